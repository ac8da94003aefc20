"""The Snakemake workflow: plans, config validation, lint."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, workdir=None):
    """Run snakemake on this workflow; with ``workdir`` its results go there instead of the checkout."""
    where = ["--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir)] if workdir else []
    return subprocess.run([*SNAKEMAKE, *where, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def job_counts(stdout):
    block = stdout.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def test_full_study_dry_run_plans_770_runs_per_repeat(tmp_path):
    p = snakemake("-n", "--quiet", "rules", "--configfile", str(ROOT / "config" / "config.yaml"), workdir=tmp_path)
    assert p.returncode == 0, p.stderr
    counts = job_counts(p.stdout + p.stderr)
    assert counts["run"] == 770 * 3  # 77 cells x (van, suf, kpad and nopad at K 4, 6, 8, 12)
    assert (counts["model"], counts["corpus"], counts["mix"]) == (11, 6, 1)


def test_embedded_dry_run(tmp_path):
    p = snakemake("-n", "--quiet", "rules", "--configfile", str(ROOT / "config" / "embedded.yaml"), workdir=tmp_path)
    assert p.returncode == 0, p.stderr
    assert job_counts(p.stdout + p.stderr)["run"] == 1 * 3 * 4


@pytest.mark.parametrize(
    ("name", "runs", "equivalence"),
    [
        ("embedded.yaml", 7 * 3, 0),
        ("x2-tp2.yaml", 2 * 2, 1),
        ("configurations.yaml", 5 * 3, 0),
        # configs of leases run and to come (humaneval-repeats, mix): a config error found on the device costs a lease
        ("auto-pair-long.yaml", 2 * 4, 0),
        ("auto-humaneval.yaml", 4 * 3, 0),
        ("auto-humaneval-repeats.yaml", 3 * 4, 0),
        ("auto-mix.yaml", 3 * 3, 0),
        ("auto-mix-diagnose.yaml", 4 * 3, 0),
        ("8b-deferred-check.yaml", 1, 0),
        ("widened-8b.yaml", 8, 0),  # issue 41: the widened 8B stand-in, one repeat a lease, its base not run
        ("widened-8b-mix.yaml", 8, 0),  # issue 41, item 3: the same on the mix, K 12 instead of 4
        ("widened-8b-humaneval.yaml", 8 * 2, 0),  # issue 41, item 3: on humaneval, 2 repeats a lease
        ("widened-8b-crossover.yaml", 2 * 3, 0),
        ("widened-8b-auto-best.yaml", 3 * 2, 0),  # issue 44: suf, nopad12, kpadautou12 since order_seed 5
        ("widened-8b-auto-k32.yaml", 3 * 2, 0),  # issue 44: suf, kpadautou12, kpadautou32
        ("widened-32b-crossover.yaml", 2 * 2, 0),  # issue 41, item 4: the 32B-class stand-in
        ("auto-unpadded-135m.yaml", 5 * 2, 0),  # issue 44: the 135M model's sharegpt cell
    ],
)
def test_gpu_configs_dry_run(tmp_path, name, runs, equivalence):
    path = ROOT / "config" / "gpu" / name
    p = snakemake(
        "-n", "--quiet", "rules", "--configfile", str(path), *local_checkpoints(path, tmp_path), workdir=tmp_path
    )
    assert p.returncode == 0, p.stderr
    counts = job_counts(p.stdout + p.stderr)
    assert (counts["run"], counts.get("equivalence", 0)) == (runs, equivalence)


def local_checkpoints(config_path, tmp_path):
    """``--config`` pointing each local model of a config (a path on the GPU machine) at a stand-in checkpoint
    folder here: a path that does not exist is refused when the model rule is planned."""
    local = {m: s for m, s in yaml.safe_load(config_path.read_text())["models"].items() if s["source"] == "local"}
    for m in local:
        (tmp_path / "ckpt" / m).mkdir(parents=True)
        (tmp_path / "ckpt" / m / "config.json").write_text("{}")
    if not local:
        return []
    return ["--config", "models={" + ", ".join(f"{m}: {{path: {tmp_path / 'ckpt' / m}}}" for m in local) + "}"]


def write_config(tmp_path, mutate):
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    mutate(cfg)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_wrong_key_is_named(tmp_path):
    p = snakemake(
        "-n", "--configfile", write_config(tmp_path, lambda c: c["load"].update(max_concurency=4)), workdir=tmp_path
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "Additional properties are not allowed ('max_concurency' was unexpected)" in out


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c.update(configurations=[{"method": "van"}, {"method": "van"}]),
            "configurations' yields duplicate names ['van']: give each entry its own name",
        ),
        (
            lambda c: c.update(taskset={"slots": [{"server": "0", "client": "1"}, {"server": "1", "client": None}]}),
            "taskset.slots[0] and taskset.slots[1] share CPUs 1: runs side by side would measure each other",
        ),
        (lambda c: c.update(configurations=[{"method": "kpad", "k": [4, 4]}]), "[4, 4] has non-unique elements"),
    ],
)
def test_a_bad_configuration_is_refused_at_planning_naming_the_config_file(tmp_path, mutate, message):
    p = snakemake("-n", "--configfile", write_config(tmp_path, mutate), workdir=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and f"config {tmp_path / 'c.yaml'}: " in out and message in out, out[-2000:]


def test_wrong_type_is_named(tmp_path):
    p = snakemake("-n", "--configfile", write_config(tmp_path, lambda c: c.update(repeats="three")), workdir=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert (
        "ValidationError: 'three' is not of type 'integer' At ['repeats']. See config/schema.yaml" in out
        and "Failed validating" not in out
    )


def test_lint_reports_nothing():
    p = snakemake("--lint")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Congratulations, your workflow is in a good condition!" in p.stdout + p.stderr


def test_model_source_without_its_key_is_named(tmp_path):
    def mutate(c):
        c["models"]["SmolLM2-135M-Instruct"] = {"source": "hf", "tensor_parallel_size": 1}

    p = snakemake("-n", "--configfile", write_config(tmp_path, mutate), workdir=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "'repo' is a required property" in out


def test_duplicate_mix_component_is_refused(tmp_path):
    p = snakemake(
        "-n",
        "--configfile",
        write_config(tmp_path, lambda c: c["mix"].update(components=["sharegpt", "sharegpt"])),
        workdir=tmp_path,
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "has non-unique elements" in out


def test_default_config_is_found_from_another_directory(tmp_path):
    p = snakemake("-n", "--quiet", "rules", workdir=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert job_counts(p.stdout + p.stderr)["equivalence"] == 11


def test_from_cache_and_report_without_vllm(tmp_path):
    """figures_from_cache / tables_from_cache on the published study, then snakemake --report on that state."""
    p = snakemake("from_cache", "--cores", "1", workdir=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    figs = sorted(f.name for f in (tmp_path / "figures" / "reference").iterdir())
    assert figs == sorted(
        f"{n}.{e}"
        for n in ["best_k_heatmap", "bestkpad_over_suf", "k_sweep", "van_suf_bestkpad"]
        for e in ["png", "svg"]
    )
    assert "kpad4" in (tmp_path / "results" / "reference" / "recommendations.md").read_text()
    r = snakemake("from_cache", "--cores", "1", "--report", str(tmp_path / "report.html"), workdir=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    html = (tmp_path / "report.html").read_text()
    assert "k_sweep.png" in html and "best_k_heatmap.png" in html


def test_slurm_profile_sizes_every_gpu_rule_and_grows_with_attempt(monkeypatch):
    """profiles/slurm: run, confirm_run and equivalence get the GPU partition and --exclusive; time and
    memory are expressions of ``attempt`` (evaluated here as Snakemake does, with ``attempt`` in scope)."""
    prof = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    res = prof["set-resources"]
    monkeypatch.setenv("KPAD_SLURM_GPU_PARTITION", "h200")

    def value(rule, key, attempt):
        return eval(str(res[rule][key]), {"attempt": attempt})

    expected = {  # rule: (runtime min at attempts 1 and 2, mem_mb at attempts 1 and 2)
        "run": ((360, 720), (128000, 256000)),
        "confirm_run": ((360, 720), (128000, 256000)),
        "equivalence": ((240, 480), (128000, 256000)),
        "widen_model": ((60, 120), (128000, 256000)),
    }
    for rule, (runtime, mem) in expected.items():
        assert (value(rule, "runtime", 1), value(rule, "runtime", 2)) == runtime, rule
        assert (value(rule, "mem_mb", 1), value(rule, "mem_mb", 2)) == mem, rule
        assert value(rule, "slurm_extra", 1) == "--exclusive" and value(rule, "slurm_partition", 1) == "h200"
    assert eval(prof["default-resources"]["runtime"], {"attempt": 2}) == 240
    # every rule that declares a gpu resource is sized here
    gpu_rules = set(re.findall(r"^rule (\w+):(?:(?!^rule ).)*?\bgpu=", _rules_text(), re.M | re.S))
    assert gpu_rules == {"run", "confirm_run", "equivalence", "widen_model"} and gpu_rules <= set(res)


def _rules_text():
    return "\n".join(p.read_text() for p in sorted((ROOT / "workflow" / "rules").glob("*.smk")))


def test_a_widening_is_built_from_its_base_by_the_workflow(tmp_path):
    """Rule widen_model on the CPU: the embedded model (converted by rule model, not measured) widened 2x in float16
    (the dtype key reaches the checkpoint; 1.1 GB where float32 wrote 2.1 GB, which a CI machine once failed to
    write); rule tokenizer copies the base's tokenizer; the plan runs only the widened model."""

    def mutate(c):
        c["models"]["SmolLM2-135M-Instruct"]["measure"] = False
        c["models"]["smol-2x"] = {
            "source": "widen",
            "base": "SmolLM2-135M-Instruct",
            "shape": dict(
                hidden_size=1152,
                num_attention_heads=16,
                num_key_value_heads=4,
                intermediate_size=3072,
                num_hidden_layers=31,
            ),
            "dtype": "float16",
        }

    cfg = write_config(tmp_path, mutate)
    p = snakemake("-n", "--quiet", "rules", "--configfile", cfg, workdir=tmp_path)
    assert p.returncode == 0, p.stderr
    counts = job_counts(p.stdout + p.stderr)
    assert (counts["run"], counts["model"], counts["widen_model"]) == (1 * 3 * 4, 1, 1)
    targets = ["results/models/smol-2x", "results/tokenizers/smol-2x"]  # before --configfile, which takes several
    p = snakemake(*targets, "--cores", "1", "--configfile", cfg, workdir=tmp_path)
    assert p.returncode == 0, p.stderr
    model_dir = tmp_path / "results" / "models" / "smol-2x"
    info = json.loads((model_dir / "widening.json").read_text())
    assert json.loads((model_dir / "config.json").read_text())["torch_dtype"] == "float16"
    assert sum(f.stat().st_size for f in model_dir.glob("*.safetensors")) < 2 * 533_863_296 + 10**6
    assert (info["base"], info["k"], info["wide"]["parameters"], info["built_on"]) == (
        "SmolLM2-135M-Instruct",
        2,
        533_863_296,
        "cpu",
    )
    assert (tmp_path / "results" / "tokenizers" / "smol-2x" / "tokenizer.json").is_file()
    shutil.rmtree(tmp_path / "results" / "models")  # 1.3 GB the rest of the suite need not carry on the CI's disk


