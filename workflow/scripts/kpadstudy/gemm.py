"""Matrix-multiply time of a model shape's engine step by the tokens it verifies: what a pad token costs.

    make bench-gemm   (= PYTHONPATH=workflow/scripts python -m kpadstudy.gemm results/gemm [options])
    python -m kpadstudy.gemm OUT_PREFIX [--shape NAME ...] [--tokens M ...] [--device auto|cuda|cpu]

For each shape (``base``: SmolLM2-135M-Instruct, or a name of :data:`kpadstudy.widen.SHAPES`, widened from it) and
each token count M (the positions one engine step verifies: requests x (1 + draft slots), pads included), times the
step's projections as vLLM runs them: per layer the fused QKV, the output, the fused gate-up and the down projection
(``torch.nn.functional.linear`` on weights of the shape's sizes, random values), then the LM head over all M
positions. Attention itself, norms and sampling are not timed: they are not matrix multiplies of the weights.
Enough copies of a layer's weights are cycled that no layer finds the previous one's weights in the GPU's L2 cache.

Writes ``OUT_PREFIX.parquet`` and ``OUT_PREFIX.md``: per shape and M, the median step time of those multiplies, its
FLOP/s and their share of the GPU's datasheet peak (:data:`kpadstudy.roofline.GPUS`; none on a GPU it lacks or on a
CPU), the time the weights take to read at the datasheet bandwidth; and per shape the milliseconds an added position
costs (the least-squares slope over M) and the FLOP/s of that added work over the peak, the efficiency of the
step-cost model's FLOP term: a kpad step verifies requests x (1 + K) positions, an unpadded one only its real
drafts.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import roofline, widen

BASE = "SmolLM2-135M-Instruct"
#: concurrency 32 at 0, 1, 2, 3, 4, 6, 8 and 12 draft slots a request
TOKENS = [32 * (1 + k) for k in (0, 1, 2, 3, 4, 6, 8, 12)]
SHAPES = ["base", "1b", "3b", "llama-3.1-8b"]
#: the defaults on a CPU, where a bf16 step of the 8B shape takes minutes: the base model in float32, 3 steps a point
CPU_DEFAULTS = {"shape": ["base"], "dtype": "float32", "repeats": 3}
GPU_DEFAULTS = {"shape": SHAPES, "dtype": "bfloat16", "repeats": 20}
#: at least this many bytes of distinct layer weights are cycled (the H100's and H200's L2 cache is 50 MB)
CYCLE_BYTES = 256 * 2**20
COLUMNS = ["shape", "parameters", "device", "gpu_name", "dtype", "tokens", "repeats", "gemm_ms", "flops"]
COLUMNS += ["tflop_s", "efficiency", "weight_read_ms", "ms_per_token", "marginal_efficiency"]


def shape_of(name: str) -> widen.Shape:
    """``base`` (SmolLM2-135M-Instruct's sizes) or a named widening of it (:data:`kpadstudy.widen.SHAPES`).

    Raises:
        ValueError: naming the shapes there are.
    """
    base = roofline.known_shapes()[BASE]
    if name == "base":
        return base
    if name not in widen.SHAPES:
        raise ValueError(f"gemm: no shape {name!r}: use base or one of {sorted(widen.SHAPES)} (kpadstudy/widen.py)")
    return widen.target_shape(base, name)


def projections(shape: widen.Shape) -> dict[str, tuple[int, int]]:
    """One layer's weight matrices as vLLM fuses them, ``name: (out_features, in_features)``."""
    d, i = shape.hidden_size, shape.intermediate_size
    q, kv = shape.num_attention_heads * shape.head_dim, shape.num_key_value_heads * shape.head_dim
    return {"qkv": (q + 2 * kv, d), "o": (d, q), "gate_up": (2 * i, d), "down": (d, i)}


def lm_head(shape: widen.Shape) -> tuple[int, int]:
    """The LM head's ``(out_features, in_features)``, once a step."""
    return shape.vocab_size, shape.hidden_size


def step_flops(shape: widen.Shape, tokens: int) -> int:
    """FLOPs of one step's projections at ``tokens`` positions: 2 per weight and position, every layer and the LM
    head."""
    layer = sum(n * k for n, k in projections(shape).values())
    head = math.prod(lm_head(shape))
    return 2 * tokens * (shape.num_hidden_layers * layer + head)


def weight_bytes(shape: widen.Shape, dtype_bytes: int = 2) -> int:
    """Bytes of the weights one step's projections read (every layer's and the LM head's): a weight per FLOP pair."""
    return step_flops(shape, 1) // 2 * dtype_bytes


def _weights(shape: widen.Shape, device: str, dt) -> tuple[list[dict], object]:  # noqa: ANN001 - a torch dtype
    """Random weights of ``shape``'s projections: enough copies of a layer's to cycle through more than
    :data:`CYCLE_BYTES` (no layer finds the last one's in the L2 cache), and the LM head."""
    import torch

    per_layer = projections(shape)
    layer_bytes = sum(n * k for n, k in per_layer.values()) * torch.finfo(dt).bits // 8
    copies = max(1, min(shape.num_hidden_layers, math.ceil(CYCLE_BYTES / layer_bytes)))
    layers = [
        {name: torch.randn(n, k, device=device, dtype=dt) / k**0.5 for name, (n, k) in per_layer.items()}
        for _ in range(copies)
    ]
    return layers, torch.randn(*lm_head(shape), device=device, dtype=dt)


def time_step(shape: widen.Shape, tokens: int, device: str, dtype: str, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` timed steps' projections at ``tokens`` positions (after 3 untimed ones). On a GPU
    the step is captured as one CUDA graph and replayed, as vLLM replays a FULL cudagraph: not a launch per matrix."""
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    layers, head = _weights(shape, device, dt)
    x = torch.randn(tokens, shape.hidden_size, device=device, dtype=dt)
    attn = torch.randn(tokens, projections(shape)["o"][1], device=device, dtype=dt)
    act = torch.randn(tokens, projections(shape)["down"][1], device=device, dtype=dt)

    def step() -> None:
        for j in range(shape.num_hidden_layers):
            w = layers[j % len(layers)]
            for name, inputs in (("qkv", x), ("o", attn), ("gate_up", x), ("down", act)):
                F.linear(inputs, w[name])
        F.linear(x, head)

    run, sync = step, (lambda: None)
    if device == "cuda":
        run, sync = _graph(step), torch.cuda.synchronize
    times = []
    for r in range(3 + repeats):
        sync()
        t0 = time.perf_counter()
        run()
        sync()
        if r >= 3:
            times.append(1000.0 * (time.perf_counter() - t0))
    return times


def _graph(step):  # noqa: ANN001, ANN202 - a callable in, its graph's replay out
    """``step`` captured as a CUDA graph (PyTorch's recipe: a warm-up on a side stream first); its ``replay``."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def measure(
    shapes: dict[str, widen.Shape], tokens: list[int], device: str, dtype: str = "bfloat16", repeats: int = 20
) -> pd.DataFrame:
    """One row per shape (by name) and token count (:data:`COLUMNS`); each token count once."""
    import torch

    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    rates = roofline.GPUS.get(gpu, {})
    peak = rates.get("peak_flops", float("nan")) if dtype in ("bfloat16", "float16") else float("nan")
    bandwidth = rates.get("bandwidth", float("nan"))
    size = torch.finfo(getattr(torch, dtype)).bits // 8
    rows = []
    for name, shape in shapes.items():
        for m in sorted(set(tokens)):
            ms = statistics.median(time_step(shape, m, device, dtype, repeats))
            flops = step_flops(shape, m)
            rows.append(
                {"shape": name, "parameters": shape.parameters(), "device": device, "gpu_name": gpu, "dtype": dtype}
                | {"tokens": m, "repeats": repeats, "gemm_ms": ms, "flops": flops, "tflop_s": flops / ms / 1e9}
                | {"efficiency": flops / ms * 1000.0 / peak}
                | {"weight_read_ms": 1000.0 * weight_bytes(shape, size) / bandwidth}
            )
    table = pd.DataFrame(rows)
    return table.join(_marginal(table, shapes, peak), on="shape")[COLUMNS]


def _marginal(table: pd.DataFrame, shapes: dict[str, widen.Shape], peak: float) -> pd.DataFrame:
    """Per shape: ``ms_per_token``, the least-squares slope of the step's time over its positions (NaN with one
    token count), and ``marginal_efficiency``, the FLOP/s of that added work over the datasheet peak: what
    ``step_model.efficiency`` stands for, the weights' read being a term of its own there."""
    rows = {}
    for name, part in table.groupby("shape", sort=False):
        slope = float(np.polyfit(part["tokens"], part["gemm_ms"], 1)[0]) if len(part) > 1 else float("nan")
        rows[name] = {"ms_per_token": slope, "marginal_efficiency": step_flops(shapes[name], 1) / slope * 1e3 / peak}
    return pd.DataFrame.from_dict(rows, orient="index")


def to_markdown(table: pd.DataFrame, command: str) -> str:
    """The table of :func:`measure` with what it measured and how, then each shape's cost per added position."""
    first = table.iloc[0]
    where = first["gpu_name"] or f"{first['device']} (no datasheet rates)"
    lines = [
        "# Matrix-multiply time of one engine step by the tokens it verifies",
        "",
        f"`{command}` on {where}, {first['dtype']}, median of {first['repeats']} steps each (on a GPU one CUDA graph "
        "a step): every layer's fused QKV, output, fused gate-up and down projections and the LM head over all the "
        "step's positions (kpadstudy/gemm.py). Attention, norms and sampling are not included. A kpad K step at "
        "concurrency c verifies c x (1 + K) positions; an unpadded step only its real drafts. "
        + (
            "Efficiency: the step's FLOP/s over the datasheet bf16 peak, its weights' read included."
            if table["efficiency"].notna().any()
            else "No efficiency: no datasheet bf16 peak for this device and dtype (kpadstudy.roofline.GPUS)."
        ),
        "",
        "| shape | parameters | tokens | GEMM ms | TFLOP/s | efficiency | weights at datasheet bandwidth, ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        cells = [
            r["shape"],
            f"{r['parameters'] / 1e9:.2f} B",
            r["tokens"],
            f"{r['gemm_ms']:.3f}",
            f"{r['tflop_s']:.3g}",
        ]
        cells += [_num(r["efficiency"], ".2f"), _num(r["weight_read_ms"], ".3f")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += [
        "",
        "What a position added to a step costs: the least-squares slope of the GEMM time over the positions, and "
        "the FLOP/s of that added work over the datasheet peak, the efficiency of the step-cost model's FLOP term "
        "(`step_model.efficiency`; its weights' read is a term of its own):",
        "",
        "| shape | ms per added position | marginal efficiency |",
        "|---|---|---|",
    ]
    for name, r in table.drop_duplicates("shape").set_index("shape").iterrows():
        lines.append(f"| {name} | {_num(r['ms_per_token'], '.5f')} | {_num(r['marginal_efficiency'], '.2f')} |")
    return "\n".join([*lines, ""])


def _num(value: float, spec: str) -> str:
    return "-" if pd.isna(value) else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_prefix", help="writes OUT_PREFIX.md and OUT_PREFIX.parquet")
    parser.add_argument("--shape", nargs="+", help=f"shapes (default {' '.join(SHAPES)}; on a CPU base)")
    parser.add_argument(
        "--tokens", nargs="+", type=int, default=TOKENS, help=f"positions a step verifies (default {TOKENS})"
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument(
        "--dtype", choices=["bfloat16", "float16", "float32"], help="default bfloat16; on a CPU float32"
    )
    parser.add_argument("--repeats", type=int, help="timed steps a point (default 20; on a CPU 3)")
    args = parser.parse_args(argv)
    import torch

    if not Path(args.out_prefix).parent.is_dir():
        raise SystemExit(f"gemm: {Path(args.out_prefix).parent} does not exist: make the folder first")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gemm: --device cuda, but torch sees no GPU here: use --device cpu or run it on the GPU")
    for key, value in (CPU_DEFAULTS if device == "cpu" else GPU_DEFAULTS).items():
        setattr(args, key, value if getattr(args, key) is None else getattr(args, key))
    if min(args.tokens) < 1 or args.repeats < 1:
        raise SystemExit(f"gemm: --tokens {args.tokens} and --repeats {args.repeats} must be 1 or more")
    try:
        shapes = {name: shape_of(name) for name in args.shape}
    except ValueError as e:
        raise SystemExit(str(e)) from e
    table = measure(shapes, args.tokens, device, args.dtype, args.repeats)
    table.to_parquet(args.out_prefix + ".parquet", index=False)
    command = "python -m kpadstudy.gemm " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out_prefix + ".md").write_text(to_markdown(table, command))
    print(f"gemm: {len(table)} rows -> {args.out_prefix}.{{md,parquet}}", file=sys.stderr)


if __name__ == "__main__":
    main()
