"""A step-cost model of padding: where does kpad K beat unpadded suffix decoding (nopad K)?

A run's engine steps cost (per step, summed over the run's measured prompts)::

    t_step = (weight bytes + KV bytes read) / bandwidth + FLOPs / (peak FLOP/s x efficiency) + overhead[mode]

- weight bytes: every weight the step reads (all but the embedding table, which is looked up), ``model_weight_bytes``;
- KV bytes: each decoding request reads its context's KV cache once per step (context = mean prompt + half the
  mean output, in tokens, x ``model_kv_bytes_per_token``);
- FLOPs: every verified position (prompt tokens, one per request-step, every draft slot, pads included) x
  ``model_flops_per_token``, plus attention's ``model_attention_flops_per_context_token`` x context;
- overhead per step of each cudagraph mode (FULL, PIECEWISE, NONE: the plugin's step counters): the host's
  scheduling, drafting, sampling and launch time, which a FULL graph shortens.

The bandwidth and peak are the GPU's datasheet numbers (:data:`GPUS`). The efficiency and the three overheads are
fitted (non-negative least squares, scipy) on the runs of one model and then used unchanged for the others: padding
pays where its extra FLOPs cost less than the overhead a FULL graph saves, and that crossover moves with the model's
bytes and FLOPs per token. A stand-in model (:mod:`kpadstudy.widen`) has the large shape's bytes and FLOPs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

MODES = ("FULL", "PIECEWISE", "NONE")

GPUS: dict[str, dict[str, Any]] = {
    "NVIDIA H200": {
        "bandwidth": 4.8e12,
        "peak_flops": 989.5e12,
        "source": "NVIDIA H200 datasheet (SXM): HBM3e 4.8 TB/s; BF16 1,979 TFLOPS with sparsity, half dense",
    },
    "NVIDIA H100 80GB HBM3": {
        "bandwidth": 3.35e12,
        "peak_flops": 989.5e12,
        "source": "NVIDIA H100 datasheet (SXM): HBM3 3.35 TB/s; BF16 1,979 TFLOPS with sparsity, half dense",
    },
    "NVIDIA H100 PCIe": {
        "bandwidth": 2.0e12,
        "peak_flops": 756.5e12,
        "source": "NVIDIA H100 datasheet (PCIe): HBM2e 2 TB/s; BF16 1,513 TFLOPS with sparsity, half dense",
    },
    "NVIDIA A100-SXM4-80GB": {
        "bandwidth": 2.039e12,
        "peak_flops": 312e12,
        "source": "NVIDIA A100 datasheet (80GB SXM): HBM2e 2,039 GB/s; BF16 312 TFLOPS dense",
    },
    "NVIDIA A100-SXM4-40GB": {
        "bandwidth": 1.555e12,
        "peak_flops": 312e12,
        "source": "NVIDIA A100 datasheet (40GB SXM): HBM2 1,555 GB/s; BF16 312 TFLOPS dense",
    },
    "NVIDIA B200": {
        "bandwidth": 8.0e12,
        "peak_flops": 2.25e15,
        "source": "NVIDIA HGX B200 datasheet: 64 TB/s HBM3e and 36 PFLOPS BF16 with sparsity for 8 GPUs, per GPU and "
        "dense",
    },
}
"""Datasheet memory bandwidth (bytes/s) and dense BF16 peak (FLOP/s) by the ``gpu_name`` a run record names."""

SIZE_COLUMNS = [
    "model_weight_bytes",
    "model_kv_bytes_per_token",
    "model_flops_per_token",
    "model_attention_flops_per_context_token",
]


def numeric(runs: pd.DataFrame, column: str, fill: float = 0.0) -> pd.Series:
    """``runs[column]`` as numbers, ``fill`` where the value is missing or not a number and for every run where the
    table lacks the column (records older than it)."""
    if column not in runs:
        return pd.Series(fill, index=runs.index, dtype=float)
    return pd.to_numeric(runs[column], errors="coerce").fillna(fill)


def terms(runs: pd.DataFrame) -> pd.DataFrame:
    """Per valid run with step counts, a known GPU and the model's sizes: what its steps read and compute.

    Returns:
        ``model, corpus, configuration, method, k, repeat, gpu_name, duration_s, output_tokens``, ``steps_<mode>``,
        ``memory_s`` (weight and KV bytes over the datasheet bandwidth), ``compute_s`` (FLOPs over the datasheet
        peak), ``positions`` (verified positions: prompt tokens, one per request-step, every draft slot),
        ``tokens_per_step`` (positions per step), ``context`` (tokens).
    """
    steps = {m: numeric(runs, f"steps_{m}") for m in MODES}
    total_steps = sum(steps.values())
    known_gpu = runs["gpu_name"].isin(list(GPUS)) if "gpu_name" in runs else False
    keep = (runs["status"] == "ok") & (total_steps > 0) & runs.reindex(columns=SIZE_COLUMNS).notna().all(axis=1)
    r = runs[keep & known_gpu]
    if r.empty:  # nothing to size (failed runs, CPU, GPUs without datasheet rates): no terms, no fit
        return pd.DataFrame()
    done = numeric(r, "completed").replace(0, np.nan)
    out_tok, accepted = numeric(r, "output_tokens"), numeric(r, "spec_accepted_tokens")
    cols = ["model", "corpus", "configuration", "method", "k", "repeat", "gpu_name", "duration_s", "output_tokens"]
    out = r[cols].copy()
    out["phase"] = r["phase"] if "phase" in r else "sweep"  # a cell's sweep and confirmation are compared apart
    out["max_concurrency"] = r["max_concurrency"] if "max_concurrency" in r else float("nan")  # a cell's load
    out["n_measured"] = r["n_measured"] if "n_measured" in r else float("nan")  # and its measured prompts
    for m in MODES:
        out[f"steps_{m}"] = steps[m][r.index]
    out["positions"] = numeric(r, "input_tokens") + out_tok - accepted + numeric(r, "spec_draft_tokens")
    out["request_steps"] = out_tok - accepted
    out["context"] = numeric(r, "input_tokens") / done + out_tok / (2 * done)
    sizes = {c: numeric(r, c) for c in SIZE_COLUMNS}
    out["memory_s"], out["compute_s"] = _memory_s(out, sizes), _compute_s(out, sizes)
    out["tokens_per_step"] = out["positions"] / total_steps[r.index]
    return out.reset_index(drop=True)


def fit(t: pd.DataFrame, efficiency: float | None = 1.0) -> dict[str, float]:
    """Fit the host's costs: ``duration_s - memory_s - compute_s / efficiency = sum over modes of steps x
    overhead[mode] + verified positions x per-position overhead`` (non-negative least squares, scipy).

    Fitted on the runs of one small model, where bytes and FLOPs cost next to nothing, the overheads are the host's
    alone; a larger model's steps then add its bytes and FLOPs at the datasheet rates. With ``efficiency`` None the
    fraction of the peak FLOP/s reached is fitted too: that needs runs of at least two shapes (with one, FLOPs and
    positions are proportional).

    Returns:
        ``efficiency``, ``overhead_<mode>_ms`` per step, ``overhead_position_us`` per verified position, ``runs``.

    Raises:
        ValueError: no run to fit.
    """
    from scipy.optimize import nnls

    if t.empty:
        raise ValueError("no run to fit: the model needs valid runs with step counts, a known GPU and model sizes")
    columns = [*(t[f"steps_{m}"] for m in MODES), t["positions"]]
    target = t["duration_s"] - t["memory_s"] - (0.0 if efficiency is None else t["compute_s"] / efficiency)
    if efficiency is None:
        columns.append(t["compute_s"])
    x, _ = nnls(np.column_stack(columns), target.to_numpy(float))
    fitted = 1.0 / x[4] if efficiency is None and x[4] > 0 else (float("inf") if efficiency is None else efficiency)
    return {
        "efficiency": fitted,
        **{f"overhead_{m}_ms": 1000.0 * x[i] for i, m in enumerate(MODES)},
        "overhead_position_us": 1e6 * x[3],
        "runs": len(t),
    }


def predict(t: pd.DataFrame, params: dict[str, float]) -> pd.Series:
    """Predicted duration (s) of each run of :func:`terms` under fitted ``params``."""
    overhead = sum(t[f"steps_{m}"] * params[f"overhead_{m}_ms"] / 1000.0 for m in MODES)
    overhead = overhead + t["positions"] * params["overhead_position_us"] / 1e6
    return t["memory_s"] + t["compute_s"] / params["efficiency"] + overhead


def crossover(t: pd.DataFrame, params: dict[str, float]) -> pd.DataFrame:
    """kpad K / nopad K per (model, GPU, concurrency, measured prompts, corpus, phase, K), measured and predicted:
    ratios of median output tok/s over the valid runs of each (measured: ``output_tokens / duration_s``; predicted:
    over the predicted durations).

    Returns:
        ``model, gpu_name, max_concurrency, n_measured, corpus, phase, k, n_kpad, n_nopad, measured, predicted``,
        ``kpad_step_ms, nopad_step_ms`` (measured medians per engine step), ``kpad_tokens_per_step``,
        ``nopad_tokens_per_step``.
    """
    t = t.assign(
        tok_s=t["output_tokens"] / t["duration_s"],
        pred_tok_s=t["output_tokens"] / predict(t, params),
        step_ms=1000.0 * t["duration_s"] / sum(t[f"steps_{m}"] for m in MODES),
    )
    rows = []
    keys = ["model", "gpu_name", "max_concurrency", "n_measured", "corpus", "phase", "k"]
    spec = t[t["method"].isin(["kpad", "nopad"])]
    for (model, gpu, concurrency, prompts, corpus, phase, k), g in spec.groupby(keys, sort=True, dropna=False):
        kp, np_ = g[g["method"] == "kpad"], g[g["method"] == "nopad"]
        if kp.empty or np_.empty:
            continue
        rows.append(
            {
                "model": model,
                "gpu_name": gpu,
                "max_concurrency": concurrency,
                "n_measured": prompts,
                "corpus": corpus,
                "phase": phase,
                "k": int(k),
                "n_kpad": len(kp),
                "n_nopad": len(np_),
                "measured": kp["tok_s"].median() / np_["tok_s"].median(),
                "predicted": kp["pred_tok_s"].median() / np_["pred_tok_s"].median(),
                "kpad_step_ms": kp["step_ms"].median(),
                "nopad_step_ms": np_["step_ms"].median(),
                "kpad_tokens_per_step": kp["tokens_per_step"].median(),
                "nopad_tokens_per_step": np_["tokens_per_step"].median(),
            }
        )
    return pd.DataFrame(rows)


def with_sizes(runs: pd.DataFrame, known: dict[str, Any]) -> pd.DataFrame:
    """``runs`` with the size columns of :data:`SIZE_COLUMNS` filled, where a record lacks them (records older than
    the columns), from ``known`` (model name -> :class:`kpadstudy.widen.Shape`, bf16)."""
    from .widen import size_facts

    out = runs.copy()
    for col in SIZE_COLUMNS:
        if col not in out:
            out[col] = np.nan
    for name, shape in known.items():
        rows = (out["model"] == name) & out[SIZE_COLUMNS].isna().any(axis=1)
        for col, value in size_facts(shape).items():
            if col in SIZE_COLUMNS:
                out.loc[rows, col] = value
    return out


def known_shapes() -> dict[str, Any]:
    """Sizes of the models in records older than the size columns: the embedded SmolLM2-135M-Instruct (bf16) and
    ``llama-8b-random`` (``tools/make_tp2_test_model.py --shape llama-8b``: Llama-3-8B's body, SmolLM2's vocabulary)."""
    from .widen import SMOLLM2_135M, Shape

    return {
        "SmolLM2-135M-Instruct": SMOLLM2_135M,
        "llama-8b-random": Shape(4096, 32, 8, 128, 14336, 32, 49152),
    }


def fit_model(t: pd.DataFrame, fit_on: str | None) -> str:
    """The model whose runs the overheads are fitted on: ``fit_on`` (config ``step_model.fit_on``), else the
    smallest by bytes read per step, where the host's costs are least mixed with the GPU's.

    Raises:
        ValueError: ``fit_on`` has no run to fit, naming the models that have.
    """
    models = t.groupby("model")["memory_s"].median().sort_values()
    if fit_on is None:
        return str(models.index[0])
    if fit_on not in models.index:
        raise ValueError(
            f"config step_model.fit_on is {fit_on!r}, which has no valid GPU run with step counts; "
            f"the runs have {sorted(models.index)}"
        )
    return fit_on


def fit_gpu(t: pd.DataFrame, model: str) -> str:
    """The GPU whose runs of ``model`` the overheads are fitted on: the one with the most of them (ties: the first
    by name). The overheads are a host's, so runs of two machines are not fitted together."""
    counts = t.loc[t["model"] == model, "gpu_name"].value_counts()
    return str(min(counts.index[counts == counts.max()]))


