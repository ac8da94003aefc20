"""A small random-weight Llama that tensor parallel size 2 can split (SmolLM2-135M's 9 heads cannot).

    python tools/make_tp2_test_model.py TOKENIZER_DIR OUT_DIR

Takes the tokenizer (and chat template) of TOKENIZER_DIR (e.g. the converted SmolLM2-135M-Instruct) and
writes a bf16 LlamaForCausalLM with 8 attention heads, 2 KV heads (both divisible by 2), hidden size 512,
8 layers and SmolLM2's vocabulary, weights drawn with seed 0. Its outputs are meaningless text, which is
enough to check that padding reaches every tensor-parallel worker (draft tokens = K x drafts), that
padded and unpadded greedy outputs match in float32, and the FULL share of decode steps (issue 8).
"""

import sys


def main(tokenizer_dir: str, out_dir: str) -> None:
    """Write the model and tokenizer to ``out_dir``. Raises OSError if ``tokenizer_dir`` has no tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
