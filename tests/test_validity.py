"""Validity rules of a run that need no server: the watchdog, the classification order, the prompt-token
check, lost cudagraphs, the mode that ran, and capture sizing. The same rules against a running (fake)
server are in test_faults.py."""

import subprocess
import time

import pandas as pd
import pytest

from kpadstudy import record, runrecord, runs, tables
from kpadstudy.execute import wait_client

OK_BENCH = {**dict.fromkeys(runrecord.CLIENT_KEYS, 1.0), "completed": 4, "failed": 0, "total_output_tokens": 32}


def _sleepers():
    return (subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2))


def test_watchdog_stall_stops_the_client_after_stall_s_without_a_new_chunk(tmp_path):
    client, server = _sleepers()
    progress = tmp_path / "progress"
    progress.write_text("5")  # the client streamed 5 chunks, then nothing
    t0 = time.monotonic()
    alive, reason = wait_client(client, server, progress=progress, stall_s=1.0, poll_s=0.1)
    assert 1.0 <= time.monotonic() - t0 < 5.0
    assert (alive, reason) == (
        True,
        "stall: no token streamed for 1 s (load.stall_s; 5 chunks streamed before), the server process still running",
    )
    assert client.poll() is not None  # stopped
    server.kill()


def test_watchdog_stall_clock_waits_for_the_client_to_start_sending_and_the_deadline_is_the_backstop(tmp_path):
    """No progress file yet (the client is importing vLLM): no stall, however long; the deadline still ends it."""
    client, server = _sleepers()
    alive, reason = wait_client(client, server, progress=tmp_path / "none", stall_s=0.2, deadline_s=1.5, poll_s=0.1)
    assert (
        alive and reason.startswith("deadline: the client ran ") and reason.endswith(" s, past load.deadline_s = 1.5 s")
    ), reason
    assert client.poll() is not None
    server.kill()


def test_classify_watchdog_first_then_prompt_tokens_last():
    assert record.classify(None, 4, True, True, "client killed", watchdog="measurement: stall: x") == (
        "invalid",
        "measurement: stall: x",
    )
    assert record.classify(OK_BENCH, 4, True, True, prompt_tokens=(1000, 1004)) == (
        "invalid",
        "prompt tokens: the server counted 1004 for the measured prompts, the corpus 1000 (+4): the server saw "
        "other prompts or another chat template than the corpus counted",
    )
    assert record.classify(OK_BENCH, 4, True, True, prompt_tokens=(1000, 1000)) == ("ok", "")
    assert record.classify(OK_BENCH, 4, True, True, prompt_tokens=(None, 1000)) == ("ok", "")  # not compared


def test_corpus_prompt_tokens_sums_the_measured_split_of_the_model():
    recs = [
        {"split": "warmup", "prompt_tokens": {"m": 100}},
        {"split": "measured", "prompt_tokens": {"m": 7, "other": 9}},
        {"split": "measured", "prompt_tokens": {"m": 5}},
    ]
    assert record.corpus_prompt_tokens(recs, "m") == 12
    assert record.corpus_prompt_tokens(recs, "other") is None  # one measured record lacks it
    assert record.corpus_prompt_tokens(recs[:1], "m") is None  # no measured prompt


def test_graph_lost_only_for_padded_runs_on_a_gpu():
    kpad16 = runs.Configuration("kpad16", "kpad", 16, True, "FULL_AND_PIECEWISE", 0.85)
    nopad16 = runs.Configuration("nopad16", "nopad", 16, False, "FULL_AND_PIECEWISE", 0.85)
    # the H200 measurement of issue 15: kpad16 at C=32 ran FULL on 244 of 871 decode steps
    lost = record.graph_lost(kpad16, "cuda", {"full_share_decode": 244 / 871})
    assert lost == (True, "FULL cudagraphs on 0.28 of decode steps (< 0.95)")
    assert record.graph_lost(kpad16, "cuda", {"full_share_decode": 853 / 853}) == (False, "")
    assert record.graph_lost(kpad16, "cuda", {"full_share_decode": 0.9}, minimum=0.85) == (False, "")
    assert record.graph_lost(kpad16, "cpu", {"full_share_decode": 0.0}) == (None, "no cudagraphs on CPU")
    assert record.graph_lost(nopad16, "cuda", {"full_share_decode": 0.0}) == (None, "")
    assert record.graph_lost(kpad16, "cuda", {"full_share_decode": None}) == (None, "no decode steps counted")


