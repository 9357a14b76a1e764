"""Rules as small registered units: id, severity, title, a docstring with why/example/fix/source.

A rule is a function ``Job -> Iterable[Finding]``. The docstring is the rule's documentation
(``shardcheck explain ID`` and docs/rules/ are generated from it), in sections separated by lines
``Why:``, ``Bad:``, ``Good:``, ``Fix:`` and ``Source:``. Rule ids are stable and never reused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

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
    scope: str | None = None  # the part of the job it is about when not the role: "stage 3", "stages 1–13"
    members: tuple[Finding, ...] = ()  # a grouped finding: the findings of one rule and cause it stands for
    covers: tuple[str, ...] = ()  # a grouped finding: the roles / stages its members are about

    @property
    def path(self) -> str | None:
        """The file to edit: where the value was written, else the file the finding is about (a missing file,
        an ``--env`` the script never reads), else None."""
        where = self.origin.first_script_line() if self.origin else None
        return where.path if where else (self.origin.path if self.origin else None)

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
            role: str | None = None, severity: str | None = None, scope: str | None = None) -> Finding:
    return Finding(rule_id, severity or _RULES[rule_id].severity, message, origin, fix, role, scope=scope)


def all_rules() -> dict[str, Rule]:
    """Every registered rule, by id (importing the rule modules registers them)."""
    from shardcheck.rules import (  # noqa: F401
        inputs,
        megatron_lm,
        megatron_model,
        megatron_moe,
        megatron_parallel_state,
        memory,
        slime,
        sglang_engine,
        verl_batch,
        verl_engines,
        verl_fsdp,
        verl_rollout,
        verl_servers,
        vllm_engine,
    )

    return dict(sorted(_RULES.items()))


# Rule ids that no longer exist, as ruff keeps its redirects: a suppression or setting that names one
# still works (renamed: applied to the new id) or is reported (removed), never silently ignored.
RENAMED: dict[str, str] = {}  # old id -> the id that replaced it with the same meaning
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


def check_id(written: str, *, prefix_ok: bool = True) -> IdCheck:
    """Judge one id as written in a ``disable=`` comment or a select/ignore setting."""
    import difflib

    code = written.strip().upper()
    ids = all_rules()
    if code == "ALL" or code in ids:
        return IdCheck("ok", code)
    if code in RENAMED:
        return IdCheck("renamed", RENAMED[code])
    if code in REMOVED:
        return IdCheck("removed", None, REMOVED[code])
    if prefix_ok and code.endswith("-") and any(i.startswith(code) for i in ids):
        return IdCheck("ok", code)
    prefixes = sorted({i[: k + 1] for i in ids for k, ch in enumerate(i) if ch == "-"})
    pool = [*ids, *RENAMED] + (prefixes if prefix_ok else [])
    close = difflib.get_close_matches(code, pool, n=1, cutoff=0.6)
    target = RENAMED.get(close[0], close[0]) if close else None
    return IdCheck("unknown", target)


def id_problem(written: str, where: str, *, prefix_ok: bool = True) -> tuple[str, str | None] | None:
    """(message, fix) for an id that names no current rule, else None."""
    c = check_id(written, prefix_ok=prefix_ok)
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
    """The id a written id stands for today (a renamed id's new name; otherwise itself, upper-cased)."""
    code = written.strip().upper()
    return RENAMED.get(code, code)


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
