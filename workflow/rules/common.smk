# Tables built from the config, input functions and wildcard constraints.
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))
from snakemake.exceptions import WorkflowError  # noqa: E402

from kpadstudy import confirm as kconfirm  # noqa: E402
from kpadstudy import cpus as kcpus  # noqa: E402
from kpadstudy import gpus as kgpus  # noqa: E402
from kpadstudy import models as kmodels  # noqa: E402
from kpadstudy import runs as kruns  # noqa: E402
from kpadstudy.configsource import config_source  # noqa: E402


def config_error(message, path=()):
    """A config problem found while planning, as one line naming where the value at ``path`` (nested keys) came
    from, the config file(s) or the --config option (kpadstudy.configsource), like the schema's errors."""
    return WorkflowError(
        f"config {config_source(workflow.config_settings, workflow.overwrite_configfiles, path)}: {message}"
    )


try:
    kmodels.check_models(config["models"])
    CONFIGURATIONS = kruns.configurations(config)
    kruns.check_capture(config)
    # threads of a run job: the CPUs of one taskset slot (server and client together), so runs with small
    # CPU slots run side by side; 1 when nothing is pinned. Never workflow.cores: that serialises runs.
    # taskset.auto: the CPUs of one GPU's share of this node (all of them on a CPU node).
    RUN_THREADS = (
        kcpus.auto_threads(
            0 if config["device"] == "cpu" else 1, len(kgpus.visible_gpus((config.get("node") or {}).get("gpus")))
        )
        if kcpus.is_auto(config["taskset"])
        else max(1, kcpus.pinned_cpu_count(config["taskset"]))
    )
except ValueError as err:
    raise config_error(err) from None
# attempts a run job gets to measure when killed without a record; one more writes its record as lost
RUN_ATTEMPTS = int(config["node"]["run_attempts"])
MODELS = kmodels.measured(config["models"])
BASE_CORPORA = list(config["corpora"])
MIX = config["mix"]["name"] if config["mix"]["components"] else None
CORPORA = BASE_CORPORA + ([MIX] if MIX else [])
MEASURED_CORPORA = CORPORA if config["measure_corpora"] is None else config["measure_corpora"]
RUN_ORDER = kruns.run_order(CONFIGURATIONS, config["repeats"], config["order_seed"])
PLUGIN_PATH = str(Path(workflow.basedir) / "workflow" / "scripts")
REFERENCE_CSV = str(Path(workflow.basedir) / config["reference"]["csv"])  # an absolute csv stays as it is
REFERENCE_PARQUET = "results/reference/kpad_published.parquet"
# figures of rule figures (results/cells.parquet, results/runs.parquet, the published study)
FIGURES = [
    "best_k_heatmap",
    "bestkpad_over_suf",
    "k_sweep",
    "van_suf_bestkpad",
    "ours_vs_published",
    "k_vs_r",
    "kpad_vs_nopad",
    "paired_ratios",
    "run_timeline",
    "kpadauto_lengths",
]
RUN_FIGURES = ["k_vs_r", "kpad_vs_nopad", "paired_ratios", "run_timeline", "kpadauto_lengths"]  # drawn from run records
CONFIRM = config["confirm"]
# cells the figures, comparison and recommendations read: with confirmation, the sweep's cells with the
# confirmation's van / suf / bestkpad rows preferred (rule analysis_cells)
ANALYSIS_CELLS = "results/cells_final.parquet" if CONFIRM["enabled"] else "results/cells.parquet"
CACHE = config["cache"]
CACHE_PUBLISHED = os.path.normpath(CACHE["cells"]) == REFERENCE_PARQUET
# a cached file that is given and not there stops the plan, naming its key (else Snakemake may call outputs drawn
# from another file up to date and say "Nothing to be done"); the default cells (the published study) are made
for _key in ("cells", "runs", "equivalence"):
    _path = CACHE.get(_key)
    if _path and not (_key == "cells" and CACHE_PUBLISHED) and not os.path.exists(_path):
        raise config_error(
            f"cache.{_key} {_path!r} does not exist; give the path of a {_key} Parquet "
            f"(a study's results/{_key}.parquet, or a shipped one: config/cache/*.yaml)",
            ("cache", _key),
        )
