"""Rule ids that no longer name a rule: removed ones, and renamed ones with the id they became.

An id is never reused (ruff keeps the same kind of table): a removed id stays here so that a
setting, a suppression comment or ``shardcheck explain`` naming it gets a clear answer, and a
renamed id is redirected to its new id. :func:`lookup` is the one place other code asks.
"""

from __future__ import annotations

from dataclasses import dataclass

# id -> why it was removed (and the commit that removed it)
REMOVED: dict[str, str] = {
    "VERL-CFG-ADDED-FIELD": "removed: a `+key` on a dataclass section is not judged from its YAML, which lists "
                            "fewer fields than the dataclass (commit 3c42223)",
}

# old id -> new id
RENAMED: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class IdStatus:
    """What an id names: ``rule`` (a current rule), ``renamed`` (to ``target``), ``removed``, or ``unknown``."""

    id: str
    status: str
    target: str | None = None
    reason: str | None = None


def lookup(rule_id: str, current: dict | frozenset | set) -> IdStatus:
    """What ``rule_id`` names among the ``current`` rule ids (redirects followed)."""
    key = rule_id.upper()
    seen = set()
    while key in RENAMED and key not in seen:
        seen.add(key)
        key = RENAMED[key]
    if key in current:
        return IdStatus(rule_id, "renamed" if seen else "rule", key)
    if key in REMOVED:
        return IdStatus(rule_id, "removed", None, REMOVED[key])
    return IdStatus(rule_id, "unknown")


def selector_matches(selector: str, current) -> bool:
    """Whether a settings selector (an id or an id prefix such as ``MCORE-``) names at least one rule."""
    key = selector.upper()
    return any(r.startswith(key) for r in current) or lookup(key, current).status in ("renamed", "removed")


def check_registry(current: dict) -> None:
    """Current ids are not reused from removed or renamed ones, and every redirect lands on a rule."""
    for old in REMOVED.keys() | RENAMED.keys():
        if old in current:
            raise ValueError(f"rule id {old} is reused: it was removed or renamed (rules/ids.py)")
    for old, new in RENAMED.items():
        if lookup(new, current).status not in ("rule", "renamed"):
            raise ValueError(f"renamed rule id {old} points to {new}, which is no rule")
