"""A per-user cache of built config trees that nobody else can make shardcheck run code from.

Building verl's OmegaConf tree costs ~35 ms; loading a pickle of it ~3 ms. Loading a pickle runs
whatever the pickle says, so an entry is unpickled only when all of these hold:

- the cache directory is a real directory (not a symlink), owned by the caller, with no access for
  group or others (0700); an existing directory that fails this is left alone and not used;
- the entry is opened with ``O_NOFOLLOW`` (a planted symlink is not followed), is a regular file owned
  by the caller, below a size cap;
- its HMAC-SHA256, keyed with a random per-user key kept in that directory (mode 0600, also opened
  with ``O_NOFOLLOW``), matches its bytes: only this user's own runs can have written it.

Writes go to a fresh ``O_EXCL`` temporary file in the directory, then ``os.replace`` (atomic; a
symlink at the entry's name is replaced, never followed). Anything wrong with an entry (corrupt,
foreign, truncated, unreadable): it is ignored and the caller builds afresh. ``SHARDCHECK_CACHE=0``
turns the cache off.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

MAGIC = b"shardcheck-cache-1\n"
KEY_NAME = "hmac-key"
KEY_BYTES = 32
MAX_ENTRY_BYTES = 64 << 20
_DIGEST = hashlib.sha256().digest_size
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/shardcheck`` (else ``~/.cache/shardcheck``); None when turned off."""
    if os.environ.get("SHARDCHECK_CACHE", "1") == "0":
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "shardcheck"


def _owned_private_dir(path: Path, uid: int) -> bool:
    """A real directory (lstat: a symlink is not one), owned by ``uid``, with no group/other access."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077


def usable_dir(directory: Path, uid: int, *, create: bool) -> bool:
    """Whether ``directory`` may hold this user's cache; with ``create``, make it (0700) when it is missing.

    Only the cache directory itself and its parent (``~/.cache``) are ever created, and the parent
    only inside an existing directory the caller owns: a ``HOME`` that does not exist gets nothing.
    """
    if _owned_private_dir(directory, uid):
        return True
    if not create or os.path.lexists(directory):
        return False  # someone else's, shared, a symlink, or a file: leave it alone
    parent = directory.parent
    try:
        if not os.path.lexists(parent):
            grand = os.lstat(parent.parent)
            if not (stat.S_ISDIR(grand.st_mode) and grand.st_uid == uid):
                return False
            os.mkdir(parent, 0o700)
        os.mkdir(directory, 0o700)
    except OSError:
        return False
    return _owned_private_dir(directory, uid)


def _read_owned(path: Path, uid: int, limit: int) -> bytes | None:
    """The bytes of a regular file owned by ``uid`` (never through a symlink), at most ``limit`` bytes."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022 or st.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_new(directory: Path, name: str, data: bytes) -> None:
    """Write ``data`` to ``directory/name`` atomically through a fresh O_EXCL temporary file."""
    tmp = directory / f".{name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, _CREATE, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _key(directory: Path, uid: int) -> bytes | None:
    """This user's HMAC key (made on first use); None when it cannot be trusted or made."""
    path = directory / KEY_NAME
    key = _read_owned(path, uid, KEY_BYTES)
    if key is not None and len(key) == KEY_BYTES:
        return key
    if os.path.lexists(path):
        return None  # a key we cannot trust: no cache rather than a guess
    try:
        fd = os.open(path, _CREATE, 0o600)
    except OSError:
        key = _read_owned(path, uid, KEY_BYTES)  # another run made it meanwhile
        return key if key is not None and len(key) == KEY_BYTES else None
    key = secrets.token_bytes(KEY_BYTES)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def _mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()


def load(directory: Path, name: str, *, uid: int | None = None) -> bytes | None:
    """The payload stored under ``name`` when it is this user's own, intact entry; else None."""
    uid = os.getuid() if uid is None else uid
    if not usable_dir(directory, uid, create=False):
        return None
    data = _read_owned(directory / name, uid, MAX_ENTRY_BYTES)
    if data is None or not data.startswith(MAGIC) or len(data) < len(MAGIC) + _DIGEST:
        return None
    key = _key(directory, uid)
    if key is None:
        return None
    mac, payload = data[len(MAGIC) : len(MAGIC) + _DIGEST], data[len(MAGIC) + _DIGEST :]
    return payload if hmac.compare_digest(mac, _mac(key, payload)) else None


def store(directory: Path, name: str, payload: bytes, *, uid: int | None = None) -> bool:
    """Store ``payload`` under ``name`` with its HMAC; False (and nothing written) when the directory is not usable."""
    uid = os.getuid() if uid is None else uid
    if len(payload) > MAX_ENTRY_BYTES - len(MAGIC) - _DIGEST or not usable_dir(directory, uid, create=True):
        return False
    key = _key(directory, uid)
    if key is None:
        return False
    try:
        _write_new(directory, name, MAGIC + _mac(key, payload) + payload)
    except OSError:
        return False
    return True
