"""What every rule module uses: the ``@rule`` decorator, findings, ``need``, and the shared helpers.

A rule is a function ``Job -> Iterable[Finding]`` registered with :func:`rule`. Its docstring is
its documentation (``shardcheck explain ID`` and docs/rules/ are generated from it), in sections
separated by lines ``Why:``, ``Fix:`` and ``Source:``; its Bad and Good examples are its case file
(``rules/cases/<ID>.yml``, run by the tests). Rule ids are stable and never reused (removed and
renamed ids are kept in :mod:`shardcheck.rules.ids`).

A rule that reports problems found while reading or resolving the input (``Job.notes``) names
their kinds with ``notes=``; its function then takes one :class:`~shardcheck.problems.Problem` and
returns the message and the fix. A rule that maps problems another layer returns (the rank grid,
the layer split) names their kinds with ``problems=``. Every kind belongs to exactly one rule.

A rule's scope is part of its declaration: ``frameworks=`` (the frameworks whose launches it
judges) and ``engine=`` (the training or rollout engines it judges). The registry runs a rule only
on jobs in its scope; a job whose engine is unknown is judged, so that the rule can say what it
needs (VALUE-UNKNOWN).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from shardcheck.errors import ShardcheckError
from shardcheck.job import Job, MegatronLayout
from shardcheck.origin import Origin, Traced, UnknownValue, need  # noqa: F401 (need: for the rule modules)
from shardcheck.problems import Kind, Problem

SEVERITIES = ("error", "warning", "info")
FRAMEWORKS = ("verl", "verl-sft", "verl-gen", "megatron-lm", "slime", "megatron-core")
ENGINES = ("megatron", "fsdp", "vllm", "sglang")
Message = tuple[str, str | None]  # a note rule's message and fix


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
    data: dict = field(default_factory=dict, compare=False, hash=False)  # the structured facts behind the message
    # set by ``check``'s proof of the fix (plan/fixes.py): the override lines that apply it, and the verdict
    # of every rule on the script re-read with them: "valid" (no error left), "proven" (this rule's error
    # gone, none added), "disproved" (the fix text's lines do not), "no-single-key"; None: not judged
    fix_lines: tuple[str, ...] = ()
    fix_check: str | None = None
    fix_note: str | None = None
    fix_source: str | None = None  # "text": the lines the fix text names; "key": a planner key the proof chose

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
    frameworks: tuple[str, ...] = ()  # empty: every framework
    engines: tuple[str, ...] = ()  # empty: every engine
    notes: tuple[Kind, ...] = ()  # the problem kinds it reports from Job.notes
    problems: tuple[Kind, ...] = ()  # the problem kinds it maps from the grid / the layer split
    render: Callable[[Problem], Message] | None = None  # a note rule's message for one problem
    certain: bool = False  # about the input words themselves: no unknown argument can change its errors

    def section(self, name: str) -> str:
        """One section of the docstring (``what`` is the text before the first heading)."""
        return _sections(self.doc).get(name, "")

    def applies(self, job: Job) -> bool:
        """Whether ``job`` is in the rule's scope (an unknown engine is: the rule says what it needs)."""
        if self.frameworks and job.framework not in self.frameworks:
            return False
        if not self.engines:
            return True
        used = job_engines(job)
        return used is None or bool(used & set(self.engines))


def job_engines(job: Job) -> set[str] | None:
    """The engines a job uses (training and rollout); None when the rollout engine is unknown."""
    used = set()
    if job.layouts:
        used.add("megatron")
    if job.fsdp_layouts:
        used.add("fsdp")
    if job.rollout is not None:
        if not job.rollout.engine.known:
            return None
        used.add(str(job.rollout.engine.value))
    return used


def _sections(doc: str) -> dict[str, str]:
    out: dict[str, list[str]] = {"what": []}
    current = "what"
    for line in doc.splitlines():
        head = line.strip().rstrip(":").lower()
        if line.strip().endswith(":") and head in ("why", "versions", "bad", "good", "fix", "source"):
            current = head
            out[current] = []
            continue
        out[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


class NotJudged(ShardcheckError):
    """Raised inside a rule when the job gives it nothing to judge and another rule reports why
    (e.g. a batch rule when the layout does not tile the world); its findings so far stand."""


RULES: dict[str, Rule] = {}  # every rule defined, by id (filled as the rule modules are imported)


def rule(
    id: str,
    severity: str,
    title: str,
    *,
    needs_model: bool = False,
    frameworks: tuple[str, ...] = (),
    engine: str | tuple[str, ...] = (),
    notes: tuple[Kind, ...] = (),
    problems: tuple[Kind, ...] = (),
    certain: bool = False,
):
    """Define a rule; the decorated function's docstring is its documentation.

    ``frameworks``/``engine`` scope it; ``notes`` makes it a note rule: the function renders one
    problem as (message, fix). ``problems`` names the kinds it maps from a lower layer's result.
    """
    engines = (engine,) if isinstance(engine, str) else tuple(engine)
    if severity not in SEVERITIES:
        raise ValueError(f"severity {severity!r} of {id} is not one of {SEVERITIES}")
    if unknown := [f for f in frameworks if f not in FRAMEWORKS] + [e for e in engines if e not in ENGINES]:
        raise ValueError(f"rule {id}: unknown scope {unknown}")

    def register(fn: Callable):
        if id in RULES:
            raise ValueError(f"rule {id} registered twice")
        doc = inspect.cleandoc(fn.__doc__ or "")
        render = None
        check = fn
        if notes:
            render = fn

            def check(job: Job) -> Iterable[Finding]:
                return note_findings(job, id, notes, render)

        RULES[id] = Rule(
            id,
            severity,
            title,
            check,
            needs_model,
            doc,
            tuple(frameworks),
            engines,
            tuple(notes),
            tuple(problems),
            render,
            certain,
        )
        return fn

    return register


def finding(
    rule_id: str,
    message: str,
    origin: Origin | None,
    *,
    fix: str | None = None,
    role: str | None = None,
    severity: str | None = None,
    scope: str | None = None,
    data: dict | None = None,
) -> Finding:
    return Finding(
        rule_id, severity or RULES[rule_id].severity, message, origin, fix, role, scope=scope, data=data or {}
    )


def note_findings(
    job: Job, rule_id: str, kinds: tuple[Kind, ...], render: Callable[[Problem], Message]
) -> Iterable[Finding]:
    """The findings of the notes of ``kinds``, in the order they were found."""
    for note in job.notes:
        if note.kind in kinds:
            message, fix = render(note)
            yield finding(
                rule_id,
                message,
                note.origin,
                fix=fix,
                severity=note.severity,
                role=note.args.get("role"),
                data={"kind": note.kind.value, **note.args},
            )


# -- helpers every rule uses ------------------------------------------------------------------


def engines(job: Job) -> list[MegatronLayout]:
    """The Megatron engines to judge: the actor, then every other engine the framework builds (verl's ref
    and critic) whose own resolved settings differ from those of an engine already judged (the same
    settings give the same findings)."""
    out: list[MegatronLayout] = []
    for e in sorted(job.layouts, key=lambda lay: lay.role != "actor"):
        if all(e.judged() != seen.judged() for seen in out):
            out.append(e)
    return out


def where(*values: Traced) -> Origin | None:
    """The first script line among ``values``: the place a user edits."""
    for v in values:
        line = v.origin.first_script_line()
        if line is not None:
            return line
    return values[0].origin if values else None
