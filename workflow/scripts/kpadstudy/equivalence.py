"""Output equivalence of padded and unpadded suffix decoding: greedy token ids of kpad vs nopad at one K.

Each side runs in its own process (the K-pad plugin reads ``VLLM_SUFFIX_PAD_UNIFORM`` when vLLM's engine
process starts), through vLLM's offline engine (``vllm.LLM.chat``), greedy, in float32 where the hardware
allows (bf16 can diverge for reasons unrelated to padding: batch shapes change the reduction order).

    python -m kpadstudy.equivalence generate --model DIR --prompts FILE --k 8 --pad 1 --out side.json ...
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import cpus, ports, runs


def compare(padded: list[list[int]], unpadded: list[list[int]]) -> dict[str, Any]:
    """Compare two lists of greedy outputs (token ids per request, same prompt order).

    Returns:
        ``requests``; ``identical_requests`` (token-for-token equal); ``token_agreement`` = equal
        positions / positions of the longer output, summed over requests (1.0 = identical);
        ``first_divergence`` = the smallest token index at which any request differs (None if none);
        ``divergent_requests`` = indices of the requests that differ.

    Raises:
        ValueError: the lists have different lengths.
    """
    if len(padded) != len(unpadded):
        raise ValueError(f"padded has {len(padded)} outputs, unpadded {len(unpadded)}: compare the same prompts")
    same = total = 0
    divergent: list[int] = []
    first: int | None = None
    for i, (a, b) in enumerate(zip(padded, unpadded, strict=True)):
        length = max(len(a), len(b))
        equal = sum(1 for x, y in zip(a, b, strict=False) if x == y)
        same += equal
        total += length
        if list(a) != list(b):
            divergent.append(i)
            d = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            first = d if first is None else min(first, d)
    return {
        "requests": len(padded),
        "identical_requests": len(padded) - len(divergent),
        "token_agreement": same / total if total else 1.0,
        "first_divergence": first,
        "divergent_requests": divergent,
    }


def generate(
    model: str,
    prompts: list[str],
    *,
    k: int,
    max_tokens: int,
    max_model_len: int,
    dtype: str,
    device: str,
    extra_requests: list[dict] | None = None,
    tensor_parallel_size: int = 1,
    passes: int = 1,
    speculative_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Greedy outputs of suffix decoding at K in this process (padding decided by the environment).

    Args:
        extra_requests: further requests ``{"prompt_token_ids": [...], "max_tokens": n}`` or
            ``{"messages": [...], "json_schema": {...}, "max_tokens": n}`` run after the prompts.
        passes: how many times the prompts run, one pass after the other in the same engine (the suffix trees
            keep what earlier passes generated, as in vLLM's ``test_suffix_decoding_acceptance``).
        speculative_options: more keys of vLLM's speculative config (``suffix_decoding_max_spec_factor``, ...).

    Returns:
        ``{"token_ids": [[...], ...], "texts": [...]`` (the last pass), ``"spec": {vLLM's spec-decode counters
        after the prompts' passes, before the extra requests}, "stats": {the K-pad plugin's counters at the same
        moment}, "extra": [{"token_ids", "text", "finish_reason"}], "passes": [{"token_ids", "spec"}, ...]}``
        (each pass's outputs and vLLM's counters after it, cumulative as vLLM keeps them).
    """
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    # A token budget that takes every prompt's prefill in the first step (with the engine core in this
    # process, see run_side): the steps then hold the same requests with and without padding, so the
    # suffix trees see the same outputs at the same steps and the drafts (and accepted tokens) match,
    # not only the outputs.
    budget = max(16384, max_model_len, sum(len(p) for p in prompts))
    llm = LLM(
        model=model,
        dtype=dtype,
        max_model_len=max_model_len,
        seed=0,
        enforce_eager=(device == "cpu"),
        tensor_parallel_size=tensor_parallel_size,
        max_num_batched_tokens=budget,
        max_num_seqs=max(len(prompts), 1),
        speculative_config={"method": "suffix", "num_speculative_tokens": k, **(speculative_options or {})},
        disable_log_stats=False,
    )
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    by_pass = []
    for _ in range(passes):
        outs = llm.chat([[{"role": "user", "content": p}] for p in prompts], params, use_tqdm=False)
        by_pass.append({"token_ids": [list(o.outputs[0].token_ids) for o in outs], "spec": _spec_counters(llm)})
    result: dict[str, Any] = {
        "token_ids": by_pass[-1]["token_ids"],
        "texts": [o.outputs[0].text for o in outs],
        "spec": by_pass[-1]["spec"],
        "stats": _plugin_counters(),
        "extra": [],
        "passes": by_pass,
    }
    for req in extra_requests or []:
        if "json_schema" in req:
            sp = SamplingParams(
                temperature=0.0,
                max_tokens=req["max_tokens"],
                structured_outputs=StructuredOutputsParams(json=req["json_schema"]),
            )
            o = llm.chat([req["messages"]], sp, use_tqdm=False)[0]
        else:
            sp = SamplingParams(temperature=0.0, max_tokens=req["max_tokens"])
            o = llm.generate([{"prompt_token_ids": req["prompt_token_ids"]}], sp, use_tqdm=False)[0]
        result["extra"].append(
            {
                "token_ids": list(o.outputs[0].token_ids),
                "text": o.outputs[0].text,
                "finish_reason": o.outputs[0].finish_reason,
            }
        )
    return result


