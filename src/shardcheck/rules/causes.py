"""One finding per cause (issue 28): the VALUE-UNKNOWN findings of values unknown for one reason — one unset
variable, one ``case`` on an unknown subject, one command substitution — become one finding at the cause's first
line, naming every value it leaves unknown, the rules they stop, and the one option that settles it.

A value's reason says what it depends on (``$rollout_tp depends on the case at line 68, whose subject is not
known (it reads $DEVICE); give it with --env``); the cause is what is left once the chain of ``$X depends on``
is taken off, so ``$rollout_tp`` and ``$train_batch_size`` set in the same ``case`` share one."""

from __future__ import annotations

import re
from dataclasses import replace

from shardcheck.problems import Kind, Problem
from shardcheck.rules.base import Finding

_DEPENDS = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}? depends on ")
_KINDS = (Kind.UNKNOWN_VALUE.value, Kind.UNKNOWN_ARGUMENT.value)


def cause_of(reason: str) -> tuple[str, list[str]]:
    """(the cause, the variables that pass it on): ``$a depends on $b depends on X`` -> (X, [a, b])."""
    through = []
    while (m := _DEPENDS.match(reason)) is not None:
        through.append(m.group(1))
        reason = reason[m.end() :]
    return reason, through


def settling_option(reason: str) -> str | None:
    """The option that settles a value unknown for ``reason``: ``--env NAME=...`` for the variables it names,
    ``-- ARGS`` for a script argument; None when no single option does."""
    if re.match(r"^\$\d+ is a script argument", reason):
        return "give the script's arguments after --: shardcheck check SCRIPT -- ARGS"
    named = re.findall(r"pass --env ([A-Za-z_][A-Za-z0-9_]*)=", reason)
    named += re.findall(r"it reads \$([A-Za-z_][A-Za-z0-9_]*)", reason)
    tests = re.search(r"give the variables it tests \(([^)]*)\) with --env", reason)
    if tests:
        named += re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", tests.group(1))
    if not named:
        return None
    return "give " + " ".join(f"--env {n}=..." for n in dict.fromkeys(named)) + ", or set it in the script"


def cause_key(f: Finding) -> str | None:
    """The cause of a VALUE-UNKNOWN finding (None for any other finding)."""
    if f.rule != "VALUE-UNKNOWN":
        return None
    if f.data.get("kind") == Kind.UNKNOWN_CAUSE.value:
        return f.data["cause"]
    return cause_of(f.data["reason"])[0] if f.data.get("reason") else f.message


def one_per_cause(findings: list[Finding]) -> list[Finding]:
    causes: dict[str, list[Finding]] = {}
    for f in findings:
        if f.rule == "VALUE-UNKNOWN" and f.data.get("kind") in _KINDS and f.data.get("reason"):
            causes.setdefault(cause_of(f.data["reason"])[0], []).append(f)
    out: dict[int, Finding | None] = {}
    for cause, members in causes.items():
        if len(members) < 2:
            continue
        out.update(dict.fromkeys(map(id, members)))
        out[id(members[0])] = _merged(cause, members)
    return [out.get(id(f), f) for f in findings if out.get(id(f), f) is not None]


def _merged(cause: str, members: list[Finding]) -> Finding:
    from shardcheck.rules.registry import render

    first = min(members, key=lambda f: (f.path != members[0].path, f.line or 0))
    names, rules, through = [], [], []
    for f in members:
        if f.data["kind"] == Kind.UNKNOWN_ARGUMENT.value:
            names.append(f"an argument at line {f.line}" if f.line else "an argument")
        else:
            names.append(f.data["name"])
        if f.data.get("rule"):
            rules.append(f.data["rule"])
        through += cause_of(f.data["reason"])[1]
    args = {
        "cause": cause,
        "names": list(dict.fromkeys(names)),
        "rules": list(dict.fromkeys(rules)),
        "through": list(dict.fromkeys(through)),
        "fix": settling_option(cause),
        "arguments": any(f.data["kind"] == Kind.UNKNOWN_ARGUMENT.value for f in members),
    }
    one = render(Problem(Kind.UNKNOWN_CAUSE, first.origin, args))
    covers = dict.fromkeys(c for f in members for c in (f.covers or (f.scope or f.role,)) if c is not None)
    return replace(one, members=tuple(members), covers=tuple(covers))