def test_a_kpadauto_run_with_unpadded_steps_is_judged_by_its_padded_shape_steps():
    auto = runs.Configuration("kpadautou12", "kpadauto", 12, True, "FULL_AND_PIECEWISE", 0.85)
    # kpadautou12 r2 of the H100 lease of 2026-12-05 15:37: 1,708 steps unpadded by choice, FULL on 219 of its
    # 1,512 decode steps (0.14): PIECEWISE by design, not a lost graph; that record had no padded-shape count
    unpadded = {"kpad_auto_unpadded_steps": 1708, "full_share_decode": 219 / 1512}
    assert record.graph_lost(auto, "cuda", unpadded) == (None, "no decode steps at a padded shape counted")
    lost = record.graph_lost(auto, "cuda", unpadded | {"full_share_auto_shape": 219 / 232})
    assert lost == (True, "FULL cudagraphs on 0.94 of decode steps at a padded shape (< 0.95)")
    assert record.graph_lost(auto, "cuda", unpadded | {"full_share_auto_shape": 231 / 232}) == (False, "")
    # every step padded: the share of all decode steps, as for kpad
    padded = {"kpad_auto_unpadded_steps": 0, "full_share_decode": 219 / 1512, "full_share_auto_shape": 1.0}
    assert record.graph_lost(auto, "cuda", padded) == (True, "FULL cudagraphs on 0.14 of decode steps (< 0.95)")


CONFIG_LINE = (
    "(EngineCore pid=1) INFO [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: model='m', "
    "compilation_config={'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
    "'cudagraph_capture_sizes': [1, 2, 4, 8], 'max_cudagraph_capture_size': 8}\n"
)


@pytest.mark.parametrize(
    ("after", "mode"),
    [
        ("", "FULL_AND_PIECEWISE"),
        # vLLM 0.26.0 / 0.32.0 CompilationConfig: the spec-decode downgrade of the model runner
        (
            "(EngineCore pid=1) WARNING [compilation.py:1] CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
            "spec-decode for attention backend FLASH_ATTN (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); "
            "setting cudagraph_mode=PIECEWISE\n",
            "PIECEWISE",
        ),
        # vLLM 0.32.0: no piecewise capture available
        (
            "(EngineCore pid=1) WARNING [compilation.py:1] Cudagraph mode CUDAGraphMode.FULL_AND_PIECEWISE requires "
            "piecewise capture, but the loaded model provides neither a compiled submodule nor breakable CUDA "
            "graphs. Overriding to CUDAGraphMode.FULL.\n",
            "FULL",
        ),
    ],
)
def test_the_mode_that_ran_follows_a_downgrade_after_the_config_line(after, mode):
    assert record.resolved_settings(CONFIG_LINE + after)["cudagraph_mode_resolved"] == mode


def test_a_downgrade_before_the_engine_config_line_is_not_the_mode_that_ran():
    before = "(APIServer pid=1) WARNING setting cudagraph_mode=NONE\n"
    assert record.resolved_settings(before + CONFIG_LINE)["cudagraph_mode_resolved"] == "FULL_AND_PIECEWISE"


def test_capture_sizes_hold_the_widest_uniform_decode_step():
    sizes = runs.capture_sizes(32, 16)
    assert 32 * 17 == 544 == sizes[-1]
    assert {17, 34, 68, 136, 272, 408, 544} <= set(sizes)  # n x (1 + K) for n = 1, 2, 4, 8, 16, 24, 32
    assert sizes[:5] == [1, 2, 4, 8, 16] and 512 in sizes  # vLLM's token grid below


def test_capture_sizes_reach_as_far_as_vllms_own_list_for_steps_with_a_prefill():
    # kpad8 at concurrency 32: the widest uniform step is 288 tokens; vLLM's own list (nopad8's) reaches
    # min(2 x 288, 512) = 512, so a decode batch with a prefill chunk up to 512 tokens keeps a PIECEWISE graph
    sizes = runs.capture_sizes(32, 8)
    assert sizes[-1] == 512 and {288, 304, 496} <= set(sizes) and 520 not in sizes
    assert runs.capture_sizes(32, 8, max_tokens=400)[-1] == 400  # a max_num_batched_tokens below 512 caps the grid
    assert runs.capture_sizes(32, 8, ceiling=1024)[-1] == 576  # a higher ceiling: 2 x 288, as vLLM's own would
    assert runs.capture_sizes(8, 8) == [1, 2, 4, 8, 9, 16, 18, 24, 32, 36, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112,
                                        120, 128, 136, 144]  # fmt: skip


def _config(**server):
    return {
        "server": {
            "max_model_len": 4096,
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "gpu_memory_utilization": 0.85,
            **server,
        },
        "load": {"max_concurrency": 32},
        "configurations": [{"method": "van"}, {"method": "kpad", "k": 16}, {"method": "nopad", "k": 16}],
    }


def _command(cfg, name, device="cuda"):
    conf = {c.name: c for c in runs.configurations(cfg)}[name]
    return runs.server_command(
        model_path="m",
        served_model_name="m",
        port=1,
        configuration=conf,
        server=cfg["server"],
        tensor_parallel_size=1,
        device=device,
        cpus=None,
        max_concurrency=cfg["load"]["max_concurrency"],
        python="python",
    )


