"""Where padding pays, across model sizes: kpad K / nopad K by parameter count, measured and predicted.

    python -m kpadstudy.crossover OUT_PREFIX FIGURE_PREFIX RUNS.parquet [RUNS.parquet ...]

Reads the runs tables of several data sets (each a lease or a study: the 135M model's, a widened stand-in's), and
writes ``OUT_PREFIX.md`` and ``OUT_PREFIX.parquet`` (one row per cell with kpad K and nopad K runs) and
``FIGURE_PREFIX.{png,svg}``. Each cell's measured ratio is the paired one (:func:`kpadstudy.paired.paired_table`:
within repeats, geometric mean, 95% t-interval from 3 repeats); its prediction is the step-cost model's
(:func:`kpadstudy.roofline.step_model`), fitted on the smallest model's runs on one GPU and so out of sample for
every other cell; the forecast line is that model's widened shapes on the GPU of the fit. A stand-in's row names the
model whose shape it has: its acceptance is the small model's (docs/stand-ins.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import paired, reference, roofline, tables, widen
from .runs import largest_capture

COLUMNS = ["model", "stand_in_for", "parameters", "gpu", "concurrency", "prompts", "corpus", "phase", "k", "n"]
COLUMNS += ["ratio", "ci_low", "ci_high"]
COLUMNS += ["favour", "full_share_kpad", "full_share_nopad", "tokens_per_request_step_kpad"]
COLUMNS += ["tokens_per_request_step_nopad", "predicted", "fitted_on_this"]
#: :func:`step_split`'s columns, each cell's medians of kpad K and of nopad K beside each other in :data:`COLUMNS`
SPLIT_COLUMNS = ["positions_per_step", "no_graph_share", "forward_ms", "rest_ms", "capture_max"]
COLUMNS += [f"{c}_{label}" for c in SPLIT_COLUMNS for label in ("kpad", "nopad")]
#: :func:`added_position_us`'s columns
COLUMNS += ["added_us", "added_us_low", "added_us_high", "added_n"]
#: the stages of the plugin's step timers (``step_time_ms``) that run the model and sample, by the worker's wall clock
#: (a FULL graph's replay returns at once and ``sample_tokens`` waits for it, so only their sum is the forward pass),
#: and the suffix proposer's CPU work that runs inside ``sample_tokens`` after it
FORWARD_STAGES, INSIDE_FORWARD = ("execute_model", "sample_tokens"), "propose"

#: the study's models issue 41 sets the stand-ins beside (their published rows: 8x B200, no nopad)
STUDY_MODELS = ["Llama-3.1-8B-Instruct", "Qwen2.5-7B-Instruct", "Qwen2.5-32B-Instruct", "DeepSeek-R1-Distill-Qwen-32B"]
PUBLISHED = "resources/reference/kpad_published.csv"
#: FLOP efficiencies (of the datasheet peak) the out-of-sample predictions are shown at besides the fit's 1.0
EFFICIENCIES = (0.5, 0.35, 0.25)
CELL_KEYS = ["model", "gpu", "concurrency", "prompts", "corpus", "phase", "k"]


#: the columns a runs table must have here (``phase`` may be absent: sweep)
REQUIRED = ["model", "corpus", "configuration", "method", "k", "repeat", "status", "output_tok_s", "gpu_name"]
REQUIRED += ["max_concurrency"]
#: a run's place: its cell (model, GPU, concurrency, measured prompts, corpus, phase), configuration and repeat
RUN_KEY = ["model", "gpu_name", "max_concurrency", "n_measured", "corpus", "phase", "configuration", "repeat"]


def read_runs(paths: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The GPU runs of the runs tables, one after another, each row with its ``source`` file, and a line for each
    table's runs left out because they ran on no GPU (CPU: no cudagraphs, so no padding effect to place).

    Raises:
        SystemExit: naming the file and the fix, for a file given twice, missing or unreadable, one that is not a
            runs table or holds no run, a GPU run without its concurrency, and runs given twice (:func:`_doubles`).
    """
    try:
        paired.refuse_given_twice(paths)
    except ValueError as e:
        raise SystemExit(f"crossover: {e}") from e
    frames, left_out = [], []
    for path in paths:
        frame = _read_one(path)
        cpu = frame["gpu_name"].isna()
        if cpu.any():
            left_out.append(f"{path}: {int(cpu.sum())} runs on no GPU (CPU: no cudagraphs), left out")
        frames.append(frame[~cpu])
    runs = pd.concat(frames, ignore_index=True)
    if runs.empty:
        raise SystemExit(f"crossover: no GPU run in {paths}: give the runs tables of GPU leases")
    _doubles(runs)
    return runs, left_out


