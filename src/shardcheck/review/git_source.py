"""Launch scripts as a git revision holds them, read from git objects: nothing is checked out.

``git ls-tree`` lists a revision's files and one ``git cat-file --batch`` process reads their blobs.
A script's reading can reach more than its own file: ``source ./env.sh``, ``source ../common.sh``,
the nearest ``pyproject.toml`` above it ([tool.shardcheck]), a ``config.json`` beside it. So for each
script the files of its own directory (recursively) and the files directly in each directory above it
are written, as the revision holds them, into one temporary tree per revision; the script is read
there and named by its path in the repository. Only regular files are written (no symlinks, no
submodules) and each is capped in size; nothing is executed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Self

from shardcheck.errors import InputError

MAX_BLOB_BYTES = 4 << 20  # a larger file is left out of the temporary tree (a launch script is a few KiB)
MAX_TREE_FILES = 20_000  # files written per revision; a directory tree beyond this is not walked further
SCRIPT_SUFFIXES = (".sh", ".bash")


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError("git: not found on PATH; install git to compare revisions") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(f"git {' '.join(args[:3])}: {message[-1] if message else 'failed'}")
    return done.stdout


def repo_root(start: Path) -> Path:
    """The top of the work tree holding ``start``; InputError outside a git repository."""
    out = _git(start, "rev-parse", "--show-toplevel")
    return Path(out.decode().strip())


def resolve_rev(repo: Path, rev: str) -> str:
    """The commit id of ``rev`` (a branch, tag, ``HEAD~1``, an id)."""
    if rev.startswith("-"):
        raise InputError(f"--git {rev}: a revision cannot start with '-'")
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except InputError:
        raise InputError(f"--git {rev}: no such revision in {repo}") from None


def changed_files(repo: Path, before: str, after: str | None) -> list[str]:
    """Paths (relative to the repository root) that differ between two commits, or between a commit and
    the work tree (``after`` None), renames followed; deleted files included."""
    args = ["diff", "--name-only", "-z", "--no-renames", before] + ([after] if after else []) + ["--"]
    out = _git(repo, *args)
    return sorted(p for p in out.decode(errors="surrogateescape").split("\0") if p)


@dataclass
class RevisionTree:
    """One revision's files, written on demand into a temporary directory."""

    repo: Path
    commit: str
    root: Path = field(init=False)
    _listing: dict[str, tuple[str, str, int]] | None = field(default=None, init=False)  # path -> (mode, sha, size)
    _written: set[str] = field(default_factory=set, init=False)
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="shardcheck-git-")
        self.root = Path(self._tmp.name)
        # the revision's copy is the top of a work tree, as the repository is: settings are looked for up to
        # here and never above (shardcheck.settings.work_tree_root looks for `.git`)
        (self.root / ".git").mkdir()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def listing(self) -> dict[str, tuple[str, str, int]]:
        if self._listing is None:
            out = _git(self.repo, "ls-tree", "-r", "-l", "-z", "--full-tree", self.commit)
            files: dict[str, tuple[str, str, int]] = {}
            for entry in out.decode(errors="surrogateescape").split("\0"):
                if not entry:
                    continue
                meta, _, path = entry.partition("\t")
                mode, kind, sha, size = meta.split()
                if kind == "blob" and mode in ("100644", "100755"):  # regular files only: no symlinks
                    files[path] = (mode, sha, int(size) if size.isdigit() else 0)
            self._listing = files
        return self._listing

    def has(self, path: str) -> bool:
        return path in self.listing()

    def local(self, path: str) -> Path:
        """Where ``path`` (repository-relative) lies in the temporary tree."""
        return self.root.joinpath(*PurePosixPath(path).parts)

    def materialise(self, scripts: list[str]) -> None:
        """Write each script with the files its reading can reach (see the module's docstring)."""
        files = self.listing()
        present = [s for s in scripts if s in files]
        homes = {str(PurePosixPath(s).parent) for s in present}
        above = homes | {str(p) for h in homes for p in PurePosixPath(h).parents}  # their direct files
        below = homes - {"."}  # walked recursively (the repository's root is not: it would be all of it)
        wanted: set[str] = set(present)
        for path in files:
            if len(wanted) >= MAX_TREE_FILES:
                break
            parent = PurePosixPath(path).parent
            if str(parent) in above or any(str(p) in below for p in parent.parents):
                wanted.add(path)
        todo = sorted(p for p in wanted - self._written if files[p][2] <= MAX_BLOB_BYTES)
        if not todo:
            return
        blobs = _read_blobs(self.repo, [files[p][1] for p in todo])
        for path in todo:
            target = self.local(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[files[path][1]])
            if files[path][0] == "100755":
                os.chmod(target, 0o755)
            self._written.add(path)


def _read_blobs(repo: Path, shas: list[str]) -> dict[str, bytes]:
    """The contents of blobs by id, through one ``git cat-file --batch``."""
    unique = list(dict.fromkeys(shas))
    out = _git(repo, "cat-file", "--batch", input="".join(f"{s}\n" for s in unique).encode())
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3:
            raise InputError(f"git cat-file: unexpected answer for {sha}: {out[pos:end]!r}")
        size = int(header[2])
        blobs[sha] = out[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1  # the content, then a newline
    return blobs


def is_script_path(path: str) -> bool:
    return path.endswith(SCRIPT_SUFFIXES)
