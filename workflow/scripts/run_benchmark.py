"""Rules run and confirm_run: one (model, corpus, configuration, repeat) against a fresh vLLM server; the
attempt after the last measuring one records the run as lost (kpadstudy.execute.run_job)."""

import logging
import signal
import sys
from pathlib import Path

from _rule import setup_logging
from kpadstudy.confirm import confirm_position
from kpadstudy.execute import run_job
from kpadstudy.progress import line as progress_line
from kpadstudy.progress import update as update_progress
from kpadstudy.runs import configuration, workflow_commit

if __name__ == "__main__":  # vLLM's engine needs the guard
    # Snakemake stops jobs with SIGTERM, Ctrl-C sends SIGINT: both become SystemExit, so the server is stopped in
    # `finally`.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(128 + signum))
    sm = snakemake  # noqa: F821
    w = sm.wildcards
    setup_logging(None)
    # The commit is read here, not passed as a param: a param that changes with every commit would make
    # Snakemake rerun every finished run after a commit (params are a rerun trigger).
    commit = workflow_commit(str(Path(sm.params.plugin_path).parents[1]))
    record = run_job(
        attempt=int(sm.resources.attempt),
        run_attempts=int(sm.config["node"]["run_attempts"]),
        config=sm.config,
        model=w.model,
        model_path=sm.input.model,
        corpus_path=sm.input.corpus,
        corpus=w.corpus,
        configuration=configuration(sm.config, w.configuration),  # the job's own configuration, resolved once
        repeat=int(w.repeat),
        out_json=Path(sm.output[0]),
        log_dir=Path(sm.log.server).parent,
        plugin_path=sm.params.plugin_path,
        workflow_commit=commit,
        phase="confirm" if sm.rule == "confirm_run" else "sweep",
        position=confirm_position(sm.input.best_k, sm.config, w.model, w.corpus, w.configuration, int(w.repeat))
        if sm.rule == "confirm_run"
        else None,
    )
    logging.getLogger("run").info(
        "%s %s %s r%s: %s %s output_tok_s=%s",
        w.model,
        w.corpus,
        w.configuration,
        w.repeat,
        record["status"],
        record.get("reason", ""),
        record.get("output_tok_s"),
    )
    try:  # results/progress.md: done / total, running, ETA; never the reason a run fails
        logging.getLogger("run").info(progress_line(update_progress()))
    except Exception as err:  # noqa: BLE001 - a missing plan (a run outside a study), a file being written, ...
        logging.getLogger("run").warning("progress not updated: %s", err)