def _read_one(path: str) -> pd.DataFrame:
    """One runs table, :func:`kpadstudy.paired.read_runs_table`, with its ``source``, its concurrency and measured
    prompts as integers (prompts NaN in records without ``n_measured``); refused (naming the file and the fix) for
    what that refuses and for runs :func:`_unplaceable` names."""
    try:
        frame = paired.read_runs_table(path, REQUIRED)
    except ValueError as e:
        raise SystemExit(f"crossover: {e}") from e
    prompts = roofline.numeric(frame, "n_measured", np.nan)  # NaN: older records lack it
    for what, mask in _unplaceable(frame, prompts).items():
        if mask.any():
            raise SystemExit(
                f"crossover: {path}: {int(mask.sum())} of {len(frame)} runs {what}: remake the table from the run "
                "records (tools/aggregate_records.py; a pooled table: then pool its sources again, "
                "tools/pool_repeats.py)"
            )
    concurrency = frame["max_concurrency"].astype("Int64")
    return frame.assign(max_concurrency=concurrency, n_measured=prompts, source=path)


def _unplaceable(frame: pd.DataFrame, prompts: pd.Series) -> dict[str, pd.Series]:
    """The runs of a :func:`kpadstudy.paired.read_runs_table` table that no cell can take, by what is wrong;
    ``prompts`` is each run's ``n_measured``: a table with it on only some runs would split their cells."""
    gpu, concurrency = frame["gpu_name"].notna(), frame["max_concurrency"]
    cuda = frame["device"].eq("cuda") if "device" in frame else pd.Series(False, frame.index)
    return {
        "ran on cuda but name no GPU (gpu_name)": cuda & ~gpu,
        "on a GPU have no whole max_concurrency": gpu & ~(concurrency > 0) | gpu & (concurrency % 1 != 0),
        "have no n_measured (measured prompts), the others have: their cells would split": (
            prompts.isna() & prompts.notna().any()
        ),
    }


def _doubles(runs: pd.DataFrame) -> None:
    """Refuse runs given twice: one run (model, GPU, start time) in two rows (a table given again under another
    name or renumbered, or pooled beside one of its sources), or two runs under one run key (:data:`RUN_KEY`: the
    repeats of one study's leases go through ``tools/pool_repeats.py`` first, which renumbers them)."""
    started = runs.dropna(subset=["started_at"]) if "started_at" in runs else runs.iloc[:0]
    again = started[started.duplicated(["model", "gpu_name", "started_at"], keep=False)]
    if not again.empty:
        first = again.iloc[0]
        raise SystemExit(
            f"crossover: {sorted(set(again['source']))} hold one run twice ({first['model']}, {first['gpu_name']}, "
            f"started {first['started_at']}): give each run once (a pooled table, or its sources, not both)"
        )
    twice = runs[runs.duplicated(RUN_KEY, keep=False)]
    if not twice.empty:
        first = twice.iloc[0]
        place = f"{first['model']} on {first['gpu_name']}, concurrency {first['max_concurrency']}"
        place += f"{_prompts(first['n_measured'])}, {first['corpus']} ({first['phase']}), {first['configuration']}"
        raise SystemExit(
            f"crossover: {sorted(set(twice['source']))} hold the same run ({place}, repeat {first['repeat']}): pool "
            "one study's leases with tools/pool_repeats.py first (it renumbers their repeats) and give its runs table"
        )


def parameters(run: pd.Series) -> float:
    """A run's model parameter count: its record's ``model_parameters``, else (records older than that column) the
    count of its shape in :func:`kpadstudy.roofline.known_shapes`, else NaN."""
    value = run.get("model_parameters")
    if value is not None and pd.notna(value):
        return float(value)
    shape = roofline.known_shapes().get(run["model"])
    return float(shape.parameters()) if shape is not None else float("nan")


def table(runs: pd.DataFrame) -> tuple[pd.DataFrame, dict | None, pd.DataFrame | None, list[str]]:
    """``(cells, params, forecast, dropped)``: one row per (model, GPU, concurrency, prompts, corpus, phase, K): a
    paired kpad K / nopad K (:data:`COLUMNS`), the step model's fitted constants and its forecast of the widened shapes
    (each with ``parameters``), as :func:`kpadstudy.roofline.step_model` gives them, and a line for each cell left
    out because no repeat had both configurations ``ok``.

    Raises:
        SystemExit: no cell has both kpad K and nopad K runs.
    """
    rows, dropped = _measured(roofline.with_sizes(runs, roofline.known_shapes()))
    if not rows:
        names = sorted(set(runs["configuration"]))
        raise SystemExit(
            f"crossover: no cell of {sorted(set(runs['source']))} has both kpad K and nopad K runs ok in one repeat "
            f"(configurations: {names}){'; ' + '; '.join(dropped) if dropped else ''}: give runs tables where both "
            "ran ok"
        )
    cells = pd.DataFrame(rows)
    model, params, ahead = roofline.step_model(runs)
    if model is not None and not model.empty:
        cells = cells.merge(_by_cell(model)[[*CELL_KEYS, "predicted", "fitted_on_this"]], on=CELL_KEYS, how="left")
    else:
        cells = cells.assign(predicted=float("nan"), fitted_on_this=False)
    if ahead is not None:
        base = roofline.known_shapes()[params["fit_on"]]
        ahead = ahead.rename(columns={"n_measured": "prompts"}).assign(
            parameters=ahead["shape"].map(lambda s: widen.target_shape(base, s).parameters()), gpu=params["fit_on_gpu"]
        )
    cells["prompts"] = cells["prompts"].astype("Int64")
    order = ["parameters", "gpu", "concurrency", "prompts", "phase"]
    return cells[COLUMNS].sort_values(order).reset_index(drop=True), params, ahead, dropped


