"""The verdict on one checked script: the one place that decides it; every report format reads it.

``valid`` is True (no error), False (an error, or an input that cannot be used) or None (no error, but a value
a rule needs is unknown: undecided, never guessed; also None for a file without a launch). An error that holds
for the values as read, though an unknown argument could change them (``Finding.conditional``), is still an
error: the script will not start as read. ``not_judged`` names the checks that could not run at all (the memory
estimate without parameter counts, the rules that need a model that was not found), each with why and where.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shardcheck.api import Result

# the short words of a verdict (review tables, badges, icons); ``sentence`` says more
WORDS = ("valid", "will not start", "undecided", "not a launch", "unusable input")


@dataclass(frozen=True)
class NotJudged:
    """A check that did not run on this script: ``what`` (memory, model rules), ``why``, and where."""

    what: str
    why: str
    path: str | None = None
    line: int | None = None

    def to_dict(self) -> dict:
        return {"what": self.what, "why": self.why, "path": self.path, "line": self.line}

    def text(self, script: str) -> str:
        if self.line is None:
            return f"{self.what} not judged: {self.why}"
        where = f"line {self.line}" if self.path in (None, script) else f"{self.path}:{self.line}"
        return f"{self.what} not judged: {self.why}, {where}"


@dataclass(frozen=True)
class Verdict:
    valid: bool | None
    word: str  # one of WORDS
    sentence: str  # what the text report prints after "verdict: " (without the counts)
    not_judged: tuple[NotJudged, ...] = ()

    @property
    def state(self) -> str:
        """valid | invalid | undecided | skipped: what badges and icons show."""
        if self.word == "not a launch":
            return "skipped"
        return {True: "valid", False: "invalid", None: "undecided"}[self.valid]


def verdict_of(r: Result) -> Verdict:
    """The verdict on ``r``, from its findings alone (suppressed ones only qualify the layout's)."""
    if r.status == "skipped":
        return Verdict(None, "not a launch", "skipped: no launch command")
    if r.error is not None:
        return Verdict(False, "unusable input", f"unusable input: {r.error}")
    errors = [f for f in r.findings if f.severity == "error"]
    unknown = sum(f.rule == "VALUE-UNKNOWN" for f in r.findings)
    not_judged = not_judged_of(r)
    if errors:
        valid, word = False, "will not start"
        sentence = "will not start as read" if all(f.conditional for f in errors) else word
        if unknown:
            sentence += f"; {_plural(unknown, 'other value')} a rule needs unknown"
    elif unknown:
        valid, word = None, "undecided"
        sentence = f"undecided: {_plural(unknown, 'value')} a rule needs unknown"
    else:
        valid, word = True, "valid"
        sentence = "layout valid" if not_judged else "valid"
    sentence += _layout_clause(r, valid)
    if not_judged and valid is not False:  # beside an error the job fails anyway: JSON still lists them
        sentence += "; " + "; ".join(n.text(r.path) for n in not_judged)
    if r.suppressed:
        sentence += f"; {_plural(len(r.suppressed), 'finding')} suppressed"
    return Verdict(valid, word, sentence, not_judged)


def _layout_clause(r: Result, valid: bool | None) -> str:
    from shardcheck.api import LAYOUT_RULES

    job = r.job
    if valid is False and r.layout_valid and (job.fsdp_layouts or job.layouts):  # a generation job has neither
        return "; the FSDP layout itself is valid" if job.fsdp_layouts else "; the Megatron-Core layout itself is valid"
    if (
        valid is not True
        and r.layout_valid is False
        and not any(f.severity == "error" and f.rule.startswith(LAYOUT_RULES) for f in r.findings)
    ):
        return "; the layout itself is not valid (its errors are suppressed)"
    return ""


def not_judged_of(r: Result) -> tuple[NotJudged, ...]:
    """The checks that could not run: the memory estimate (its first reason, with the line of the value that
    stopped it) and the rules that need a model when none was found."""
    job = r.job
    if job is None:
        return ()
    out: list[NotJudged] = []
    if r.skipped:
        why = f"{_plural(len(r.skipped), 'rule')} need the model: {job.model_problem or 'model not found'}"
        out.append(NotJudged("model rules", why))
    memory = job.run_cache.get("memory")
    if memory is not None and job.model is not None:
        for why in memory.problems:
            part = "rollout memory" if why.startswith("rollout: ") else "memory"
            if (part == "memory" and memory.train is not None) or (part != "memory" and memory.rollout is not None):
                continue
            where = memory.problem_origins.get(why)
            out.append(NotJudged(part, why.removeprefix("rollout: ").removeprefix("train: "), *_at(where)))
    return tuple(out)


def _at(origin) -> tuple[str | None, int | None]:
    line = origin.first_script_line() if origin is not None else None
    return (line.path, line.line) if line is not None else (None, None)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
