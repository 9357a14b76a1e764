"""What the CI formats (SARIF, GitHub, JUnit) report, from ``check`` results or ``diff`` results alike.

Each item is one finding with its file, line, the script line's text, and (for a diff) whether it is new
on the after side or was already there; inputs that could not be used are items without a rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOCATION = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): ")


INPUT_RULES = ("INPUT-UNREADABLE", "INPUT-UNUSABLE")  # api.check's findings for an input it cannot use


@dataclass(frozen=True, slots=True)
class Item:
    script: str  # the script the check was of
    rule: str | None  # None: the input could not be used (message says why)
    severity: str
    message: str
    path: str | None
    line: int | None
    fix: str | None = None
    snippet: str | None = None
    baseline: str | None = None  # diff only: "new" or "unchanged"

    @property
    def unusable(self) -> bool:
        """The input could not be judged at all (not a finding about the launch)."""
        return self.rule is None or (self.rule in INPUT_RULES and self.severity == "error")


def _snippet(f) -> str | None:
    where = f.origin.first_script_line() if getattr(f, "origin", None) else None
    return where.text if where is not None and where.text else None


def _from_finding(script: str, f, baseline: str | None = None) -> Item:
    return Item(script, f.rule, f.severity, f.message, f.path or script, f.line, f.fix, _snippet(f), baseline)


def input_error_item(script: str, error: str) -> Item:
    """An unusable input: its message starts with ``file:line:`` (errors.InputError's contract) when it can."""
    m = _LOCATION.match(error)
    if m:
        return Item(script, None, "error", error[m.end() :], m.group("path"), int(m.group("line")))
    return Item(script, None, "error", error, script, None)


def _result_items(r, script: str, new: set[int] | None = None) -> list[Item]:
    """A result's findings; a skipped file (no launch) has none; an unusable one its INPUT-* finding, or
    one item made from the error when the settings left that finding out."""
    if r.status == "skipped":
        return []
    if r.error is not None and not r.findings:
        return [input_error_item(script, r.error)]
    if new is None:
        return [_from_finding(script, f) for f in r.findings]
    return [_from_finding(script, f, "new" if id(f) in new else "unchanged") for f in r.findings]


def check_items(results) -> list[Item]:
    return [it for r in results for it in _result_items(r, r.path)]


def diff_items(diffs) -> list[Item]:
    """The after side's findings of each diff, marked new or unchanged; an unusable after side as an error."""
    items: list[Item] = []
    for d in diffs:
        if d.skipped or d.after.result is None:
            continue
        items.extend(_result_items(d.after.result, d.path, {id(f) for f in d.new}))
    return items
