"""A time limit and a memory guard per input, so one bad file in a batch costs a bounded time.

Every bound of the reader (``inputs/bounds.py``) keeps a hostile script small and fast on its own;
this is the backstop for whatever those bounds miss. The time limit is a real-time interval timer
(SIGALRM) whose handler raises ``_Exceeded`` — a BaseException, so that no ``except Exception`` on
the way swallows it — and fires again every second until the input is abandoned. The memory guard
lowers the soft address-space limit (RLIMIT_AS) to what the process holds now plus the allowance,
so an allocation past it fails with MemoryError instead of taking the machine's memory, and
restores it afterwards. Both only where the platform has them (the timer: POSIX, main thread).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_SECONDS = 20.0
DEFAULT_MEMORY = 2 << 30


class _Exceeded(BaseException):
    pass


def _address_space() -> int | None:
    """Bytes of address space this process maps now (Linux), or None where that cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def run_guarded(
    fn: Callable[[], T], *, seconds: float | None = DEFAULT_SECONDS, memory: int | None = DEFAULT_MEMORY
) -> tuple[T | None, str | None]:
    """``(fn(), None)``, or ``(None, why)`` when it ran past ``seconds`` or needed more than ``memory``
    bytes beyond what the process held when it started (None or 0: no such limit)."""
    timer = bool(seconds) and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    restore_limit = None
    if memory:
        try:
            import resource

            held = _address_space()
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            if held is not None:
                target = held + memory
                if hard != resource.RLIM_INFINITY:
                    target = min(target, hard)
                if soft == resource.RLIM_INFINITY or target < soft:
                    resource.setrlimit(resource.RLIMIT_AS, (target, hard))
                    restore_limit = (soft, hard)
        except (ImportError, ValueError, OSError):
            restore_limit = None
    previous = None
    modules = set(sys.modules)
    if timer:

        def _fire(signum, frame):
            raise _Exceeded

        previous = signal.signal(signal.SIGALRM, _fire)
        signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        try:
            return fn(), None
        finally:
            if timer:  # quiet the handler first: a signal already pending must not land in here
                signal.signal(signal.SIGALRM, _ignore)
                signal.setitimer(signal.ITIMER_REAL, 0, 0)
    except _Exceeded:
        _forget_modules_since(modules)
        return None, f"reading it took more than {seconds:g} s, shardcheck's time limit per input"
    except MemoryError:
        _forget_modules_since(modules)
        return None, f"reading it needed more than {_size(memory)} of memory, shardcheck's limit per input"
    finally:
        if timer:
            signal.signal(signal.SIGALRM, previous)
        if restore_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, restore_limit)


def _forget_modules_since(before: set[str]) -> None:
    """An import the limit cut short leaves a half-made module behind; drop every module imported during
    the abandoned input, so that the next input imports them afresh."""
    for name in [n for n in sys.modules if n not in before]:
        sys.modules.pop(name, None)


def _ignore(signum, frame) -> None:
    return None


def _size(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"