def forecast(t: pd.DataFrame, params: dict[str, Any], base: Any) -> pd.DataFrame:
    """kpad K / nopad K predicted for each named widened shape (:data:`kpadstudy.widen.SHAPES`) of ``base`` (a
    :class:`kpadstudy.widen.Shape`), from the fitted model's own runs on the GPU of the fit: a widening computes the
    same function, so it drafts and accepts the same tokens in the same steps; only its bytes and FLOPs change.

    ``predicted_like`` is the same at the sizes of the real model the shape stands in for (``like``,
    :data:`kpadstudy.widen.REAL`: its vocabulary, head size and layer count): the step model's size of the
    stand-in's bias, the acceptance held the same.

    Returns:
        ``shape, n_measured, corpus, phase, k, predicted, like, predicted_like`` per cell of the fitted model's runs;
        None when none of its cells has both kpad K and nopad K runs.
    """
    from .widen import REAL, SHAPES, target_shape

    own = t[(t["model"] == params["fit_on"]) & (t["gpu_name"] == params["fit_on_gpu"])]
    rows = []
    for name, spec in SHAPES.items():
        wide, real = _at_sizes(own, params, target_shape(base, name)), _at_sizes(own, params, REAL[spec["like"]])
        if wide.empty:
            continue
        for r, r_like in zip(wide.to_dict("records"), real["predicted"], strict=True):
            rows.append({"shape": name, **r, "like": spec["like"], "predicted_like": r_like})
    return pd.DataFrame(rows) if rows else None


