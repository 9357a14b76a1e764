"""Models from the Hugging Face cache on this machine: ``models--ORG--NAME/snapshots/REV/config.json``.

The cache's layout is huggingface_hub's (file_download.py, ``repo_folder_name``; constants.py for where it
lies): ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``. ``refs/main`` holds the commit whose
snapshot ``from_pretrained`` reads. Nothing is downloaded; only files are read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from shardcheck.inputs import files

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def cache_dirs(environ=os.environ) -> list[Path]:
    """The hub caches to look in, the first one set by the environment first (as huggingface_hub chooses)."""
    out: list[Path] = []
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(name):
            out.append(Path(environ[name]).expanduser())
    if environ.get("HF_HOME"):
        out.append(Path(environ["HF_HOME"]).expanduser() / "hub")
    xdg = environ.get("XDG_CACHE_HOME")
    out.append((Path(xdg) if xdg else Path("~/.cache").expanduser()) / "huggingface" / "hub")
    seen: list[Path] = []
    for d in out:
        if d not in seen:
            seen.append(d)
    return seen


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
    for cache in cache_dirs(environ):
        if not files.is_directory(cache):
            continue
        if wanted is not None:
            entry = cache / ("models--" + wanted.replace("/", "--"))
            if files.is_directory(entry):
                return _snapshot(entry)
            continue
        if not name or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            continue
        entries = [p for p in cache.glob(f"models--*--{name}") if p.name.count("--") == 2 and files.is_directory(p)]
        if len(entries) == 1:
            return _snapshot(entries[0])
    return None


def shown_id(entry: Path) -> str:
    return entry.name.removeprefix("models--").replace("--", "/", 1)