def _by_cell(model: pd.DataFrame) -> pd.DataFrame:
    """:func:`kpadstudy.roofline.crossover`'s table with this module's cell key names (:data:`CELL_KEYS`)."""
    return model.rename(columns={"gpu_name": "gpu", "max_concurrency": "concurrency", "n_measured": "prompts"})


def sensitivity(runs: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The out-of-sample cells' predictions if the GPU reached only a part of its datasheet FLOP/s: the step model
    refitted at each of :data:`EFFICIENCIES` (config ``step_model.efficiency``), a column ``predicted_<e>`` each,
    beside the paired ``ratio``. The fit cannot tell the efficiency from one model's runs (their FLOPs and positions
    are proportional), so this is a range, not a fit; empty when no cell is out of sample."""
    out = cells.loc[cells["fitted_on_this"] != True, [*CELL_KEYS, "ratio", "predicted"]]  # noqa: E712 - None too
    out = out.dropna(subset=["predicted"])
    if out.empty:
        return out
    for e in EFFICIENCIES:
        model = _by_cell(roofline.step_model(runs, efficiency=e)[0]).rename(columns={"predicted": f"predicted_{e}"})
        out = out.merge(model[[*CELL_KEYS, f"predicted_{e}"]], on=CELL_KEYS, how="left")
    return out.reset_index(drop=True)


def _measured(sized: pd.DataFrame) -> tuple[list[dict], list[str]]:
    """The paired kpad K / nopad K of every (GPU, concurrency, measured prompts, model, corpus, phase, K) that ran
    both, and a line for each such cell without a repeat where both were ``ok`` (a failed run is no data point)."""
    rows, dropped = [], []
    load = ["gpu_name", "max_concurrency", "n_measured"]
    for (gpu, concurrency, prompts), part in sized.groupby(load, sort=True, dropna=False):
        where = f"on {gpu}, concurrency {int(concurrency)}{_prompts(prompts)}"
        pairs = paired.paired_table(part)
        pairs = pairs[
            pairs["numerator"].str.fullmatch(r"kpad\d+")
            & (pairs["denominator"] == "nopad" + pairs["numerator"].str[4:])
        ]
        for _, p in pairs.iterrows():
            cell = part[(part["model"] == p["model"]) & (part["corpus"] == p["corpus"]) & (part["phase"] == p["phase"])]
            if p["n"] == 0:
                statuses = ", ".join(f"{k} {v}" for k, v in sorted(cell["status"].value_counts().items()))
                dropped.append(
                    f"{p['model']} {where}, {p['corpus']} ({p['phase']}): "
                    f"{p['numerator']} / {p['denominator']} has no repeat with both ok (runs: {statuses}), left out"
                )
                continue
            first = cell.iloc[0]
            ok = step_split(cell[cell["status"] == "ok"])  # once per cell: parses every run's step timers
            stand_in = first.get("stand_in_for") if isinstance(first.get("stand_in_for"), str) else ""
            rows.append(
                {"model": p["model"], "stand_in_for": stand_in, "parameters": parameters(first), "gpu": gpu}
                | {"concurrency": int(concurrency), "prompts": prompts}
                | {c: p[c] for c in ("corpus", "phase", "n", "ratio", "ci_low", "ci_high", "favour")}
                | {"k": int(p["numerator"][4:])}
                | _medians(ok, p["numerator"], p["denominator"])
                | added_position_us(ok, p["numerator"], p["denominator"])
            )
        dropped += _unpaired(part, where)
    return rows, dropped


def _prompts(prompts: float) -> str:
    """``, N measured prompts`` (nothing for records without the count)."""
    return "" if pd.isna(prompts) else f", {int(prompts)} measured prompts"


def _unpaired(part: pd.DataFrame, where: str) -> list[str]:
    """A line for each kpad K or nopad K of one GPU, concurrency and prompt count (``where``) that has no run of the
    other at its K."""
    lines = []
    spec = part[part["method"].isin(["kpad", "nopad"])]
    for (model, corpus, phase), cell in spec.groupby(["model", "corpus", "phase"], sort=True):
        ks = {m: set(cell.loc[cell["method"] == m, "k"].astype(int)) for m in ("kpad", "nopad")}
        alone = sorted(f"{m}{k}" for m, other in (("kpad", "nopad"), ("nopad", "kpad")) for k in ks[m] - ks[other])
        if alone:
            lines.append(
                f"{model} {where}, {corpus} ({phase}): {', '.join(alone)} without the "
                "other method at the same K, left out"
            )
    return lines


def _medians(ok: pd.DataFrame, kpad: str, nopad: str) -> dict[str, float]:
    """Medians over one cell's ``ok`` runs (:func:`step_split` of them) of kpad K and of nopad K (NaN where the
    records lack the columns): the share of decode steps replayed as FULL cudagraphs, the tokens per request-step,
    and where an engine step's time went."""
    out = {}
    for column, name in (
        ("full_share_decode", "full_share"),
        ("tokens_per_request_step", "tokens_per_request_step"),
        *((c, c) for c in SPLIT_COLUMNS),
    ):
        values = roofline.numeric(ok, column, np.nan)
        for label, configuration in (("kpad", kpad), ("nopad", nopad)):
            out[f"{name}_{label}"] = float(values[ok["configuration"] == configuration].median())
    return out


