"""Where a value came from: a script line, the environment, a framework default or a derivation.

Every value shardcheck reads or derives carries an :class:`Origin`, so that a finding can point at
the line to change and the report can say why a size has the value it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shardcheck.errors import ShardcheckError

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """One step of provenance.

    ``kind`` is one of ``script`` (a line of an input file), ``env`` (``--env NAME=VALUE``),
    ``default`` (a framework default, ``text`` names it), ``derived`` (computed from other values,
    ``text`` gives the formula), ``model`` (the model's config or preset) or ``cli``.
    ``via`` lists the places the value passed through on its way (a variable's assignment, the
    array element that used it), outermost last.
    """

    kind: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    text: str | None = None
    via: tuple[Origin, ...] = field(default=())

    @property
    def location(self) -> str | None:
        """``path:line`` where the value was written, or None when it was not written in a file."""
        if self.path is None or self.line is None:
            return None
        return f"{self.path}:{self.line}"

    def with_via(self, *steps: Origin) -> Origin:
        return Origin(
            kind=self.kind,
            path=self.path,
            line=self.line,
            column=self.column,
            text=self.text,
            via=self.via + tuple(steps),
        )

    def first_script_line(self) -> Origin | None:
        """The deepest written place: the line a user edits to change the value."""
        if self.location is not None:
            return self
        for step in self.via:
            found = step.first_script_line()
            if found is not None:
                return found
        return None

    def describe(self) -> str:
        """A short human phrase: ``run.sh:25 (train_tp=2)``, ``default of verl 0.9.1``, ..."""
        if self.kind == "script" and self.location:
            head = self.location
            if self.text:
                head += f" ({self.text})"
        elif self.kind == "env":
            head = f"environment ({self.text})" if self.text else "environment"
        else:
            head = self.text or self.kind
            if self.location:
                head += f" at {self.location}"
        return head


@dataclass(frozen=True, slots=True)
class Traced(Generic[T]):
    """A value with its origin; ``value`` is None and ``unknown`` says why when it cannot be known."""

    value: T | None
    origin: Origin
    unknown: str | None = None

    @property
    def known(self) -> bool:
        return self.unknown is None

    @staticmethod
    def derived(value: T | None, formula: str, *inputs: Traced) -> Traced:
        """A value computed from ``inputs``; unknown when any input is unknown."""
        unknown = next((i for i in inputs if not i.known), None)
        origin = Origin(kind="derived", text=formula, via=tuple(i.origin for i in inputs))
        if unknown is not None:
            return Traced(None, origin, unknown.unknown)
        return Traced(value, origin)


class UnknownValue(ShardcheckError):
    """A value that is needed is not known statically: the one way to stop on an unknown (see :func:`need`).

    A rule that stops so is reported as VALUE-UNKNOWN naming ``name`` and the value's line; the
    memory estimate says it is partial and why."""

    def __init__(self, name: str, traced: Traced | None = None) -> None:
        super().__init__(f"{name} is unknown ({traced.unknown})" if traced is not None else name)
        self.name = name  # the value's name (a key, a flag), or a phrase saying what is unknown and why
        self.traced = traced


def need(traced: Traced, name: str):
    """The value of ``traced``; raises :class:`UnknownValue` (naming ``name``) when it is unknown."""
    if not traced.known:
        raise UnknownValue(name, traced)
    return traced.value
