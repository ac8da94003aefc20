"""Aggregation: run records -> ``runs`` table -> ``cells`` table -> best K per cell.

``results/runs.parquet``: one row per run (model, corpus, configuration, repeat).
``results/cells.parquet``: one row per (model, corpus, configuration): median and MAD of output tok/s
over the valid repeats, and how many repeats were valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pandas as pd

from . import runrecord

CELL_KEYS = ["model", "corpus", "configuration", "method", "k", "pad", "device"]
NOISY_REL_MAD = 0.05  # a configuration whose MAD exceeds 5% of its median is flagged ``noisy``
MIN_NOISE_N = 3  # fewer valid repeats: MAD and noisy are unknown (NaN / None), never 0 / False
SUMMARIZED = [
    "output_tok_s",
    "tpot_mean_ms",
    "itl_token_mean_ms",
    "ttft_mean_ms",
    "tokens_per_request_step",
    "acceptance_rate",
    "acceptance_rate_real",
    "mean_acceptance_length",
    "full_share_decode",
]
runrecord.names(*CELL_KEYS, *SUMMARIZED)  # a typo here fails at import, naming the column


def read_records(paths: Iterable[Path], required: set[str]) -> pd.DataFrame:
    """One row per JSON record file; nested values (lists, dicts) become JSON strings.

    Raises:
        ValueError: a file is not JSON (or not UTF-8), is JSON but not an object, or lacks a ``required`` key
            (the message names the file).
    """
    rows = []
    for path in paths:
        try:
            rec = json.loads(Path(path).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not a JSON record ({err}); delete it and rerun its job") from err
        if not isinstance(rec, dict):
            raise ValueError(f"{path}: not a run record (a JSON {type(rec).__name__}); delete it and rerun its job")
        missing = required - rec.keys()
        if missing:
            raise ValueError(f"{path}: record lacks {sorted(missing)}; delete it and rerun its job")
        rows.append({k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in rec.items()})
    return pd.DataFrame(rows)


def read_runs(paths: Iterable[Path]) -> pd.DataFrame:
    """One row per run record (the JSON that a run job writes; :mod:`kpadstudy.runrecord`), its columns in the
    record's order; a column of an older record that the definition no longer has is kept, after them. See
    :func:`read_records` (the record must name its run: :data:`kpadstudy.runrecord.IDENTITY`)."""
    table = read_records(paths, set(runrecord.IDENTITY))
    known = [c for c in runrecord.NAMES if c in table]
    return table[known + [c for c in table if c not in runrecord.BY_NAME]]


def lost_graphs(rows: pd.DataFrame) -> pd.Series:
    """Boolean mask of the rows (runs or cells) whose kpad runs lost their FULL cudagraphs (``graph_lost`` True;
    no column: none did)."""
    if "graph_lost" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["graph_lost"] == True  # noqa: E712 - elementwise on an object column of True / False / None


def ranked_kpad(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The K-sweep's kpad rows of one cell, best first: ``(ranked, lost)``.

    ``ranked``: the ``method == "kpad"`` rows with a valid median and a K that kept their FULL cudagraphs,
    by median output tok/s (highest first; equal medians: the smaller K first). ``lost``: the valid rows left
    out because their runs lost their FULL cudagraphs (:func:`lost_graphs`). The one ranking behind the best K
    of :func:`best_kpad` and the best and second-best of :func:`kpadstudy.confirm.pick_best_k`.
    """
    kp = rows[(rows["method"] == "kpad") & rows["output_tok_s_median"].notna() & rows["k"].notna()]
    lost = kp[lost_graphs(kp)]
    ranked = kp.drop(lost.index).sort_values(["output_tok_s_median", "k"], ascending=[False, True], kind="stable")
    return ranked, lost


def mad(values: pd.Series) -> float:
    """Median absolute deviation, unscaled: ``median(|x - median(x)|)``."""
    return float((values - values.median()).abs().median())


def cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Median and MAD over valid repeats (``status == "ok"``) per (model, corpus, configuration).

    Columns: ``CELL_KEYS``, ``n_runs``, ``n_valid``, ``<metric>_median`` for each of ``SUMMARIZED``,
    ``output_tok_s_mad``, ``output_tok_s_rel_mad`` (MAD / median), ``noisy`` (rel. MAD > 5%; all three unknown,
    NaN / None, below 3 valid repeats: one or two numbers say nothing about the noise), ``client_limited``
    (see :func:`any_client_limited`), ``graph_lost`` (a valid kpad run lost its FULL cudagraphs: record
    ``graph_lost``), ``statuses`` (e.g. ``"ok:2,invalid:1"``), ``stand_in`` (:func:`stand_in`). A configuration
    with no valid repeat keeps its row with NaN medians, so it shows as failed, never as a number.
    """
    out = []
    for key, group in runs.groupby(CELL_KEYS, dropna=False, sort=True):
        ok = group[group["status"] == "ok"]
        row = dict(zip(CELL_KEYS, key, strict=True))
        row["n_runs"] = len(group)
        row["n_valid"] = len(ok)
        for m in SUMMARIZED:
            vals = pd.to_numeric(ok[m], errors="coerce").dropna() if m in ok else pd.Series(dtype=float)
            row[f"{m}_median"] = float(vals.median()) if len(vals) else float("nan")
        tok = (
            pd.to_numeric(ok["output_tok_s"], errors="coerce").dropna()
            if "output_tok_s" in ok
            else pd.Series(dtype=float)
        )
        known = len(tok) >= MIN_NOISE_N  # below 3 repeats the noise is unknown, not 0
        row["output_tok_s_mad"] = mad(tok) if known else float("nan")
        row["output_tok_s_rel_mad"] = (
            row["output_tok_s_mad"] / row["output_tok_s_median"]
            if known and row["output_tok_s_median"]
            else float("nan")
        )
        row["noisy"] = bool(row["output_tok_s_rel_mad"] > NOISY_REL_MAD) if known else None
        row["client_limited"] = any_client_limited(ok)
        row["graph_lost"] = bool(lost_graphs(ok).any())
        row["statuses"] = ",".join(f"{s}:{n}" for s, n in group["status"].value_counts().sort_index().items())
        row["stand_in"] = stand_in(group)
        out.append(row)
    return pd.DataFrame(out)


def stand_in(group: pd.DataFrame) -> str | None:
    """What a stand-in model is (record ``stand_in``, e.g. a widened SmolLM2: :mod:`kpadstudy.widen`), None for a
    real model or runs older than the column."""
    if "stand_in" not in group:
        return None
    named = group["stand_in"].dropna()
    return str(named.iloc[0]) if len(named) else None


def any_client_limited(valid_runs: pd.DataFrame) -> bool | None:
    """True when any valid run is ``client_limited``; False when every one is known not to be; else None
    (no valid run, or a run whose client ceiling was unknown)."""
    if "client_limited" not in valid_runs or valid_runs.empty:
        return None
    flags = valid_runs["client_limited"]
    if (flags == True).any():  # noqa: E712 - elementwise on an object column of True / False / None
        return True
    return None if flags.isna().any() else False


def comparison_rows(cell_table: pd.DataFrame) -> pd.DataFrame:
    """The rows every comparison of a cell reads: the confirmation's where the cell has any (``phase``
    confirm), else the sweep's (``phase`` sweep, or every row of a table without ``phase``).

    A confirmed cell is thus compared within its confirmation only: a configuration whose confirmation runs
    failed shows as failed there, and is never filled in from the sweep (another time, another drift).
    """
    if "phase" not in cell_table.columns:
        return cell_table
    confirmed = cell_table.groupby(["model", "corpus"])["phase"].transform(lambda p: (p == "confirm").any())
    is_confirm = cell_table["phase"] == "confirm"
    return cell_table[(confirmed & is_confirm) | (~confirmed & ~is_confirm)]


def sweep_rows(cell_table: pd.DataFrame) -> pd.DataFrame:
    """The K-sweep's rows (``phase`` sweep, or every row of a table without ``phase``)."""
    return cell_table if "phase" not in cell_table.columns else cell_table[cell_table["phase"] != "confirm"]


