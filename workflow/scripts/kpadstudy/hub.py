"""What a failed Hugging Face Hub download says: the repository, the revision, what is missing and the fix."""

from __future__ import annotations

import os
from pathlib import Path


def token_state() -> str:
    """Whether ``HF_TOKEN`` is set, in the words of a refused download."""
    return "HF_TOKEN is set but that account has no access" if os.environ.get("HF_TOKEN") else "HF_TOKEN is not set"


def cached_snapshots(repo: str, repo_type: str) -> list[str]:
    """Commits of ``repo`` with a snapshot folder in the Hub cache (``HF_HUB_CACHE``), however complete."""
    from huggingface_hub import constants

    prefix = {"model": "models", "dataset": "datasets"}[repo_type]
    snapshots = Path(constants.HF_HUB_CACHE) / f"{prefix}--{repo.replace('/', '--')}" / "snapshots"
    return sorted(p.name for p in snapshots.iterdir()) if snapshots.is_dir() else []


def offline_failure(repo: str, repo_type: str, revision: str | None, err: Exception) -> str:
    """The Hub could not be reached (or ``HF_HUB_OFFLINE``) and the cache cannot serve the download: says whether the
    repository is not cached at all or its cached snapshot is incomplete, with huggingface-hub's own words (which
    name the missing file), and the fixes."""
    cached = cached_snapshots(repo, repo_type)
    state = (
        f"its cached snapshot is incomplete (commits {', '.join(c[:12] for c in cached)})"
        if cached
        else "it is not in the cache"
    )
    return (
        f"{repo_type} {repo} (revision {revision or 'main'}) cannot be downloaded: the Hugging Face Hub cannot be "
        f"reached (HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')!r}) and {state}: {err}. Fix: go online once "
        "(with HF_TOKEN set and the terms accepted on the Hub if it is gated), or point the config at a local copy"
    )


def access_failure(repo: str, repo_type: str, revision: str | None, err: Exception) -> str:
    """A gated, private, missing repository or revision, or a missing file: names them and the fix."""
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, RevisionNotFoundError

    page = f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo}"
    token = token_state()
    if isinstance(err, GatedRepoError):
        why = f"it is gated ({token}): accept its terms at {page} and put a read token of that account in HF_TOKEN"
    elif isinstance(err, RevisionNotFoundError):
        why = "it has no such revision: fix the revision in the config"
    elif isinstance(err, EntryNotFoundError):
        why = f"a file is missing from it ({err}): fix the file names in the config"
    else:
        why = f"it was not found at {page}, or it is private and {token}: fix the repository in the config"
    return f"{repo_type} {repo} (revision {revision or 'main'}) cannot be downloaded: {why}"
