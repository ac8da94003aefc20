"""Validity rules of a measured run."""

from kpadstudy.record import classify
from kpadstudy.runrecord import CLIENT_KEYS

OK = {**dict.fromkeys(CLIENT_KEYS, 1.0), "completed": 16, "failed": 0, "total_output_tokens": 1960}


def test_ok_run():
    assert classify(OK, 16, server_alive=True, plugin_ok=True) == ("ok", "")


def test_server_died():
    assert classify(OK, 16, server_alive=False, plugin_ok=True) == ("invalid", "server died during the measurement")


def test_failed_requests():
    assert classify({**OK, "completed": 14, "failed": 2}, 16, True, True) == ("invalid", "2 of 16 requests failed")


def test_missing_completions():
    assert classify({**OK, "completed": 15}, 16, True, True) == ("invalid", "15 of 16 requests completed")


def test_zero_output():
    assert classify({**OK, "total_output_tokens": 0}, 16, True, True) == ("invalid", "zero output tokens")


def test_no_client_result():
    assert classify(None, 16, True, True) == ("invalid", "benchmark client wrote no result")


def test_failed_warmup_requests():
    assert classify(OK, 16, True, True, warmup={"n": 4, "completed": 2, "failed": 2}) == (
        "invalid",
        "warm-up: 2 of 4 requests failed",
    )
    assert classify(OK, 16, True, True, warmup={"n": 4, "completed": 3, "failed": 0}) == (
        "invalid",
        "warm-up: 3 of 4 requests completed",
    )
    assert classify(OK, 16, True, True, warmup={"n": 4, "completed": 4, "failed": 0}) == ("ok", "")


def test_a_client_without_result_says_its_stage_exit_code_and_last_line():
    from kpadstudy.record import client_failure

    log = "Traceback (most recent call last):\n  ...\nurllib.error.HTTPError: HTTP Error 500: Internal Server Error\n\n"
    reason = client_failure(1, log, warmed_up=False)
    assert reason == (
        "warm-up: benchmark client exited with code 1 and wrote no result: "
        "urllib.error.HTTPError: HTTP Error 500: Internal Server Error"
    )
    assert classify(None, 16, True, True, reason) == ("invalid", reason)
    assert (
        client_failure(None, "", warmed_up=True)
        == "measurement: benchmark client exited with code None and wrote no result (its log is empty)"
    )


def test_padding_not_active():
    assert classify(OK, 16, True, plugin_ok=False)[1].startswith("K-pad patch not active")


from pathlib import Path  # noqa: E402

from kpadstudy.record import config_hash, resolved_settings  # noqa: E402

DATA = Path(__file__).parent / "data"


def test_resolved_settings_h200_kpad8_log():
    s = resolved_settings((DATA / "server_log_h200_kpad8.txt").read_text())
    assert s["cudagraph_mode_resolved"] == "FULL_AND_PIECEWISE"
    sizes = s["cudagraph_capture_sizes"].split(",")
    assert (len(sizes), sizes[:5], sizes[-2:]) == (51, ["1", "2", "4", "8", "16"], ["496", "512"])
    assert (s["async_scheduling"], s["kv_cache_tokens"], s["model_runner"]) == (False, 5497008, "v1")


def test_resolved_settings_h200_van_log_uses_v2_runner_and_async():
    s = resolved_settings((DATA / "server_log_h200_van.txt").read_text())
    assert (s["async_scheduling"], s["kv_cache_tokens"], s["model_runner"]) == (True, 5507008, "v2")
    assert s["cudagraph_capture_sizes"] == "1,2,4,8,16,24,32,40,48,56,64"


def test_resolved_settings_cpu_log():
    s = resolved_settings((DATA / "server_log_cpu_kpad8.txt").read_text())
    assert (s["cudagraph_mode_resolved"], s["cudagraph_capture_sizes"], s["kv_cache_tokens"]) == ("NONE", "", 46592)


