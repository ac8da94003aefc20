"""Prometheus counters and the acceptance measures derived from them."""

import pytest

from kpadstudy import metrics

TEXT = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="smol"} 1050.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="smol"} 8400.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="smol"} 906.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smol"} 1960.0
vllm:generation_tokens_created{engine="0",model_name="smol"} 1.79e+09
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="smol"} 0.0
"""


def test_parse_counters_reads_totals_only():
    assert metrics.parse_counters(TEXT) == {
        "spec_drafts": 1050.0,
        "spec_draft_tokens": 8400.0,
        "spec_accepted_tokens": 906.0,
        "generation_tokens": 1960.0,
    }


def test_counter_delta():
    assert metrics.counter_delta({"a": 10.0}, {"a": 15.0, "b": 2.0}) == {"a": 5.0, "b": 2.0}


def test_speculation_measures_hand_computed():
    m = metrics.speculation_measures(
        {"spec_drafts": 1050.0, "spec_draft_tokens": 8400.0, "spec_accepted_tokens": 906.0, "generation_tokens": 1960.0}
    )
    assert m["acceptance_rate"] == pytest.approx(906 / 8400)
    assert m["mean_acceptance_length"] == pytest.approx(1 + 906 / 1050)
    assert m["tokens_per_request_step"] == pytest.approx(1960 / 1054)


def test_van_has_no_acceptance_and_one_token_per_step():
    assert metrics.speculation_measures({"generation_tokens": 500.0}) == {
        "acceptance_rate": None,
        "mean_acceptance_length": None,
        "tokens_per_request_step": 1.0,
    }


def test_accepted_per_position():
    text = """# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 500.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 100.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 300.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="m",position="0"} 1.7e9
"""
    assert metrics.parse_accepted_per_position(text) == [500.0, 300.0, 100.0]
    assert metrics.parse_accepted_per_position(TEXT) == []
