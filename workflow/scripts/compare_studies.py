"""Rule compare_studies: two studies of ours (config studies.a, studies.b: a cells + runs Parquet pair each) side
by side, matched by cell and configuration (:mod:`kpadstudy.studies`). Also a command with no Snakemake:

    python workflow/scripts/compare_studies.py A_CELLS A_RUNS B_CELLS B_RUNS OUT FIGURES [--label-a H200]
        [--label-b CPU] [--note "..."]
"""

import argparse
import logging
import sys

from _rule import setup_logging
from kpadstudy import studies


def main(argv: list[str] | None = None) -> None:
    """The command-line form of rule compare_studies."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("a_cells", "a_runs", "b_cells", "b_runs", "out", "figures"):
        p.add_argument(name)
    p.add_argument("--label-a", default="A")
    p.add_argument("--label-b", default="B")
    p.add_argument("--note", default="")
    a = p.parse_args(argv)
    try:
        study_a = studies.read_study(a.label_a, a.a_cells, a.a_runs, "a")
        study_b = studies.read_study(a.label_b, a.b_cells, a.b_runs, "b")
        studies.write_comparison(study_a, study_b, a.out, a.figures, a.note)
    except ValueError as err:
        sys.exit(f"compare_studies: {err}")


if "snakemake" in globals():
    sm = snakemake  # noqa: F821
    setup_logging(sm.log[0])
    log = logging.getLogger(sm.rule)
    try:
        a = studies.read_study(sm.params.label_a, sm.input.a_cells, list(sm.input.a_runs), "studies.a")
        b = studies.read_study(sm.params.label_b, sm.input.b_cells, list(sm.input.b_runs), "studies.b")
        ratios, confs = studies.write_comparison(a, b, sm.params.out, sm.params.figures, sm.params.note)
    except ValueError as err:  # one line naming the file and the fix, in the log and on the console
        log.error("%s", err)
        sys.exit(1)
    log.info(
        "%d comparisons in both studies, %d only in A, %d only in B -> %s, %s",
        (ratios["match"] == "both").sum(),
        (ratios["match"] == "only in A").sum(),
        (ratios["match"] == "only in B").sum(),
        sm.params.out,
        sm.params.figures,
    )
elif __name__ == "__main__":
    main()
