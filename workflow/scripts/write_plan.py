"""Rule plan: results/plan.md (kpadstudy.plan), also printed."""

from _rule import setup_logging
from kpadstudy import plan

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
text = plan.to_markdown(plan.plan(sm.config, sm.params.measured))
with open(sm.output[0], "w") as f:
    f.write(text)
print(text, flush=True)
