"""make bench-client: the headroom ratio, its report, and one small end-to-end measurement."""

import pytest

from kpadstudy import headroom

RESULT = {
    "output_tok_s": 111_680.4,
    "completed": 1000,
    "failed": 0,
    "output_tokens": 512_000,
    "duration_s": 4.58,
    "server_cpu_s": 2.1,
    "client_command": "taskset -c 0 py -m kpadstudy.vllm_bench ...",
    "server_command": "taskset -c 1 py -m kpadstudy.fake_server ...",
}
SETTINGS = {
    "n_measured": 1000,
    "n_warmup": 32,
    "max_tokens": 512,
    "max_concurrency": 32,
    "tokens_per_chunk": 3,
    "client_cpus": "0",
    "server_cpus": "1",
}


def test_headroom_ratio_is_ceiling_over_the_studys_top_cell():
    assert headroom.headroom_ratio(33_530.0) == 1.0
    assert headroom.headroom_ratio(167_650.0) == pytest.approx(5.0)


def test_report_ends_with_the_ratio_and_says_when_below_target():
    lines = headroom.report(RESULT, SETTINGS)
    assert lines[-1] == "headroom_ratio=3.33"  # 111680.4 / 33530 = 3.3308
    assert lines[-2].startswith("BELOW TARGET (5x): set load.client_ceiling_tok_s: 111680")
    assert "client CPUs 0, server CPUs 1" in lines[2]
    assert headroom.report({**RESULT, "output_tok_s": 170_000.0}, SETTINGS)[-2].startswith("OK")


def test_prompt_kinds_never_overlap():
    m, w = headroom.prompts(50, "measured"), headroom.prompts(50, "warmup")
    assert len(set(m)) == 50 and len(set(w)) == 50 and not set(m) & set(w)


def test_measure_end_to_end_small(tmp_path):
    # 128 x 300 tokens: the fake server works about 0.23 CPU s on this VM (23 clock ticks of 10 ms), so the
    # lower bound below is not at /proc's tick granularity (16 x 40 tokens took 1 tick, and 0 once in CI).
    pytest.importorskip("vllm.benchmarks.serve")
    client, server = headroom.cpu_pinning()
    r = headroom.measure(
        n_measured=128,
        n_warmup=2,
        max_tokens=300,
        max_concurrency=4,
        tokens_per_chunk=3,
        client_cpus=client,
        server_cpus=server,
        workdir=tmp_path,
    )
    assert (r["completed"], r["failed"], r["output_tokens"]) == (128, 0, 38_400)
    assert 0.05 <= r["server_cpu_s"] < 30
    assert r["output_tok_s"] == pytest.approx(38_400 / r["duration_s"], rel=1e-6)
    assert "--tokens-per-chunk 3" in r["server_command"] and "--max-concurrency 4" in r["client_command"]