def best_kpad(cell_table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, corpus): the best kpad K and its median output tok/s, next to van and suf.

    The sweep's best K is the kpad K with the highest median output tok/s in the K-sweep (``method == "kpad"``
    in :func:`sweep_rows`). The numbers compared - van, suf and the best K's - come from one phase,
    :func:`comparison_rows`: in a confirmed cell the confirmation's van, suf and its measurement of the best K
    (``method == "bestkpad"``); elsewhere the sweep's van and suf, and a separate measurement of the best K where
    the table has one (the published mix table's bestKpad), else the sweep's best K. ``best_from`` says which:
    "separate measurement" or "K-sweep" (empty when there is no valid number).

    Columns: ``model, corpus, phase, best_k, best_kpad_tok_s, best_from, sweep_best_k, sweep_best_tok_s,
    van_tok_s, suf_tok_s, bestkpad_over_suf, bestkpad_over_van`` (tok/s and plain ratios; van and suf are the
    configurations of those names, the study's van(OFF) and suf(OFF)), ``graph_lost_k`` (the Ks left out
    because their runs lost FULL cudagraphs, e.g. ``"16"``; empty when none). ``best_k`` is NA when no
    kpad configuration has a valid repeat.
    """
    rows = []
    compared = comparison_rows(cell_table)
    sweep_all = sweep_rows(cell_table)
    for (model, corpus), group in compared.groupby(["model", "corpus"], sort=True):
        sweep = sweep_all[(sweep_all["model"] == model) & (sweep_all["corpus"] == corpus)]
        kp, lost = ranked_kpad(sweep)
        best = kp.iloc[0] if len(kp) else None
        sep = group[(group["method"] == "bestkpad") & group["output_tok_s_median"].notna()]
        phase = str(group["phase"].iloc[0]) if "phase" in group.columns else "sweep"

        def median_of(name: str, group=group) -> float:
            # by configuration name: a study may run several configurations of one method (suf and trident)
            g = group[group["configuration"] == name]["output_tok_s_median"].dropna()
            return float(g.iloc[0]) if len(g) else float("nan")

        van, suf = median_of("van"), median_of("suf")
        sweep_k = int(best["k"]) if best is not None else pd.NA
        sweep_tok = float(best["output_tok_s_median"]) if best is not None else float("nan")
        if len(sep):
            bk_k, bk, source = int(sep.iloc[0]["k"]), float(sep.iloc[0]["output_tok_s_median"]), "separate measurement"
        elif phase == "confirm":  # the confirmation of the best K failed: no number from another phase
            failed = group[group["method"] == "bestkpad"]
            bk_k = int(failed.iloc[0]["k"]) if len(failed) else pd.NA
            bk, source = float("nan"), ""
        else:
            bk_k, bk, source = sweep_k, sweep_tok, "K-sweep"
        rows.append(
            {
                "model": model,
                "corpus": corpus,
                "phase": phase,
                "best_k": bk_k,
                "best_kpad_tok_s": bk,
                "best_from": source if not pd.isna(bk) else "",
                "sweep_best_k": sweep_k,
                "sweep_best_tok_s": sweep_tok,
                "van_tok_s": van,
                "suf_tok_s": suf,
                "bestkpad_over_suf": bk / suf if suf else float("nan"),
                "bestkpad_over_van": bk / van if van else float("nan"),
                "graph_lost_k": ",".join(str(int(k)) for k in sorted(lost["k"])),
            }
        )
    return pd.DataFrame(rows).astype({"best_k": "Int64", "sweep_best_k": "Int64"})


def failure_label(rows: pd.DataFrame) -> str:
    """How to mark configurations without a valid median: "did not boot" when every run of them has status
    ``boot_failed``, "lost" when every run was ``lost`` (its job killed on every attempt), "not measured"
    when there are no rows, else "failed" (``invalid`` runs, or a mix)."""
    if rows.empty:
        return "not measured"
    statuses = set()
    for s in rows.get("statuses", pd.Series(dtype=str)).fillna(""):
        statuses |= {part.split(":")[0] for part in s.split(",") if part}
    return {frozenset({"boot_failed"}): "did not boot", frozenset({"lost"}): "lost"}.get(frozenset(statuses), "failed")


def best_kpad_with_device(cells: pd.DataFrame) -> pd.DataFrame:
    """:func:`best_kpad` with each cell's ``device`` (the first of its configurations), for the comparison."""
    devices = cells.groupby(["model", "corpus"])["device"].first().reset_index()
    return best_kpad(cells).merge(devices, on=["model", "corpus"])


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """``df`` as Parquet at ``path`` and as CSV beside it (same name, ``.csv``), for people who read tables in a
    spreadsheet; list-valued cells are written as their text."""
    path = Path(path)
    df.to_parquet(path, index=False)
    df.to_csv(path.with_suffix(".csv"), index=False)


CELLS_COLUMNS = {"model", "corpus", "configuration", "method", "k", "output_tok_s_median"}


def read_cells(path: str | Path) -> pd.DataFrame:
    """A cells Parquet (``results/cells.parquet``, a cached or the published one), checked.

    Raises:
        ValueError: the file does not exist, is not Parquet, is not a cells table (lacks any of
            ``CELLS_COLUMNS``; e.g. a runs Parquet), or has no rows. The message names the file.
    """
    import pyarrow as pa

    if not Path(path).is_file():
        raise ValueError(
            f"{path}: no such file; give a cells Parquet "
            "(results/cells.parquet after a run, or results/cpu/embedded-cells.parquet)"
        )
    try:
        cells = pd.read_parquet(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path} is not a Parquet file ({err}); give a cells Parquet") from err
    missing = CELLS_COLUMNS - set(cells.columns)
    if missing:
        raise ValueError(
            f"{path} is not a cells Parquet (lacks {sorted(missing)}); pass results/cells.parquet, not runs.parquet"
        )
    if cells.empty:
        raise ValueError(f"{path} has no rows: nothing to draw")
    return cells