def step_split(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with :data:`SPLIT_COLUMNS` per run: verified positions per engine step (one per decoding request-step
    plus its draft tokens, pads included: ``(kpad_draft_requests + spec_draft_tokens) / engine_steps``), the share
    of steps run without a cudagraph (``steps_NONE`` over the three modes' steps: in vLLM 0.26 most steps with a
    prefill in them), the wall time of the worker's forward pass and sampling per engine step (:data:`FORWARD_STAGES`
    of ``step_time_ms`` less the proposer's :data:`INSIDE_FORWARD`, in ms: input preparation, launches and the wait
    for the GPU) and the rest of the step (``engine_step`` minus that: scheduling, the proposer, output handling,
    executor calls), NaN without step timers; and the largest batch captured as a cudagraph (``capture_max``, tokens,
    from ``cudagraph_capture_sizes``; NaN where the record lacks it): a step wider than it runs without a graph."""
    out = runs.copy()
    steps = roofline.numeric(runs, "engine_steps", np.nan)
    out["positions_per_step"] = (
        roofline.numeric(runs, "kpad_draft_requests", np.nan) + roofline.numeric(runs, "spec_draft_tokens", np.nan)
    ) / steps.where(steps > 0)
    modes = sum(roofline.numeric(runs, f"steps_{m}", np.nan) for m in roofline.MODES)
    out["no_graph_share"] = roofline.numeric(runs, "steps_NONE", np.nan) / modes.where(modes > 0)
    stages = [json.loads(s) if isinstance(s, str) else {} for s in runs.get("step_time_ms", [None] * len(runs))]
    timed = [all(f in s for f in FORWARD_STAGES) for s in stages]
    forward = [
        sum(s[f] for f in FORWARD_STAGES) - s.get(INSIDE_FORWARD, 0.0) if ok else np.nan
        for s, ok in zip(stages, timed, strict=True)
    ]
    out["forward_ms"] = pd.Series(forward, index=runs.index, dtype=float)
    step = pd.Series([s.get("engine_step", np.nan) for s in stages], index=runs.index, dtype=float)
    out["rest_ms"] = step - out["forward_ms"]
    sizes = runs.get("cudagraph_capture_sizes", pd.Series(None, index=runs.index, dtype=object))
    out["capture_max"] = sizes.map(largest_capture)
    return out


def added_position_us(ok: pd.DataFrame, kpad: str, nopad: str) -> dict[str, float]:
    """Within each repeat of one cell's ``ok`` runs (:func:`step_split` of them) that has both: kpad K's forward pass
    less nopad K's, per verified position padding added, in us; their median, lowest, highest and count (NaN and 0
    without timers)."""
    a, b = (ok[ok["configuration"] == c].set_index("repeat") for c in (kpad, nopad))
    both = a.index.intersection(b.index)
    per = 1000 * (a.loc[both, "forward_ms"] - b.loc[both, "forward_ms"])
    per = (per / (a.loc[both, "positions_per_step"] - b.loc[both, "positions_per_step"])).dropna()
    return {"added_us": per.median(), "added_us_low": per.min(), "added_us_high": per.max(), "added_n": len(per)}


def against_base(cells: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """How close each stand-in's tokens per request-step (nopad K, median) is to its base model's, at the same
    concurrency, corpus, phase and K on the same GPU (the base's cell with the same measured prompts where it has one):
    a widening computes the base's function up to bf16 rounding."""
    lines = []
    stand_ins = runs.dropna(subset=["stand_in"]) if "stand_in" in runs else runs.iloc[:0]
    bases = {m: widen.base_of(s) for m, s in zip(stand_ins["model"], stand_ins["stand_in"], strict=True) if s}
    for _, r in cells[cells["model"].isin(list(bases))].iterrows():
        keys = (
            (cells["gpu"] == r["gpu"]) & (cells["concurrency"] == r["concurrency"]) & (cells["corpus"] == r["corpus"])
        )
        keys &= cells["phase"] == r["phase"]
        base = cells[keys & (cells["model"] == bases[r["model"]]) & (cells["k"] == r["k"])]
        same = base["prompts"].eq(r["prompts"]).fillna(False).astype(bool)
        base = pd.concat([base[same], base[~same]])  # the base's cell with the same prompts first
        where = f"{r['gpu']}, concurrency {r['concurrency']}, {r['corpus']}, nopad{r['k']}"
        what = f"- {r['model']} ({where}): {r['tokens_per_request_step_nopad']:.2f}"
        if base.empty:
            lines.append(f"{what} tokens per request-step; {bases[r['model']]} has no such cell on this GPU")
            continue
        b = base.iloc[0]
        on_gpu = runs[(runs["gpu_name"] == r["gpu"]) & (runs["max_concurrency"] == r["concurrency"])]
        sources = [_sources(on_gpu, c["model"], c["prompts"]) for c in (r, b)]
        counts = [_prompts(c["prompts"])[2:] or "measured prompts not recorded" for c in (b, r)]
        same = f"{counts[0]}, this cell {counts[1]}"
        if counts[0] == counts[1]:
            same = "measured prompts recorded in neither" if pd.isna(b["prompts"]) else f"the same {counts[0]}"
        apart = f"; the base's cell from another runs table ({same}; other settings may differ)"
        ratio = r["tokens_per_request_step_nopad"] / b["tokens_per_request_step_nopad"]
        lines.append(
            f"{what} tokens per request-step against {bases[r['model']]}'s {b['tokens_per_request_step_nopad']:.2f} "
            f"({100 * (ratio - 1):+.1f}%){apart if sources[0] != sources[1] else ''}"
        )
    return lines


def _sources(runs: pd.DataFrame, model: str, prompts: float) -> set[str]:
    """The runs tables that hold ``model``'s runs of one prompt count (NA: records without the count)."""
    same = runs["n_measured"].isna() if pd.isna(prompts) else runs["n_measured"].eq(prompts)
    return set(runs.loc[(runs["model"] == model) & same, "source"])


def published_rows(csv: str, cells: pd.DataFrame) -> pd.DataFrame:
    """The study's own rows (8x B200; it never ran nopad) for :data:`STUDY_MODELS` on the corpora of ``cells``
    and the mix: the best kpad K of its K-sweep, and on the mix its best kpad / suf and / van
    (:func:`kpadstudy.tables.best_kpad` of :func:`kpadstudy.reference.published_cells`).

    Raises:
        SystemExit: the CSV is missing or not the published table.
    """
    try:
        published = reference.published_cells(pd.read_csv(csv))
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"crossover: {csv}: cannot read the published table ({e}); give --published PATH") from e
    best = tables.best_kpad(published)
    keep = best["model"].isin(STUDY_MODELS) & best["corpus"].isin([*set(cells["corpus"]), "mix"])
    return best[keep].sort_values(["model", "corpus"]).reset_index(drop=True)