def _at_sizes(own: pd.DataFrame, params: dict[str, Any], shape: Any) -> pd.DataFrame:
    """:func:`crossover`'s ``n_measured, corpus, phase, k, predicted`` of the fitted model's runs at ``shape``'s bytes
    and FLOPs (:func:`kpadstudy.widen.size_facts`)."""
    from .widen import size_facts

    sizes = size_facts(shape)
    scaled = own.assign(memory_s=_memory_s(own, sizes), compute_s=_compute_s(own, sizes))
    table = crossover(scaled, params)
    return table[["n_measured", "corpus", "phase", "k", "predicted"]] if not table.empty else pd.DataFrame()


def _memory_s(t: pd.DataFrame, sizes: dict[str, Any]) -> pd.Series:
    """Seconds of a run's steps reading weights and KV at its GPU's datasheet bandwidth."""
    steps = sum(t[f"steps_{m}"] for m in MODES)
    bandwidth = t["gpu_name"].map(lambda g: GPUS[g]["bandwidth"])
    kv = t["request_steps"] * t["context"] * sizes["model_kv_bytes_per_token"]
    return (steps * sizes["model_weight_bytes"] + kv) / bandwidth


def _compute_s(t: pd.DataFrame, sizes: dict[str, Any]) -> pd.Series:
    """Seconds of a run's verified positions' FLOPs at its GPU's datasheet peak."""
    peak = t["gpu_name"].map(lambda g: GPUS[g]["peak_flops"])
    per = sizes["model_flops_per_token"] + t["context"] * sizes["model_attention_flops_per_context_token"]
    return t["positions"] * per / peak


