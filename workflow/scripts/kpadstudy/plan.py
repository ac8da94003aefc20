"""What a study will cost before it starts: disk for the models, GPUs per run, server boots, wall time.

``snakemake plan`` (rule plan) writes :func:`to_markdown` of :func:`plan` to ``results/plan.md`` and
prints it. Every assumption is printed with the numbers it produced.

Wall time (the estimate, not a promise):
    one run             = ``plan.boot_s`` + (warm-up + measured prompts) / ``plan.requests_per_s``   [s]
    GPU-seconds         = sum over runs of (one run x GPUs of its model)
    wall time           = sum over models of (its runs x one run / its lanes)
    lanes               = runs of a model side by side, by the rule the workflow packs them with (:func:`lanes`):
                          ``plan.gpus`` / its GPUs per run with ``taskset: auto`` (the shipped default) or no
                          pinning, at most the slots with ``taskset.slots``, 1 with one server / client pair
On CPU (``device: cpu``) runs go one after another: wall time = sum of the runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from . import cpus, runs


def hub_size_gb(repo: str, revision: str | None = None, timeout_s: float = 10.0) -> float | None:
    """Size of a Hub model's weight files (``*.safetensors``, else ``*.bin``) in GB (10^9 bytes); None when
    the Hub cannot be reached (offline, ``HF_HUB_OFFLINE=1``, gated without token) or lists no weights."""
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(repo, revision=revision, files_metadata=True, timeout=timeout_s)
    except Exception:  # noqa: BLE001 - any failure means: not known from the Hub
        return None
    files = info.siblings or []
    for ext in (".safetensors", ".bin"):
        sizes = [f.size for f in files if f.rfilename.endswith(ext) and f.size]
        if sizes:
            return sum(sizes) / 1e9
    return None


def dir_size_gb(path: str) -> float | None:
    """Bytes under ``path`` in GB (10^9); None when it does not exist."""
    p = Path(path)
    if not p.exists():
        return None
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e9


def model_size(
    name: str, spec: dict[str, Any], hub: Callable[[str, str | None], float | None] = hub_size_gb
) -> tuple[float | None, str]:
    """``(GB, where from)``: config ``size_gb``, else the Hub (source hf), the directory (source local), else
    unknown."""
    if spec.get("size_gb") is not None:
        return float(spec["size_gb"]), "config size_gb"
    if spec["source"] == "hf":
        gb = hub(spec["repo"], spec.get("revision"))
        return (gb, "Hub metadata") if gb is not None else (None, "unknown (Hub not reachable, no size_gb)")
    if spec["source"] == "local":
        gb = dir_size_gb(spec["path"])
        return (gb, "local directory") if gb is not None else (None, "unknown (path missing)")
    if spec["source"] == "widen":
        return widen_size_gb(spec)
    return None, "unknown (converted from a packaged GGUF)"


def widen_size_gb(spec: dict[str, Any], models_dir: str = "results/models") -> tuple[float | None, str]:
    """A widening's size from its shape: the base's vocabulary and head size from its ``config.json`` when it is
    built, else SmolLM2-135M's (vocabulary 49,152, heads of 64), the base the named shapes are made for."""
    from .widen import SMOLLM2_135M, Shape, target_shape

    cfg_path = Path(models_dir) / spec["base"] / "config.json"
    if cfg_path.is_file():
        base, where = Shape.of_config(json.loads(cfg_path.read_text())), "widened shape"
    else:
        base, where = SMOLLM2_135M, "widened shape (a base like SmolLM2-135M)"
    try:
        wide = target_shape(base, spec["shape"])
    except ValueError as err:
        return None, f"unknown ({err})"
    return wide.parameters() * (4 if spec.get("dtype") == "float32" else 2) / 1e9, where


def confirm_configurations(config: dict[str, Any]) -> int:
    """How many configurations the confirmation reruns per cell (each ``confirm.repeats`` times): those outside
    the K sweeps (van, suf, ngram, kpadauto, Trident-like entries), the best K, the second-best K (with two or
    more kpad Ks), nopad at the best K (where nopad is swept at a kpad K: an upper bound, the best K may have no
    nopad twin) and the best nopad K (where it can be another nopad configuration than that twin: an upper bound
    too); 0 without a confirmation or without a kpad entry."""
    configs = runs.configurations(config)
    confirm = config.get("confirm") or {"enabled": False}
    if not (confirm["enabled"] and any(c.method == "kpad" for c in configs)):
        return 0
    kpad_ks = {c.k for c in configs if c.method == "kpad"}
    nopads = [c for c in configs if c.method == "nopad"]
    at_best = any(c.k in kpad_ks for c in nopads)
    return (
        sum(c.method not in ("kpad", "nopad") for c in configs)
        + 1
        + (len(kpad_ks) > 1)
        + at_best
        + (len(nopads) > 1 or (len(nopads) == 1 and not at_best))  # the best nopad can be another than the twin
    )


