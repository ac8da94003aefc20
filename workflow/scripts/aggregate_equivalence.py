"""Rule equivalence_table: equivalence check records -> results/equivalence.parquet."""

import logging

from _rule import setup_logging
from kpadstudy import tables

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
df = tables.read_records(sm.input, required={"model", "corpus", "k", "identical_requests", "requests"})
tables.write_table(df, sm.output[0])
logging.getLogger("equivalence").info(
    "%d checks; identical requests %s",
    len(df),
    (df["identical_requests"].astype(str) + "/" + df["requests"].astype(str)).tolist(),
)
