"""The published K-pad study as a cells table, so every figure and comparison reads it like our own runs.

Source: ``resources/reference/kpad_published.csv`` (a copy of ``../shared/reference/kpad_published.csv``),
one row per published number: columns ``model, corpus, config, k, output_tok_s, source, note``, where
``config`` is ``kpad`` (the appendix's raw K-sweep, 11 models x 7 corpora x K in {4, 6, 8, 12} = 308 rows)
or ``van`` / ``suf`` / ``bestKpad`` (section 03's mix table, 11 rows each).
"""

from __future__ import annotations

import pandas as pd

from .tables import CELL_KEYS, SUMMARIZED

SOURCE = "published"
DEVICE = "8x B200"  # the study's hardware; our own cells say cpu / cuda
CSV_COLUMNS = {"model", "corpus", "config", "k", "output_tok_s", "source", "note"}
# the published configurations and how they map onto ours (method, pad)
METHODS = {"van": ("van", False), "suf": ("suf", False), "kpad": ("kpad", True), "bestKpad": ("bestkpad", True)}


def configuration_name(config: str, k: float) -> str:
    """Our configuration label of a published row: ``van``, ``suf``, ``kpad8`` (sweep), ``bestKpad``.

    Raises:
        ValueError: an unknown ``config`` or a kpad row without K.
    """
    if config not in METHODS:
        raise ValueError(f"published config {config!r} is not one of {sorted(METHODS)}")
    if config == "kpad":
        if pd.isna(k):
            raise ValueError("a published kpad row has no K")
        return f"kpad{int(k)}"
    return config


def published_cells(csv: pd.DataFrame) -> pd.DataFrame:
    """The published numbers in the cells schema of :func:`kpadstudy.tables.cells`, one row per number.

    Args:
        csv: the published CSV as read (columns ``CSV_COLUMNS``); output_tok_s in tok/s.

    Returns:
        One row per CSV row: ``CELL_KEYS`` (method ``van`` / ``suf`` / ``kpad`` / ``bestkpad``; ``k`` as
        nullable Int64: 0 for van, NA for suf, whose K the mix table does not state; ``device`` "8x B200"),
        ``n_runs`` = ``n_valid`` = 1 (the study publishes one number per configuration, no repeats),
        ``statuses`` "published", ``output_tok_s_median`` = the published number, ``output_tok_s_mad`` NaN
        (no spread published), every other ``<metric>_median`` NaN, ``noisy`` None (unknown), and ``source`` =
        "published", ``source_text`` and ``note`` from the CSV. ``bestkpad`` rows are the mix table's
        separately measured bestKpad: :func:`kpadstudy.tables.best_kpad` prefers them to the sweep's
        maximum, as the study's own mix figures do.

    Raises:
        ValueError: columns missing, an unknown config, or a duplicate (model, corpus, configuration).
    """
    missing = CSV_COLUMNS - set(csv.columns)
    if missing:
        raise ValueError(f"the published CSV lacks columns {sorted(missing)}")
    if csv.empty:
        raise ValueError("the published CSV has no rows")
    blank = pd.to_numeric(csv["output_tok_s"], errors="coerce").isna()
    if blank.any():
        rows = csv.loc[blank, ["model", "corpus", "config"]].values.tolist()
        raise ValueError(f"the published CSV has no output_tok_s number in {int(blank.sum())} rows: {rows[:3]}")
    rows = []
    for r in csv.itertuples(index=False):
        method, pad = METHODS.get(r.config, (None, None))
        name = configuration_name(r.config, r.k)
        row = {
            "model": r.model,
            "corpus": r.corpus,
            "configuration": name,
            "method": method,
            "k": pd.NA if pd.isna(r.k) else int(r.k),
            "pad": pad,
            "device": DEVICE,
            "n_runs": 1,
            "n_valid": 1,
            "statuses": SOURCE,
        }
        for m in SUMMARIZED:
            row[f"{m}_median"] = float("nan")
        row["output_tok_s_median"] = float(r.output_tok_s)
        row["output_tok_s_mad"] = float("nan")
        row["output_tok_s_rel_mad"] = float("nan")
        row["noisy"] = None  # a single published number: its noise is unknown
        row["source"] = SOURCE
        row["source_text"] = r.source
        row["note"] = "" if pd.isna(r.note) else str(r.note)
        rows.append(row)
    out = pd.DataFrame(rows).astype({"k": "Int64"})
    dup = out.duplicated(["model", "corpus", "configuration"], keep=False)
    if dup.any():
        raise ValueError(
            "published CSV repeats cells: "
            f"{out.loc[dup, ['model', 'corpus', 'configuration']].drop_duplicates().values.tolist()}"
        )
    return out[[*CELL_KEYS, *[c for c in out.columns if c not in CELL_KEYS]]]


def is_published(cells: pd.DataFrame) -> bool:
    """True when every row of ``cells`` is a published number (column ``source`` == "published")."""
    return "source" in cells and len(cells) > 0 and bool((cells["source"] == SOURCE).all())
