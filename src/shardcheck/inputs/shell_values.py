"""Values a static bash reading produces: words made of segments, each segment traced to its origin."""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.origin import Origin


@dataclass(frozen=True, slots=True)
class Seg:
    """A piece of a word: known ``text`` or, when ``text`` is None, an unknown value and its reason."""

    text: str | None
    origin: Origin
    unknown: str | None = None

    @property
    def known(self) -> bool:
        return self.text is not None


@dataclass(frozen=True, slots=True)
class Field:
    """One shell word after expansion (one argument a command would receive)."""

    segs: tuple[Seg, ...]
    origin: Origin

    @property
    def known(self) -> bool:
        return all(s.known for s in self.segs)

    @property
    def text(self) -> str | None:
        """The word's text, or None when any part of it is unknown."""
        if not self.known:
            return None
        return "".join(s.text for s in self.segs)  # type: ignore[misc]

    def render(self, unknown: str = "⟨?⟩") -> str:
        """The text with each unknown part shown as ``unknown``."""
        return "".join(s.text if s.text is not None else unknown for s in self.segs)

    @property
    def unknowns(self) -> tuple[Seg, ...]:
        return tuple(s for s in self.segs if not s.known)

    def value_origin(self, start: int) -> Origin:
        """Origin of the text from character ``start`` on: the variable it came from, when only one."""
        pos = 0
        sources: list[Seg] = []
        for seg in self.segs:
            length = len(seg.text) if seg.text is not None else 1
            if pos + length > start and (seg.text is None or seg.text[max(0, start - pos) :]):
                sources.append(seg)
            pos += length
        distinct: list[Seg] = []
        for s in sources:
            if s.origin != self.origin and all(s.origin != d.origin for d in distinct):
                distinct.append(s)
        if len(sources) == 1 and distinct:
            return distinct[0].origin.with_via(self.origin)
        if distinct:
            return self.origin.with_via(*(s.origin for s in distinct))
        return self.origin


@dataclass(frozen=True, slots=True)
class Var:
    """A shell variable: a scalar (``value``), an indexed array (``items``) or an associative array
    (``declare -A``: ``items`` with their string ``keys``, in the order they were set)."""

    name: str
    origin: Origin
    value: Field | None = None
    items: tuple[Field, ...] | None = None
    exported: bool = False
    keys: tuple[str, ...] | None = None

    @property
    def is_array(self) -> bool:
        return self.items is not None

    def as_scalar(self) -> Field | None:
        if self.items is not None:
            return self.items[0] if self.items else Field((), self.origin)
        return self.value


@dataclass(frozen=True, slots=True)
class Command:
    """A simple command the script would run, with its expanded words."""

    fields: tuple[Field, ...]
    origin: Origin
    env: tuple[tuple[str, Field], ...] = ()
    condition: str | None = None  # set when the command only runs under a condition not decided statically