CACHE_FIGURES = (
    ["best_k_heatmap", "bestkpad_over_suf", "k_sweep", "van_suf_bestkpad"]
    + ([] if CACHE_PUBLISHED else ["ours_vs_published"])
    + (RUN_FIGURES if CACHE["runs"] else [])
)

if MIX in BASE_CORPORA:
    raise config_error(f"mix.name {MIX!r} is also a corpus name; pick another", ("mix", "name"))
for _c in config["mix"]["components"]:
    if _c not in BASE_CORPORA:
        raise config_error(f"mix.components names {_c!r}, which is not under corpora ({BASE_CORPORA})", ("mix",))
for _key, _names in (
    ("measure_corpora", config["measure_corpora"] or []),
    ("equivalence.corpora", config["equivalence"]["corpora"] or []),
):
    for _c in _names:
        if _c not in CORPORA:
            raise config_error(
                f"{_key} names {_c!r}, which is neither a corpus nor the mix ({CORPORA})", _key.split(".")
            )
if not CONFIGURATIONS:
    raise config_error("configurations enables nothing: give at least one entry without enabled: false")


def _alternatives(names):
    return "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))


# models made by rule widen_model (source widen), the others by rule model
WIDENED = [m for m, spec in config["models"].items() if spec["source"] == "widen"]


def local_checkpoint(wc):
    """The model rule's input check: a local checkpoint (source local) must exist when the rule is planned."""
    spec = config["models"][wc.model]
    path = Path(spec.get("path") or "")
    if spec["source"] == "local" and not (path / "config.json").is_file():
        what = "has no config.json" if path.is_dir() else "does not exist"
        raise config_error(
            f"models.{wc.model}.path {str(path)!r} {what}: point it at a checkpoint directory (with config.json), "
            "or use source: hf",
            ("models", wc.model, "path"),
        )
    return []


def widen_base_tokenizer(wc):
    """The tokenizer rule's input: a widening's tokenizer is its base's."""
    spec = config["models"][wc.model]
    return {"base": f"results/tokenizers/{spec['base']}"} if spec["source"] == "widen" else {}


wildcard_constraints:
    model=_alternatives(config["models"]),
    corpus=_alternatives(CORPORA),
    configuration=_alternatives([c.name for c in CONFIGURATIONS]),
    repeat=r"\d+",
    k=r"\d+",


def run_path(model, corpus, configuration, repeat):
    """The one path pattern of a run's record."""
    return f"results/runs/{model}/{corpus}/{configuration}/r{repeat}.json"


def previous_run(wildcards):
    """The run just before this one in the cell's interleaved order (none for the first). Only an order: ancient,
    so a redone run does not redo the recorded runs after it."""
    i = RUN_ORDER.index((wildcards.configuration, int(wildcards.repeat)))
    if i == 0:
        return []
    configuration, repeat = RUN_ORDER[i - 1]
    return [ancient(run_path(wildcards.model, wildcards.corpus, configuration, repeat))]


def runs_after(wildcards):
    """How many runs of the cell's interleaved order come after this one: the run's priority, so that with
    several runs side by side the cells with the most left go first and the cells finish together."""
    return len(RUN_ORDER) - 1 - RUN_ORDER.index((wildcards.configuration, int(wildcards.repeat)))


def confirm_path(model, corpus, configuration, repeat):
    """The one path pattern of a confirmation run's record (apart from the sweep's)."""
    return f"results/confirm/{model}/{corpus}/{configuration}/r{repeat}.json"


def cell_runs(wildcards):
    """Every sweep record of one cell (input of its checkpoint best_k)."""
    return [run_path(wildcards.model, wildcards.corpus, cfg, r) for cfg, r in RUN_ORDER]


def confirm_plan(model, corpus):
    """[(configuration, repeat), ...] of one cell's confirmation, from its checkpoint's output."""
    with open(checkpoints.best_k.get(model=model, corpus=corpus).output[0]) as f:
        best = json.load(f)
    return kconfirm.confirm_order(best, CONFIGURATIONS, config["order_seed"]).get((model, corpus), [])


def confirm_previous(wildcards):
    """The confirmation run just before this one in its cell (none for the first). Only an order: ancient, as the
    sweep's chain."""
    order = confirm_plan(wildcards.model, wildcards.corpus)
    i = order.index((wildcards.configuration, int(wildcards.repeat)))
    return [] if i == 0 else [ancient(confirm_path(wildcards.model, wildcards.corpus, *order[i - 1]))]


