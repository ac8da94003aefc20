"""Widened stand-in models: a large model's shape computing a small Llama's function (HyperCloning / Net2Net).

The Hub is not reachable everywhere this study runs, and a random-weight model accepts no drafts. Widening
SmolLM2-135M-Instruct to a large shape gives a checkpoint whose every step costs what the large shape costs
(parameters, FLOPs, KV bytes per token: every weight is a dense matrix) while its greedy outputs, and so what
suffix decoding drafts and gets accepted, are the small model's (arXiv 2409.12903, arXiv 1511.05641). How:

- the residual stream is the base's replicated k times (k a power of two, so dividing by k is exact); RMSNorm's
  mean of squares is unchanged, its weight is replicated;
- a projection that reads the stream gets its columns as k copies of W / k, one that writes it is replicated;
  the LM head reads the stream, so it is untied from the embedding (the embedding writes it);
- attention heads keep the base's head size (the softmax scale and RoPE depend on it) and are mapped into the
  larger grouped-query layout (:func:`head_map`); extra query heads are dead (their output-projection columns
  zero), extra KV heads serve only dead query heads;
- extra MLP rows have their up-projection zero; extra layers are identities (value and up-projection zero).

A stand-in is not the large model: its vocabulary is the base's (49,152 for SmolLM2, against 128k-152k for the
study's models), so the LM head, computed at every verified position, is under-charged, which favours padding;
the base is a Q4_1 GGUF converted to bf16; positions past the base's ``max_position_embeddings`` (8,192) are
extrapolated; bf16 outputs of the wide model are close to, not equal to, the base's. :data:`BIASES` says so
wherever the numbers go.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BIASES = (
    "vocabulary {vocab:,} (the base's) where the real model has {real_vocab:,}: the LM head, run at every verified "
    "position, is under-charged, which favours padding; the base's weights in {dtype} (the shipped base: a Q4_1 GGUF "
    "dequantized); positions past "
    "{base_positions:,} extrapolated; {dtype} outputs close to, not equal to, the base's"
)
"""The stand-in's known biases, formatted with :meth:`Widened.describe`'s numbers."""

STAND_IN = "a large model's step costs with a small model's acceptance, not that large model"

MIN_POSITIONS = 16384
"""``max_position_embeddings`` of a widened model at least (the study's ``server.max_model_len``)."""


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer's sizes, enough for its parameter count, KV cache and FLOPs per token."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    num_hidden_layers: int
    vocab_size: int
    tie_word_embeddings: bool = False
    qkv_bias: bool = False

    def layer_parameters(self) -> int:
        """Parameters of one layer: q, k, v, o projections (+ q, k, v biases), gated MLP, two RMSNorms."""
        d, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        attention = d * q + 2 * d * kv + q * d + ((q + 2 * kv) if self.qkv_bias else 0)
        return attention + 3 * d * self.intermediate_size + 2 * d

    def parameters(self) -> int:
        """All parameters: layers, the final norm, the embedding and (untied) the LM head."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * self.layer_parameters() + self.hidden_size + embeddings

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token takes: K and V of every KV head of every layer."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes

    def flops_per_token(self) -> int:
        """Matrix FLOPs per token at zero context: 2 per weight of every projection and of the LM head (the
        embedding is a lookup). Attention adds :meth:`attention_flops_per_context_token` per token of context."""
        return 2 * (self.num_hidden_layers * self.layer_parameters() + self.vocab_size * self.hidden_size)

    def weight_bytes(self, dtype_bytes: int = 2) -> int:
        """Bytes of the weights a step reads: all but the embedding table (looked up), which tied is the LM head."""
        return dtype_bytes * (
            self.parameters() - (0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size)
        )

    def attention_flops_per_context_token(self) -> int:
        """FLOPs per token for each token of context: Q.K and the weighted sum of V, per query head and layer."""
        return 4 * self.num_hidden_layers * self.num_attention_heads * self.head_dim

    def describe(self, dtype_bytes: int = 2) -> dict[str, Any]:
        """The sizes with the derived numbers (the ``widening.json`` and run records' fields)."""
        return {
            **asdict(self),
            "parameters": self.parameters(),
            "kv_bytes_per_token": self.kv_bytes_per_token(dtype_bytes),
            "flops_per_token": self.flops_per_token(),
            "attention_flops_per_context_token": self.attention_flops_per_context_token(),
            "weight_bytes": self.weight_bytes(dtype_bytes),
        }

    @classmethod
    def of_config(cls, cfg: dict[str, Any]) -> Shape:
        """The shape of a Hugging Face ``config.json`` (Llama, Qwen2 and alike)."""
        heads = int(cfg["num_attention_heads"])
        return cls(
            hidden_size=int(cfg["hidden_size"]),
            num_attention_heads=heads,
            num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
            intermediate_size=int(cfg["intermediate_size"]),
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            vocab_size=int(cfg["vocab_size"]),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", cfg.get("model_type") == "qwen2")),
        )


SMOLLM2_135M = Shape(576, 9, 3, 64, 1536, 30, 49152, tie_word_embeddings=True)
"""SmolLM2-135M-Instruct, the embedded model: the base the named shapes are made for."""

# The real models the named shapes stand in for, from their config.json on the Hub.
REAL = {
    "Llama-3.2-1B": Shape(2048, 32, 8, 64, 8192, 16, 128256, tie_word_embeddings=True),
    "Llama-3.2-3B": Shape(3072, 24, 8, 128, 8192, 28, 128256, tie_word_embeddings=True),
    "Llama-3.1-8B": Shape(4096, 32, 8, 128, 14336, 32, 128256),
    "Qwen2.5-7B": Shape(3584, 28, 4, 128, 18944, 28, 152064, qkv_bias=True),
    "Qwen2.5-32B": Shape(5120, 40, 8, 128, 27648, 64, 152064, qkv_bias=True),
}

SHAPES: dict[str, dict[str, Any]] = {
    "1b": {
        "like": "Llama-3.2-1B",
        "hidden_size": 2304,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 3072,
        "num_hidden_layers": 30,
        "note": "Llama-3.2-1B's heads (32 / 8 of 64) and about its parameter count; 30 layers (the base's, "
        "Llama-3.2-1B has 16) with a narrower MLP (3,072, Llama-3.2-1B 8,192), so its KV bytes per token are 1.9x",
    },
    "3b": {
        "like": "Llama-3.2-3B",
        "hidden_size": 4608,
        "num_attention_heads": 64,
        "num_key_value_heads": 16,
        "intermediate_size": 3072,
        "num_hidden_layers": 30,
        "note": "Llama-3.2-3B's KV width (1,024) and about its parameter count; 30 layers (the base's, Llama-3.2-3B "
        "has 28), hidden 4,608 (Llama's 3,072) with a narrower MLP (3,072, Llama's 8,192), heads of 64 (Llama's 128): "
        "the crossover's point between the 1b and 8B shapes",
    },
    "llama-3.1-8b": {
        "like": "Llama-3.1-8B",
        "hidden_size": 4608,
        "num_attention_heads": 64,
        "num_key_value_heads": 16,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "note": "Llama-3.1-8B's layers, MLP and KV width (1,024); heads of 64 (Llama's are 128) and hidden 4,608 "
        "(Llama's 4,096), the nearest the base's 576 x 2^n allows",
    },
    "qwen2.5-32b": {
        "like": "Qwen2.5-32B",
        "hidden_size": 4608,
        "num_attention_heads": 64,
        "num_key_value_heads": 16,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "note": "Qwen2.5-32B's layers, MLP and KV width (1,024); heads of 64 (Qwen's are 128), query width 4,096 "
        "(Qwen's 5,120; the hidden size must be a multiple of the heads) and hidden 4,608 (Qwen's 5,120) to fit a "
        "64 GiB disk (56 GB in bf16), no q / k / v biases",
    },
}
"""Named target shapes for a base with hidden size 576 x 2^n and heads of 64 (SmolLM2-135M-Instruct)."""

SHAPE_KEYS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers")


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def check_base(cfg: dict[str, Any], where: str) -> None:
    """Refuse a base the widening cannot keep exact: not Llama-family, or with biases.

    Raises:
        ValueError: naming ``where`` (the base's config.json) and the fix.
    """
    if cfg.get("model_type") != "llama" or cfg.get("architectures", ["LlamaForCausalLM"]) != ["LlamaForCausalLM"]:
        raise ValueError(
            f"{where}: widening needs a Llama-family base (model_type 'llama', LlamaForCausalLM), this is "
            f"model_type {cfg.get('model_type')!r} {cfg.get('architectures')}; set models.<name>.base to a "
            "Llama-family model such as SmolLM2-135M-Instruct"
        )
    for key in ("attention_bias", "mlp_bias"):
        if cfg.get(key):
            raise ValueError(f"{where}: {key} is true; widening keeps only bias-free Llama bases exact")


def target_shape(base: Shape, shape: str | dict[str, Any]) -> Shape:
    """The widened shape of ``base``: a named shape (:data:`SHAPES`) or a dict of :data:`SHAPE_KEYS`.

    Raises:
        ValueError: an unknown name, a hidden size that is not the base's times a power of two, or a shape smaller
            than the base in any size (layers, MLP, heads): each message names the fix.
    """
    if isinstance(shape, str):
        if shape not in SHAPES:
            raise ValueError(f"shape {shape!r} unknown; use one of {sorted(SHAPES)} or give {list(SHAPE_KEYS)}")
        shape = SHAPES[shape]
    missing = [k for k in SHAPE_KEYS if k not in shape]
    if missing:
        raise ValueError(f"shape {shape} lacks {missing}; give all of {list(SHAPE_KEYS)} or a name of {sorted(SHAPES)}")
    out = Shape(**{k: int(shape[k]) for k in SHAPE_KEYS}, head_dim=base.head_dim, vocab_size=base.vocab_size)
    k = out.hidden_size / base.hidden_size
    if k != int(k) or not _is_power_of_two(int(k)):
        ok = ", ".join(str(base.hidden_size * 2**i) for i in range(1, 5))
        raise ValueError(
            f"hidden_size {out.hidden_size} is not the base's {base.hidden_size} times a power of two (k must be, so "
            f"W / k is exact); use one of {ok}"
        )
    if out.hidden_size % out.num_attention_heads:
        raise ValueError(
            f"hidden_size {out.hidden_size} is not a multiple of num_attention_heads {out.num_attention_heads} "
            "(transformers' LlamaConfig refuses it); take a number of heads that divides the hidden size"
        )
    for key in ("intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
        if getattr(out, key) < getattr(base, key):
            raise ValueError(
                f"shape smaller than the base: {key} {getattr(out, key)} < the base's {getattr(base, key)}; "
                f"widening cannot remove any: take at least {getattr(base, key)}"
            )
    head_map(base, out)  # raises when the heads do not fit
    return out


def head_map(base: Shape, wide: Shape) -> tuple[list[int], list[int], list[bool]]:
    """Where the base's attention heads go in the wide grouped-query layout.

    Base KV head g is copied into ``ceil(G / G')`` consecutive wide KV heads (G, G' the query heads per KV head of
    base and wide); the r-th query head of its group goes to wide KV head ``g * copies + r // G'``, slot
    ``r % G'``. Wide heads left over copy base heads (so their weights look real) and are dead.

    Returns:
        ``(q_source, kv_source, q_live)``: the base query head each wide query head copies, the base KV head each
        wide KV head copies, and whether a wide query head is live (its output projection kept).

    Raises:
        ValueError: the wide query heads are not a multiple of its KV heads, or too few KV heads to hold the base's.
    """
    if wide.num_attention_heads % wide.num_key_value_heads:
        raise ValueError(
            f"num_attention_heads {wide.num_attention_heads} is not a multiple of num_key_value_heads "
            f"{wide.num_key_value_heads}; grouped-query attention needs it"
        )
    group = base.num_attention_heads // base.num_key_value_heads
    wide_group = wide.num_attention_heads // wide.num_key_value_heads
    copies = math.ceil(group / wide_group)
    if base.num_key_value_heads * copies > wide.num_key_value_heads:
        raise ValueError(
            f"num_key_value_heads {wide.num_key_value_heads} cannot hold the base's {base.num_key_value_heads} KV "
            f"heads of {group} query heads each at {wide_group} query heads per KV head; take at least "
            f"{base.num_key_value_heads * copies} KV heads"
        )
    kv_source = [t % base.num_key_value_heads for t in range(wide.num_key_value_heads)]
    q_source = [s % base.num_attention_heads for s in range(wide.num_attention_heads)]
    q_live = [False] * wide.num_attention_heads
    for g in range(base.num_key_value_heads):
        for c in range(copies):
            kv_source[g * copies + c] = g
        for r in range(group):
            slot = (g * copies + r // wide_group) * wide_group + r % wide_group
            q_source[slot], q_live[slot] = g * group + r, True
    return q_source, kv_source, q_live


def _reads(w, k: int):  # noqa: ANN001, ANN202 - torch tensors
    """A projection reading the k-fold stream: its columns as k copies of W / k."""
    import torch

    return torch.cat([w / k] * k, dim=-1)


def _writes(w, k: int):  # noqa: ANN001, ANN202
    """A projection (or norm weight) writing the k-fold stream: its rows replicated."""
    import torch

    return torch.cat([w] * k, dim=0)


def _heads(w, n: int, source: list[int]):  # noqa: ANN001, ANN202
    """Rows of ``w`` (``n`` heads of equal size, stacked) rearranged as the heads ``source`` names."""
    return w.reshape(n, -1, w.shape[-1])[source].reshape(-1, w.shape[-1])


def widen_layer(t: dict[str, Any], base: Shape, wide: Shape, identity: bool = False) -> dict[str, Any]:
    """One wide layer from one base layer's tensors (names relative to the layer, e.g. ``self_attn.q_proj.weight``).

    With ``identity`` the layer is an extra one: value and up-projection zero, so it adds nothing to the stream.
    """
    import torch

    k = wide.hidden_size // base.hidden_size
    q_source, kv_source, q_live = head_map(base, wide)
    hd, m, big_m = base.head_dim, base.intermediate_size, wide.intermediate_size
    rows = [j % m for j in range(big_m)]
    o = t["self_attn.o_proj.weight"].reshape(base.hidden_size, base.num_attention_heads, hd)[:, q_source]
    o = o * torch.tensor(q_live, dtype=o.dtype, device=o.device)[None, :, None]
    up = t["mlp.up_proj.weight"][rows]
    up[m:] = 0
    out = {
        "input_layernorm.weight": _writes(t["input_layernorm.weight"], k),
        "post_attention_layernorm.weight": _writes(t["post_attention_layernorm.weight"], k),
        "self_attn.q_proj.weight": _reads(_heads(t["self_attn.q_proj.weight"], base.num_attention_heads, q_source), k),
        "self_attn.k_proj.weight": _reads(_heads(t["self_attn.k_proj.weight"], base.num_key_value_heads, kv_source), k),
        "self_attn.v_proj.weight": _reads(_heads(t["self_attn.v_proj.weight"], base.num_key_value_heads, kv_source), k),
        "self_attn.o_proj.weight": _writes(o.reshape(base.hidden_size, -1), k),
        "mlp.gate_proj.weight": _reads(t["mlp.gate_proj.weight"][rows], k),
        "mlp.up_proj.weight": _reads(up, k),
        "mlp.down_proj.weight": _writes(t["mlp.down_proj.weight"][:, rows], k),
    }
    if identity:
        out["self_attn.v_proj.weight"].zero_()
        out["mlp.up_proj.weight"].zero_()
    return out


def _load_base(base_dir: Path, dtype, device: str) -> dict[str, Any]:  # noqa: ANN001
    from safetensors.torch import load_file

    files = sorted(base_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{base_dir}: no *.safetensors; the base must be a Hugging Face checkpoint directory")
    tensors = {}
    for f in files:
        tensors.update({n: w.to(device=device, dtype=dtype) for n, w in load_file(str(f)).items()})
    return tensors


def wide_config(cfg: dict[str, Any], wide: Shape, dtype: str) -> dict[str, Any]:
    """The wide model's ``config.json``: the base's with the wide sizes, untied, at least :data:`MIN_POSITIONS`."""
    out = {**cfg, **{k: getattr(wide, k) for k in (*SHAPE_KEYS, "head_dim")}, "tie_word_embeddings": False}
    out["max_position_embeddings"] = max(int(cfg.get("max_position_embeddings", 0)), MIN_POSITIONS)
    for key in ("torch_dtype", "dtype"):
        if key in cfg or key == "torch_dtype":
            out[key] = dtype
    return out


def _layer_tensors(base_t: dict[str, Any], i: int, base: Shape, wide: Shape) -> dict[str, Any]:
    src = i % base.num_hidden_layers
    prefix = f"model.layers.{src}."
    layer = {n[len(prefix) :]: w for n, w in base_t.items() if n.startswith(prefix)}
    wide_layer = widen_layer(layer, base, wide, identity=i >= base.num_hidden_layers)
    return {f"model.layers.{i}.{n}": w for n, w in wide_layer.items()}


def _write_shards(tensor_groups, out_dir: Path, shard_bytes: int) -> None:  # noqa: ANN001 - an iterator of dicts
    """Save groups of tensors as ``model-XXXXX.safetensors`` shards of about ``shard_bytes`` and their index."""
    from safetensors.torch import save_file

    weight_map, shard, size, total, n = {}, {}, 0, 0, 0

    def flush() -> None:
        nonlocal shard, size, n
        n += 1
        name = f"model-{n:05d}.safetensors"
        save_file({k: v.contiguous().cpu() for k, v in shard.items()}, str(out_dir / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
        shard, size = {}, 0

    for group in tensor_groups:
        for name, w in group.items():
            shard[name] = w
            size += w.numel() * w.element_size()
            total += w.numel() * w.element_size()
        if size >= shard_bytes:
            flush()
    if shard:
        flush()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def widen(
    base_dir: Path,
    out_dir: Path,
    shape: str | dict[str, Any],
    dtype: str = "bfloat16",
    device: str = "auto",
    shard_bytes: int = 5 * 10**9,
) -> dict[str, Any]:
    """Write the widened checkpoint of ``base_dir`` (a Llama ``LlamaForCausalLM`` directory) to ``out_dir``.

    Writes sharded safetensors, ``config.json``, the base's tokenizer and generation files, and ``widening.json``
    (:func:`describe`). ``device`` ``auto`` builds on the GPU when there is one.

    Returns:
        The ``widening.json`` dict.
    """
    import torch

    base_dir, out_dir = Path(base_dir), Path(out_dir)
    cfg = json.loads((base_dir / "config.json").read_text())
    check_base(cfg, str(base_dir / "config.json"))
    base = Shape.of_config(cfg)
    wide = target_shape(base, shape)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    base_t = _load_base(base_dir, getattr(torch, dtype), device)
    k = wide.hidden_size // base.hidden_size
    embed = base_t["model.embed_tokens.weight"]
    head = base_t.get("lm_head.weight", embed)
    out_dir.mkdir(parents=True, exist_ok=True)
    groups = (
        {"model.embed_tokens.weight": torch.cat([embed] * k, dim=1)}
        if i == -1
        else {"model.norm.weight": _writes(base_t["model.norm.weight"], k), "lm_head.weight": _reads(head, k)}
        if i == wide.num_hidden_layers
        else _layer_tensors(base_t, i, base, wide)
        for i in range(-1, wide.num_hidden_layers + 1)
    )
    _write_shards(groups, out_dir, shard_bytes)
    (out_dir / "config.json").write_text(json.dumps(wide_config(cfg, wide, dtype), indent=2) + "\n")
    for f in base_dir.iterdir():
        if f.is_file() and f.name != "config.json" and not f.name.startswith("model"):
            shutil.copy(f, out_dir / f.name)
    info = describe(base_dir.name, cfg, base, wide, shape, dtype, device)
    (out_dir / "widening.json").write_text(json.dumps(info, indent=2) + "\n")
    log.info("widened %s (k=%d) -> %s: %s", base_dir, k, out_dir, json.dumps(info))
    return info


def base_of(stand_in: str | None) -> str | None:
    """The base model a record's ``stand_in`` text names (:func:`describe` writes "widened <base> (...)"), else
    None."""
    match = re.match(r"widened (\S+) \(", stand_in or "")
    return match.group(1) if match else None


def describe(
    base_name: str, cfg: dict[str, Any], base: Shape, wide: Shape, shape: str | dict[str, Any], dtype: str, device: str
) -> dict[str, Any]:
    """What a widened model is (``wide``, made from ``shape``), beside the real model it stands in for
    (``widening.json``)."""
    named = SHAPES.get(shape) if isinstance(shape, str) else None
    like = named["like"] if named else None
    real = REAL[like] if like else None
    dtype_bytes = 4 if dtype == "float32" else 2
    return {
        "stand_in": f"widened {base_name} ({shape if named else 'custom shape'}): {STAND_IN}",
        "base": base_name,
        "shape": shape,
        "k": wide.hidden_size // base.hidden_size,
        "dtype": dtype,
        "built_on": device,
        "like": like,
        "note": named["note"] if named else "",
        "biases": BIASES.format(
            vocab=wide.vocab_size,
            real_vocab=real.vocab_size if real else wide.vocab_size,
            dtype=dtype,
            base_positions=int(cfg.get("max_position_embeddings", 0)),
        ),
        "wide": wide.describe(dtype_bytes),
        "real": real.describe() if real else None,
        "base_shape": base.describe(dtype_bytes),
    }


def model_facts(model_dir: Path) -> dict[str, Any]:
    """A run record's facts about its model, from the checkpoint's ``config.json`` and (a stand-in)
    ``widening.json``: :func:`size_facts`, and for a stand-in ``stand_in`` (what it is) and ``stand_in_for`` (the
    real model, with ``stand_in_for_parameters``, ``..._kv_bytes_per_token``, ``..._flops_per_token``). None where
    the checkpoint has no config (a fake server's model) or is not a decoder this can size."""
    keys = ["model_parameters", "model_kv_bytes_per_token", "model_flops_per_token"]
    facts: dict[str, Any] = dict.fromkeys(
        [*size_facts(None), "stand_in", "stand_in_for", *(f"stand_in_for_{k[6:]}" for k in keys)]
    )
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
        shape = Shape.of_config(cfg)
    except (OSError, KeyError, ValueError, TypeError):
        return facts
    facts.update(size_facts(shape, 4 if str(cfg.get("torch_dtype", cfg.get("dtype"))) == "float32" else 2))
    widening = Path(model_dir) / "widening.json"
    if widening.is_file():
        info = json.loads(widening.read_text())
        facts.update(stand_in=info["stand_in"], stand_in_for=info["like"])
        for key in keys:
            facts[f"stand_in_for_{key[6:]}"] = (info["real"] or {}).get(key[6:])
    return facts


def size_facts(shape: Shape | None, dtype_bytes: int = 2) -> dict[str, int | None]:
    """A run record's size columns of a model: ``model_parameters``, ``model_weight_bytes`` (read each step),
    ``model_kv_bytes_per_token``, ``model_flops_per_token``, ``model_attention_flops_per_context_token``; None
    without a shape."""
    if shape is None:
        return dict.fromkeys(
            [
                "model_parameters",
                "model_weight_bytes",
                "model_kv_bytes_per_token",
                "model_flops_per_token",
                "model_attention_flops_per_context_token",
            ]
        )
    return {
        "model_parameters": shape.parameters(),
        "model_weight_bytes": shape.weight_bytes(dtype_bytes),
        "model_kv_bytes_per_token": shape.kv_bytes_per_token(dtype_bytes),
        "model_flops_per_token": shape.flops_per_token(),
        "model_attention_flops_per_context_token": shape.attention_flops_per_context_token(),
    }
