"""Validity rules of a measured run."""
from kpadstudy.execute import classify

OK = {"completed": 16, "failed": 0, "total_output_tokens": 1960}


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


def test_padding_not_active():
    assert classify(OK, 16, True, plugin_ok=False)[1].startswith("K-pad patch not active")
