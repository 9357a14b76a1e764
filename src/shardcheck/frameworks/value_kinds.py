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

from shardcheck.job import ConfigNote
from shardcheck.origin import Traced

# Larger counts than any cluster, batch or sequence has; past it products and float conversions of
# several such values could overflow, so a larger value is out of range.
MAX_INT = 1 << 40
# The start of an unknown-reason that says the value was rejected (and reported) as invalid.
INVALID = "invalid value: "


def is_invalid(reason: str | None) -> bool:
    """Whether an unknown value is unknown because it was rejected as invalid (already a VALUE-BAD-* finding)."""
    return bool(reason) and reason.startswith(INVALID)


@dataclass(frozen=True, slots=True)
class Kind:
    """A value's type and range: ``type`` is ``int``, ``real``, ``bool``, ``text``, ``texts`` (a list of
    strings) or ``any``; ``low`` / ``high`` bound numbers (inclusive); ``none``: null is allowed."""

    type: str
    low: float | None = None
    high: float | None = None
    none: bool = False

    @property
    def what(self) -> str:
        base = {"int": "a whole number", "real": "a number", "bool": "true or false", "text": "a string",
                "texts": "a list of strings", "any": "any value"}[self.type]
        if self.type in ("int", "real"):
            if self.low is not None and self.high is not None:
                base += f" from {_num(self.low)} to {_num(self.high)}"
            elif self.low is not None:
                base += f" ≥ {_num(self.low)}"
        return base + (" (or null)" if self.none else "")

    def problem(self, value: object) -> str | None:
        """The rule id of what is wrong with ``value`` (VALUE-BAD-TYPE / VALUE-BAD-RANGE), or None."""
        if value is None:
            return None if self.none or self.type == "any" else "VALUE-BAD-TYPE"
        if self.type == "any":
            return None
        if self.type == "bool":
            return None if isinstance(value, bool) or (type(value) is int and value in (0, 1)) else "VALUE-BAD-TYPE"
        if self.type == "text":
            return None if isinstance(value, str) else "VALUE-BAD-TYPE"
        if self.type == "texts":
            ok = isinstance(value, list) and all(isinstance(x, str) for x in value)
            return None if ok else "VALUE-BAD-TYPE"
        if isinstance(value, float) and not math.isfinite(value):
            return "VALUE-BAD-RANGE"  # 1e400 is inf: out of any range, whichever number it should be
        number = (int,) if self.type == "int" else (int, float)
        if isinstance(value, bool) or not isinstance(value, number):
            return "VALUE-BAD-TYPE"
        if abs(value) > MAX_INT:
            return "VALUE-BAD-RANGE"
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return "VALUE-BAD-RANGE"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a huge integer by its size: repr could not print it)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"a {value.bit_length()}-bit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


COUNT = Kind("int", low=1)  # sizes, batch sizes, lengths, token budgets
COUNT_OR_NULL = Kind("int", low=1, none=True)
FLAG = Kind("bool")
FLAG_OR_NULL = Kind("bool", none=True)
NAME = Kind("text")
NAME_OR_NULL = Kind("text", none=True)
FRACTION = Kind("real", low=0, high=1)
FRACTION_OR_NULL = Kind("real", low=0, high=1, none=True)
NUMBER = Kind("real")
ANY = Kind("any")


def checked(key: str, traced: Traced, kind: Kind, notes: list[ConfigNote]) -> Traced:
    """``traced`` when its value is of ``kind``; else a VALUE-BAD-* note at its line and an unknown value."""
    if not traced.known:
        return traced
    rule = kind.problem(traced.value)
    if rule is None:
        return traced
    where = traced.origin.first_script_line() or traced.origin
    value = shown(traced.value)
    note = ConfigNote(rule=rule, origin=where, message=f"{key} = {value}: must be {kind.what}",
                      fix=f"set {key} to {kind.what}")
    if note not in notes:  # a key read in two places is reported once
        notes.append(note)
    return Traced(None, traced.origin, f"{INVALID}{key} = {value} is not {kind.what}")
