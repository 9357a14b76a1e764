"""Rule ids that no longer name a rule: removed ones, and renamed ones with the id they became.

An id is never reused (ruff keeps the same kind of table): a removed id stays here so that a
setting, a suppression comment or ``shardcheck explain`` naming it gets a clear answer, and a
renamed id is redirected to its new id. :func:`check_id` is the one place that judges a written id
(the registry calls it with the current rules); SUPPRESS-UNKNOWN-ID reports what it finds.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Collection
from dataclasses import dataclass

# old id -> the id that replaced it with the same meaning
RENAMED: dict[str, str] = {}
# id -> what became of it (and the commit that removed it)
REMOVED: dict[str, str] = {
    # 3c42223: a `+key` near-miss in a dataclass section; the YAML lists fewer fields than the dataclass
    "VERL-CFG-ADDED-FIELD": "removed: verl's YAML lists fewer fields than its dataclasses, so it could not judge "
    "them; VERL-CFG-ADDED-KEY covers the other sections",
}


@dataclass(frozen=True, slots=True)
class IdCheck:
    """What a rule id (or prefix) written in a comment or setting means: ``kind`` is ``ok``, ``renamed``
    (``target`` is the current id), ``removed`` or ``unknown`` (``target`` a suggestion or None)."""

    kind: str
    target: str | None = None
    note: str | None = None


SUGGESTIONS = 100  # unknown ids given a "did you mean" each: a settings file of 60,000 ids stays fast


@functools.cache
def _pool(current: frozenset[str], prefix_ok: bool) -> tuple[str, ...]:
    """What an unknown id is compared with: the current ids, the renamed ones and (``prefix_ok``) their prefixes."""
    prefixes = sorted({i[: k + 1] for i in current for k, ch in enumerate(i) if ch == "-"})
    return (*sorted(current), *RENAMED, *(prefixes if prefix_ok else []))


def check_id(written: str, current: Collection[str], *, prefix_ok: bool = True, suggest: bool = True) -> IdCheck:
    """Judge one id as written against the ``current`` rule ids (prefixes such as ``MCORE-`` when ``prefix_ok``);
    ``suggest``: look for the closest id of an unknown one (else its ``target`` is None)."""
    code = written.strip().upper()
    if code == "ALL" or code in current:
        return IdCheck("ok", code)
    if code in RENAMED:
        return IdCheck("renamed", current_id(code))
    if code in REMOVED:
        return IdCheck("removed", None, REMOVED[code])
    if prefix_ok and any(i.startswith(code if code.endswith("-") else code + "-") for i in current):
        return IdCheck("ok", code)  # MCORE- or MCORE: a prefix up to a dash, as Settings.reports matches it
    if not suggest:
        return IdCheck("unknown", None)
    close = difflib.get_close_matches(code, _pool(frozenset(current), prefix_ok), n=1, cutoff=0.6)
    target = current_id(close[0]) if close else None
    return IdCheck("unknown", target)


def id_problem(
    written: str, where: str, current: Collection[str], *, prefix_ok: bool = True, suggest: bool = True
) -> tuple[str, str | None] | None:
    """(message, fix) for an id that names no current rule, else None."""
    c = check_id(written, current, prefix_ok=prefix_ok, suggest=suggest)
    if c.kind == "ok":
        return None
    shown = written.strip()
    if c.kind == "renamed":
        return f"{where} names {shown}, which was renamed {c.target}; applied as {c.target}", f"write {c.target}"
    if c.kind == "removed":
        return f"{where} names {shown}, a rule that was {c.note}", f"remove {shown}"
    hint = f"did you mean {c.target}?" if c.target else "`shardcheck rules` lists the ids"
    return f"{where} names {shown}, which is no rule id; it has no effect", hint


def current_id(written: str) -> str:
    """The id a written id stands for today (renames followed; otherwise itself, upper-cased)."""
    code = written.strip().upper()
    seen = set()
    while code in RENAMED and code not in seen:
        seen.add(code)
        code = RENAMED[code]
    return code


def check_registry(current: Collection[str]) -> None:
    """Current ids are not reused from removed or renamed ones, and every redirect lands on a rule."""
    for old in REMOVED.keys() | RENAMED.keys():
        if old in current:
            raise ValueError(f"rule id {old} is reused: it was removed or renamed (rules/ids.py)")
    for old in RENAMED:
        if current_id(old) not in current:
            raise ValueError(f"renamed rule id {old} points to {current_id(old)}, which is no rule")
