"""profiles/slurm on a real SLURM cluster: a reduced embedded study through `snakemake --profile`, compared
with the same study run locally (same result files, same runs, every status ok; numbers differ).

Needs `sbatch` on PATH, a reachable cluster (`sinfo`) and snakemake-executor-plugin-slurm; skipped, with
the reason, otherwise. `make slurm-test` sets all that up on this machine (tools/slurm-local.sh: a
single-node cluster on localhost) and runs this file. On 2 cores it takes about 19 minutes: two studies of
two runs, two confirmation runs and one equivalence check each (10 vLLM engine boots), and a retried job.

The profile used is profiles/slurm/config.yaml with its sizes cut to the node (cores, cpus_per_task,
mem_mb) and, as there is no accounting database here, job status from squeue; everything else
(executor, --exclusive for run/equivalence, gpu -> --gpus, partition/account variables, retries) is the
profile's own.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpadstudy.cpus import parse_cpu_list, split_roles

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"


def _why_not():
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH (no SLURM here; `make slurm-test` installs and starts a local one)"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return (
            "snakemake-executor-plugin-slurm is not installed "
            "(pip install --no-deps -r profiles/slurm/requirements.txt)"
        )
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%P %c %m %t"], capture_output=True, text=True, timeout=60)
        why = (
            (p.stderr.strip().splitlines() or ["no partitions"])[-1]
            if p.returncode != 0 or not p.stdout.strip()
            else None
        )
    except subprocess.TimeoutExpired:
        why = "sinfo timed out after 60 s"
    if why:
        return f"sbatch is on PATH but no cluster answers sinfo ({why[:200]}); start one: tools/slurm-local.sh start"
    return None


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def _node():
    """CPUs and memory (MiB) of the smallest node of the default partition."""
    rows = [
        line.split()
        for line in subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%P %c %m"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    ]
    default = [r for r in rows if r[0].endswith("*")] or rows
    return min(int(r[1]) for r in default), min(int(re.sub(r"\D", "", r[2])) for r in default)


def _test_profile(dest: Path, retries: int = 0, gpu_job_cpus: int | None = None) -> Path:
    """profiles/slurm with cores, cpus_per_task and mem_mb cut to fit the node; status from squeue.

    ``mem_mb`` stays the profile's expression (it grows with ``attempt``), capped at half the node's memory.
    ``gpu_job_cpus``: cpus_per_task of the run, confirm_run and equivalence jobs (default: the profile's,
    cut to the node).
    """
    cpus, mem = _node()
    prof = yaml.safe_load(PROFILE.read_text())
    prof["cores"] = min(int(prof["cores"]), cpus)
    prof["jobs"] = 4
    prof["slurm-status-command"] = "squeue"  # no slurmdbd here; MinJobAge keeps finished jobs in squeue
    prof["slurm-init-seconds-before-status-checks"] = 5
    prof["retries"] = retries  # 0 for the studies: a failure must show, not be retried away
    sections = [prof["default-resources"], *prof["set-resources"].values()]
    for res in {id(r): r for r in sections}.values():  # run and confirm_run share one mapping (a YAML anchor)
        if "cpus_per_task" in res:
            res["cpus_per_task"] = min(int(res["cpus_per_task"]), cpus)
        if "mem_mb" in res:
            res["mem_mb"] = f"min({mem // 2}, {res['mem_mb']})"
    if gpu_job_cpus:
        for rule in ("run", "confirm_run", "equivalence"):
            prof["set-resources"][rule]["cpus_per_task"] = gpu_job_cpus
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    return dest


def _config(work: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["device"] = "cpu"  # gpu resource 0: no --gpus on a CPU node
    cfg["taskset"] = "auto"  # as profiles/slurm sets it: the CPU lists come from each job's own CPUs
    cfg["corpora"] = {"humaneval": cfg["corpora"]["humaneval"]}
    cfg["mix"] = {"name": "mix", "components": [], "seed": 0}
    cfg["configurations"] = {
        "van": {"enabled": True},
        "suf": {"enabled": False},
        "kpad": {"k": [4]},
        "nopad": {"k": []},
    }
    cfg["confirm"] = {"enabled": True, "repeats": 1}  # van and kpad4 again, as confirm_run jobs
    cfg["prompts"] = {"measured": 6, "warmup": 2, "seed": 0}
    cfg["load"] = {"max_concurrency": 4, "max_tokens": 32, "temperature": 0}
    cfg["equivalence"] = {
        "enabled": True,
        "corpora": ["humaneval"],
        "k": [4],
        "prompts": 4,
        "max_tokens": 24,
        "dtype": "float32",
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _snakemake(work: Path, *args, timeout=1800):
    t0 = time.monotonic()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(work),
            "--configfile",
            str(work / "config.yaml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    (work / "snakemake.out").write_text(p.stdout + p.stderr)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-6000:]
    return time.monotonic() - t0, p.stdout + p.stderr


def _results(work: Path):
    """Every result file, relative to the study (logs and the report's html included)."""
    return sorted(
        str(f.relative_to(work))
        for f in (work / "results").rglob("*")
        if f.is_file() and "/models/" not in f"/{f.relative_to(work)}"
    )


def _rule_of(sbatch_call: str) -> str:
    """The rule of an sbatch call the plugin logged (--comment rule_<name>[_wildcards_<...>])."""
    comment = re.search(r"--comment '?rule_([^' ]+)", sbatch_call).group(1)
    return comment.split("_wildcards_")[0]


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    local, slurm = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("slurm")
    for work in (local, slurm):
        _config(work)
    # the GPU jobs get 1 CPU each: on this cluster (TaskPlugin=task/affinity) a job then runs on that CPU only
    profile = _test_profile(tmp_path_factory.mktemp("profile") / "slurm", gpu_job_cpus=1)
    t_local, _ = _snakemake(local, "--cores", "2")
    t_slurm, log = _snakemake(slurm, "--profile", str(profile), "--verbose")
    print(f"\nlocal study {t_local:.0f} s, SLURM study {t_slurm:.0f} s (profile {profile})")
    return {"local": local, "slurm": slurm, "log": log, "t_local": t_local, "t_slurm": t_slurm}


def test_same_result_files(studies):
    local, slurm = _results(studies["local"]), _results(studies["slurm"])
    assert local == slurm
    assert "results/runs.parquet" in local and "results/equivalence.parquet" in local


def test_same_runs_all_ok(studies):
    keys = ["model", "corpus", "configuration", "repeat"]
    runs = {
        name: pd.read_parquet(studies[name] / "results" / "runs.parquet").sort_values(keys).reset_index(drop=True)
        for name in ("local", "slurm")
    }
    assert runs["local"][keys].equals(runs["slurm"][keys])
    assert sorted(runs["slurm"]["configuration"]) == ["kpad4", "van"]
    for name, df in runs.items():
        assert list(df["status"]) == ["ok"] * len(df), (
            name,
            df[["configuration", "status", "reason"]].to_dict("records"),
        )
        assert (df["completed"] == 6).all() and (df["failed"] == 0).all() and (df["output_tok_s"] > 0).all()
    eq = {
        name: pd.read_parquet(studies[name] / "results" / "equivalence.parquet").iloc[0] for name in ("local", "slurm")
    }
    for e in eq.values():  # greedy float32 outputs: identical on both sides
        assert (e["requests"], e["identical_requests"], e["token_agreement"]) == (4, 4, 1.0)


def test_confined_jobs_pin_server_and_client_inside_their_one_cpu(studies):
    """The cluster confines each job to its CPUs (task/affinity; a run job gets 1): with taskset auto the
    run's server and client both get that CPU, the record says they share it, and the CPUs the processes
    really had (Cpus_allowed_list) are that one CPU. The local study (2 CPUs, no confinement) gives the
    client the last CPU and the server the other."""
    df = pd.read_parquet(studies["slurm"] / "results" / "runs.parquet")
    confirm = pd.read_parquet(studies["slurm"] / "results" / "confirm" / "runs.parquet")
    for _, r in pd.concat([df, confirm]).iterrows():
        assert r["server_cpus"] == r["client_cpus"] == r["server_cpus_allowed"] == r["client_cpus_allowed"], r
        assert len(parse_cpu_list(r["server_cpus"])) == 1 and bool(r["cpus_shared"]), r
    local = pd.read_parquet(studies["local"] / "results" / "runs.parquet")
    expected = split_roles(os.sched_getaffinity(0))
    for _, r in local.iterrows():
        assert not r["cpus_shared"] and r["client_cpus"] == r["client_cpus_allowed"] == expected["client"], r
        assert r["server_cpus"] == r["server_cpus_allowed"] == expected["server"], r


def test_jobs_went_through_slurm(studies):
    log = studies["log"]
    calls = [line for line in log.splitlines() if line.startswith("sbatch call:")]
    rules = [_rule_of(c) for c in calls]
    assert {"run", "confirm_run", "equivalence", "model", "corpus"} <= set(rules), rules
    assert rules.count("run") == 2 and rules.count("confirm_run") == 2
    for rule, call in zip(rules, calls, strict=True):
        assert "--gpus" not in call  # device cpu: gpu resource 0
        assert ("--exclusive" in call) == (rule in ("run", "confirm_run", "equivalence")), call
        if rule in ("run", "confirm_run"):
            assert re.search(r" -t '?360'?( |$)", call), call  # the GPU jobs' time, first attempt
    # every job SLURM ran for the study completed (MinJobAge of tools/slurm-local.sh keeps them in squeue)
    ids = re.findall(r"submitted with SLURM jobid (\d+)", log)
    assert len(ids) == len(calls)
    out = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", "%i|%T", "-j", ",".join(ids)], capture_output=True, text=True
    ).stdout
    states = dict(line.split("|") for line in out.split())
    assert states == {i: "COMPLETED" for i in ids}, states
    # the servers of the SLURM study ran and logged
    for server_log in (studies["slurm"] / "results" / "logs" / "runs").rglob("server.log"):
        assert server_log.stat().st_size > 0


def test_a_retried_gpu_job_gets_more_time(tmp_path):
    """A job of rule confirm_run that fails on its first attempt is resubmitted with the profile's time for
    attempt 2 (360 -> 720 minutes): the job itself checks the runtime it was given."""
    work = tmp_path / "retry"
    work.mkdir()
    (work / "Snakefile").write_text(
        "rule all:\n"
        '    input: "done.txt"\n\n'
        "rule confirm_run:\n"
        '    output: "done.txt"\n'
        "    resources: gpu=0\n"
        '    shell: "test {resources.runtime} -ge 720 && touch {output}"\n'
    )
    profile = _test_profile(tmp_path / "profile" / "slurm", retries=1)
    p = subprocess.run(
        [sys.executable, "-m", "snakemake", "--directory", str(work), "--profile", str(profile), "--verbose"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-4000:]
    calls = [line for line in log.splitlines() if line.startswith("sbatch call:")]
    assert [_rule_of(c) for c in calls] == ["confirm_run", "confirm_run"], calls
    assert re.search(r" -t '?360'?( |$)", calls[0]) and re.search(r" -t '?720'?( |$)", calls[1]), calls
    assert all("--exclusive" in c for c in calls)
    assert (work / "done.txt").exists()
