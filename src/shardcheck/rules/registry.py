"""Rules as small registered units: id, severity, title, a docstring with why/example/fix/source.

A rule is a function ``Job -> Iterable[Finding]``. The docstring is the rule's documentation
(``shardcheck explain ID`` and docs/rules/ are generated from it), in sections separated by lines
``Why:``, ``Bad:``, ``Good:``, ``Fix:`` and ``Source:``. Rule ids are stable and never reused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from shardcheck.frameworks.value_kinds import is_invalid
from shardcheck.job import Job
from shardcheck.origin import Origin, Traced

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: str
    message: str
    origin: Origin | None
    fix: str | None = None
    role: str | None = None
    conditional: bool = False  # holds for the values as read; an unknown argument could change them

    @property
    def path(self) -> str | None:
        where = self.origin.first_script_line() if self.origin else None
        return where.path if where else None

    @property
    def line(self) -> int | None:
        where = self.origin.first_script_line() if self.origin else None
        return where.line if where else None


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: str
    title: str
    check: Callable[[Job], Iterable[Finding]]
    needs_model: bool
    doc: str

    def section(self, name: str) -> str:
        """One section of the docstring (``what`` is the text before the first heading)."""
        return _sections(self.doc).get(name, "")


def _sections(doc: str) -> dict[str, str]:
    out: dict[str, list[str]] = {"what": []}
    current = "what"
    for line in doc.splitlines():
        head = line.strip().rstrip(":").lower()
        if line.strip().endswith(":") and head in ("why", "bad", "good", "fix", "source"):
            current = head
            out[current] = []
            continue
        out[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


class UnknownValue(Exception):
    """Raised inside a rule when a value it needs is not known statically."""

    def __init__(self, name: str, traced: Traced) -> None:
        super().__init__(name)
        self.name = name
        self.traced = traced


def need(traced: Traced, name: str):
    """The value of ``traced``; a rule that cannot go on without it stops with VALUE-UNKNOWN."""
    if not traced.known:
        raise UnknownValue(name, traced)
    return traced.value


_RULES: dict[str, Rule] = {}


def rule(id: str, severity: str, title: str, *, needs_model: bool = False):
    """Register a rule; the decorated function's docstring is its documentation."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity {severity!r} of {id} is not one of {SEVERITIES}")

    def register(fn: Callable[[Job], Iterable[Finding]]):
        if id in _RULES:
            raise ValueError(f"rule {id} registered twice")
        _RULES[id] = Rule(id, severity, title, fn, needs_model, inspect.cleandoc(fn.__doc__ or ""))
        return fn

    return register


def finding(rule_id: str, message: str, origin: Origin | None, *, fix: str | None = None,
            role: str | None = None, severity: str | None = None) -> Finding:
    return Finding(rule_id, severity or _RULES[rule_id].severity, message, origin, fix, role)


def all_rules() -> dict[str, Rule]:
    """Every registered rule, by id (importing the rule modules registers them)."""
    from shardcheck.rules import (  # noqa: F401
        inputs,
        megatron_lm,
        megatron_model,
        megatron_parallel_state,
        memory,
        slime,
        sglang_engine,
        verl_batch,
        verl_engines,
        verl_fsdp,
        verl_rollout,
        vllm_engine,
    )

    return dict(sorted(_RULES.items()))


def run_rules(job: Job) -> tuple[list[Finding], list[str]]:
    """All findings for ``job``, and the ids of rules skipped because no model was found.

    A rule that stops on an unknown value (``need``) adds one VALUE-UNKNOWN finding for it, unless
    the VALUE-UNKNOWN rule already reported the same value.
    """
    findings: list[Finding] = []
    skipped: list[str] = []
    stopped: dict[tuple, Finding] = {}
    for rule_obj in all_rules().values():
        if rule_obj.needs_model and job.model is None:
            skipped.append(rule_obj.id)
            continue
        try:
            findings.extend(rule_obj.check(job))
        except UnknownValue as exc:
            if is_invalid(exc.traced.unknown):
                continue  # already a VALUE-BAD-* finding at its line
            where = exc.traced.origin.first_script_line() or exc.traced.origin
            key = (where.location, exc.traced.unknown)
            stopped.setdefault(key, finding(
                "VALUE-UNKNOWN",
                f"{exc.name} is unknown: {exc.traced.unknown}; {rule_obj.id} is not checked",
                where,
                fix="give the value with --env NAME=VALUE, or set it literally in the script",
            ))
    reported = {(f.origin.location if f.origin else None, f.message.split(" is unknown: ", 1)[-1])
                for f in findings if f.rule == "VALUE-UNKNOWN"}
    for (location, reason), f in stopped.items():
        if (location, reason) not in reported:
            findings.append(f)
    if job.open_arguments:
        lines = ", ".join(str(o.line) for o in job.open_arguments[:4])
        findings = [
            replace(f, conditional=True,
                    message=f"{f.message} — as read; the unknown argument(s) at line {lines} could change this")
            if f.severity == "error" and not f.rule.startswith(_INPUT_RULES) else f
            for f in findings
        ]
    return findings, skipped


# Rules about the input words themselves: certain whatever an argument of unknown content holds.
# Every other rule judges resolved values, which such an argument could have set differently.
_INPUT_RULES = ("SHELL-", "HYDRA-", "VERL-CFG-UNKNOWN-KEY", "VERL-CFG-ADDED-", "VERL-CONFIG-", "VALUE-UNKNOWN",
                "MODEL-", "MLM-FLAG-")