def _plugin_counters() -> dict[str, dict[str, int]]:
    """The K-pad plugin's counters of this process so far, ``{role: counters}`` (empty without ``KPAD_STATS_DIR``).

    The engine core runs in this process (:func:`run_side`), so flushing here makes the files current.
    """
    import kpad_plugin

    for stats in kpad_plugin._stats.values():
        stats.flush()
    directory = os.environ.get(kpad_plugin.ENV_STATS)
    return {role: dict(c) for role, c in kpad_plugin.read_stats(directory).items()} if directory else {}


def _spec_counters(llm) -> dict[str, float]:  # noqa: ANN001
    """vLLM's spec-decode counters (drafts, draft tokens, accepted tokens) of the engine so far."""
    spec: dict[str, float] = {}
    for m in llm.get_metrics():
        if m.name.startswith("vllm:spec_decode_num_") and hasattr(m, "value"):
            spec[m.name] = spec.get(m.name, 0) + m.value
    return spec


def vllm_acceptance_prompts(n: int) -> list[str]:
    """The prompts of vLLM's ``test_suffix_decoding_acceptance`` (tests/v1/e2e/test_spec_decode.py,
    ``get_test_prompts`` without images), the first ``n``: each "repeat" or "sentence", with a word among four,
    drawn after ``random.seed(0)`` as there, the text as there (its source's indentation included)."""
    rng = random.Random(0)
    kinds = rng.choices(["repeat", "sentence"], k=n)
    prompts = []
    for kind in kinds:
        word = rng.choice(["test", "temp", "hello", "where"])
        if kind == "repeat":
            text = (
                f"please repeat the word '{word}' 10 times.\n"
                "give no other output than the word at least ten times in a row,\n"
                "in lowercase with spaces between each word and without quotes."
            )
        else:
            text = (
                "please give a ten-word sentence that\n"
                f"uses the word {word} at least once.\n"
                "give no other output than that simple sentence without quotes."
            )
        prompts.append("\n" + "".join(" " * 12 + line + "\n" for line in text.split("\n")) + " " * 12)
    return prompts


