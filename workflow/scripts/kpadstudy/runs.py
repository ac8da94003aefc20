"""Configurations, runs and the command lines that execute them.

Words (used everywhere in this project):
    cell           (model, corpus), as in the study's 77 cells.
    configuration  a named server setting: method ``van`` (no speculation), ``suf`` (suffix decoding),
                   ``ngram`` (vLLM's prompt-lookup drafter), ``kpad`` (suffix decoding, drafts padded to K),
                   ``nopad`` (suffix decoding at a kpad K, unpadded), ``kpadauto`` (suffix decoding, each decode
                   step's drafts padded or cut to a length chosen per step from a set up to K; the plugin's
                   ``kpad_plugin.auto``), with its K and server overrides.
    run            (model, corpus, configuration, repeat): one fresh ``vllm serve``.

Server parameters and benchmark parameters are separate data, combined into command lines here and
nowhere else (the pattern of vLLM's own benchmark sweep).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from kpad_plugin import auto

PLUGIN_NAME = "kpad"
METHODS = ("van", "suf", "ngram", "kpad", "nopad", "kpadauto")
SUFFIX_METHODS = ("suf", "kpad", "nopad", "kpadauto")  # drafts from arctic-inference's suffix tree
PADDED_METHODS = ("kpad", "kpadauto")  # the K-pad patch pads their drafts (VLLM_SUFFIX_PAD_UNIFORM=1)
#: vLLM's suffix-decoding defaults (SpeculativeConfig, 0.26 to 0.32) that bound a draft's length
SUFFIX_DEFAULTS = {"suffix_decoding_max_tree_depth": 24, "suffix_decoding_max_spec_factor": 1.0}
VLLM_METHOD = {"suf": "suffix", "kpad": "suffix", "nopad": "suffix", "kpadauto": "suffix", "ngram": "ngram"}
AUTO_LENGTHS = (0, 2, 4, 8)  # kpadauto's draft lengths below K when the entry gives none
# Server variables the pipeline sets per run (ports, scratch paths, the run's GPUs): not in recorded_env.
PER_RUN_ENV = ("KPAD_STATS_DIR", "VLLM_PORT", "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "VLLM_RPC_BASE_PATH", "TMPDIR")
# Server variables the pipeline sets itself (server_env, execute): a configuration's own env may not set them.
RESERVED_ENV = (
    "ARCTIC_INFERENCE_ENABLED",
    "VLLM_PLUGINS",
    "VLLM_SUFFIX_PAD_UNIFORM",
    "KPAD_AUTO_LENGTHS",
    *PER_RUN_ENV,
    "VLLM_CPU_KVCACHE_SPACE",
)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")  # safe as a path part and a wildcard


@dataclass(frozen=True)
class Configuration:
    """One server configuration of the study.

    Attributes:
        name: label used in paths and tables: ``van``, ``suf``, ``kpad8``, ``nopad8``, ``ngram7``, ``trident``.
        method: one of :data:`METHODS`.
        k: ``num_speculative_tokens`` (0 for ``van``).
        pad: whether the K-pad patch pads drafts (``VLLM_SUFFIX_PAD_UNIFORM=1``; methods ``kpad``, ``kpadauto``).
        cudagraph_mode: vLLM ``compilation_config.cudagraph_mode`` requested.
        gpu_memory_utilization: fraction of GPU memory vLLM may use.
        speculative_options: more keys of vLLM's speculative config (e.g. ``prompt_lookup_min``).
        server_args: more ``vllm serve`` options, ``{option without dashes: value}`` (e.g.
            ``kv_cache_dtype: fp8``, ``max_num_batched_tokens: 8192``).
        capture_sizing: for ``kpad`` on a GPU, whether the server gets capture sizes that hold concurrency x
            (1 + K) (:func:`capture_sizes`; config ``server.capture_sizing``, or the entry's own key).
        lengths: ``kpadauto`` only: the draft lengths a step may take, sorted, the largest = ``k``
            (``KPAD_AUTO_LENGTHS``); empty for every other method.
        env: more server environment variables of this configuration, on top of config ``server.env`` (e.g.
            ``VLLM_USE_V2_MODEL_RUNNER: "0"``, ``KPAD_AUTO_SKIP_SPECULATION: "0"``); never one of
            :data:`RESERVED_ENV`.
        control: a measurement control, not a way to serve (e.g. van with async scheduling off, as vLLM runs
            suffix decoding): measured and compared like any configuration, never recommended
            (:func:`kpadstudy.advice.recommend`). The server does not see it.
    """

    name: str
    method: str
    k: int
    pad: bool
    cudagraph_mode: str
    gpu_memory_utilization: float
    speculative_options: dict[str, Any] = field(default_factory=dict)
    server_args: dict[str, Any] = field(default_factory=dict)
    capture_sizing: bool = True
    lengths: tuple[int, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    control: bool = False

    @property
    def speculative(self) -> bool:
        return self.method != "van"

    @property
    def suffix(self) -> bool:
        """Whether its drafts come from suffix decoding (arctic-inference)."""
        return self.method in SUFFIX_METHODS

    @property
    def draft_limit(self) -> int | None:
        """The longest draft suffix decoding can propose with this configuration's speculative options
        (:func:`suffix_draft_limit`), at most ``k``; None for a method that does not draft from the suffix tree."""
        return min(self.k, suffix_draft_limit(self.speculative_options)) if self.suffix else None


def suffix_settings(options: dict[str, Any] | None = None) -> dict[str, Any]:
    """:data:`SUFFIX_DEFAULTS` with a configuration's speculative options on top."""
    return {**SUFFIX_DEFAULTS, **(options or {})}


def suffix_draft_limit(options: dict[str, Any] | None = None) -> int:
    """The longest draft suffix decoding can propose, whatever K: arctic-inference's ``SuffixTree::speculate``
    (0.3.0) matches the last ``match_len`` tokens, ``match_len`` below the tree depth, drafts at most
    ``int(match_len x max_spec_factor + 1e-6)`` tokens, and match plus draft fit in the tree's depth. With vLLM's
    defaults (:data:`SUFFIX_DEFAULTS`: depth 24, factor 1.0) that is 12 tokens. ``options``: a configuration's
    speculative options (``suffix_decoding_max_tree_depth``, ``suffix_decoding_max_spec_factor``)."""
    opts = suffix_settings(options)
    depth, factor = int(opts["suffix_decoding_max_tree_depth"]), float(opts["suffix_decoding_max_spec_factor"])
    return max((min(int(m * factor + 1e-6), depth - m) for m in range(1, depth)), default=0)


def draft_limit_note(c: Configuration) -> str:
    """For a suffix-decoding configuration whose K is above the longest draft its suffix settings allow
    (:func:`suffix_draft_limit`), what that means: its drafts are those of the smaller K, and a padded step only adds
    pad slots above it. "" for any other configuration."""
    limit = c.draft_limit
    if limit is None or limit >= c.k:
        return ""
    opts = suffix_settings(c.speculative_options)
    pads = f"; a step padded to {c.k} verifies at least {c.k - limit} pad slots a request" if c.pad else ""
    return (
        f"{c.name}: K = {c.k}, but suffix decoding drafts at most {limit} tokens at "
        f"suffix_decoding_max_tree_depth {opts['suffix_decoding_max_tree_depth']} and "
        f"suffix_decoding_max_spec_factor {opts['suffix_decoding_max_spec_factor']:g}, so its drafts are "
        f"those of K = {limit}{pads} (a deeper tree in the entry's `speculative` allows longer drafts)"
    )


def configurations(config: dict[str, Any]) -> list[Configuration]:
    """Expand ``config["configurations"]`` into the ordered list of configurations (one cell's run order).

    Two forms (``config/schema.yaml``):

    * the list of named entries: ``{name?, method, k?, enabled?, cudagraph_mode?, gpu_memory_utilization?,
      speculative?, server_args?, env?, capture_sizing?, lengths?, control?}``, in the order given (``env``:
      :func:`entry_env`; ``lengths``: kpadauto only, :func:`auto_lengths`). ``k`` may be a list: one
      configuration per K.
      Default names: ``van`` and ``suf`` for a single entry of those methods, else ``<method><k>``; a given
      ``name`` with a list of K becomes ``<name><k>``.
    * the mapping of the first studies, kept as it was: ``van: {enabled}``, ``suf: {enabled, k, cudagraph_mode,
      gpu_memory_utilization}``, ``kpad: {k: [...]}``, ``nopad: {k: [...]}`` -> van, suf, kpad K..., nopad K...

    Unset modes and memory shares come from ``server``.

    Raises:
        ValueError: a name that is not safe as a path part, names that repeat, a K on van or a missing K,
            speculative options that set ``method`` or ``num_speculative_tokens``, an ``env`` that
            :func:`entry_env` refuses, a kpadauto entry whose ``KPAD_AUTO_*`` settings (``server.env`` and its
            own ``env``) :func:`check_auto_env` refuses, ``KPAD_AUTO_CHECK_DEFERRED=1`` with a model at tensor
            parallel size > 1 or another executor than uni, a ``server.env`` setting one of :data:`RESERVED_ENV`;
            the message names the entry and what to change.
    """
    reserved = sorted(set(config["server"].get("env") or {}) & set(RESERVED_ENV))
    if reserved:
        raise ValueError(
            f"config server.env sets {reserved}, which the pipeline sets itself for every run; remove them"
        )
    spec = config["configurations"]
    entries = _legacy_entries(spec) if isinstance(spec, dict) else list(spec)
    out: list[Configuration] = []
    for i, entry in enumerate(entries):
        out += _expand(entry, config["server"], f"configurations[{i}]")
    names = [c.name for c in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(
            f"config 'configurations' yields duplicate names {repeated}: give each entry its own name, list each K once"
        )
    _check_deferred_check_in_process(config, out)
    return out


def _check_deferred_check_in_process(config: dict[str, Any], configs: list[Configuration]) -> None:
    """Refuse ``KPAD_AUTO_CHECK_DEFERRED=1`` where no step can be skipped (``kpad_plugin.auto.skip_blocked_by``: a
    model at tensor parallel size > 1, or an entry's ``distributed_executor_backend`` other than uni), which the
    server would refuse only after loading the model."""
    wide = sorted(m for m, spec in (config.get("models") or {}).items() if int(spec.get("tensor_parallel_size", 1)) > 1)
    for c in configs:
        env = configured_env(config["server"].get("env"), c.env)
        if c.method != "kpadauto" or not auto.env_int(env, auto.ENV_CHECK_DEFERRED, 0, 0):
            continue
        backend = c.server_args.get("distributed_executor_backend")
        if wide or backend not in (None, "uni"):
            why = (
                f"models {wide} run at tensor parallel size > 1" if wide else f"distributed_executor_backend {backend}"
            )
            raise ValueError(
                f"configuration {c.name}: {auto.ENV_CHECK_DEFERRED}=1 would check nothing: {why} puts the workers "
                "outside the scheduler's process, where no step is skipped; run the check with the models at "
                "tensor_parallel_size 1 and the default executor, or drop the variable"
            )


def configuration(config: dict[str, Any], name: str) -> Configuration:
    """The configuration named ``name`` of :func:`configurations` (what a run job is given).

    Raises:
        ValueError: no configuration has that name (the message lists the names there are).
    """
    known = {c.name: c for c in configurations(config)}
    if name not in known:
        raise ValueError(f"configuration {name!r} is not in config 'configurations' (it yields {sorted(known)})")
    return known[name]


def disabled_configurations(config: dict[str, Any]) -> list[Configuration]:
    """The configurations of the entries switched off (``enabled: false``), as they would run if switched on.

    ``snakemake plan`` lists what each would add. Raises as :func:`configurations`.
    """
    spec = config["configurations"]
    entries = _legacy_entries(spec) if isinstance(spec, dict) else list(spec)
    out: list[Configuration] = []
    for i, entry in enumerate(entries):
        if not entry.get("enabled", True):
            out += _expand({**entry, "enabled": True}, config["server"], f"configurations[{i}]")
    return out


def _legacy_entries(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of the mapping form (van, suf, kpad K..., nopad K...) as list-form entries.

    Absent keys: van and suf enabled (suf K=32), kpad K 4, 6, 8, 12, no nopad (the study's defaults).
    """
    suf = spec.get("suf", {})
    return [
        {"method": "van", "enabled": spec.get("van", {}).get("enabled", True)},
        {"name": "suf", "method": "suf", "k": int(suf.get("k", 32)), "enabled": suf.get("enabled", True)}
        | {key: suf[key] for key in ("cudagraph_mode", "gpu_memory_utilization") if key in suf},
        *({"method": "kpad", "k": int(k)} for k in spec.get("kpad", {}).get("k", [4, 6, 8, 12])),
        *({"method": "nopad", "k": int(k)} for k in spec.get("nopad", {}).get("k", [])),
    ]


def _expand(entry: dict[str, Any], server: dict[str, Any], where: str) -> list[Configuration]:
    """One list-form entry -> its configurations (none when ``enabled`` is false); see :func:`configurations`."""
    if not entry.get("enabled", True):
        return []
    method = entry.get("method")
    if method not in METHODS:
        raise ValueError(f"{where}: method {method!r} is not one of {list(METHODS)}")
    options = dict(entry.get("speculative") or {})
    fixed = sorted({"method", "num_speculative_tokens"} & set(options))
    if fixed:
        raise ValueError(
            f"{where}: speculative sets {fixed}, which come from the entry's method and k; remove them there"
        )
    if "lengths" in entry and method != "kpadauto":
        raise ValueError(f"{where}: lengths are for method kpadauto only (this entry is {method}); remove them")
    env = entry_env(entry.get("env"), method, where)
    ks = entry.get("k")
    if method == "van":
        if ks not in (None, 0) or options:
            raise ValueError(f"{where}: method van takes no k and no speculative options")
        ks_list, several = [0], False
    else:
        if ks is None:
            raise ValueError(f"{where}: method {method} needs k (num_speculative_tokens), an integer or a list")
        several = isinstance(ks, list)
        ks_list = [int(k) for k in (ks if several else [ks])]
    out = []
    for k in ks_list:
        if "name" in entry:
            name = f"{entry['name']}{k}" if several else str(entry["name"])
        else:
            name = method if method == "van" or (method == "suf" and not several) else f"{method}{k}"
        if not NAME_PATTERN.match(name):
            raise ValueError(
                f"{where}: name {name!r} is not safe as a path part: use letters, digits, _ . + - (at most 64)"
            )
        lengths: tuple[int, ...] = ()
        if method == "kpadauto":
            lengths = auto_lengths(entry.get("lengths"), k, where)
            check_auto_env(server.get("env") or {}, env, lengths, f"{where} ({name})")
        out.append(
            Configuration(
                name=name,
                method=method,
                k=k,
                pad=method in PADDED_METHODS,
                cudagraph_mode=entry.get("cudagraph_mode", server["cudagraph_mode"]),
                gpu_memory_utilization=entry.get("gpu_memory_utilization", server["gpu_memory_utilization"]),
                speculative_options=options,
                server_args=dict(entry.get("server_args") or {}),
                capture_sizing=bool(entry.get("capture_sizing", server.get("capture_sizing", True))),
                lengths=lengths,
                env=env,
                control=bool(entry.get("control", False)),
            )
        )
    return out


def controls(config: dict[str, Any]) -> list[str]:
    """Names of the configurations of ``config`` marked ``control: true``, switched off ones (``enabled: false``)
    included, so cached runs of a control stay one: enabled ones first, in run order. The advice and the
    confirmation's choice of K leave them out. Raises as :func:`configurations`."""
    return [c.name for c in [*configurations(config), *disabled_configurations(config)] if c.control]


def entry_env(env: dict[str, Any] | None, method: str, where: str) -> dict[str, str]:
    """A configuration entry's ``env`` as strings (booleans as ``1`` / ``0``, which vLLM's flags and ours read).

    Raises:
        ValueError: a variable of :data:`RESERVED_ENV`; a ``KPAD_AUTO_*`` setting on a method other than
            ``kpadauto`` (it would do nothing); the message names the entry. Their values are checked with
            ``server.env`` by :func:`check_auto_env`.
    """
    out = {str(k): str(int(v)) if isinstance(v, bool) else str(v) for k, v in (env or {}).items()}
    reserved = sorted(set(out) & set(RESERVED_ENV))
    if reserved:
        raise ValueError(
            f"{where}: env sets {reserved}, which the pipeline sets itself for every run (method, lengths, "
            "ports, GPUs, plugin path); remove them from the entry"
        )
    knobs = sorted(k for k in out if k.startswith("KPAD_AUTO_"))
    if knobs and method != "kpadauto":
        raise ValueError(f"{where}: env sets {knobs}, which only method kpadauto reads (this entry is {method})")
    return out


def configured_env(server_env: dict[str, Any] | None, entry_env: dict[str, Any] | None) -> dict[str, str]:
    """Config ``server.env`` with a configuration's ``env`` on top, as strings: what a server gets from the config
    before the pipeline's own variables (:func:`server_env`)."""
    return {str(k): str(v) for k, v in {**(server_env or {}), **(entry_env or {})}.items()}


def check_auto_env(server_env: dict[str, Any], entry_env: dict[str, str], lengths: tuple[int, ...], where: str) -> None:
    """Check the ``KPAD_AUTO_*`` settings of a kpadauto server's environment before any run (the server would
    refuse them only after loading the model). Values are read as the plugin reads them (``auto.env_int``: spaces
    stripped, an empty value is the default).

    Args:
        server_env: config ``server.env``.
        entry_env: the entry's ``env`` as strings (:func:`entry_env`), on top of ``server_env`` (as the server gets
            them, :func:`server_env`).
        lengths: the configuration's kpadauto lengths (``KPAD_AUTO_STEP_COSTS`` must give a cost for each).
        where: the configuration, put in front of the message.

    Raises:
        ValueError: ``KPAD_AUTO_SKIP_SPECULATION``, ``KPAD_AUTO_CHECK_DEFERRED`` or ``KPAD_AUTO_UNPADDED`` other than
            0 / 1, the check on with the skip off, ``KPAD_AUTO_EXPLORE_EVERY`` not an integer >= 0,
            ``KPAD_AUTO_COST_REPEATS`` not an integer >= 1, a ``KPAD_AUTO_STEP_COSTS`` that
            ``kpad_plugin.auto.parse_step_costs`` refuses; the message names the configuration, whether the value
            came from its ``env`` or from ``server.env``, and the fix.
    """
    env = configured_env(server_env, entry_env)

    def source(name: str) -> str:
        return f"{where}: {'env' if name in entry_env else 'config server.env'}"

    for name, what in (
        (auto.ENV_SKIP, "1 (skip, the default) or 0"),
        (auto.ENV_CHECK_DEFERRED, "1 (check) or 0 (the default)"),
        (auto.ENV_UNPADDED, "1 (a step may run unpadded) or 0 (the default)"),
    ):
        if env.get(name, "").strip() not in ("", "0", "1"):
            raise ValueError(f"{source(name)} {name}={env[name]!r}: give {what}")
    for name, default, minimum in (
        (auto.ENV_EXPLORE, auto.DEFAULT_EXPLORE_EVERY, 0),
        (auto.ENV_COST_REPEATS, auto.DEFAULT_COST_REPEATS, 1),
    ):
        try:
            auto.env_int(env, name, default, minimum)
        except ValueError as err:
            raise ValueError(f"{source(name)} {err}") from None
    skip = auto.env_int(env, auto.ENV_SKIP, auto.DEFAULT_SKIP, 0)
    if auto.env_int(env, auto.ENV_CHECK_DEFERRED, 0, 0) and not skip:
        raise ValueError(f"{source(auto.ENV_CHECK_DEFERRED)} {auto.CHECK_WITHOUT_SKIP}")
    if env.get(auto.ENV_STEP_COSTS, "").strip():
        try:
            auto.parse_step_costs(env[auto.ENV_STEP_COSTS], lengths)
        except ValueError as err:
            raise ValueError(f"{source(auto.ENV_STEP_COSTS)} {err}") from None


def auto_lengths(lengths: list[int] | None, k: int, where: str) -> tuple[int, ...]:
    """A ``kpadauto`` entry's draft lengths: ``lengths`` as given, or :data:`AUTO_LENGTHS` below ``k`` and ``k``.

    Example: ``auto_lengths(None, 12, "")`` -> ``(0, 2, 4, 8, 12)``.

    Raises:
        ValueError: fewer than two lengths, a negative one, or a largest length other than ``k`` (the
            longest draft suffix decoding proposes); the message names the entry.
    """
    out = tuple(sorted({int(n) for n in lengths})) if lengths else tuple(n for n in AUTO_LENGTHS if n < k) + (k,)
    if len(out) < 2 or out[0] < 0 or out[-1] != k:
        raise ValueError(
            f"{where}: kpadauto lengths {list(out)} must hold at least two lengths >= 0, the largest equal to k ({k}): "
            f"end them with {k}, or leave lengths out for {list(tuple(n for n in AUTO_LENGTHS if n < k) + (k,))}"
        )
    return out


def run_order(configs: list[Configuration], repeats: int, seed: int | None = None) -> list[tuple[str, int]]:
    """The interleaved order of one cell's runs: every configuration of repeat 1, then repeat 2, ...

    A repeat is one block of a randomized complete block design: slow drift of the machine hits every
    configuration of a repeat alike, and within-repeat ratios (:mod:`kpadstudy.paired`) cancel it. Inside a
    repeat the order is shuffled with ``random.Random(f"{seed}/{repeat}")`` (config ``order_seed``), so no
    configuration always runs first (after a boot, at a cooler GPU); ``seed`` None keeps the config's order.

    Returns:
        ``[(configuration name, repeat), ...]`` with repeats numbered from 1; length ``len(configs) * repeats``.
    """
    out: list[tuple[str, int]] = []
    for repeat in range(1, repeats + 1):
        names = [c.name for c in configs]
        if seed is not None:
            random.Random(f"{seed}/{repeat}").shuffle(names)
        out += [(name, repeat) for name in names]
    return out


def position(config: dict[str, Any], configuration_name: str, repeat: int) -> int | None:
    """1-based place of a run within its repeat in :func:`run_order` of ``config`` (None if it is not there)."""
    order = run_order(configurations(config), max(int(config.get("repeats", 1)), repeat), config.get("order_seed"))
    order = [n for n, r in order if r == repeat]
    return order.index(configuration_name) + 1 if configuration_name in order else None


def option_args(options: dict[str, Any]) -> list[str]:
    """``vllm serve`` arguments of ``{option: value}``: ``kv_cache_dtype: fp8`` -> ``--kv-cache-dtype fp8``.

    ``True`` gives the bare flag, ``False`` and ``None`` leave the option out; a dict or list value is
    passed as JSON (vLLM parses JSON options).
    """
    out: list[str] = []
    for key, value in options.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not False and value is not None:
            out += [flag, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    return out


def request_counts(max_reqs: int) -> list[int]:
    """vLLM's grid of batch sizes up to ``max_reqs`` requests: 1, 2, 4, 8, 16, ..., 248 (step 8), 256, 272, ...
    (step 16), and ``max_reqs`` itself (vLLM 0.32 ``VllmConfig``'s ``request_counts``; 0.26's default capture list
    is the same grid in tokens)."""
    counts = [n for n in (1, 2, 4) if n <= max_reqs]
    counts += list(range(8, min(max_reqs + 1, 256), 8)) + list(range(256, max_reqs + 1, 16))
    return sorted(set(counts + [max_reqs]))


#: the ceiling of vLLM's own capture list, in tokens: min(2 x max_num_seqs x (1 + K), this) on every GPU in vLLM 0.26;
#: 0.32 raises it to 1024 on data-center Blackwell (compute capability 10.x; config ``server.capture_ceiling``)
DEFAULT_CAPTURE_CEILING = 512


def capture_sizes(
    max_reqs: int, k: int, max_tokens: int | None = None, ceiling: int = DEFAULT_CAPTURE_CEILING
) -> list[int]:
    """CUDA graph capture sizes (tokens) for a padded configuration whose decode steps carry ``1 + k`` tokens
    per request, with at most ``max_reqs`` requests per step.

    The union of vLLM's token grid (for mixed, PIECEWISE steps) and the uniform decode sizes ``n * (1 + k)`` for
    ``n`` in :func:`request_counts` (``max_reqs``), so the widest uniform step (every request of the concurrency
    decoding at once) has a FULL graph. The grid reaches that step, and at least as far as vLLM's own default list
    reaches for the same settings (``min(2 x max_reqs x (1 + k), ceiling)``, capped at ``max_tokens``, the server's
    ``max_num_batched_tokens`` when given), so a step with a prefill in it keeps the PIECEWISE graph it would have
    had unpadded. Without the uniform sizes vLLM caps the list at 512 tokens (0.32: 1024 on Blackwell): at
    concurrency 32, K = 16 (544 tokens) ran FULL on 244 and eager on 627 of the decode steps on an H200 (vLLM 0.26),
    2.2x slower than K = 12. With the grid stopping at the widest uniform step (this pipeline until 2026-12-07),
    kpad8 at concurrency 32 (288 tokens) ran 19-21% of its engine steps eager, nopad8 4% (H100 crossover leases).
    vLLM 0.26 (model runner V1) rounds each size up to a multiple of 1 + K, keeping those up to the largest; 0.32 uses
    an explicit list as given. Example: ``capture_sizes(2, 4)`` -> ``[1, 2, 4, 5, 8, 10, 16, 20]``.
    """
    q = 1 + k
    top = max_reqs * q
    grid = max(top, min(2 * top, ceiling, max_tokens or ceiling))
    return sorted(set(request_counts(grid)) | {n * q for n in request_counts(max_reqs)})


def largest_capture(sizes: Any) -> float:
    """The largest batch of a run record's ``cudagraph_capture_sizes`` (comma-separated tokens, as vLLM's config
    line gave them), NaN where the record has none."""
    return float(max(map(int, sizes.split(",")))) if isinstance(sizes, str) and sizes else float("nan")


def capture_max_reqs(load: dict[str, Any], server: dict[str, Any], server_args: dict[str, Any] | None = None) -> int:
    """Requests in the widest decode step: ``load.max_concurrency``, or the server's ``max_num_seqs`` when smaller
    (the configuration's ``server_args`` first, then config ``server.max_num_seqs``)."""
    seqs = (server_args or {}).get("max_num_seqs") or server.get("max_num_seqs") or load["max_concurrency"]
    return min(int(load["max_concurrency"]), int(seqs))


def check_capture(config: dict[str, Any]) -> None:
    """Refuse padded configurations whose widest decode step cannot get a FULL cudagraph (called at planning).

    With ``server.capture_sizing`` on, the server is given capture sizes that hold ``C x (1 + K)``
    (:func:`capture_sizes`); vLLM then also needs ``max_num_batched_tokens`` (a configuration's ``server_args``)
    to hold that step.

    Raises:
        ValueError: with the numbers, naming the configuration.
    """
    for c in configurations(config):
        if not (c.pad and c.capture_sizing):
            continue
        where = f"configuration {c.name!r}"
        try:
            reqs = capture_max_reqs(config["load"], config["server"], c.server_args)
            budget = c.server_args.get("max_num_batched_tokens")
            budget = None if budget is None else int(budget)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{where}: server_args max_num_seqs / max_num_batched_tokens must be integers ({err})"
            ) from None
        tokens = reqs * (1 + c.k)
        if budget is not None and budget < tokens:
            raise ValueError(
                f"configuration {c.name!r}: a uniform decode step at concurrency {reqs} has {reqs} x (1 + {c.k}) = "
                f"{tokens} tokens, above its max_num_batched_tokens {budget}: it could never run as one FULL "
                "cudagraph; raise max_num_batched_tokens, or lower K or load.max_concurrency"
            )


def server_command(
    *,
    model_path: str,
    served_model_name: str,
    port: int,
    configuration: Configuration,
    server: dict[str, Any],
    tensor_parallel_size: int,
    device: str,
    cpus: str | None,
    max_concurrency: int | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The ``vllm serve`` command line of one run (OpenAI API server module, pinned with ``taskset``).

    A padded (kpad) configuration on a GPU with ``capture_sizing`` on gets ``--max-num-seqs`` =
    ``max_concurrency`` (unless ``server.max_num_seqs`` or the configuration's ``server_args`` set it: then that one
    value, written once) and the capture list of :func:`capture_sizes`
    in its compilation config, so its widest uniform decode step has a FULL cudagraph.

    ``python -m vllm.entrypoints.openai.api_server`` is what ``vllm serve`` runs; it is used because the
    ``vllm`` console script of vllm-cpu 0.32.0 fails looking up a distribution named ``vllm``.
    On ``device == "cpu"`` vLLM runs eager (no cudagraphs exist there), cudagraph settings are left out and
    the dtype is ``server.cpu.dtype`` (float32 by default: see the schema).
    """
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_path,
        "--served-model-name",
        served_model_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(server["max_model_len"]),
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--seed",
        str(server.get("seed", 0)),
        "--dtype",
        (server.get("cpu") or {}).get("dtype", "float32") if device == "cpu" else server.get("dtype", "auto"),
    ]
    sizing = configuration.pad and configuration.capture_sizing and device != "cpu" and max_concurrency is not None
    compilation: dict[str, Any] = {"cudagraph_mode": configuration.cudagraph_mode}
    if sizing:
        reqs = capture_max_reqs({"max_concurrency": max_concurrency}, server, configuration.server_args)
        budget = configuration.server_args.get("max_num_batched_tokens")
        ceiling = int(server.get("capture_ceiling", DEFAULT_CAPTURE_CEILING))
        sizes = capture_sizes(reqs, configuration.k, None if budget is None else int(budget), ceiling)
        compilation.update(cudagraph_capture_sizes=sizes, max_cudagraph_capture_size=sizes[-1])
    own = configuration.server_args.get("max_num_seqs") not in (None, False)  # option_args writes it, the only one
    if (server.get("max_num_seqs") or sizing) and not own:
        cmd += ["--max-num-seqs", str((server.get("max_num_seqs") or reqs) if sizing else server["max_num_seqs"])]
    if device == "cpu":
        cmd += ["--enforce-eager"]
    else:
        cmd += [
            "--gpu-memory-utilization",
            str(configuration.gpu_memory_utilization),
            "--compilation-config",
            json.dumps(compilation),
        ]
    if configuration.speculative:
        speculative = {"method": VLLM_METHOD[configuration.method], "num_speculative_tokens": configuration.k}
        cmd += ["--speculative-config", json.dumps({**speculative, **configuration.speculative_options})]
    cmd += option_args(configuration.server_args)
    cmd += [str(a) for a in server.get("extra_args", [])]
    return cmd


def server_env(
    base_env: dict[str, str],
    *,
    configuration: Configuration,
    server: dict[str, Any],
    device: str,
    plugin_path: str,
    vllm_port: int,
    cuda_visible_devices: list[str] | None = None,
    scratch_dir: str | None = None,
) -> dict[str, str]:
    """Environment of the server process.

    ``base_env`` (the job's environment) passes through whole: the node's ``NCCL_*``, ``HF_*``,
    ``CUDA_*`` variables reach the server; config ``server.env`` comes on top, then the configuration's ``env``.
    ``cuda_visible_devices``
    (the GPUs :mod:`kpadstudy.gpus` gave the run) sets ``CUDA_VISIBLE_DEVICES``; None leaves it as it is.

    ``VLLM_PLUGINS`` names only our plugin (an empty value would load no plugin at all, and an unset one
    would also load arctic-inference's); ``VLLM_SUFFIX_PAD_UNIFORM`` is ``1`` only for ``kpad`` and ``kpadauto``,
    ``KPAD_AUTO_LENGTHS`` (``0,2,4,8,12``) is set only for ``kpadauto``.
    ``plugin_path`` (the folder holding ``kpad_plugin`` and its dist-info) goes first on ``PYTHONPATH``.

    ``scratch_dir`` (the run's own temporary folder, removed after it) receives vLLM's ZMQ IPC sockets
    (``VLLM_RPC_BASE_PATH``; vLLM never removes them from /tmp when its server is stopped: about 3 per
    boot) and, on CPU, every other temporary file (``TMPDIR``: vLLM's ``vllm_dist_*`` rendezvous files).
    On a GPU ``TMPDIR`` stays, so torch's compile caches under it are shared between runs.
    """
    env = dict(base_env)
    env.update(configured_env(server.get("env"), configuration.env))
    env["ARCTIC_INFERENCE_ENABLED"] = "0"  # arctic-inference's own vLLM patches stay off; its suffix tree is used
    env["VLLM_PLUGINS"] = PLUGIN_NAME
    env["VLLM_SUFFIX_PAD_UNIFORM"] = "1" if configuration.pad else "0"
    env.pop("KPAD_AUTO_LENGTHS", None)
    if configuration.lengths:
        env["KPAD_AUTO_LENGTHS"] = ",".join(str(n) for n in configuration.lengths)
    env["VLLM_PORT"] = str(vllm_port)
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(cuda_visible_devices)
    env["PYTHONPATH"] = plugin_path + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if scratch_dir is not None:
        env["VLLM_RPC_BASE_PATH"] = scratch_dir
        if device == "cpu":
            env["TMPDIR"] = scratch_dir
    if device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(server["cpu"]["kvcache_space_gib"])
    return env


#: inherited variables that :func:`recorded_env` keeps: vLLM's own settings and those our plugin reads (not the
#: launch scripts' KPAD_CONFIG, KPAD_WORKFLOW_COMMIT, KPAD_SLURM_*, ..., which differ between leases)
RECORDED_ENV_PREFIXES = ("VLLM_", "KPAD_AUTO_", "KPAD_ALLOW_UNSUPPORTED_VLLM")
#: inherited ``VLLM_*`` variables that name a host, port or path (they may differ per node or job, e.g.
#: VLLM_HOST_IP, VLLM_DP_MASTER_PORT, VLLM_CACHE_ROOT, VLLM_ASSETS_CACHE), by a word of their name: not recorded
#: unless configured
PLACE_ENV = re.compile(r"(^|_)(HOST|IP|PORT|PATH|ROOT|DIR|ADDR|URL|URI)(_|$)|^VLLM_ASSETS_CACHE$")
#: variables whose value is a credential (VLLM_API_KEY, a token), by a word of their name: recorded as ``"<set>"``
SECRET_ENV = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)(_|$)")


def recorded_env(env: dict[str, str], configured: dict[str, str]) -> str:
    """The server environment a run record keeps (column ``server_env``): JSON text with sorted keys.

    Kept, with the values of ``env`` (the environment the pipeline starts the server with, :func:`server_env`;
    vLLM may still set variables of its own, e.g. ``VLLM_WORKER_MULTIPROC_METHOD=spawn`` when unset): every
    variable of ``configured`` (config ``server.env`` with the entry's ``env`` on top, :func:`configured_env`), those
    the pipeline sets (:data:`RESERVED_ENV`: ``VLLM_PLUGINS``, ``VLLM_SUFFIX_PAD_UNIFORM``, ...) and the inherited
    ones of :data:`RECORDED_ENV_PREFIXES` (``VLLM_*``: vLLM reads its settings from them, e.g.
    ``VLLM_USE_FLASHINFER_SAMPLER``; ``KPAD_AUTO_*``: the plugin's) but those naming a host, port or path
    (:data:`PLACE_ENV`). Left out: :data:`PER_RUN_ENV`, which differ between runs of one setting. A credential
    (:data:`SECRET_ENV`, e.g. ``VLLM_API_KEY``) is kept as ``"<set>"``. Other inherited variables (``NCCL_*``,
    ``OMP_*``, ``PYTORCH_*``, ``HF_*``) are not recorded unless configured.
    """

    def kept(name: str) -> bool:
        if name in PER_RUN_ENV:
            return False
        if name in configured or name in RESERVED_ENV:
            return True
        return name.startswith(RECORDED_ENV_PREFIXES) and not PLACE_ENV.search(name)

    keep = {k: ("<set>" if SECRET_ENV.search(k) else v) for k, v in env.items() if kept(k)}
    return json.dumps(keep, sort_keys=True)


def bench_command(
    *,
    base_url: str,
    served_model_name: str,
    tokenizer: str,
    dataset_path: str,
    num_prompts: int,
    load: dict[str, Any],
    seed: int,
    result_dir: str | None,
    result_filename: str | None,
    cpus: str | None,
    python: str = sys.executable,
) -> list[str]:
    """The ``vllm bench serve`` command line for one prompt file (chat endpoint, streaming, no oversampling).

    Prompts are sent in file order (``--disable-shuffle``), each once (``--no-oversample``), as chat user
    messages (``--skip-chat-template``: the server applies the template). ``--ready-check-timeout-sec 0``
    (vLLM's default in 0.26 and 0.32, pinned here): no readiness probe, which would send the first
    measured prompt an extra time; the run waits for ``/health`` instead. ``max_tokens`` is
    ``load.max_tokens``; generation stops earlier at EOS.
    """
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [
        python,
        "-m",
        "kpadstudy.vllm_bench",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        base_url,
        "--model",
        served_model_name,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "custom",
        "--dataset-path",
        dataset_path,
        "--num-prompts",
        str(num_prompts),
        "--no-oversample",
        "--disable-shuffle",
        "--skip-chat-template",
        "--custom-output-len",
        str(load["max_tokens"]),
        "--max-concurrency",
        str(load["max_concurrency"]),
        "--temperature",
        str(load["temperature"]),
        "--seed",
        str(seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
    ]
    if result_dir:
        cmd += ["--save-result", "--result-dir", result_dir, "--result-filename", result_filename]
    return cmd


def warmup_args(dataset_path: str, num_prompts: int) -> list[str]:
    """Options of ``kpadstudy.vllm_bench`` that send ``num_prompts`` warm-up prompts from ``dataset_path``
    (a file disjoint from the measured one) before the measured prompts, unsaved."""
    return ["--warmup-dataset-path", dataset_path, "--warmup-num-prompts", str(num_prompts)]


def describe(configuration: Configuration) -> dict[str, Any]:
    """The configuration as a flat dict of table columns (``configuration`` = its name).

    ``speculative_options``, ``server_args`` and ``env`` become JSON text (``"{}"`` when empty) and ``lengths`` the text
    ``"0,2,4,8,12"`` (``""`` for every method but kpadauto), so every configuration has the same columns in Parquet.
    """
    d = asdict(configuration)
    d["configuration"] = d.pop("name")
    d["lengths"] = ",".join(str(n) for n in configuration.lengths)
    for key in ("speculative_options", "server_args", "env"):
        d[key] = json.dumps(d[key], sort_keys=True)
    return d


def workflow_commit(basedir: str, environ: dict[str, str] | None = None) -> str | None:
    """The workflow's commit for the run records.

    ``$KPAD_WORKFLOW_COMMIT`` when set (a copy of the tree whose git metadata may be stale, e.g. on a lent
    machine), else ``git rev-parse HEAD`` in ``basedir`` with ``-dirty`` when tracked files have changes,
    else None (no git, or not a repository).
    """
    environ = os.environ if environ is None else environ
    if environ.get("KPAD_WORKFLOW_COMMIT"):
        return environ["KPAD_WORKFLOW_COMMIT"]
    try:
        sha = subprocess.run(
            ["git", "-C", basedir, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", basedir, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def missing_records(table: str, records: list[str]) -> list[str]:
    """Lines saying which of the expected ``records`` are missing though ``table`` (made from them) exists; none
    when nothing is missing or there is no table yet."""
    missing = [r for r in records if not os.path.exists(r)]
    if not missing or not os.path.exists(table):
        return []
    return [
        f"{len(missing)} run record(s) missing though {table} exists: `snakemake` (the default target) reruns them "
        "and then remakes the tables; an explicit target such as the table itself does not",
        *(f"  {r}" for r in missing),
    ]
