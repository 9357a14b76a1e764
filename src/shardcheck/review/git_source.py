"""Launch scripts as a git revision holds them, read from git objects: nothing is checked out.

``git ls-tree`` lists a revision's files and one ``git cat-file --batch`` process reads their blobs.
A script's reading can reach more than its own file: ``source ./env.sh``, ``source ../common.sh``,
the nearest ``pyproject.toml`` above it ([tool.shardcheck]), a ``config.json`` beside it. So for each
script the files of its own directory (recursively) and the files directly in each directory above it
are written, as the revision holds them, into one temporary tree per revision; the script is read
there and named by its path in the repository. Only regular files are written (no symlinks, no
submodules), each is capped in size and created new strictly inside the temporary tree (an entry git would
refuse to check out, such as ``../x.sh``, refuses the revision); nothing is executed. git runs through
``git_command.run_git``, with the repository's configured programs off.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Self

from shardcheck.errors import InputError
from shardcheck.review.git_command import run_git as _git

MAX_BLOB_BYTES = 4 << 20  # a larger file is left out of the temporary tree (a launch script is a few KiB)
MAX_TREE_FILES = 20_000  # files written per revision; a directory tree beyond this is not walked further
SCRIPT_SUFFIXES = (".sh", ".bash")


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
        # here and never above (inputs/read_policy.work_tree_root looks for `.git`)
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
                refused = unsafe_entry(path)
                if refused is not None:
                    raise InputError(
                        f"git ls-tree {self.commit[:12]}: the entry {path!r} {refused}; git refuses to check it "
                        "out and so does shardcheck (repair the revision, e.g. with git fsck)"
                    )
                if kind == "blob" and mode in ("100644", "100755"):  # regular files only: no symlinks
                    files[path] = (mode, sha, int(size) if size.isdigit() else 0)
            self._listing = files
        return self._listing

    def has(self, path: str) -> bool:
        return path in self.listing()

    def local(self, path: str) -> Path:
        """Where ``path`` (repository-relative, checked by ``unsafe_entry``) lies in the temporary tree."""
        if unsafe_entry(path) is not None:
            raise InputError(f"{path!r}: not a path inside a revision's tree")
        return self.root.joinpath(*PurePosixPath(path).parts)

    def _write(self, path: str, data: bytes, mode: int) -> None:
        """Write one file strictly inside the temporary tree: every directory on the way is a real directory
        below the root (no link is followed), and the file is created new (``O_EXCL | O_NOFOLLOW``)."""
        target = self.local(path)
        root = Path(os.path.realpath(self.root))
        folder = self.root
        for part in PurePosixPath(path).parts[:-1]:
            folder = folder / part
            try:
                folder.mkdir()
            except FileExistsError:
                pass
            if folder.is_symlink() or not folder.is_dir():
                raise InputError(f"{path!r}: {folder.name} in the revision's tree is not a directory; refused")
        if not Path(os.path.realpath(target.parent)).is_relative_to(root):
            raise InputError(f"{path!r}: would be written outside the revision's temporary tree; refused")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(target, flags, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

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
            self._write(path, blobs[files[path][1]], 0o755 if files[path][0] == "100755" else 0o644)
            self._written.add(path)


def unsafe_entry(path: str) -> str | None:
    """Why a path from ``git ls-tree`` cannot be a file of a checkout (None: it can). As git's ``verify_path``
    (read-cache.c) refuses: an absolute path, an empty component, ``.``, ``..``, ``.git`` in any case."""
    if not path or path.startswith("/"):
        return "is absolute"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"has the component {part!r}, which would lead outside its folder"
        if part.lower() == ".git":
            return "lies inside a .git folder"
    return None


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
