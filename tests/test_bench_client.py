"""The pipeline's client command (``python -m kpadstudy.vllm_bench`` with the arguments of
``runs.bench_command`` and ``runs.warmup_args``) against the fake server, which records every prompt and
streams on a known schedule. About 15 s per client run (vLLM's import); no vLLM server.
"""

import pytest

from kpadstudy import headroom, metrics, runs
from kpadstudy.fake_server import Schedule, serve_in_thread

pytest.importorskip("vllm.benchmarks.serve")

N_MEASURED, N_WARMUP, MAX_TOKENS = 12, 4, 13
K, GAP_S = 4, 0.05  # chunks of [1, 4, 4, 4] tokens; 50 ms between content chunks
LOAD = {"max_tokens": MAX_TOKENS, "max_concurrency": 4, "temperature": 0}


def run_client(tmp_path, extra: list[str] = ()):
    """Run the client once against a fresh fake server; return (its result JSON, prompts the server received)."""
    with serve_in_thread(Schedule(tokens_per_chunk=K, chunk_gap_s=GAP_S, first_token_s=0.01)) as (url, server):
        cmd = headroom.client_command(
            base_url=url, workdir=tmp_path, n_measured=N_MEASURED, n_warmup=N_WARMUP, load=LOAD, cpus=None
        )
        bench = headroom.run_client(cmd + list(extra), tmp_path)
        return bench, list(server.prompts)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    return run_client(tmp_path_factory.mktemp("client"))


def test_client_command_is_the_pipelines(tmp_path):
    cmd = headroom.client_command(
        base_url="http://h:1", workdir=tmp_path, n_measured=3, n_warmup=2, load=LOAD, cpus="0"
    )
    expected = runs.bench_command(
        base_url="http://h:1",
        served_model_name="fake",
        tokenizer=str(tmp_path / "tokenizer"),
        dataset_path=str(tmp_path / "measured.jsonl"),
        num_prompts=3,
        load=LOAD,
        seed=0,
        result_dir=str(tmp_path),
        result_filename="bench.json",
        cpus="0",
    )
    assert cmd == expected + ["--warmup-dataset-path", str(tmp_path / "warmup.jsonl"), "--warmup-num-prompts", "2"]
    assert cmd[cmd.index("--ready-check-timeout-sec") + 1] == "0"
    assert {"--no-oversample", "--disable-shuffle"} <= set(cmd) and "--num-warmups" not in cmd


def test_each_prompt_arrives_exactly_once_and_warmup_is_disjoint(pipeline_run):
    _, received = pipeline_run
    measured, warmup = headroom.prompts(N_MEASURED, "measured"), headroom.prompts(N_WARMUP, "warmup")
    assert not set(measured) & set(warmup)
    assert len(received) == N_MEASURED + N_WARMUP  # nothing else: no readiness probe, no repeat, no oversampling
    assert sorted(received[:N_WARMUP]) == sorted(warmup)  # warm-up first, each once
    assert sorted(received[N_WARMUP:]) == sorted(measured)  # then each measured prompt once


def test_a_ready_check_would_send_the_first_measured_prompt_twice(tmp_path):
    """Why ``--ready-check-timeout-sec 0`` is pinned: vLLM's readiness probe is the first measured prompt."""
    _, received = run_client(tmp_path, ["--ready-check-timeout-sec", "5"])
    assert len(received) == N_MEASURED + N_WARMUP + 2  # a probe before the warm-up and one before the measured prompts
    assert received.count(headroom.prompts(N_WARMUP, "warmup")[0]) == 2
    assert received.count(headroom.prompts(N_MEASURED, "measured")[0]) == 2


def test_itl_per_token_from_the_known_schedule(pipeline_run):
    bench, _ = pipeline_run
    assert (bench["completed"], bench["failed"], bench["total_output_tokens"]) == (
        N_MEASURED,
        0,
        N_MEASURED * MAX_TOKENS,
    )
    # per request: role chunk + first token, then 3 chunks of 4 tokens, 50 ms apart: 150 ms for 12 tokens -> 12.5 ms
    # per token (a busy machine delays single chunks by a few ms on either end: +-12%)
    per_token = metrics.itl_per_token(bench)["itl_token_mean_ms"]
    assert 11.0 < per_token < 14.0
    assert 11.0 < bench["mean_tpot_ms"] < 14.0  # the same per-request quantity, every request 12 tokens after the first
    # vLLM's ITL is per chunk: gaps [~0 (role -> first token), 50, 50, 50] ms -> mean 37.5 ms
    assert 33.0 < bench["mean_itl_ms"] < 42.0
    # exactly: both divide the same decode time, by 4 chunk gaps or by 12 tokens per request
    assert bench["mean_itl_ms"] / per_token == pytest.approx(3.0, rel=1e-9)
