"""Which files a launch script may make shardcheck read: one policy for every file a script names.

A script someone else wrote names paths: ``source ../x.sh``, ``actor_rollout_ref.model.path=/abs/dir`` (its
``config.json``), ``--hf-checkpoint``, ``--config-path=/abs/dir`` (Hydra's YAML files). Whatever shardcheck reads
can reach its output (a value that is not a whole number is quoted), so a script must not make it read the
caller's private files. A file is read when it lies inside the main script's directory tree (symlinks resolved)
and is readable by everyone, or when it lies inside a folder the caller names with ``--allow-source DIR``.
Files the caller names on the command line (``--model-config``, ``--config``, ``--verl-path``) are theirs to name
and are not vetted here.

A directory walk (``shardcheck check DIR``) uses the same policy with DIR as the tree for the ``*.sh`` symlinks it
meets. ``policy_for(script, allowed)`` makes the policy of one script's reading current (a context variable, so that
worker threads and processes each keep their own); ``refusal(path)`` asks it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

ALLOW_OPTION = "--allow-source"


@dataclass(frozen=True, slots=True)
class ReadPolicy:
    tree: Path  # the main script's folder (or the folder a directory walk was given); symlinks resolved here
    allowed: tuple[Path, ...] = ()  # folders the caller allows besides

    def refusal(self, path: str | os.PathLike) -> str | None:
        """Why ``path`` must not be read (None: it may): outside the script's tree (by path or symlink) and no
        allowed folder holds it, or not readable by everyone (a mode-0600 credentials file)."""
        try:
            resolved = Path(os.path.realpath(path))
            if any(resolved.is_relative_to(os.path.realpath(d)) for d in self.allowed):
                return None
            tree = Path(os.path.realpath(self.tree))
            top = repository_root(tree)
            if top is not None:
                tree = top
            if not resolved.is_relative_to(tree):
                what = "repository" if tree == top else "directory"
                return (
                    f"{resolved} lies outside the script's {what} {tree}; pass {ALLOW_OPTION} "
                    f"{resolved.parent} to read it"
                )
            mode = os.stat(resolved).st_mode
        except (OSError, ValueError) as exc:
            return f"it cannot be checked ({exc})"
        if not mode & 0o004:
            return (
                f"{resolved} is not readable by everyone (mode {mode & 0o777:04o}); pass {ALLOW_OPTION} "
                f"{resolved.parent} to read it"
            )
        return None


def owned_by_caller(path: Path) -> bool:
    """Whether ``path`` (and, when it is a symlink, what it points at) belongs to the user running shardcheck: git's
    ``safe.directory`` rule (git-config(1) ``safe.directory``: a repository owned by someone else is not trusted)."""
    try:
        uid = os.geteuid()
        return os.lstat(path).st_uid == uid and os.stat(path).st_uid == uid
    except (OSError, ValueError):
        return False


def work_tree_root(start: Path) -> Path | None:
    """The top of the git work tree holding ``start`` (the directory with ``.git``), or None. A ``.git`` that
    someone else owns (a shared, world-writable parent folder holding another user's) makes no work tree."""
    for directory in [start, *start.parents]:
        if os.path.lexists(directory / ".git"):
            return directory if owned_by_caller(directory / ".git") else None
    return None


def repository_root(path: Path) -> Path | None:
    """The caller's git work tree holding ``path`` (work_tree_root), symlinks resolved, unless it is the home
    directory or ``/``; else None. Its scripts are run from its root, and its files are the script's tree."""
    top = work_tree_root(path)
    if top is None or Path(os.path.realpath(top)) in (Path(os.path.realpath(Path.home())), Path("/")):
        return None
    return Path(os.path.realpath(top))


_CURRENT: ContextVar[ReadPolicy | None] = ContextVar("shardcheck_read_policy", default=None)


@contextmanager
def policy_for(script: str | os.PathLike, allowed: tuple[str | os.PathLike, ...] = ()) -> Iterator[ReadPolicy]:
    """The policy of ``script``'s reading, current inside the ``with``."""
    policy = ReadPolicy(Path(script).parent, tuple(Path(d) for d in allowed))
    token = _CURRENT.set(policy)
    try:
        yield policy
    finally:
        _CURRENT.reset(token)


def refusal(path: str | os.PathLike) -> str | None:
    """Why the current script may not make shardcheck read ``path``; None when it may, or when no script's
    reading is under way (a library call that names the file itself)."""
    policy = _CURRENT.get()
    return None if policy is None else policy.refusal(path)