def step_model(runs: pd.DataFrame, fit_on: str | None = None, efficiency: float | None = 1.0) -> tuple:
    """Fit on one model's runs on one GPU (:func:`fit_model`, :func:`fit_gpu`), predict every cell's kpad K / nopad K.

    Returns:
        ``(table, params, forecast)``: :func:`crossover` with ``fitted_on_this`` (True for the cells the overheads
        were fitted on: in sample) and ``predicted_over_measured``; ``params`` of :func:`fit` with ``fit_on``,
        ``fit_on_gpu`` and ``efficiency_from``; :func:`forecast` of the named widened shapes when the fitted model is
        a base they are made for (:func:`known_shapes`), else None. ``(None, None, None)`` when no run can be fitted
        (CPU runs, unknown GPUs).
    """
    t = terms(with_sizes(runs, known_shapes()))
    if t.empty:
        return None, None, None
    model = fit_model(t, fit_on)
    gpu = fit_gpu(t, model)
    params = {
        **fit(t[(t["model"] == model) & (t["gpu_name"] == gpu)], efficiency),
        "fit_on": model,
        "fit_on_gpu": gpu,
        "efficiency_from": "fitted" if efficiency is None else "config step_model.efficiency, not fitted",
    }
    table = crossover(t, params)
    if not table.empty:
        table["fitted_on_this"] = (table["model"] == model) & (table["gpu_name"] == gpu)
        table["predicted_over_measured"] = table["predicted"] / table["measured"]
    base = known_shapes().get(model)
    widenable = base is not None and base.hidden_size % 576 == 0 and base.head_dim == 64
    return table, params, forecast(t, params, base) if widenable else None


