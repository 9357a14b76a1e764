"""One finding per rule and cause: findings of the same rule, anchor and fix become one group.

The same cause often shows in several places: every pipeline stage over the device memory, the
actor and the ref engine with the same sizes. The group keeps its first (most severe, first written)
member's message, says what it covers ("stages 0–13", "actor and ref"), and keeps every member for
the JSON report.
"""

from __future__ import annotations

import re
from dataclasses import replace

from shardcheck.rules.registry import Finding

_ROLE = re.compile(r"^\[([\w ,]+)\] ")
_NUMBERED = re.compile(r"^(stage|rank|replica)s? ([\d–, ]+)$")


def group_findings(findings: list[Finding]) -> list[Finding]:
    """Merge findings with the same rule, severity, anchor, fix and conditionality, in first-seen order."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.severity, f.path, f.line, f.fix, f.conditional), []).append(f)
    out: list[Finding] = []
    for members in groups.values():
        out.append(members[0] if len(members) == 1 else _merge(members))
    return out


def _label(f: Finding) -> str | None:
    return f.scope or f.role


def _merge(members: list[Finding]) -> Finding:
    first = members[0]
    labels = list(dict.fromkeys(label for m in members if (label := _label(m)) is not None))
    covers = tuple(labels)
    message = first.message
    roles = [m.role for m in members]
    rests = {_ROLE.sub("", m.message, count=1) for m in members}
    if all(roles) and len(rests) == 1 and _ROLE.match(first.message):
        message = f"[{join_labels(list(dict.fromkeys(roles)))}] {rests.pop()}"
    return replace(first, message=message, members=tuple(members), covers=covers)


def join_labels(labels: list[str]) -> str:
    """``stages 0–13``, ``actor and ref``, ``a, b and c``."""
    numbered = [_NUMBERED.match(label) for label in labels]
    if labels and all(numbered) and len({m.group(1) for m in numbered}) == 1:
        numbers: list[int] = []
        for m in numbered:
            for part in m.group(2).split(","):
                lo, _, hi = part.strip().partition("–")
                numbers.extend(range(int(lo), int(hi or lo) + 1))
        return f"{numbered[0].group(1)}s {_ranges(sorted(set(numbers)))}"
    if len(labels) <= 1:
        return "".join(labels)
    return f"{', '.join(labels[:-1])} and {labels[-1]}"


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)