def test_server_command_sizes_capture_for_kpad_on_a_gpu_only():
    import json

    cmd = _command(_config(), "kpad16")
    compilation = json.loads(cmd[cmd.index("--compilation-config") + 1])
    assert compilation["max_cudagraph_capture_size"] == 544 and compilation["cudagraph_capture_sizes"][-1] == 544
    assert cmd[cmd.index("--max-num-seqs") + 1] == "32"
    for name, device, cfg in (
        ("nopad16", "cuda", _config()),
        ("van", "cuda", _config()),
        ("kpad16", "cpu", _config()),
        ("kpad16", "cuda", _config(capture_sizing=False)),
    ):
        cmd = _command(cfg, name, device)
        assert "--max-num-seqs" not in cmd and "cudagraph_capture_sizes" not in " ".join(cmd), (name, device)
    cmd = _command(_config(max_num_seqs=16), "kpad16")  # fewer requests per step: 16 x 17 = 272
    assert cmd.count("--max-num-seqs") == 1 and cmd[cmd.index("--max-num-seqs") + 1] == "16"
    compilation = json.loads(cmd[cmd.index("--compilation-config") + 1])
    assert 272 in compilation["cudagraph_capture_sizes"] and compilation["max_cudagraph_capture_size"] == 512
    cmd = _command(_config(capture_ceiling=1024), "kpad16")  # data-center Blackwell: vLLM's own list reaches 1024
    compilation = json.loads(cmd[cmd.index("--compilation-config") + 1])
    assert compilation["max_cudagraph_capture_size"] == 1024 and {544, 1008} <= set(
        compilation["cudagraph_capture_sizes"]
    )


def test_a_kpad_step_that_cannot_fit_the_batch_budget_is_refused_with_the_numbers():
    cfg = _config()
    cfg["configurations"][1]["server_args"] = {"max_num_batched_tokens": 512}
    with pytest.raises(ValueError) as err:
        runs.check_capture(cfg)
    assert str(err.value) == (
        "configuration 'kpad16': a uniform decode step at concurrency 32 has 32 x (1 + 16) = 544 tokens, above its "
        "max_num_batched_tokens 512: it could never run as one FULL cudagraph; raise max_num_batched_tokens, or "
        "lower K or load.max_concurrency"
    )
    runs.check_capture(_config())  # no budget given: vLLM sizes it


def test_best_k_leaves_out_a_k_whose_runs_lost_their_graphs():
    rows = []
    for conf, method, k, tok, lost in (
        ("van", "van", 0, 100.0, None),
        ("suf", "suf", 32, 110.0, None),
        ("kpad12", "kpad", 12, 150.0, False),
        ("kpad16", "kpad", 16, 160.0, True),  # faster here, but not K-pad: decode steps ran eager
    ):
        rows.append(
            {
                "model": "m",
                "corpus": "c",
                "configuration": conf,
                "method": method,
                "k": k,
                "pad": method == "kpad",
                "device": "cuda",
                "repeat": 1,
                "status": "ok",
                "output_tok_s": tok,
                "graph_lost": lost,
            }
        )
    cells = tables.cells(pd.DataFrame(rows))
    assert cells.set_index("configuration")["graph_lost"].to_dict() == {
        "kpad12": False,
        "kpad16": True,
        "suf": False,
        "van": False,
    }
    best = tables.best_kpad(cells).iloc[0]
    assert (best["best_k"], best["best_kpad_tok_s"], best["graph_lost_k"]) == (12, 150.0, "16")


def test_capture_follows_a_configurations_own_max_num_seqs():
    """server_args max_num_seqs 2 at concurrency 8: the widest step is 2 x (1 + 4) = 10 tokens, within 16."""
    import json

    cfg = _config()
    cfg["load"]["max_concurrency"] = 8
    cfg["configurations"] = [
        {"method": "kpad", "k": 4, "server_args": {"max_num_seqs": 2, "max_num_batched_tokens": 16}}
    ]
    runs.check_capture(cfg)  # not refused
    cmd = _command(cfg, "kpad4")
    # the grid reaches min(2 x 10, 512) = 20 as vLLM's own list would, capped at max_num_batched_tokens 16
    compilation = json.loads(cmd[cmd.index("--compilation-config") + 1])
    assert compilation["cudagraph_capture_sizes"] == [1, 2, 4, 5, 8, 10, 16]
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--max-num-seqs"] == ["2"]  # its own, written once
    cfg["configurations"][0]["server_args"]["max_num_seqs"] = False  # option_args leaves a false value out
    cmd = _command(cfg, "kpad4")
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--max-num-seqs"] == ["8"]
    cfg["configurations"][0]["server_args"]["max_num_batched_tokens"] = "lots"
    with pytest.raises(ValueError, match=r"^configuration 'kpad4': server_args max_num_seqs / max_num_batched_tokens"):
        runs.check_capture(cfg)
