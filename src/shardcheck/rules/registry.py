"""The rule registry: every rule module of this package, discovered, and the run of the rules on a job.

Rule modules are found by listing the package (a new ``rules/*.py`` needs no registration);
:mod:`shardcheck.rules.base` holds the ``@rule`` decorator they use, :mod:`shardcheck.rules.ids`
the ids that were removed or renamed.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace
from functools import cache

from shardcheck.errors import ShardcheckError
from shardcheck.frameworks.value_kinds import is_invalid
from shardcheck.job import Job
from shardcheck.problems import Kind, Problem
from shardcheck.rules import ids
from shardcheck.rules.base import RULES, Finding, NotJudged, Rule, UnknownValue, finding
from shardcheck.rules.ids import REMOVED, RENAMED  # noqa: F401 (the tables, for callers of the registry)

# Modules of this package that define no rules.
NOT_RULE_MODULES = frozenset({"base", "registry", "ids", "docs", "grouping", "causes", "examples", "divisors"})


@cache
def all_rules() -> dict[str, Rule]:
    """Every registered rule, by id: the rule modules of this package are imported once, then listed."""
    import shardcheck.rules as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in NOT_RULE_MODULES:
            importlib.import_module(f"{package.__name__}.{info.name}")
    found = dict(sorted(RULES.items()))
    ids.check_registry(found)
    return found


@cache
def rule_of_kind() -> dict[Kind, str]:
    """Each problem kind and the id of the one rule that reports it."""
    out: dict[Kind, str] = {}
    for r in all_rules().values():
        for kind in r.notes + r.problems:
            if kind in out:
                raise ValueError(f"problem kind {kind} is claimed by {out[kind]} and {r.id}")
            out[kind] = r.id
    return out


def rule_id(kind: Kind) -> str:
    """The id of the rule that reports problems of ``kind``."""
    return rule_of_kind()[kind]


def render(problem: Problem) -> Finding:
    """The finding a note (a problem found while reading or resolving) becomes."""
    r = all_rules()[rule_id(problem.kind)]
    message, fix = r.render(problem)
    return finding(
        r.id,
        message,
        problem.origin,
        fix=fix,
        severity=problem.severity,
        role=problem.args.get("role"),
        data={"kind": problem.kind.value, **problem.args},
    )


def check_id(written: str, *, prefix_ok: bool = True) -> ids.IdCheck:
    """Judge one id as written in a ``disable=`` comment or a select/ignore setting (see ``ids.check_id``)."""
    return ids.check_id(written, all_rules(), prefix_ok=prefix_ok)


def id_problem(
    written: str, where: str, *, prefix_ok: bool = True, suggest: bool = True
) -> tuple[str, str | None] | None:
    """(message, fix) for an id that names no current rule, else None (``suggest``: see ``ids.check_id``)."""
    return ids.id_problem(written, where, all_rules(), prefix_ok=prefix_ok, suggest=suggest)


def current_id(written: str) -> str:
    """The id a written id stands for today (a renamed id's new name; otherwise itself, upper-cased)."""
    return ids.current_id(written)


def _internal_error(rule_id: str, exc: Exception, job: Job) -> Finding:
    """The INTERNAL-ERROR finding of a rule that raised: the other rules' findings still stand."""
    from shardcheck.guard import internal_error_text
    from shardcheck.origin import Origin

    message = f"rule {rule_id}: {internal_error_text(exc)}"
    return render(Problem(Kind.INTERNAL_ERROR, Origin(kind="cli", path=job.path), {"message": message}))


def run_rules(job: Job, only: tuple[str, ...] = ()) -> tuple[list[Finding], list[str]]:
    """All findings for ``job``, and the ids of rules skipped because no model was found (``only``: run just
    the rules whose ids start with one of these prefixes, e.g. the planner's rollout screen).

    A rule that stops on an unknown value (``need``) adds one VALUE-UNKNOWN finding for it, unless
    VALUE-UNKNOWN already reported the same value. Rules whose scope (``frameworks=``, ``engine=``)
    excludes the job are not run.
    """
    from shardcheck.rules.inputs import unknown_sizes

    judged = replace(job, notes=job.notes + tuple(unknown_sizes(job)))
    # the copy only adds notes, which no cached value reads (the memory estimate): it shares the job's cache,
    # so the caller reads the estimate the rules judged instead of making it again
    object.__setattr__(judged, "run_cache", job.run_cache)
    findings: list[Finding] = []
    skipped: list[str] = []
    stopped: dict[tuple, Problem] = {}
    for rule_obj in all_rules().values():
        if only and not rule_obj.id.startswith(only):
            continue
        if rule_obj.needs_model and job.model is None:
            skipped.append(rule_obj.id)
            continue
        if not rule_obj.applies(job):
            continue
        try:
            for found in rule_obj.check(judged):
                findings.append(found)
        except NotJudged:
            continue
        except UnknownValue as exc:
            if is_invalid(exc.traced.unknown):
                continue  # already a VALUE-BAD-* finding at its line
            where = exc.traced.origin.first_script_line() or exc.traced.origin
            key = (where.location, exc.traced.unknown)
            stopped.setdefault(
                key,
                Problem(
                    Kind.UNKNOWN_VALUE, where, {"name": exc.name, "reason": exc.traced.unknown, "rule": rule_obj.id}
                ),
            )
        except (MemoryError, ShardcheckError):
            raise  # the input's memory limit (guard.py), or bad input said on purpose: not this rule's bug
        except Exception as exc:  # noqa: BLE001 — crash isolation per rule: the bug is this rule's finding
            findings.append(_internal_error(rule_obj.id, exc, job))
            continue
    reported = {
        (f.origin.location if f.origin else None, f.data.get("reason"))
        for f in findings
        if f.data.get("kind") == Kind.UNKNOWN_VALUE.value
    }
    for (location, reason), problem in stopped.items():
        if (location, reason) not in reported:
            findings.append(render(problem))
    from shardcheck.rules.causes import one_per_cause

    findings = one_per_cause(findings)
    if job.open_arguments:
        lines = ", ".join(str(o.line) for o in job.open_arguments[:4])
        findings = [
            replace(
                f,
                conditional=True,
                message=f"{f.message} — as read; the unknown argument(s) at line {lines} could change this",
            )
            if f.severity == "error" and not all_rules()[f.rule].certain
            else f
            for f in findings
        ]
    return findings, skipped