def _interval(r: pd.Series) -> str:
    if pd.isna(r["ci_low"]):
        return f"{r['ratio']:.2f}x (n = {r['n']}: noise unknown)"
    return f"{r['ratio']:.2f}x ({r['ci_low']:.2f}-{r['ci_high']:.2f})"


def to_markdown(
    cells: pd.DataFrame,
    params: dict | None,
    ahead: pd.DataFrame | None,
    sources: list[str],
    left_out: list[str],
    extra: tuple[list[str], pd.DataFrame | None, pd.DataFrame | None] = ([], None, None),
) -> str:
    """The crossover table: each cell's paired kpad K / nopad K with its interval, FULL share and tokens per
    request-step, beside the step model's prediction; then the forecast of the widened shapes, and ``extra``: the
    stand-ins' tokens per request-step against their bases' (:func:`against_base`), the study's own rows
    (:func:`published_rows`) and the predictions at lower FLOP efficiencies (:func:`sensitivity`)."""
    lines = [
        "# Where padding pays: kpad K / nopad K by model size",
        "",
        "Measured: within-repeat ratios of output tok/s, geometric mean, 95% t-interval (kpadstudy/paired.py). "
        "Predicted: the step-cost model (kpadstudy/roofline.py), fitted on "
        + (
            f"the {params['runs']} valid runs of {params['fit_on']} on {params['fit_on_gpu']} (in the fit: yes); "
            f"every other cell is out of sample. Fitted: {roofline.fitted_text(params)}."
            if params
            else "no run (no cell has a prediction)."
        )
        + " A stand-in is a small model widened to a large "
        "model's shape: the large shape's step costs with the small model's acceptance, not that large model "
        "(docs/stand-ins.md). SmolLM2-135M-Instruct is the real model, in bf16 from its Q4_1 GGUF.",
        "",
        *_cell_lines(cells),
        *_split_lines(cells),
        *_forecast_lines(ahead),
    ]
    base_lines, study, slower = extra
    lines += _sensitivity_lines(slower)
    if base_lines:
        lines += ["", "A stand-in's tokens per request-step beside its base model's (the same function up to bf16 "
                  "rounding, so the same drafts and acceptance within that):", "", *base_lines]  # fmt: skip
    lines += _study_lines(study)
    lines += ["", "Runs tables read:", "", *(f"- `{s}`" for s in sources), *(f"- {x}" for x in left_out), ""]
    return "\n".join(lines)


