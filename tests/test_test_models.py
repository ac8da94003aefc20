"""tools/make_tp2_test_model.py: the random-weight shapes for GPU rehearsals (issue 19, parts 1 and 4)."""

import json

import pytest
from conftest import load_tool

tool = load_tool("make_tp2_test_model")


def test_llama_8b_shape_has_the_parameters_of_llama3_8b_body_with_smollm2_vocabulary(smol_model):
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    config = tool.model_config(AutoTokenizer.from_pretrained(smol_model), "llama-8b")
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    # by hand: 32 layers x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096) = 6,979,584,000,
    # + untied embedding and LM head 2 x 49,152 x 4096 = 402,653,184, + final norm 4096
    assert sum(p.numel() for p in model.parameters()) == 7_382_241_280
    assert (config.max_position_embeddings, config.num_key_value_heads, config.vocab_size) == (16384, 8, 49152)


def test_tp2_test_shape_is_written_in_bf16_with_the_tokenizer(smol_model, tmp_path):
    n = tool.main(str(smol_model), str(tmp_path / "tp2"), "tp2-test")
    saved = json.loads((tmp_path / "tp2" / "config.json").read_text())
    assert (saved["num_attention_heads"], saved["num_key_value_heads"], saved["hidden_size"]) == (8, 2, 512)
    assert saved.get("torch_dtype", saved.get("dtype")) == "bfloat16"
    assert (tmp_path / "tp2" / "tokenizer.json").exists()
    # embedding 49,152 x 512 (tied) + 8 x (2 x 512^2 + 2 x 512 x 128 + 3 x 512 x 1536 + 2 x 512) + 512
    assert n == 49152 * 512 + 8 * (2 * 512**2 + 2 * 512 * 128 + 3 * 512 * 1536 + 2 * 512) + 512


def test_unknown_shape_names_the_known_ones(smol_model):
    from transformers import AutoTokenizer

    with pytest.raises(KeyError, match="unknown shape 'llama-70b'; known: tp2-test, no-accept, llama-8b"):
        tool.model_config(AutoTokenizer.from_pretrained(smol_model), "llama-70b")
