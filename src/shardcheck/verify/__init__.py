"""``--verify``: prove shardcheck's verdict with the real megatron-core.

    >>> from shardcheck.verify import verify_available, verify_job
    >>> verify_available()            # None, or the one-line install hint
    >>> report = verify_job(result.job, findings=result.findings)
    >>> report.agrees, report.text()

For every engine of the job (``shardcheck.rules.megatron_parallel_state.engines``) one case goes to
``python -m shardcheck.verify.worker`` -- a subprocess, run once for all engines (and, with
:func:`verify_jobs`, for all jobs) -- which initialises ``megatron.core.parallel_state`` on torch's fake
process group and, when the model is known, builds megatron-core's ``TransformerConfig`` and asks
``get_num_layers_to_build`` for every pipeline stage. shardcheck's side: its MCORE-PS-* findings and
``build_grid`` (verdict, DP, EDP, the tp/cp/dp/pp/ep/etp/edp group of every checked rank) and, with a
model, its MCORE-TC-* / MCORE-BUILD-* findings and ``layer_split``.

This module imports neither torch nor megatron; only the worker subprocess does.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.errors import ShardcheckError
from shardcheck.report.escape import text_lines
from shardcheck.verify.compare import ASSUMPTIONS, EnginePlan, Expectation, compare, plan_engine

__all__ = ["Expectation", "VerifyError", "VerifyReport", "compare", "verify_available", "verify_job", "verify_jobs"]

INSTALL_HINT = "pip install 'shardcheck[verify]'"
WORKER_MODULE = "shardcheck.verify.worker"
DEFAULT_TIMEOUT_S = 600


class VerifyError(ShardcheckError, RuntimeError):
    """The megatron-core worker could not be run (not a disagreement): missing packages, a crash, a timeout."""


def _importable(name: str) -> bool:
    """Whether ``name`` can be imported, found without importing it -- nor its parent packages: a dotted
    name is looked up in its parent's search path (find_spec("a.b") would import ``a``)."""
    head, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(head)
        for part in rest.split(".") if rest else []:
            if spec is None or not spec.submodule_search_locations:
                return False
            spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
        return spec is not None
    except (ImportError, ValueError):
        return False


def verify_available() -> str | None:
    """None when torch and megatron-core can be imported (checked without importing them), else a hint."""
    missing = [
        label for name, label in (("torch", "torch"), ("megatron.core", "megatron-core")) if not _importable(name)
    ]
    if not missing:
        return None
    return f"--verify needs torch and megatron-core ({' and '.join(missing)} not installed): {INSTALL_HINT}"


@dataclass
class VerifyReport:
    """megatron-core's verdict on one job next to shardcheck's.

    ``agrees``: every compared value matched and nothing was left unverified for lack of a value;
    ``disagreements``: one line each; ``unverified``: what could not be asked (an unknown size);
    ``notes``: what was assumed or not compared; ``ranks_checked``: the ranks whose groups were compared
    (``rank_selection`` says why those).
    """

    path: str
    disagreements: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    megatron_version: str | None = None
    seconds: float = 0.0
    world: int | None = None
    ranks_checked: list[int] = field(default_factory=list)
    rank_selection: str = ""
    engines: list[dict] = field(default_factory=list)  # per engine: role, case (no ranks), results, expectation

    @property
    def agrees(self) -> bool:
        return not self.disagreements and not self.unverified and bool(self.engines)

    def text(self) -> str:
        version = self.megatron_version or "?"
        head = f"verified against megatron-core {version}"
        if self.agrees:
            rejected = [e["megatron"]["error"] for e in self.engines if e["megatron"].get("valid") is False]
            if len(rejected) == len(self.engines):  # nothing initialised: no groups were compared
                return f"{head}: agrees (megatron-core rejects it too: {rejected[0]}; {self.seconds:.1f} s)"
            n = len(self.ranks_checked)
            ranks = f"{n} ranks" if self.world is None or n == self.world else f"{n} of {self.world} ranks"
            lines = [f"{head}: agrees ({ranks}, {self.seconds:.1f} s)"]
            if self.world is not None and n != self.world:
                lines.append(f"  ranks checked: {self.rank_selection}")
            return text_lines(lines)
        lines = [f"{head}: disagrees: {d}" for d in self.disagreements]
        lines += [f"{head}: {u}" for u in self.unverified]
        if not self.engines and not self.unverified:
            lines.append(f"{head}: nothing to verify (no Megatron-Core engine)")
        return text_lines(lines)

    def to_dict(self) -> dict:
        return {
            "agrees": self.agrees,
            "megatron_version": self.megatron_version,
            "seconds": round(self.seconds, 3),
            "world": self.world,
            "ranks_checked": self.ranks_checked,
            "rank_selection": self.rank_selection,
            "disagreements": self.disagreements,
            "unverified": self.unverified,
            "notes": self.notes,
            "engines": self.engines,
        }