def run_side(
    *,
    pad: bool,
    model: str,
    prompts_file: str,
    k: int,
    max_tokens: int,
    max_model_len: int,
    dtype: str,
    device: str,
    out: Path,
    plugin_path: str,
    extra_file: str | None = None,
    stats_dir: str | None = None,
    tensor_parallel_size: int = 1,
    kvcache_space_gib: float = 1,
    node: dict[str, Any] | None = None,
    cpu_list: str | None = None,
    cuda_visible_devices: list[str] | None = None,
    lengths: list[int] | None = None,
    env: dict[str, str] | None = None,
    passes: int = 1,
    speculative_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run :func:`generate` in a fresh process with padding on or off; return its result (also in ``out``).

    ``lengths`` (with ``pad``): adaptive K-pad (``kpadauto``) over these draft lengths, the largest = ``k``.
    ``env``: more variables for the process, as a configuration entry's ``env`` (e.g. ``KPAD_AUTO_*`` settings).

    The process gets a server's environment (:func:`kpadstudy.runs.server_env`: our plugin named,
    padding flag, ``kvcache_space_gib`` of KV cache on CPU, ``cuda_visible_devices``), with the engine core
    in-process, pinned with ``taskset -c cpu_list`` when given.

    Raises:
        RuntimeError: the process failed (its output is in the message).
    """
    method = ("kpadauto" if lengths else "kpad") if pad else "nopad"
    side = runs.Configuration(
        f"{method}{k}",
        method,
        k,
        pad,
        "FULL_AND_PIECEWISE",
        0.9,
        lengths=runs.auto_lengths(lengths, k, "equivalence") if pad and lengths else (),
        env=dict(env or {}),
    )
    node = node or {}
    # vLLM's internal ports in a locked block; its IPC sockets and temporary files in a scratch folder removed after
    with (
        ports.port_block(node.get("lock_dir"), node.get("port_range")) as block,
        tempfile.TemporaryDirectory() as scratch,
    ):
        env = runs.server_env(
            dict(os.environ),
            configuration=side,
            server={"cpu": {"kvcache_space_gib": kvcache_space_gib}},
            device=device,
            plugin_path=plugin_path,
            vllm_port=block.vllm_base,
            scratch_dir=scratch,
            cuda_visible_devices=cuda_visible_devices,
        )
        # engine core in this process: every request is added before the first step, so the schedule
        # does not depend on how fast requests reach a separate engine process
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        if stats_dir:
            env["KPAD_STATS_DIR"] = stats_dir
        cmd = (["taskset", "-c", cpu_list] if cpu_list else []) + [
            sys.executable,
            "-m",
            "kpadstudy.equivalence",
            "generate",
            "--model",
            model,
            "--prompts",
            prompts_file,
            "--k",
            str(k),
            "--max-tokens",
            str(max_tokens),
            "--max-model-len",
            str(max_model_len),
            "--dtype",
            dtype,
            "--device",
            device,
            "--out",
            str(out),
            "--tensor-parallel-size",
            str(tensor_parallel_size),
            "--passes",
            str(passes),
            "--speculative",
            json.dumps(speculative_options or {}),
        ]
        if extra_file:
            cmd += ["--extra", extra_file]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(
            f"equivalence side pad={pad} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
        )
    return json.loads(Path(out).read_text())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="one side, in this process")
    g.add_argument("--model", required=True)
    g.add_argument("--prompts", required=True, help="JSON list of prompt strings")
    g.add_argument("--k", type=int, required=True)
    g.add_argument("--max-tokens", type=int, required=True)
    g.add_argument("--max-model-len", type=int, required=True)
    g.add_argument("--dtype", default="float32")
    g.add_argument("--device", default="cpu")
    g.add_argument("--extra", default=None, help="JSON list of extra requests")
    g.add_argument("--tensor-parallel-size", type=int, default=1)
    g.add_argument("--passes", type=int, default=1, help="run the prompts this many times in one engine")
    g.add_argument("--speculative", default="{}", help="more keys of vLLM's speculative config, as JSON")
    g.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    prompts = json.loads(Path(a.prompts).read_text())
    extra = json.loads(Path(a.extra).read_text()) if a.extra else None
    res = generate(
        a.model,
        prompts,
        k=a.k,
        max_tokens=a.max_tokens,
        max_model_len=a.max_model_len,
        dtype=a.dtype,
        device=a.device,
        extra_requests=extra,
        tensor_parallel_size=a.tensor_parallel_size,
        passes=a.passes,
        speculative_options=json.loads(a.speculative),
    )
    Path(a.out).write_text(json.dumps(res))


if __name__ == "__main__":
    main()


def check_cell(
    *,
    model_path: str,
    prompts: list[str],
    k: int,
    max_tokens: int,
    max_model_len: int,
    dtype: str,
    device: str,
    plugin_path: str,
    workdir: Path,
    tensor_parallel_size: int = 1,
    node: dict[str, Any] | None = None,
    taskset: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Greedy outputs of kpad vs nopad (unpadded suffix) at K on ``prompts``; see :func:`compare`.

    The check holds resources like a run (:func:`kpadstudy.cpus.allocated`): a CPU slot of config ``taskset``
    or, with ``taskset.auto``, the CPUs of its GPUs (its engines pinned to the slot's server CPUs) and, on a
    GPU node, ``tensor_parallel_size`` GPUs of its own (``CUDA_VISIBLE_DEVICES``), so
    it can go beside runs without sharing a CPU or a GPU with them.

    Args:
        node: config ``node`` (lock directory, waits, port range of the engines' internal ports, GPUs).
        taskset: config ``taskset`` (None: unpinned).

    Returns:
        The comparison plus ``k``, ``dtype``, ``device``, both sides' spec-decode counters (``padded_spec``,
        ``unpadded_spec``), and the CPUs and GPUs it ran on (``server_cpus``, ``cuda_visible_devices``).

    Raises:
        RuntimeError: a side failed (:func:`run_side`).
        TimeoutError: no CPU slot or not enough GPUs became free (``node.cpu_wait_s`` / ``node.gpu_wait_s``).
    """
    node = node or {}
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    prompts_file = workdir / "prompts.json"
    prompts_file.write_text(json.dumps(prompts))
    n_gpus = tensor_parallel_size if device == "cuda" else 0
    sides = {}
    with (
        cpus.allocated(taskset or {}, n_gpus, node) as (_, slot, gpu_ids),
    ):
        for pad in (False, True):
            sides[pad] = run_side(
                pad=pad,
                model=model_path,
                prompts_file=str(prompts_file),
                k=k,
                max_tokens=max_tokens,
                max_model_len=max_model_len,
                dtype=dtype,
                device=device,
                out=workdir / f"pad{int(pad)}.json",
                plugin_path=plugin_path,
                tensor_parallel_size=tensor_parallel_size,
                node=node,
                cpu_list=slot["server"],
                cuda_visible_devices=gpu_ids if n_gpus else None,
            )
    out = compare(sides[True]["token_ids"], sides[False]["token_ids"])
    out.update(
        k=k,
        dtype=dtype,
        device=device,
        max_tokens=max_tokens,
        padded_spec=sides[True]["spec"],
        unpadded_spec=sides[False]["spec"],
        server_cpus=slot["server"],
        cuda_visible_devices=",".join(gpu_ids) if n_gpus else None,
    )
    return out
