"""Proven fixes: every fix ``check`` prints for an error is re-judged by the full rule set on the fixed job.

A fix is proven the way ``shardcheck plan`` proves its plans (plan/__init__.py ``prove``): the script is read
again with the fix's override lines added to its launch command (``Result.reread``: ``api.resolve_script``
with ``extra_args``, the framework's own resolution), and every rule ``check`` runs judges the result
(``rules.registry.run_rules``). A fix is **proven** when that run has no error of the finding's rule and
no error of a rule that had none before; it **makes the job valid** when no error is left at all.

Where the candidate lines come from, in order:

1. the fix text itself, when it names whole override lines (``key=value`` for Hydra launches, ``--flag
   value`` for Megatron-LM and slime): each alternative ("A, or B") is tried; one that is not proven is
   marked so in the report (``fix_check: "disproved"``);
2. otherwise, or when the text's lines are disproved: one planner key changed at a time (TP, PP, CP, EP,
   ETP, VPP, the uneven stage sizes, the rollout's TP and DP; values from the planner's default space,
   nearest to the current value first), judged on the resolved job, and the nearest that fixes the finding
   proven by re-reading the script;
3. when no single key makes the job valid: the nearest valid layouts of the planner (fewest changed keys,
   ``search.nearest``), each proven the same way (``Result.nearest``).

Cost is kept to error findings only, and capped (CAP_*): a script without errors costs nothing, and one
with errors a bounded number of re-reads (bench/bench_check.py measures both).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from shardcheck.errors import ShardcheckError

CAP_FINDINGS = 6  # error findings whose fixes are proven (the first, by severity and line)
CAP_PROOFS = 10  # re-reads of the script for text fixes and single-key fixes together
CAP_TRIALS = 48  # single-key candidates judged on the resolved job
NEAREST = 3  # nearest valid layouts named when no single key makes the job valid
CAP_NEAREST_TRIALS = 40  # candidates judged for them
SINGLE_KNOBS = ("tp", "pp", "cp", "ep", "etp", "vpp", "first", "last", "rollout_tp", "rollout_dp")

_HYDRA_LINE = re.compile(r"(?<![\w.$])(\+{0,2}[A-Za-z_]\w*(?:\.\w+)+=[^\s,;()]+)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)((?:\s+[^\s,;()]+)?)")
_NOT_VALUES = {"in", "or", "and", "to", "a", "an", "the", "of", "is", "with", "e.g.", "instead"}


@dataclass(frozen=True)
class Judged:
    errors: frozenset[str]  # the rules with an error finding on the fixed job
    job: object


def fix_alternatives(text: str | None, framework: str) -> list[tuple[str, ...]]:
    """The override lines each alternative of a fix text names (``[]`` when it names none, or words that are
    not whole lines: a placeholder, "remove …", a list of values)."""
    if not text:
        return []
    out = []
    for part in re.split(r",?\s+or\s+|;\s*", text):
        if re.match(r"\s*(remove|drop|run on|use the default)\b", part):
            continue
        if framework == "verl":
            lines = tuple(m.group(1).rstrip(".") for m in _HYDRA_LINE.finditer(part))
        else:
            lines = tuple(_flag_lines(part))
        if lines and all(_concrete(line) for line in lines):
            out.append(lines)
    return out


def _flag_lines(part: str):
    for m in _FLAG.finditer(part):
        flag, value = m.group(1), m.group(2).strip()
        if value and not value.startswith("--") and value.lower() not in _NOT_VALUES:
            yield f"{flag} {value}"
        elif not value or value.lower() in _NOT_VALUES:
            if value.lower() == "in":
                continue  # "--flag in 1, 2, 4": a list of values, no one line
            yield flag


def _concrete(line: str) -> bool:
    """No placeholder (HEAD_DIM, N, K) in the value."""
    value = line.split("=", 1)[1] if "=" in line and not line.startswith("--") else line.partition(" ")[2]
    return not (value and re.fullmatch(r"[A-Z][A-Z_]*", value))


class _Prover:
    def __init__(self, result):
        from shardcheck.rules.registry import run_rules

        self.result = result
        self.run_rules = run_rules
        # the raw rules' errors on the job as read (the report's findings may be demoted across verl versions)
        self.before = frozenset(f.rule for f in run_rules(result.job)[0] if f.severity == "error")
        self.proofs = 0
        self.cache: dict[tuple[str, ...], Judged | None] = {}

    def reread(self, lines: tuple[str, ...]) -> Judged | None:
        """The script re-read with ``lines`` and judged by every rule (None: the lines do not read, or the cap)."""
        if lines in self.cache:
            return self.cache[lines]
        if self.proofs >= CAP_PROOFS:
            return None
        self.proofs += 1
        try:
            job = self.result.reread(tuple(w for line in lines for w in line.split()))
            findings, _ = self.run_rules(job)
        except ShardcheckError:
            judged = None
        else:
            judged = Judged(frozenset(f.rule for f in findings if f.severity == "error"), job)
        self.cache[lines] = judged
        return judged

    def fixes(self, judged: Judged | None, rule: str) -> bool:
        return judged is not None and rule not in judged.errors and judged.errors <= self.before


def prove_fixes(result) -> object:
    """``result`` with each error finding's fix proven, replaced or marked (``Finding.fix_lines``,
    ``fix_check``, ``fix_note``), and ``result.nearest`` when no single key makes the job valid."""
    if getattr(result, "job", None) is None or getattr(result, "reread", None) is None:
        return result
    targets = [f for f in result.findings if f.severity == "error" and not f.rule.startswith("INPUT-")]
    if not targets:
        return result
    from shardcheck.plan.search import INPUT_RULES

    prover = _Prover(result)
    framework = result.job.framework
    singles = _Singles(result.job, prover)
    done: dict[int, object] = {}
    any_valid = False
    for f in targets[:CAP_FINDINGS]:
        proven = None
        disproved = []
        for lines in fix_alternatives(f.fix, framework):
            judged = prover.reread(lines)
            if prover.fixes(judged, f.rule):
                proven = (lines, judged)
                break
            if judged is not None or prover.proofs < CAP_PROOFS:
                disproved.append((lines, judged))
        source = "text"
        if proven is None and not f.rule.startswith(INPUT_RULES):  # no layout key changes the input's words
            proven = singles.fix(f.rule)
            source = "key"
        if proven is not None:
            lines, judged = proven
            valid = not judged.errors
            any_valid |= not {r for r in judged.errors if not r.startswith(INPUT_RULES)}
            note = "re-judged by every rule: " + (
                "no error left"
                if valid
                else f"fixes {f.rule}, adds no error (left: {', '.join(sorted(judged.errors))})"
            )
            if source == "key" and disproved:
                note = f"the lines above do not ({_why(prover, disproved[0], f.rule)}); instead: " + note
            done[id(f)] = replace(
                f, fix_lines=lines, fix_check="valid" if valid else "proven", fix_note=note, fix_source=source
            )
        elif disproved:
            done[id(f)] = replace(f, fix_check="disproved", fix_note=_why(prover, disproved[0], f.rule))
        elif singles.tried and not f.rule.startswith(INPUT_RULES):
            done[id(f)] = replace(f, fix_check="no-single-key", fix_note="no single planner key fixes this")
    result.findings = [done.get(id(f), f) for f in result.findings]
    layout_errors = [f for f in targets if not f.rule.startswith(INPUT_RULES)]
    if layout_errors and not any_valid:  # the input's own words (an unknown key) no layout fixes
        result.nearest = _nearest(result, singles)
    return result


def _why(prover: _Prover, attempt, rule: str) -> str:
    lines, judged = attempt
    if judged is None:
        return "not proven: the lines could not be re-read" if prover.proofs <= CAP_PROOFS else "not judged (cap)"
    if rule in judged.errors:
        return f"not proven: with {' '.join(lines)} {rule} still fires"
    added = sorted(judged.errors - prover.before)
    return f"not proven: {' '.join(lines)} adds {', '.join(added)}"


class _Singles:
    """One planner key changed at a time, judged on the resolved job (no re-read), nearest value first."""

    def __init__(self, job, prover: _Prover):
        self.job, self.prover = job, prover
        self.tried = 0
        self.judged: list[tuple[dict, frozenset[str]]] | None = None
        self.adapter = self.space = None
        try:
            from shardcheck.plan.search import adapter_for, space_for

            self.adapter = adapter_for(job)
            self.space = space_for(job, self.adapter)
            self.base = self.adapter.current(job)
        except (ShardcheckError, TypeError, ValueError):
            self.adapter = None

    def candidates(self) -> list[dict]:
        sp, base, out = self.space, self.base, []
        values = {
            "tp": sp.tp,
            "pp": sp.pp,
            "cp": sp.cp,
            "ep": sp.ep,
            "etp": sp.etp,
            "vpp": sp.vpp,
            "first": (None,),
            "last": (None,),
            "rollout_tp": sp.rollout_tp if sp.rollout else (),
            "rollout_dp": sp.rollout_dp if sp.rollout else (),
        }
        for knob in SINGLE_KNOBS:
            if knob not in self.adapter.KNOBS:
                continue
            now = base.get(knob)
            for v in values[knob] or ():
                if v != now and not (knob in ("first", "last") and now is None):
                    out.append(({knob: v}, _distance(now, v)))
        out.sort(key=lambda c: c[1])
        return [c for c, _ in out]

    def judge_all(self) -> None:
        if self.judged is not None:
            return
        self.judged = []
        if self.adapter is None:
            return
        from shardcheck.plan.search import changes_of

        for changes in self.candidates()[:CAP_TRIALS]:
            self.tried += 1
            try:
                job = self.adapter.apply(self.job, changes_of(self.adapter, self.base, changes))
                findings, _ = self.prover.run_rules(job)
            except (ShardcheckError, TypeError, ValueError, ZeroDivisionError):
                continue
            self.judged.append((changes, frozenset(f.rule for f in findings if f.severity == "error")))

    def fix(self, rule: str):
        """(lines, judged) of the nearest single-key change that fixes ``rule`` once the script is re-read."""
        self.judge_all()
        p = self.prover
        from shardcheck.plan.search import INPUT_RULES

        # a change that leaves no error at all first, then the nearest that fixes this rule and adds none
        ranked = sorted(self.judged, key=lambda c: any(not r.startswith(INPUT_RULES) for r in c[1]))
        for changes, errors in ranked:
            if rule in errors or not errors <= p.before:
                continue
            lines = tuple(self.adapter.lines(self.job, changes))
            judged = p.reread(lines)
            if p.fixes(judged, rule):
                return lines, judged
            if p.proofs >= CAP_PROOFS:
                return None
        return None


def _distance(now, value) -> float:
    if isinstance(now, int) and isinstance(value, int) and now > 0 and value > 0:
        return abs(math.log2(value / now))
    return 1.0


def _nearest(result, singles: _Singles) -> list[dict]:
    """The planner's nearest valid layouts (fewest changed keys), each proven by re-reading the script."""
    if singles.adapter is None:
        return []
    from shardcheck.plan.search import PlanError, errors_of, knob_view, nearest

    try:
        plans = nearest(result.job, top=NEAREST, budget=CAP_NEAREST_TRIALS)
    except (PlanError, ShardcheckError):
        return []
    out: list[dict] = []
    for plan in plans:
        if any(n["overrides"] == list(plan.lines) for n in out):
            continue
        try:
            job = result.reread(tuple(w for line in plan.lines for w in line.split()))
            job = replace(job, device_choice=plan.job.device_choice)
        except ShardcheckError:
            continue
        if errors_of(singles.prover.run_rules(job)[0]) or knob_view(job) != knob_view(plan.job):
            continue
        out.append(
            {
                "overrides": list(plan.lines),
                "changed_keys": len(plan.changes),
                "peak_bytes": plan.peak_bytes,
                "step_seconds": plan.seconds,
            }
        )
    return out
