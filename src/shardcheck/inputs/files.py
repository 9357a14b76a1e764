"""Reading the files shardcheck is pointed at: regular files only, each with a size cap.

A launch script, a sourced file, a ``config.json`` or a YAML config may name anything: a FIFO (which
blocks an ``open`` until a writer comes), ``/dev/zero`` (endless), ``/proc/kmsg`` (blocks), a
directory, a file of gigabytes. Here a file is opened without blocking and without becoming the
controlling terminal, checked to be a regular file with ``fstat`` on the open descriptor (no race
with a swapped path), and read up to its cap; anything else is one line saying what it is.
"""

from __future__ import annotations

import errno
import os
import stat

from shardcheck.errors import UnreadableInput

MiB = 1 << 20
SCRIPT_LIMIT = 4 * MiB  # a launch script or a file it sources (real ones are a few KiB)
CONFIG_LIMIT = 16 * MiB  # a config.json or YAML config


class UnreadableFile(UnreadableInput):
    """A file that cannot be read as input; ``reason`` is the short why (no path), for messages that
    name the file themselves."""

    def __init__(self, path: str | os.PathLike, reason: str, what: str) -> None:
        self.reason = reason
        super().__init__(f"{_short(str(path))}: {reason}; {what}")


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode):
        return "is a character device, not a regular file"
    if stat.S_ISBLK(mode):
        return "is a block device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def read_regular(path: str | os.PathLike, *, limit: int, what: str) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``limit`` of them;
    ``UnreadableFile`` for anything else, its message ending in ``what`` (what to give instead)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnreadableFile(path, "no such file", what) from None
    except IsADirectoryError:
        raise UnreadableFile(path, "is a directory", what) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise UnreadableFile(path, "the name is too long for the file system", what) from None
        raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})", what) from None
    except ValueError:  # a NUL byte in the name
        raise UnreadableFile(path, "the name holds a NUL byte", what) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(path, _kind(info.st_mode), what)
        if info.st_size > limit:
            raise UnreadableFile(
                path, f"is {info.st_size:,} bytes, more than the {limit // MiB} MiB shardcheck reads", what
            )
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(1 * MiB, limit + 1 - total))
            except BlockingIOError:  # a regular file never blocks; be safe anyway
                break
            except OSError as exc:
                raise UnreadableFile(path, f"cannot be read ({exc.strerror or exc})", what) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:  # grew while being read
            raise UnreadableFile(path, f"is more than the {limit // MiB} MiB shardcheck reads", what)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str | os.PathLike, *, limit: int, what: str) -> str:
    """``read_regular`` decoded as UTF-8; bytes that are not UTF-8 are one line, not a traceback."""
    raw = read_regular(path, limit=limit, what=what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(path, f"is not UTF-8 text (byte {exc.start})", what) from None


def is_regular(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a regular file (symlinks followed); never raises, never blocks."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_directory(path: str | os.PathLike) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