INTRO = (
    "Per engine step: (weight bytes + KV bytes read) / the GPU's bandwidth + FLOPs / (its peak x efficiency) + an "
    "overhead per step of its cudagraph mode + an overhead per verified position (prompt tokens, one per "
    "request-step, every draft slot, pads included). The overheads are fitted on one model's runs; every other "
    "model's cells are predicted from its own bytes and FLOPs per token (kpadstudy/roofline.py)."
)

NO_FIT = (
    "No run to fit: the step-cost model needs valid GPU runs with the K-pad plugin's step counts on a GPU of "
    "kpadstudy.roofline.GPUS (CPU runs have no cudagraphs and no datasheet rates)."
)


def count_text(value: float) -> str:
    """A whole count (measured prompts, concurrency) as table text, "-" where a run's record has none."""
    return "-" if pd.isna(value) else str(int(value))


def fitted_text(params: dict[str, Any]) -> str:
    """What :func:`fit` fitted, in words: the overheads per engine step and per verified position (non-negative
    least-squares intercepts, not timed host work) and the FLOP efficiency with where it came from."""
    return (
        f"overhead per engine step FULL {params['overhead_FULL_ms']:.2f} ms, PIECEWISE "
        f"{params['overhead_PIECEWISE_ms']:.2f} ms, NONE {params['overhead_NONE_ms']:.2f} ms; "
        f"{params['overhead_position_us']:.1f} us per verified position; FLOP efficiency {params['efficiency']:.3g} of "
        f"the datasheet peak ({params['efficiency_from']})"
    )


