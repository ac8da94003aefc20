"""Rule timings: the benchmark files of the heavy jobs -> results/timings.md, also printed (log and stderr)."""

import logging
from pathlib import Path

from _rule import setup_logging
from kpadstudy import timings

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
table = timings.timings({rule: list(sm.input[rule]) for rule in timings.STAGES if rule in sm.input.keys()})
text = timings.summary(table)
Path(sm.output[0]).write_text(text)
logging.getLogger("timings").info("\n%s", text)
