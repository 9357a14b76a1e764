"""Models from the Hugging Face cache on this machine: ``models--ORG--NAME/snapshots/REV/config.json``.

The cache's layout is huggingface_hub's (file_download.py, ``repo_folder_name``; constants.py for where it
lies, ``cache_dir`` below). ``refs/main`` holds the commit whose snapshot ``from_pretrained`` reads. A model
path that reads as a repository id (``Qwen/Qwen3-8B``) is looked up as that repository; any other path by its
last part, when exactly one cached repository has that name (the report names it). Only files are read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from shardcheck.inputs import files

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def cache_dir(environ=os.environ) -> Path | None:
    """The one hub cache huggingface_hub reads (constants.py: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else
    HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub); None without a HOME."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(name):
            return Path(environ[name]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    try:
        xdg = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path("~/.cache").expanduser()
    except RuntimeError:  # no HOME to expand
        return None
    return xdg / "huggingface" / "hub"


def repo_id(text: str) -> str | None:
    """``Org/Name`` when the model path reads as a Hub repository id (two parts, not a path on disk)."""
    return text if _REPO_ID.match(text) and not text.startswith((".", "~")) else None


@dataclass(frozen=True, slots=True)
class Found:
    config: Path | None  # the snapshot's config.json; None when the entry is unusable
    entry: Path  # models--ORG--NAME
    problem: str | None = None  # why the entry is unusable


def _snapshot(entry: Path) -> Found:
    ref = entry / "refs" / "main"
    snapshots = entry / "snapshots"
    if files.is_regular(ref):
        try:
            commit = ref.read_text(encoding="ascii", errors="replace").strip()
        except OSError as exc:
            return Found(None, entry, f"{ref} cannot be read ({exc.strerror})")
        if not _COMMIT.match(commit):
            return Found(None, entry, f"{ref} does not hold a commit hash")
        config = snapshots / commit / "config.json"
        if not files.is_regular(config):
            return Found(None, entry, f"refs/main names snapshot {commit[:12]}, which has no config.json")
        return Found(config, entry)
    held = sorted(p for p in snapshots.glob("*/config.json") if files.is_regular(p)) if snapshots.is_dir() else []
    if len(held) == 1:
        return Found(held[0], entry)
    why = "no snapshot holds a config.json" if not held else f"{len(held)} snapshots and no refs/main to choose one"
    return Found(None, entry, why)


def find(text: str, environ=os.environ) -> Found | None:
    """The cached config.json for the model ``text`` names: a repository id (``Qwen/Qwen3-8B``), or the last
    part of a path when exactly one cached repository has that name; None when the cache has none."""
    wanted = repo_id(text)
    name = text.rstrip("/").rsplit("/", 1)[-1]
    cache = cache_dir(environ)
    if cache is None or not files.is_directory(cache):
        return None
    if wanted is not None:
        entry = cache / ("models--" + wanted.replace("/", "--"))
        return _snapshot(entry) if files.is_directory(entry) else None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        return None
    entries = [p for p in cache.glob(f"models--*--{name}") if p.name.count("--") == 2 and files.is_directory(p)]
    return _snapshot(entries[0]) if len(entries) == 1 else None


def shown_id(entry: Path) -> str:
    return entry.name.removeprefix("models--").replace("--", "/", 1)