def run_worker(
    cases: list[dict], *, jobs: int = 1, strict: bool = False, timeout: float = DEFAULT_TIMEOUT_S
) -> list[dict]:
    """Run ``python -m shardcheck.verify.worker`` on ``cases``; its results, in order."""
    hint = verify_available()
    if hint is not None:
        raise VerifyError(hint)
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the directory holding the shardcheck package
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", WORKER_MODULE, "--jobs", str(max(1, jobs))]
    if strict:
        cmd.append("--strict")
    try:
        proc = subprocess.run(
            cmd, input=json.dumps(cases), capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise VerifyError(f"the megatron-core worker did not finish in {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise VerifyError(f"the megatron-core worker exited {proc.returncode}:\n{tail}")
    try:
        results = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise VerifyError(f"the megatron-core worker wrote no JSON: {proc.stdout[:200]!r}") from None
    if not isinstance(results, list) or len(results) != len(cases):
        raise VerifyError(f"the megatron-core worker returned {len(results)} results for {len(cases)} cases")
    return results


def verify_jobs(
    jobs: list,
    findings: list[list] | None = None,
    *,
    all_ranks_limit: int = 64,
    strict: bool = False,
    worker_jobs: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[VerifyReport]:
    """:func:`verify_job` for several jobs with one worker subprocess; ``findings[i]`` are job i's (run_rules
    is called for a job whose findings are not given). ``seconds`` of each report is the whole batch's."""
    from shardcheck.rules.base import engines
    from shardcheck.rules.registry import run_rules

    t0 = time.perf_counter()
    plans: list[list[EnginePlan]] = []
    reports: list[VerifyReport] = []
    cases: list[dict] = []
    for i, job in enumerate(jobs):
        found = findings[i] if findings is not None and findings[i] is not None else run_rules(job)[0]
        job_plans = [plan_engine(job, e, found, all_ranks_limit=all_ranks_limit) for e in engines(job)]
        plans.append(job_plans)
        world = job.cluster.world.value if job.cluster.world.known else None
        report = VerifyReport(path=job.path, world=world)
        for p in job_plans:
            report.unverified.extend(p.unverified)
            report.notes.extend(n for n in p.notes if n not in report.notes)
            if p.case is not None:
                cases.append(p.case)
        if any(p.case is not None and "model" in p.case for p in job_plans):
            report.notes.extend(ASSUMPTIONS)
        reports.append(report)
    results = run_worker(cases, jobs=worker_jobs, strict=strict, timeout=timeout) if cases else []
    seconds = time.perf_counter() - t0
    it = iter(results)
    for job_plans, report in zip(plans, reports):
        report.seconds = seconds
        ranks: set[int] = set()
        selections: list[str] = []
        for p in job_plans:
            if p.case is None:
                continue
            result = next(it)
            report.megatron_version = result.get("megatron_version") or report.megatron_version
            report.disagreements.extend(compare(p.case, result, p.expected))
            ranks.update(p.ranks)
            selections.append(f"[{p.role}] {p.rank_selection}")
            if result.get("layers_note"):
                report.notes.append(f"[{p.role}] layers per stage not compared: megatron-core {result['layers_note']}")
            elif p.expected.config_valid and p.expected.layers_per_stage is None:
                note = f"[{p.role}] layers per stage not compared (shardcheck has no split for this layout)"
                report.notes.append(note)
            report.engines.append(
                {
                    "role": p.role,
                    "case": {k: v for k, v in p.case.items() if k != "ranks"},
                    "megatron": {k: v for k, v in result.items() if k != "groups"},
                    "shardcheck": p.expected.to_dict(),
                    "ranks": p.ranks,
                }
            )
        report.ranks_checked = sorted(ranks)
        report.rank_selection = (
            "; ".join(selections) if len(selections) > 1 else (selections[0].split("] ", 1)[1] if selections else "")
        )
    return reports


def verify_job(
    job,
    findings: list | None = None,
    *,
    all_ranks_limit: int = 64,
    strict: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> VerifyReport:
    """Run megatron-core on ``job``'s engines and compare with shardcheck (``findings``: the job's, from
    ``shardcheck.api.check``; computed with run_rules when not given). Every rank's groups are compared when
    the world has at most ``all_ranks_limit`` ranks, else representative ranks (``report.rank_selection``)."""
    return verify_jobs(
        [job],
        [findings] if findings is not None else None,
        all_ranks_limit=all_ranks_limit,
        strict=strict,
        timeout=timeout,
    )[0]