def _cell_lines(cells: pd.DataFrame) -> list[str]:
    """The measured cells' table, what each stand-in's shape is, and why a cell has no prediction."""
    lines = [
        "| model | stand-in for | parameters | GPU | concurrency | prompts | corpus | phase | K | n "
        "| measured (95% interval) | favour | FULL share kpad / nopad | tokens per request-step kpad / nopad "
        "| predicted | in the fit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in cells.iterrows():
        row = [r["model"], r["stand_in_for"] or "-", f"{r['parameters'] / 1e9:.2f} B", r["gpu"], r["concurrency"]]
        row += [roofline.count_text(r["prompts"]), r["corpus"]]
        row += [r["phase"], r["k"], r["n"], _interval(r), f"{r['favour']} of {r['n']}"]
        row += [f"{r['full_share_kpad']:.0%} / {r['full_share_nopad']:.0%}"]
        row += [f"{r['tokens_per_request_step_kpad']:.2f} / {r['tokens_per_request_step_nopad']:.2f}"]
        row += ["-" if pd.isna(r["predicted"]) else f"{r['predicted']:.2f}x"]
        row += ["yes" if r["fitted_on_this"] is True else "no"]
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    likes = set(cells["stand_in_for"])
    shapes = [
        f"- {name}, for {spec['like']}: {spec['note']}." for name, spec in widen.SHAPES.items() if spec["like"] in likes
    ]
    if shapes:
        lines += ["", "What each stand-in's shape is (kpadstudy/widen.py):", "", *shapes]
    unrated = sorted(set(cells.loc[cells["predicted"].isna(), "gpu"]) - set(roofline.GPUS))
    if unrated:
        lines += ["", f"No prediction (-) on {unrated}: no datasheet rates for it in kpadstudy.roofline.GPUS."]
    return lines


def _split_lines(cells: pd.DataFrame) -> list[str]:
    """Where each cell's engine steps spent their time (:func:`step_split`, :func:`added_position_us`), kpad K beside
    nopad K, for the cells whose records have the step timers."""
    timed = cells[cells["added_n"] > 0]
    if timed.empty:
        return []
    lines = [
        "",
        "Where an engine step's time went (the K-pad plugin's step timers; medians over each cell's ok runs): the "
        "verified positions per engine step (a decoding request's one token and its draft tokens, pads included), "
        "the share of steps run without a cudagraph (in vLLM 0.26 most steps with a prefill in them; decode-only "
        "steps run FULL when padded, PIECEWISE when not), the wall time of the worker's forward pass with sampling "
        "(execute_model + sample_tokens less the suffix proposer inside them: input preparation, launches and the "
        "wait for the GPU) and the rest of the step (scheduling, the proposer, output handling). Per added position: "
        "within each repeat, kpad K's forward pass less nopad K's over the positions padding added, what they cost "
        "less what the graph modes saved (median of the repeats, lowest and highest). Largest capture: the widest "
        "batch, in tokens, the server captured as a cudagraph (a padded server's list stopped at concurrency x "
        "(1 + K) before 2026-12-07, below vLLM's own, so its steps with a prefill ran without a graph):",
        "",
        "| model | GPU | concurrency | prompts | K | n | positions per step kpad / nopad | largest capture kpad / "
        "nopad | steps without a graph kpad / nopad | forward + sampling ms kpad / nopad | per added position, us "
        "(repeats' range) | rest of the step ms kpad / nopad |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in timed.iterrows():
        n = int(r["added_n"])
        spread = "n = 1: noise unknown" if n == 1 else f"{r['added_us_low']:+.1f} to {r['added_us_high']:+.1f}"
        row = [r["model"], r["gpu"], r["concurrency"], roofline.count_text(r["prompts"]), r["k"], n]
        row += [f"{r['positions_per_step_kpad']:.0f} / {r['positions_per_step_nopad']:.0f}"]
        row += [" / ".join(roofline.count_text(r[f"capture_max_{x}"]) for x in ("kpad", "nopad"))]
        row += [f"{r['no_graph_share_kpad']:.0%} / {r['no_graph_share_nopad']:.0%}"]
        row += [f"{r['forward_ms_kpad']:.2f} / {r['forward_ms_nopad']:.2f}", f"{r['added_us']:+.1f} ({spread})"]
        row += [f"{r['rest_ms_kpad']:.2f} / {r['rest_ms_nopad']:.2f}"]
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return lines


def _forecast_lines(ahead: pd.DataFrame | None) -> list[str]:
    """The forecast of the widened shapes, at the stand-ins' sizes and at the real models'."""
    if ahead is None or ahead.empty:
        return []
    lines = [
        "",
        f"Forecast, not a measurement: the fitted model's widened shapes on {ahead['gpu'].iloc[0]}, from its own "
        'runs (the same drafts and acceptance in the same steps, the shape\'s bytes and FLOPs); "at its sizes": the '
        "same at the bytes and FLOPs of the real model the shape stands in for (its vocabulary, heads and layers), "
        "the step model's size of the stand-in's bias:",
        "",
        "| shape | parameters | prompts | corpus | phase | K | predicted | stands in for | predicted at its sizes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in ahead.iterrows():
        prompts = roofline.count_text(r["prompts"])
        lines.append(
            f"| {r['shape']} | {r['parameters'] / 1e9:.2f} B | {prompts} | {r['corpus']} | {r['phase']} | {r['k']} "
            f"| {r['predicted']:.2f}x | {r['like']} | {r['predicted_like']:.2f}x |"
        )
    return lines


def _sensitivity_lines(slower: pd.DataFrame | None) -> list[str]:
    """The out-of-sample cells' predictions at lower FLOP efficiencies (:func:`sensitivity`)."""
    if slower is None or slower.empty:
        return []
    lines = [
        "",
        "The out-of-sample predictions if the GPU reached only a part of its datasheet FLOP/s (config "
        "`step_model.efficiency`; the fit takes 1.0 and cannot tell it from one model's runs), refitted at each: a "
        "lower efficiency charges every verified position, pads included, more, so padding is predicted to pay less. "
        "Which efficiency holds is not measured here; a 135M model's cells barely move (its FLOPs are a small part of "
        "its steps):",
        "",
        "| model | GPU | prompts | phase | K | measured (paired) | predicted at 1.0 | "
        + " | ".join(f"at {e}" for e in EFFICIENCIES) + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(EFFICIENCIES),
    ]  # fmt: skip
    for _, r in slower.iterrows():
        prompts = roofline.count_text(r["prompts"])
        at = " | ".join(f"{r[f'predicted_{e}']:.2f}x" for e in EFFICIENCIES)
        lines.append(
            f"| {r['model']} | {r['gpu']} | {prompts} | {r['phase']} | {r['k']} | {r['ratio']:.2f}x "
            f"| {r['predicted']:.2f}x | {at} |"
        )
    return lines


def _study_lines(study: pd.DataFrame | None) -> list[str]:
    """The study's own rows (:func:`published_rows`)."""
    if study is None or study.empty:
        return []
    lines = [
        "",
        "The study's own rows, for scale (8x B200, vLLM 1.7.dev, one number each; it never ran nopad K, so none is a "
        "kpad K / nopad K). Best kpad: the K-sweep's best K; on the mix the separately measured bestKpad of its mix "
        "table (its K in brackets where it differs from the sweep's):",
        "",
        "| model | corpus | best kpad K | best kpad / suf (K=32) | best kpad / van |",
        "|---|---|---|---|---|",
    ]
    for _, r in study.iterrows():
        k = f"{r['best_k']}" + (f" (sweep {r['sweep_best_k']})" if r["best_k"] != r["sweep_best_k"] else "")
        over = ["-" if pd.isna(r[c]) else f"{r[c]:.2f}x" for c in ("bestkpad_over_suf", "bestkpad_over_van")]
        lines.append(f"| {r['model']} | {r['corpus']} | {k} | {over[0]} | {over[1]} |")
    return lines


def _cells_within(cells: pd.DataFrame, low: float, high: float) -> bool:
    """Whether a measured cell's size lies in [low, high] (parameters)."""
    return bool(cells["parameters"].between(low, high).any())


def _measured_near(parameters: pd.Series, cells: pd.DataFrame) -> pd.Series:
    """Whether a forecast shape has a measured cell within 1.5x of its size: that cell's label names the shape (its
    stand-in), and the forecast's own label would cross the cell's interval."""
    return parameters.apply(lambda p: _cells_within(cells, p / 1.5, p * 1.5))


def _draw_cells(ax, cells: pd.DataFrame) -> None:  # noqa: ANN001 - a matplotlib Axes
    """Each measured cell with its interval, one colour per GPU (hollow: a confirmation phase), its prediction as a
    black mark (+ in the fit, x out of sample). The cells of one model stand a little apart (by GPU, phase, prompts,
    concurrency) and their labels name what tells them apart; more than two are labelled in a column from the top,
    each joined to its point (:func:`_label`)."""
    gpus = sorted(set(cells["gpu"]))
    order = cells.sort_values(["gpu", "phase", "prompts", "concurrency"]).groupby("model", sort=False).cumcount()
    apart = {
        c: cells.groupby("model")[c].transform(lambda v: v.nunique(dropna=False)) > 1
        for c in ("gpu", "prompts", "concurrency")
    }
    for j, r in cells.iterrows():
        i = gpus.index(r["gpu"])
        low = r["ratio"] - r["ci_low"] if pd.notna(r["ci_low"]) else 0.0
        high = r["ci_high"] - r["ratio"] if pd.notna(r["ci_high"]) else 0.0
        x = r["parameters"] * 1.1 ** order[j]
        face = "none" if r["phase"] == "confirm" else f"C{i}"
        ax.errorbar(x, r["ratio"], yerr=[[low], [high]], fmt="o", color=f"C{i}", mfc=face, capsize=3)
        name = f"stand-in for {r['stand_in_for']}" if r["stand_in_for"] else r["model"]
        name += f"\n{r['phase']}, K={r['k']}, n={r['n']}"
        name += f", concurrency {r['concurrency']}" if apart["concurrency"][j] else ""
        name += f", {r['gpu']}" if apart["gpu"][j] else ""
        name += (_prompts(r["prompts"]) or ", prompts not recorded") if apart["prompts"][j] else ""
        _label(ax, cells, r, (x, r["ratio"], low), name)
        if pd.notna(r["predicted"]):
            mark = "+" if r["fitted_on_this"] is True else "x"
            ax.plot(x, r["predicted"], marker=mark, color="black", linestyle="none")
    for i, gpu in enumerate(gpus):
        hollow = " (hollow: confirmation)" if (cells.loc[cells["gpu"] == gpu, "phase"] == "confirm").any() else ""
        ax.plot([], [], "o", color=f"C{i}", label=f"measured, {gpu}{hollow}")
    fitted = cells["fitted_on_this"] == True  # noqa: E712 - a column of True / False / None
    for mark, label, shown in (("+", "in the fit", fitted.any()), ("x", "out of sample", (~fitted).any())):
        if shown:
            ax.plot([], [], mark, color="black", linestyle="none", label=f"step model, same cell ({label})")


def _label(ax, cells: pd.DataFrame, r: pd.Series, at: tuple[float, float, float], name: str) -> None:  # noqa: ANN001
    """A cell's label: under its interval when a larger cell is within 4x, else beside its point; where its model has
    more than two cells, in a column from the top of the panel (right of the smallest model's cells, left of any
    other's), ranked by ratio, with a line to the point."""
    x, y, low = at
    same = cells[cells["model"] == r["model"]]
    if len(same) > 2:
        rank = list(same.sort_values("ratio", ascending=False, kind="stable").index).index(r.name)
        right = r["parameters"] == cells["parameters"].min()
        x_text = r["parameters"] * 1.1 ** len(same) * 1.2 if right else r["parameters"] / 1.2
        line = {"arrowstyle": "-", "color": "grey", "lw": 0.5, "relpos": (0 if right else 1, 0.5)}  # from its edge
        ax.annotate(name, (x, y), xytext=(x_text, 0.98 - 0.085 * rank), textcoords=("data", "axes fraction"),
                    fontsize=6, va="top", ha="left" if right else "right", arrowprops=line)  # fmt: skip
    elif _cells_within(cells, r["parameters"] * 1.01, r["parameters"] * 4):  # a larger cell within 4x: under
        ax.annotate(name, (x, y - low), fontsize=6, xytext=(0, -4), textcoords="offset points", va="top", ha="center")
    else:
        ax.annotate(name, (x, y), fontsize=6, xytext=(6, -3), textcoords="offset points", va="top")


def draw(cells: pd.DataFrame, ahead: pd.DataFrame | None, png: str, svg: str) -> None:
    """kpad K / nopad K against parameters (log): the measured cells (:func:`_draw_cells`) and the forecast of the
    widened shapes as a dashed line through its shapes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5.2))
    _draw_cells(ax, cells)
    xs = cells["parameters"]
    if ahead is not None and not ahead.empty:
        line = ahead.groupby(["parameters", "shape"])["predicted"].mean().reset_index().sort_values("parameters")
        label = f"step model forecast, widened shapes, {ahead['gpu'].iloc[0]}"
        several = len(ahead) // len(line)
        label += f"\n(mean over the fitted model's {several} cells)" if several > 1 else ""
        ax.plot(line["parameters"], line["predicted"], "d--", color="grey", lw=1, markersize=4, label=label)
        for _, r in line[~_measured_near(line["parameters"], cells)].iterrows():
            ax.annotate(r["shape"], (r["parameters"], r["predicted"]), fontsize=6, color="grey", xytext=(3, 5),
                        textcoords="offset points", ha="left")  # fmt: skip
        xs = pd.concat([xs, line["parameters"]])
    ax.axhline(1, color="black", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlim(xs.min() / 2, xs.max() * 3)
    ax.set(xlabel="model parameters", ylabel="kpad K / nopad K (output tok/s)")
    setting = f"{', '.join(sorted(set(cells['corpus'])))}; concurrency "
    setting += ", ".join(str(c) for c in sorted(set(cells["concurrency"])))
    ax.set_title(f"Where padding pays: above 1, kpad beats unpadded suffix decoding\n{setting}", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=150)
    plt.rcParams["svg.hashsalt"] = "kpadstudy"  # same data, same SVG bytes
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_prefix", help="writes OUT_PREFIX.md and OUT_PREFIX.parquet")
    parser.add_argument("figure_prefix", help="writes FIGURE_PREFIX.png and FIGURE_PREFIX.svg")
    parser.add_argument("runs", nargs="+", help="runs tables (Parquet) of the data sets to set side by side")
    parser.add_argument("--published", default=PUBLISHED, help=f"the study's published numbers (default {PUBLISHED})")
    args = parser.parse_args(argv)
    for prefix in (args.out_prefix, args.figure_prefix):
        if not Path(prefix).parent.is_dir():
            raise SystemExit(f"crossover: {Path(prefix).parent} does not exist: make the folder first")
    runs, left_out = read_runs(args.runs)
    cells, params, ahead, dropped = table(runs)
    left_out += dropped
    for line in left_out:
        print(f"crossover: {line}", file=sys.stderr)
    extra = (against_base(cells, runs), published_rows(args.published, cells), sensitivity(runs, cells))
    Path(args.out_prefix + ".md").write_text(to_markdown(cells, params, ahead, args.runs, left_out, extra))
    cells.to_parquet(args.out_prefix + ".parquet", index=False)
    draw(cells, ahead, args.figure_prefix + ".png", args.figure_prefix + ".svg")
    out = f"{args.out_prefix}.{{md,parquet}}, {args.figure_prefix}.{{png,svg}}"
    print(f"crossover: {len(cells)} cells -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
