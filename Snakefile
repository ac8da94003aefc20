# K-pad study: speculative-decoding speed-ups in vLLM, van vs suffix vs uniformly padded suffix (K-pad).
# Read README.md first. Default config: the full 77-cell study; `--configfile config/embedded.yaml`
# runs the embedded default (SmolLM2-135M + packaged corpora) anywhere.
import os
import re
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "scripts"))
from kpadstudy.configsource import config_source  # noqa: E402

min_version("9.0")


# The full study unless --configfile names another config (which then replaces it, not merges into it).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


if config.get("taskset") == "auto":  # the short form of taskset: {auto: true} (also --config taskset=auto)
    config["taskset"] = {"auto": True}
try:
    validate(config, schema=os.path.join(workflow.basedir, "config", "schema.yaml"), set_default=True)
except WorkflowError as err:  # keep what and where, not the schema and config dumps that follow
    text = str(err)
    what = text.split("\n\n")[0].replace("Error validating config file.\n", "")
    where = re.search(r"On instance(\[[^\n]*?\])?:", text)
    bad = err.__context__  # the jsonschema ValidationError: where in the config, and which keys were unexpected
    path = tuple(getattr(bad, "absolute_path", ()))
    extra = []
    if getattr(bad, "validator", None) == "additionalProperties" and isinstance(bad.instance, dict):
        extra = [k for k in bad.instance if k not in (bad.schema.get("properties") or {})]
    raise WorkflowError(
        f"config {config_source(workflow.config_settings, workflow.overwrite_configfiles, path, extra)}: {what}"
        + (f" At {where.group(1) or 'the top level'}." if where else "")
        + " See config/schema.yaml for the keys, their types and defaults."
    ) from None


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/corpora.smk"
include: "workflow/rules/mix.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/equivalence.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/confirm.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/comparison.smk"
include: "workflow/rules/stepcost.smk"
include: "workflow/rules/advice.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/cache.smk"
include: "workflow/rules/compare_studies.smk"


_STARTED = __import__("time").time()


onstart:
    # the progress plan of this invocation (kpadstudy.progress): run jobs write results/progress.md after every run
    if not workflow.dag_settings.targets or set(workflow.dag_settings.targets) - NO_RUN_TARGETS:
        from kpadstudy import plan as _kplan, progress as _kprogress

        _kprogress.write_plan(
            all_runs(),
            _kplan.confirm_configurations(config) * int(CONFIRM["repeats"]) * len(MODELS) * len(MEASURED_CORPORA),
        )


onsuccess:
    # the summary of what this invocation made (a study, or from_cache): printed, not only written
    for _path in ["results/summary.md", f"{config['cache']['tables']}/summary.md"]:
        if os.path.exists(_path) and os.path.getmtime(_path) >= _STARTED:
            with open(_path) as _summary:
                print(f"\n{_summary.read()}(also in {_path})")


include: "workflow/rules/plan.smk"
include: "workflow/rules/timings.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
        final_confirm_runs,