def to_markdown(
    table: pd.DataFrame | None, params: dict[str, Any] | None, runs: pd.DataFrame, ahead: pd.DataFrame | None = None
) -> str:
    """``results/step_model.md``: the fitted constants with their sources, kpad K / nopad K per cell, measured and
    predicted, and (``ahead``, :func:`forecast`) predicted for the widened stand-ins of the fitted model."""
    lines = ["# Step-cost model: kpad K / nopad K, measured and predicted", "", INTRO, ""]
    if params is None:
        return "\n".join([*lines, NO_FIT, ""])
    gpus = sorted(set(runs["gpu_name"].dropna()) & set(GPUS)) if "gpu_name" in runs else []
    lines += [
        f"Fitted on the {params['runs']} valid runs of {params['fit_on']} on {params['fit_on_gpu']}: "
        f"{fitted_text(params)}.",
        "",
        *(f"- {g}: {GPUS[g]['source']}." for g in gpus),
        "",
    ]
    if table is None or table.empty:
        return "\n".join([*lines, "No cell has both kpad and nopad runs at one K.", ""])
    load = [c for c in ("max_concurrency", "n_measured") if table[c].nunique(dropna=False) > 1]  # where cells differ
    names = {"max_concurrency": "concurrency", "n_measured": "prompts"}
    lines += [
        "| model | GPU | " + "".join(f"{names[c]} | " for c in load) + "corpus | phase | K | n kpad / nopad | measured "
        "| predicted | predicted / measured | step ms kpad / nopad | positions per step kpad / nopad | fitted on |",
        "|---|---|" + "---|" * len(load) + "---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        cells = [
            r["model"],
            r["gpu_name"],
            *(count_text(r[c]) for c in load),
            r["corpus"],
            r["phase"],
            r["k"],
            f"{r['n_kpad']} / {r['n_nopad']}",
            f"{r['measured']:.2f}x",
            f"{r['predicted']:.2f}x",
            f"{r['predicted_over_measured']:.2f}",
            f"{r['kpad_step_ms']:.1f} / {r['nopad_step_ms']:.1f}",
            f"{r['kpad_tokens_per_step']:.0f} / {r['nopad_tokens_per_step']:.0f}",
            "yes (in sample)" if r["fitted_on_this"] else "no",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += [
        "",
        "Ratios of median output tok/s over each configuration's valid runs (measured: output tokens / duration; "
        "predicted: over the model's durations), not paired intervals: results/paired.md has those.",
        "",
    ]
    if ahead is not None and not ahead.empty:
        lines += [
            f"Forecast, not a measurement: kpad K / nopad K of {params['fit_on']}'s widened stand-ins "
            "(kpadstudy/widen.py: the same drafts and acceptance in the same steps, the large shape's bytes and "
            "FLOPs), from the cells above; beside it, the same at the sizes of the real model it stands in for (its "
            "vocabulary, heads and layers; the acceptance held the same): the stand-in's bias as the model sizes it.",
            "",
            "| shape | corpus | phase | K | predicted | stands in for | predicted at its sizes |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {r['shape']} | {r['corpus']} | {r['phase']} | {r['k']} | {r['predicted']:.2f}x | {r['like']} "
                f"| {r['predicted_like']:.2f}x |"
                for _, r in ahead.iterrows()
            ),
            "",
        ]
    return "\n".join(lines)


def draw(table: pd.DataFrame | None, png: str, svg: str) -> None:
    """Predicted against measured kpad K / nopad K, one point per cell, the cells of the fitted model hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    if table is None or table.empty:
        ax.text(0.5, 0.5, "no cell with kpad and nopad GPU runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        for fitted, marker in ((True, "o"), (False, "s")):
            part = table[table["fitted_on_this"] == fitted]
            if part.empty:
                continue
            ax.scatter(
                part["measured"],
                part["predicted"],
                marker=marker,
                facecolors="none" if fitted else "C0",
                edgecolors="C0",
                label="fitted on (in sample)" if fitted else "predicted (out of sample)",
            )
            for _, r in part.iterrows():
                label = f"{r['model']}\n{r['corpus']} K={r['k']} ({r['phase']})"
                label += f", {r['gpu_name']}" if table["gpu_name"].nunique() > 1 else ""
                ax.annotate(label, (r["measured"], r["predicted"]), fontsize=7)
        lo = min(table["measured"].min(), table["predicted"].min(), 1.0) * 0.9
        hi = max(table["measured"].max(), table["predicted"].max(), 1.0) * 1.1
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        ax.axhline(1, color="grey", lw=0.5, ls=":")
        ax.axvline(1, color="grey", lw=0.5, ls=":")
        ax.set(xlim=(lo, hi), ylim=(lo, hi), xlabel="measured kpad K / nopad K", ylabel="predicted kpad K / nopad K")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Step-cost model: padding's gain over unpadded suffix decoding", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=150)
    plt.rcParams["svg.hashsalt"] = "kpadstudy"  # same data, same SVG bytes (no random ids, no date)
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