def lanes(config: dict[str, Any], gpus_per_run: int) -> tuple[int, str]:
    """How many runs of a model go side by side, by the rule the workflow packs them with, and why.

    ``taskset: auto`` or no pinning: as many as the node's GPUs (config ``plan.gpus``) hold at ``gpus_per_run``
    each; ``taskset.slots``: no more than the slots; one server / client pair, or the CPU: one at a time.
    """
    gpus = int(config["plan"]["gpus"])
    pin = config.get("taskset") or {}
    if config.get("device") == "cpu" or gpus_per_run == 0:
        return 1, "device cpu: runs one after another"
    by_gpu = max(1, gpus // gpus_per_run)
    if cpus.is_auto(pin):  # also the short form `taskset: auto` of a config not yet resolved by the Snakefile
        return by_gpu, f"taskset auto: {gpus} GPUs (config plan.gpus) / {gpus_per_run} per run, NUMA-local CPUs each"
    if not isinstance(pin, dict):
        raise ValueError(f"config taskset is {pin!r}: give auto, or server / client lists, or slots")
    if pin.get("slots"):
        n = min(len(pin["slots"]), by_gpu)
        return n, f"taskset.slots: {n} runs at once ({len(pin['slots'])} slots, {gpus} GPUs / {gpus_per_run} per run)"
    if pin.get("server") or pin.get("client"):
        return 1, "taskset: one server / client pair, so one run at a time"
    return by_gpu, f"no pinning: {gpus} GPUs (config plan.gpus) / {gpus_per_run} per run, CPUs shared"


def plan(
    config: dict[str, Any], measured_corpora: list[str], hub: Callable[[str, str | None], float | None] = hub_size_gb
) -> dict[str, Any]:
    """The plan of a resolved config.

    Args:
        measured_corpora: the corpora whose cells are run (the workflow's ``MEASURED_CORPORA``).
        hub: looks a Hub repo's size up (GB or None); tests pass one that has no network.

    Returns:
        ``{"models": [{name, tensor_parallel_size, gpus_per_run, size_gb, size_from, runs, run_s}], "runs",
        "confirm_runs", "boots", "disk_gb" (None if any size is unknown), "disk_known_gb", "gpu_s",
        "wall_s", "assumptions": [str, ...], "off": [{name, runs, confirm_runs, gpu_s}]}``. ``confirm_runs`` counts
        the confirmation's configurations outside the K sweeps, the best and second-best K, nopad at the best K
        where nopad is swept at a kpad K and the best nopad K (upper bounds, :func:`confirm_configurations`) per cell;
        ``boots`` = runs + confirm_runs (one server each; equivalence checks are not boots); ``off`` lists what
        each configuration switched off in the config (``enabled: false``) would add; ``notes``: one line per
        suffix-decoding configuration whose K is above the longest draft it can propose
        (:func:`kpadstudy.runs.draft_limit_note`).
    """
    device = config.get("device", "auto")
    p = config["plan"]
    configs = runs.configurations(config)
    n_cfg, repeats = len(configs), int(config["repeats"])
    n_prompts = int(config["prompts"]["measured"]) + int(config["prompts"]["warmup"])
    run_s = float(p["boot_s"]) + n_prompts / float(p["requests_per_s"])
    confirm = config.get("confirm") or {"enabled": False}
    sweeps_k = confirm["enabled"] and any(c.method == "kpad" for c in configs)
    n_confirm_cfg = confirm_configurations(config)
    models, gpu_s, wall_s, packing = [], 0.0, 0.0, set()
    for name, spec in config["models"].items():
        tp = int(spec.get("tensor_parallel_size", 1))
        gpus = 0 if device == "cpu" else tp
        size, where = model_size(name, spec, hub)
        n_runs = len(measured_corpora) * n_cfg * repeats * spec.get("measure", True)
        n_conf = len(measured_corpora) * n_confirm_cfg * int(confirm.get("repeats", 0)) if n_confirm_cfg else 0
        n_conf *= spec.get("measure", True)
        models.append(
            {
                "name": name,
                "tensor_parallel_size": tp,
                "gpus_per_run": gpus,
                "size_gb": size,
                "size_from": where,
                "runs": n_runs,
                "confirm_runs": n_conf,
            }
        )
        gpu_s += (n_runs + n_conf) * run_s * gpus
        n_lanes, why = lanes(config, gpus)
        wall_s += (n_runs + n_conf) * run_s / n_lanes
        packing.add(why)
    # what each configuration switched off (enabled: false) would add: its sweep runs, and its confirmation
    # runs when it is outside the K sweep (the confirmation reruns those)
    off = []
    for c in runs.disabled_configurations(config):
        per_model = len(measured_corpora) * repeats
        per_model_confirm = (
            len(measured_corpora) * int(confirm.get("repeats", 0))
            if sweeps_k and c.method not in ("kpad", "nopad")
            else 0
        )
        measured = [m for m in config["models"].values() if m.get("measure", True)]
        n_models = len(measured)
        gpus_all = sum(0 if device == "cpu" else int(m.get("tensor_parallel_size", 1)) for m in measured)
        off.append(
            {
                "name": c.name,
                "runs": per_model * n_models,
                "confirm_runs": per_model_confirm * n_models,
                "gpu_s": (per_model + per_model_confirm) * run_s * gpus_all,
            }
        )
    total_runs = sum(m["runs"] for m in models)
    confirm_runs = sum(m["confirm_runs"] for m in models)
    sizes = [m["size_gb"] for m in models]
    assumptions = [
        f"one run = boot {p['boot_s']:g} s + {n_prompts} prompts "
        f"({config['prompts']['warmup']} warm-up + {config['prompts']['measured']} measured) "
        f"/ {p['requests_per_s']:g} requests/s = {run_s:,.0f} s (config plan.boot_s, plan.requests_per_s)",
        *sorted(packing),
        "model downloads, corpus building and equivalence checks are not counted",
    ]
    return {
        "models": models,
        "runs": total_runs,
        "confirm_runs": confirm_runs,
        "boots": total_runs + confirm_runs,
        "disk_gb": None if any(s is None for s in sizes) else sum(sizes),
        "disk_known_gb": sum(s for s in sizes if s is not None),
        "gpu_s": gpu_s,
        "wall_s": wall_s,
        "run_s": run_s,
        "assumptions": assumptions,
        "off": off,
        "notes": [n for c in configs if (n := runs.draft_limit_note(c))],
    }


def to_markdown(pl: dict[str, Any]) -> str:
    """The plan as a markdown page (what ``snakemake plan`` prints)."""

    def gb(v):
        return "unknown" if v is None else f"{v:,.1f}"

    lines = [
        "# Plan",
        "",
        "| model | GPUs per run | runs | confirmation runs | disk (GB) | size from |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for m in pl["models"]:
        lines.append(
            f"| {m['name']} | {m['gpus_per_run']} | {m['runs']} | {m['confirm_runs']} | "
            f"{gb(m['size_gb'])} | {m['size_from']} |"
        )
    unknown = sum(m["size_gb"] is None for m in pl["models"])
    if pl["disk_gb"] is not None:
        disk = f"{pl['disk_gb']:,.1f} GB"
    else:
        disk = (
            f"unknown: {unknown} of {len(pl['models'])} model sizes unknown "
            "(set models.<name>.size_gb or reach the Hub); "
            f"the known ones take {pl['disk_known_gb']:,.1f} GB"
        )
    lines += [
        "",
        f"- server boots: {pl['boots']:,} ({pl['runs']:,} sweep runs + {pl['confirm_runs']:,} confirmation runs)",
        f"- disk for the models: {disk}",
        f"- GPU time: {pl['gpu_s'] / 3600:,.1f} GPU-hours",
        f"- wall time: about {pl['wall_s'] / 3600:,.1f} h",
        "",
        "Assumptions:",
    ]
    lines += [f"- {a}" for a in pl["assumptions"]]
    if pl.get("notes"):
        lines += ["", "Draft lengths:"]
        lines += [f"- {n}" for n in pl["notes"]]
    if pl.get("off"):
        lines += ["", "Switched off in this config (`enabled: false`); each would add:"]
        lines += [
            f"- {o['name']}: {o['runs']:,} runs + {o['confirm_runs']:,} confirmation runs, "
            f"{o['gpu_s'] / 3600:,.1f} GPU-hours"
            for o in pl["off"]
        ]
    return "\n".join(lines) + "\n"