def all_confirm_runs(wildcards):
    """Every confirmation record of the study (the cells' checkpoints decide which)."""
    return [confirm_path(m, c, cfg, r) for m in MODELS for c in MEASURED_CORPORA for cfg, r in confirm_plan(m, c)]


def final_confirm_runs(wildcards):
    """Rule all's confirmation records, each itself (as the sweep's): a deleted one is rerun. None when off."""
    return all_confirm_runs(wildcards) if CONFIRM["enabled"] else []


def all_runs():
    return [run_path(m, c, cfg, r) for m in MODELS for c in MEASURED_CORPORA for cfg, r in RUN_ORDER]


# targets that measure nothing: no progress plan, no check of the run records for them
NO_RUN_TARGETS = {
    "from_cache",
    "figures_from_cache",
    "tables_from_cache",
    "report_from_cache",
    "plan",
    "compare_studies",
}
# A record deleted after the tables were made: Snakemake takes a missing input of an up-to-date output for a
# deleted temporary file and redoes nothing. Rule all asks for every record itself, so `snakemake` reruns exactly
# the runs without one, then the tables; said at the start (kpadstudy.runs.missing_records).
_targets = set(getattr(workflow.dag_settings, "targets", None) or ())  # no DAG settings under --lint
if not _targets or _targets - NO_RUN_TARGETS:
    for _line in kruns.missing_records("results/runs.parquet", all_runs()):
        print(_line, file=sys.stderr)


def all_equivalence_checks():
    """One check per (model, corpus, K): kpad vs unpadded suffix at K (config ``equivalence``)."""
    eq = config["equivalence"]
    if not eq["enabled"]:
        return []
    ks = eq["k"] if eq["k"] is not None else sorted({c.k for c in CONFIGURATIONS if c.method == "kpad"})
    corpora = eq["corpora"] if eq["corpora"] is not None else MEASURED_CORPORA
    return [f"results/equivalence/{m}/{c}/K{k}.json" for m in MODELS for c in corpora for k in ks]


def gpus_per_run(model):
    """GPUs one server of ``model`` needs: its tensor parallel size (0 when the study runs on CPU)."""
    return 0 if config["device"] == "cpu" else int(config["models"][model]["tensor_parallel_size"])


def benchmark_files(wildcards=None):
    """The Snakemake benchmark files of the heavy jobs, by rule (input of rule timings)."""
    out = {
        "model": expand("results/benchmarks/model/{model}.tsv", model=MODELS),
        "corpus": expand("results/benchmarks/corpus/{corpus}.tsv", corpus=BASE_CORPORA),
        "mix": [f"results/benchmarks/mix/{MIX}.tsv"] if MIX else [],
        "run": [p.replace("results/runs/", "results/benchmarks/run/").replace(".json", ".tsv") for p in all_runs()],
        "equivalence": [
            p.replace("results/equivalence/", "results/benchmarks/equivalence/").replace(".json", ".tsv")
            for p in all_equivalence_checks()
        ],
    }
    if CONFIRM["enabled"]:
        out["confirm_run"] = [
            p.replace("results/confirm/", "results/benchmarks/confirm_run/").replace(".json", ".tsv")
            for p in all_confirm_runs(wildcards)
        ]
    return out


def get_final_output():
    return [
        *all_runs(),  # each record itself: a deleted one is rerun, not taken for a deleted temporary file
        "results/runs.parquet",
        "results/cells.parquet",
        *(["results/equivalence.parquet"] if all_equivalence_checks() else []),
        *(["results/confirmed.parquet", ANALYSIS_CELLS] if CONFIRM["enabled"] else []),
        REFERENCE_PARQUET,
        "results/ours_vs_published.parquet",
        "results/step_cost.parquet",
        "results/step_model.md",
        "figures/step_model.png",
        "results/recommendations.md",
        "results/summary.md",
        "results/report/cells.html",
        "results/timings.md",
        *expand("figures/{figure}.{ext}", figure=FIGURES, ext=["png", "svg"]),
    ]


def caption(name):
    """The caption file of a figure or table in the report (relative to the rule files)."""
    return f"../report/{name}.rst"
