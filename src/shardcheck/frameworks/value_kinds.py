"""What each value a rule or the memory estimate reads must be, checked where the value is read.

An ill-typed or out-of-range value (``data.train_batch_size=-1``, ``ppo_mini_batch_size=1.5``,
``gpu_memory_utilization=abc``, ``max_prompt_length=1e400``) becomes a ``VALUE-BAD-TYPE`` or
``VALUE-BAD-RANGE`` finding at its line, and the value itself unknown — so no rule and no estimate
ever does arithmetic on it. Such a value is not reported again as ``VALUE-UNKNOWN`` (see
:func:`is_invalid`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardcheck.origin import Traced
from shardcheck.problems import Kind as ProblemKind
from shardcheck.problems import Problem

# Larger counts than any cluster, batch or sequence has; past it products and float conversions of
# several such values could overflow, so a larger value is out of range.
MAX_INT = 1 << 40
# The start of an unknown-reason that says the value was rejected (and reported) as invalid.
INVALID = "invalid value: "
BAD_TYPE, BAD_RANGE = ProblemKind.VALUE_BAD_TYPE, ProblemKind.VALUE_BAD_RANGE


def is_invalid(reason: str | None) -> bool:
    """Whether an unknown value is unknown because it was rejected as invalid (already a VALUE-BAD-* finding)."""
    return bool(reason) and reason.startswith(INVALID)


@dataclass(frozen=True, slots=True)
class ValueKind:
    """A value's type and range: ``type`` is ``int``, ``real``, ``bool``, ``text``, ``texts`` (a list of
    strings) or ``any``; ``low`` / ``high`` bound numbers (inclusive); ``none``: null is allowed."""

    type: str
    low: float | None = None
    high: float | None = None
    none: bool = False

    @property
    def what(self) -> str:
        base = {
            "int": "a whole number",
            "real": "a number",
            "bool": "true or false",
            "text": "a string",
            "texts": "a list of strings",
            "any": "any value",
        }[self.type]
        if self.type in ("int", "real"):
            if self.low is not None and self.high is not None:
                base += f" from {_num(self.low)} to {_num(self.high)}"
            elif self.low is not None:
                base += f" ≥ {_num(self.low)}"
        return base + (" (or null)" if self.none else "")

    def problem(self, value: object) -> ProblemKind | None:
        """What is wrong with ``value`` (a bad type or a bad range), or None."""
        if value is None:
            return None if self.none or self.type == "any" else BAD_TYPE
        if self.type == "any":
            return None
        if self.type == "bool":
            return None if isinstance(value, bool) or (type(value) is int and value in (0, 1)) else BAD_TYPE
        if self.type == "text":
            return None if isinstance(value, str) else BAD_TYPE
        if self.type == "texts":
            ok = isinstance(value, list) and all(isinstance(x, str) for x in value)
            return None if ok else BAD_TYPE
        if isinstance(value, float) and not math.isfinite(value):
            return BAD_RANGE  # 1e400 is inf: out of any range, whichever number it should be
        number = (int,) if self.type == "int" else (int, float)
        if isinstance(value, bool) or not isinstance(value, number):
            return BAD_TYPE
        if abs(value) > MAX_INT:
            return BAD_RANGE
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return BAD_RANGE
        return None

    def beyond(self, value: object) -> str | None:
        """Why a number is out of every range, said plainly (``not a finite number``, ``too large (> 2^40)``),
        or None: the message then names the range alone."""
        if isinstance(value, float) and not math.isfinite(value):
            return "not a finite number"
        if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > MAX_INT:
            return "too large (> 2^40)" if value > 0 else "too small (< -2^40)"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a huge integer by its size: repr could not print it)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"a {value.bit_length()}-bit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


COUNT = ValueKind("int", low=1)  # sizes, batch sizes, lengths, token budgets
COUNT_OR_NULL = ValueKind("int", low=1, none=True)
RANK = ValueKind("int", low=0)  # 0: off (LoRA ranks)
FLAG = ValueKind("bool")
FLAG_OR_NULL = ValueKind("bool", none=True)
NAME = ValueKind("text")
NAME_OR_NULL = ValueKind("text", none=True)
FRACTION = ValueKind("real", low=0, high=1)
FRACTION_OR_NULL = ValueKind("real", low=0, high=1, none=True)
NUMBER = ValueKind("real")
ANY = ValueKind("any")


def checked(key: str, traced: Traced, kind: ValueKind, notes: list[Problem]) -> Traced:
    """``traced`` when its value is of ``kind``; else a bad-value problem at its line and an unknown value."""
    if not traced.known:
        return traced
    problem = kind.problem(traced.value)
    if problem is None:
        return traced
    where = traced.origin.first_script_line() or traced.origin
    value = shown(traced.value)
    note = Problem(problem, where, {"key": key, "value": value, "what": kind.what, "why": kind.beyond(traced.value)})
    # a key read in two places is reported once
    if not any(n.kind is problem and n.origin == where and n.args.get("key") == key for n in notes):
        notes.append(note)
    return Traced(None, traced.origin, f"{INVALID}{key} = {value} is not {kind.what}")