def test_a_widening_of_no_model_entry_is_refused_at_planning(tmp_path):
    def mutate(c):
        c["models"]["wide"] = {"source": "widen", "base": "SmolLM2", "shape": "llama-3.1-8b"}

    p = snakemake("-n", "--configfile", write_config(tmp_path, mutate), workdir=tmp_path)
    assert p.returncode != 0
    assert (
        "models.wide.base is 'SmolLM2', which is not a model entry (['SmolLM2-135M-Instruct', 'wide'])"
        in p.stdout + p.stderr
    )


@pytest.mark.parametrize(
    ("make", "what"), [(lambda p: None, "does not exist"), (lambda p: p.mkdir(), "has no config.json")]
)
def test_a_local_model_path_that_is_no_checkpoint_is_refused_by_the_dry_run(tmp_path, make, what):
    make(tmp_path / "ckpt")

    def mutate(c):
        c["models"]["SmolLM2-135M-Instruct"] = {"source": "local", "path": str(tmp_path / "ckpt")}

    p = snakemake("-n", "--configfile", write_config(tmp_path, mutate), workdir=tmp_path)
    assert p.returncode != 0
    assert (
        f"models.SmolLM2-135M-Instruct.path '{tmp_path / 'ckpt'}' {what}: point it at a checkpoint directory "
        "(with config.json), or use source: hf" in p.stdout + p.stderr
    )
