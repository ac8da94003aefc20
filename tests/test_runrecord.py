"""The run record's one definition (kpadstudy.runrecord): its checks and the documentation made from it."""

import pytest

from kpadstudy import record, runrecord, tables
from lifecycle import ROOT


def test_docs_outputs_holds_the_table_made_from_the_definition():
    text = (ROOT / "docs" / "outputs.md").read_text()
    table = text.split(runrecord.BEGIN + "\n", 1)[1].split(runrecord.END, 1)[0]
    assert table == runrecord.markdown(), "docs/outputs.md is stale: run `make docs`"
    assert table.count("\n") == 2 + len(runrecord.NAMES) == 156
    assert "| `output_tok_s` | float | tok/s | output throughput: output_tokens / duration_s (client key " in table


def test_a_record_with_an_undefined_or_missing_column_is_refused_naming_it():
    rec = runrecord.blank()
    runrecord.check(rec)
    with pytest.raises(ValueError, match=r"r1.json: columns not in kpadstudy.runrecord.COLUMNS: \['output_tok_s:'\]"):
        runrecord.check({**rec, "output_tok_s:": 1.0}, "r1.json")
    del rec["boot_s"]
    with pytest.raises(ValueError, match=r"\[\]; missing: \['boot_s'\]"):
        runrecord.check(rec)


def test_type_errors_name_the_column_and_the_value():
    rec = runrecord.blank() | {"k": 8, "output_tok_s": 12, "pad": True, "completed": True, "failed_requests": {}}
    assert runrecord.type_errors(rec) == ["completed: int expected, got True"]  # a bool is no count
    assert runrecord.type_errors(rec | {"completed": 3, "k": "8"}) == ["k: int expected, got '8'"]


def test_readers_take_their_columns_from_the_definition():
    assert runrecord.names("model", "status") == {"model", "status"}
    with pytest.raises(KeyError, match=r"\['output_toks'\] are not run-record columns"):
        runrecord.names("model", "output_toks")
    # the client's keys: vllm bench serve's names, 7 totals and 16 latencies, each read into one column
    assert len(runrecord.CLIENT_KEYS) == 23
    assert runrecord.CLIENT_KEYS["output_throughput"] == "output_tok_s"
    assert runrecord.CLIENT_KEYS["p99_itl_ms"] == "itl_p99_ms"
    assert record.classify({}, 1, True, True)[1].startswith(
        "the client's result lacks completed, duration, failed, mean_e2el_ms"
    )


def test_read_runs_orders_columns_as_defined_and_keeps_an_old_one(tmp_path):
    path = tmp_path / "r1.json"
    path.write_text(
        '{"status": "ok", "old_column": 1, "repeat": 1, "configuration": "van", "corpus": "c", "model": "m"}'
    )
    table = tables.read_runs([path])
    assert list(table.columns) == ["model", "corpus", "configuration", "repeat", "status", "old_column"]