def test_boot_phases_from_vllms_own_log_lines():
    """Lines of the 8B stand-in's second boot (H100, vLLM 0.26.0, 2026-12-07) and of a CPU boot (vLLM 0.32.0)."""
    from kpadstudy.record import boot_phases

    gpu = (
        "(EngineCore pid=2999) INFO 12-07 16:55:34 [default_loader.py:430] Loading weights took 2.33 seconds\n"
        "(EngineCore pid=2999) INFO 12-07 16:55:35 [gpu_model_runner.py:5347] Model loading took 15.47 GiB memory "
        "and 2.897771 seconds\n"
        "(EngineCore pid=2999) INFO 12-07 16:55:50 [core.py:340] init engine (profile, create kv cache, warmup model) "
        "took 14.73 s (compilation: 4.72 s)\n"
    )
    assert boot_phases(gpu) == {"model_load_s": 2.33, "engine_init_s": 14.73, "compile_s": 4.72}
    cpu = (
        "(Worker pid=32076) INFO 12-07 20:33:00 [default_loader.py:501] Loading weights took 1.72 seconds\n"
        "(EngineCore pid=31990) INFO 12-07 20:33:06 [core.py:402] init engine (profile, create kv cache, warmup "
        "model) took 3.34 s\n"
    )
    assert boot_phases(cpu) == {"model_load_s": 1.72, "engine_init_s": 3.34, "compile_s": None}
    retried = gpu.replace("14.73", "30.10").replace("4.72", "20.00") + gpu  # the boot that served logs last
    assert boot_phases(retried)["engine_init_s"] == 14.73 and boot_phases(retried)["compile_s"] == 4.72
    assert boot_phases("") == {"model_load_s": None, "engine_init_s": None, "compile_s": None}


def test_resolved_settings_of_an_empty_log():
    assert resolved_settings("") == {
        "cudagraph_mode_resolved": None,
        "cudagraph_capture_sizes": None,
        "async_scheduling": None,
        "kv_cache_tokens": None,
        "model_runner": "v1",
    }


def test_config_hash_changes_with_config_and_configuration():
    a = config_hash({"x": 1}, "van")
    assert len(a) == 16 and a == config_hash({"x": 1}, "van")
    assert a != config_hash({"x": 2}, "van") and a != config_hash({"x": 1}, "suf")


from kpadstudy.record import client_limit  # noqa: E402


def test_client_limited_above_the_fraction_of_the_ceiling():
    # ceiling 150,000 tok/s, fraction 0.2 -> runs above 30,000 tok/s are flagged
    flagged, reason = client_limit(33_530.0, 150_000.0, 0.2)
    assert flagged is True
    assert (
        reason
        == "output 33530 tok/s exceeds 0.2 x the client's ceiling of 150000 tok/s (30000): the client may be the limit"
    )
    assert client_limit(30_000.0, 150_000.0, 0.2) == (False, "")
    assert client_limit(29_999.0, 150_000.0) == (False, "")  # default fraction 0.2
    assert client_limit(80_000.0, 150_000.0, 0.5) == (
        True,
        "output 80000 tok/s exceeds 0.5 x the client's ceiling of 150000 tok/s (75000): the client may be the limit",
    )


def test_client_limited_unknown_without_a_ceiling_or_a_measurement():
    assert client_limit(33_530.0, None) == (
        None,
        "client ceiling unknown (load.client_ceiling_tok_s is null; measure it with make bench-client)",
    )
    assert client_limit(None, 150_000.0) == (None, "no output tok/s measured")


def test_a_result_with_a_misspelled_key_is_invalid_naming_it():
    """One vLLM version wrote "request_goodput:"; a key the record reads that is missing or misspelled must not give
    an ok run with an empty column."""
    bench = {k: v for k, v in OK.items() if k != "output_throughput"} | {"output_throughput:": 123.0}
    status, reason = classify(bench, 16, True, True)
    assert status == "invalid"
    assert reason.startswith("the client's result lacks output_throughput (or holds null there)")
    bench = {**OK, "duration": None, "mean_ttft_ms": None}
    assert classify(bench, 16, True, True)[1].startswith("the client's result lacks duration, mean_ttft_ms")
    assert classify({**OK, "unread_key": 1}, 16, True, True) == ("ok", "")  # keys the record does not read: ignored
