"""kpadstudy.gemm: the FLOPs and weights of a step's projections, hand-computed; a tiny shape timed on the CPU."""

import math

import pandas as pd
import pytest

from kpadstudy import gemm, widen

TINY = widen.Shape(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    num_hidden_layers=2,
    vocab_size=100,
)


def test_the_8b_shapes_step_flops_are_two_per_weight_and_position():
    shape = gemm.shape_of("llama-3.1-8b")
    # hidden 4,608; 64 q heads and 16 kv heads of 64; intermediate 14,336; 32 layers; vocabulary 49,152
    assert gemm.projections(shape) == {
        "qkv": (4096 + 2 * 1024, 4608),
        "o": (4608, 4096),
        "gate_up": (2 * 14336, 4608),
        "down": (4608, 14336),
    }
    assert gemm.lm_head(shape) == (49152, 4608)
    layer = 4608 * (6144 + 4096 + 28672 + 14336)  # 245,366,784 weights
    weights = 32 * layer + 49152 * 4608  # 8,078,229,504: all but the norms (2 x 4,608 a layer, and the final one)
    assert weights == 8_078_229_504
    assert gemm.step_flops(shape, 288) == 2 * 288 * weights
    assert gemm.weight_bytes(shape) == 2 * weights
    assert shape.flops_per_token() == 2 * (weights + 32 * 2 * 4608)  # the step model's count adds the norms


def test_base_is_smollm2_and_an_unknown_shape_names_the_known_ones():
    assert gemm.shape_of("base").hidden_size == 576
    with pytest.raises(ValueError) as e:
        gemm.shape_of("llama-70b")
    assert str(e.value) == f"gemm: no shape 'llama-70b': use base or one of {sorted(widen.SHAPES)} (kpadstudy/widen.py)"


def test_a_tiny_shape_is_timed_on_the_cpu_with_its_exact_flops():
    table = gemm.measure({"tiny": TINY}, [8, 4, 8], "cpu", "float32", repeats=2)
    assert list(table.columns) == gemm.COLUMNS
    assert list(table["tokens"]) == [4, 8]  # each count once
    # a layer: qkv 128 x 64, o 64 x 64, gate_up 256 x 64, down 64 x 128; the LM head 100 x 64
    weights = 2 * (128 * 64 + 64 * 64 + 256 * 64 + 64 * 128) + 100 * 64
    assert list(table["flops"]) == [2 * 4 * weights, 2 * 8 * weights]
    assert (table["gemm_ms"] > 0).all() and table["tflop_s"].tolist() == pytest.approx(
        (table["flops"] / table["gemm_ms"] / 1e9).tolist()
    )
    first, second = table.iloc[0], table.iloc[1]
    slope = (second["gemm_ms"] - first["gemm_ms"]) / 4  # through two points, the least-squares line is the chord
    assert table["ms_per_token"].tolist() == pytest.approx([slope, slope])
    assert table["gpu_name"].isna().all()  # a CPU: no datasheet rates, so no efficiency or weights' read time
    assert table[["efficiency", "marginal_efficiency", "weight_read_ms"]].isna().all().all()
    one = gemm.measure({"tiny": TINY}, [4], "cpu", "float32", repeats=1)
    assert math.isnan(one.iloc[0]["ms_per_token"])  # no slope from one count


def test_the_command_writes_its_table_and_refuses_bad_arguments(tmp_path):
    out = str(tmp_path / "gemm")
    gemm.main([out, "--shape", "base", "--tokens", "8", "--dtype", "float32", "--repeats", "1", "--device", "cpu"])
    table = pd.read_parquet(out + ".parquet")
    assert (table.iloc[0]["shape"], table.iloc[0]["tokens"], table.iloc[0]["repeats"]) == ("base", 8, 1)
    gemm.main([str(tmp_path / "cpu"), "--tokens", "8", "--device", "cpu"])  # a CPU's defaults
    cpu = pd.read_parquet(tmp_path / "cpu.parquet")
    assert (list(cpu["shape"]), list(cpu["dtype"]), list(cpu["repeats"])) == (["base"], ["float32"], [3])
    text = (tmp_path / "gemm.md").read_text()
    assert text.startswith("# Matrix-multiply time of one engine step by the tokens it verifies\n")
    assert (
        f"`python -m kpadstudy.gemm {out} --shape base --tokens 8 --dtype float32 --repeats 1 --device cpu` on cpu"
        in text
    )
    assert "\n| base | 0.13 B | 8 | " in text
    assert text.endswith("| shape | ms per added position | marginal efficiency |\n|---|---|---|\n| base | - | - |\n")
    with pytest.raises(SystemExit, match="gemm: no shape 'huge': use base or one of"):
        gemm.main([out, "--shape", "huge", "--device", "cpu"])
    with pytest.raises(SystemExit, match=r"gemm: .*/missing does not exist: make the folder first"):
        gemm.main([str(tmp_path / "missing" / "g"), "--device", "cpu"])
    with pytest.raises(SystemExit, match=r"gemm: --tokens \[0\] and --repeats 3 must be 1 or more"):
        gemm.main([out, "--tokens", "0", "--device", "cpu"])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is here")
def test_cuda_asked_for_without_a_gpu_is_refused(tmp_path):
    with pytest.raises(SystemExit) as e:
        gemm.main([str(tmp_path / "g"), "--device", "cuda"])
    assert str(e.value) == "gemm: --device cuda, but torch sees no GPU here: use --device cpu or run it on the GPU"
