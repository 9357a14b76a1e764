"""A time limit and a memory guard per input, so one bad file in a batch costs a bounded time.

Every bound of the reader (``inputs/bounds.py``) keeps a hostile script small and fast on its own;
this is the backstop for whatever those bounds miss. The time limit is a real-time interval timer
(SIGALRM) whose handler raises ``_Exceeded`` — a BaseException, so that no ``except Exception`` on
the way swallows it — and fires again every second until the input is abandoned. Once it has fired,
the input is a timeout whatever comes back: an error the interruption caused on the way (a half-made
object's cleanup), or a value some handler made of it. The memory guard
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
from dataclasses import dataclass
from typing import TypeVar

from shardcheck.errors import ShardcheckError

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
        except (ImportError, ValueError, OverflowError, OSError):
            restore_limit = None
    previous = None
    modules = set(sys.modules)
    fired: list[bool] = []
    try:
        try:
            if timer:  # armed inside the try: a limit shorter than the arming itself still lands below

                def _fire(signum, frame):
                    fired.append(True)
                    raise _Exceeded

                previous = signal.signal(signal.SIGALRM, _fire)
                signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
            value = fn()
            if fired:  # the limit's exception was swallowed (or turned into a verdict) on the way: a timeout
                raise _Exceeded
            return value, None
        except Exception:
            if fired:  # an error the interruption caused (a half-made object's `finally`): still a timeout
                raise _Exceeded from None
            raise
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
        if timer and previous is not None:
            signal.signal(signal.SIGALRM, previous)
        if restore_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, restore_limit)


@dataclass(frozen=True)
class Failure:
    """Why one input was abandoned: ``kind`` "limit" (its time or memory ran out) or "internal" (a bug of
    shardcheck while judging it); ``message`` is one line."""

    kind: str
    message: str

    @property
    def exit_code(self) -> int:
        """2 for an input past its limits (unusable input), 4 for an internal error."""
        return 4 if self.kind == "internal" else 2

    @property
    def line(self) -> str:
        """The message as one line on stderr: an internal error with what to do about it."""
        return f"{self.message}; {REPORT_HINT}" if self.kind == "internal" else self.message

    @property
    def result_kind(self) -> str:
        """The ``error_kind`` of the check Result that stands for the abandoned input."""
        return "internal" if self.kind == "internal" else "unusable"


def run_isolated(
    fn: Callable[[], T],
    *,
    seconds: float | None = DEFAULT_SECONDS,
    memory: int | None = DEFAULT_MEMORY,
    debug: bool = False,
) -> tuple[T | None, Failure | None]:
    """``fn()`` under ``run_guarded``'s limits with crash isolation, as ruff has it: an internal error while
    judging one input is that input's failure (one line), so the others of a batch are still judged.
    A ShardcheckError (bad input, or a plan that cannot be made: said on purpose) passes through to the
    caller, as do KeyboardInterrupt and SystemExit. ``debug``: print an internal error's traceback on stderr."""
    try:
        value, why = run_guarded(fn, seconds=seconds, memory=memory)
    except ShardcheckError:
        raise
    except Exception as exc:  # noqa: BLE001 — the crash-isolation boundary: any bug becomes one input's failure
        return None, Failure("internal", internal_error_text(exc, debug=debug))
    return (value, None) if why is None else (None, Failure("limit", why))


def run_input(
    shown: str,
    fn: Callable[[], T],
    *,
    seconds: float | None = DEFAULT_SECONDS,
    memory: int | None = DEFAULT_MEMORY,
    debug: bool = False,
) -> tuple[T | None, Failure | None]:
    """The one guard every command judges an input under: ``run_isolated`` with the message naming the input
    (``shown``) and, past a limit, what to do."""
    value, failure = run_isolated(fn, seconds=seconds, memory=memory, debug=debug)
    if failure is None:
        return value, None
    if failure.kind == "limit":
        return None, Failure(
            "limit", f"{shown}: {failure.message}; simplify the input, or raise --time-limit / --memory-limit"
        )
    return None, Failure("internal", f"{shown}: {failure.message}")


REPORT_HINT = (
    "this is a bug in shardcheck, not a verdict on the input: please report it with the input "
    "(rerun with --debug for the traceback)"
)


def internal_error_line(exc: BaseException, *, debug: bool = False) -> str:
    """One line for an internal error: ``internal_error_text`` and what to do (REPORT_HINT)."""
    return f"{internal_error_text(exc, debug=debug)}; {REPORT_HINT}"


def internal_error_text(exc: BaseException, *, debug: bool = False) -> str:
    """An internal error in a few words: its type, message (folded, cut at 200 characters) and the file:line
    it was raised at; the traceback itself only with ``debug`` (--debug), on stderr."""
    if debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    at = f" at {os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno}" if where is not None else ""
    text = " ".join(str(exc).split())[:200]
    return f"internal error ({type(exc).__name__}: {text}{at})"


def _forget_modules_since(before: set[str]) -> None:
    """An import the limit cut short leaves a half-made module behind: drop the modules imported during the
    abandoned input whose import never finished (``__spec__._initializing``), so that the next input imports
    them afresh. Modules imported whole stay: dropping them too would leave two copies of a module whose
    tables others hold (the registry of rules or frameworks), and the next input would be judged by neither."""
    for name in [n for n in sys.modules if n not in before]:
        module = sys.modules.get(name)
        if getattr(getattr(module, "__spec__", None), "_initializing", False):
            sys.modules.pop(name, None)


def _ignore(signum, frame) -> None:
    return None


def _size(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"
