"""``shardcheck diff``: what a change to a launch script changes, judged on both sides.

Each side is checked as ``shardcheck check`` would (the verdict, the layout of every engine, the rank
placement from the mesh code, the rollout layout, the memory estimate); the diff lists what differs,
the findings that are new, resolved and kept, and one summary line for a review.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.api import Result, check, mesh_grid
from shardcheck.errors import InputError

LAYOUT_FIELDS = (
    "strategy",
    "world",
    "nnodes",
    "devices_per_node",
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "vpp",
    "dp",
    "edp",
    "layers_per_stage",
    "sp",
    "fsdp_size",
    "shard",
    "replicate",
    "model_dtype",
    "param_offload",
    "optimizer_offload",
    "offload_policy",
)
ROLLOUT_FIELDS = ("engine", "tp", "dp", "ep", "pp", "gpus", "replicas", "replica_size")
LABELS = {
    "tp": "TP",
    "pp": "PP",
    "cp": "CP",
    "ep": "EP",
    "etp": "ETP",
    "vpp": "VPP",
    "dp": "DP",
    "edp": "EDP",
    "sp": "SP",
    "layers_per_stage": "layers per stage",
    "world": "world",
    "nnodes": "nodes",
    "devices_per_node": "devices per node",
    "gpus": "GPUs",
    "replicas": "replicas",
    "replica_size": "devices per replica",
    "tp-cp": "TP·CP",
}
GIB = 1 << 30
# Keys of a stage's bytes that are not terms of the device's peak: the totals, and the optimizer share on the host.
NOT_TERMS = ("total", "allocated", "optimizer_host")


@dataclass
class Side:
    """One version of a script: its check result, and the facts derived from its job."""

    label: str  # "HEAD", "work tree", a short commit id, or the file's path
    result: Result | None  # None: the file does not exist on this side
    layouts: dict[str, dict] = field(default_factory=dict)  # engine role -> layout summary (Result.layout_summary)
    placement: dict | None = None  # {"devices_per_node", "groups": {kind: {size, groups, crossing}}}
    rollout: dict | None = None
    memory: dict | None = None  # {"device", "capacity_bytes", "stages": [...], "rollout": {...}}
    context: dict[tuple[str, int], list[tuple[int, str]]] = field(default_factory=dict)  # finding's lines ± 2

    @property
    def exists(self) -> bool:
        return self.result is not None

    @property
    def no_launch(self) -> bool:
        return self.result is not None and no_launch(self.result)


@dataclass(frozen=True, slots=True)
class Change:
    what: str  # e.g. "actor.tp", "placement.ep", "rollout.dp", "verdict"
    before: object
    after: object


@dataclass
class ScriptDiff:
    path: str
    before: Side
    after: Side
    changes: list[Change]
    new: list = field(default_factory=list)  # findings only after
    resolved: list = field(default_factory=list)  # findings only before
    kept: list = field(default_factory=list)  # findings on both sides (the after side's)
    summary: str = ""

    @property
    def skipped(self) -> bool:
        """Neither side holds a launch: not a launch script, nothing to review."""
        return all(not s.exists or s.no_launch for s in (self.before, self.after))

    @property
    def exit_code(self) -> int:
        """The after side's exit status (a deleted or non-launch script: 0)."""
        if self.skipped or not self.after.exists:
            return 0
        return self.after.result.exit_code


def no_launch(result: Result) -> bool:
    """The file holds no launch command shardcheck recognises (not a launch script): check skips it."""
    return result.status == "skipped"


def judge(
    path: Path | str,
    display: str,
    label: str,
    *,
    env: dict[str, str] | None = None,
    model_config: str | None = None,
    device: str | None = None,
    host_memory: int | None = None,
    time_limit: float | None = None,
    memory_limit: int | None = None,
) -> Side:
    """Check one version of a script and derive what a diff compares, under the per-input guard
    (guard.run_input: ``time_limit`` seconds, ``memory_limit`` bytes; an internal error is this side's
    INTERNAL-ERROR finding)."""
    from shardcheck.guard import run_input

    result, failure = run_input(
        display,
        lambda: check(path, env, model_config=model_config, display=display, device=device, host_memory=host_memory),
        seconds=time_limit,
        memory=memory_limit,
    )
    if failure is not None:
        from shardcheck.api import unusable_result
        from shardcheck.settings import Settings

        result = unusable_result(display, failure.line, failure.result_kind, Settings())
    side = Side(label, result)
    side.context = _context(result.findings, Path(path), display)
    job = result.job
    if job is None:
        return side
    for role in ("actor", "ref", "critic"):
        summary = result.layout_summary(role)
        if summary is not None and (role == "actor" or summary != side.layouts.get("actor")):
            side.layouts[role] = summary
    side.placement, side.rollout = _placement(job)
    side.memory = _memory(job)
    return side


CONTEXT_LINES = 2


def _context(findings: list, local: Path, display: str) -> dict[tuple[str, int], list[tuple[int, str]]]:
    """The script lines around each finding's line, read from where the file lies now (a git side's
    temporary tree is gone after judging): ``(path, line) -> [(number, text), ...]``."""
    out: dict[tuple[str, int], list[tuple[int, str]]] = {}
    texts: dict[Path, list[str] | None] = {}
    for f in findings[:200]:
        if not f.path or not f.line or (f.path, f.line) in out:
            continue
        rel = os.path.relpath(f.path, os.path.dirname(display) or ".")
        where = Path(os.path.normpath(local.parent / rel))
        if where not in texts:
            try:
                texts[where] = (
                    where.read_text(encoding="utf-8", errors="replace").splitlines()
                    if where.is_file() and where.stat().st_size <= 4 << 20
                    else None
                )
            except OSError:
                texts[where] = None
        lines = texts[where]
        if lines is None or f.line > len(lines):
            continue
        lo, hi = max(1, f.line - CONTEXT_LINES), min(len(lines), f.line + CONTEXT_LINES)
        out[(f.path, f.line)] = [(n, lines[n - 1][:300]) for n in range(lo, hi + 1)]
    return out


def _placement(job) -> tuple[dict | None, dict | None]:
    from shardcheck.mesh.placement import LOCAL_GROUPS, RolloutReplicas, blocks_crossing, crossing_count

    layout, grid, replicas = mesh_grid(job)
    placement = None
    per_node = job.cluster.devices_per_node
    if grid is not None and per_node.known and per_node.value:
        n = per_node.value
        groups = {}
        for kind in LOCAL_GROUPS:  # from the strides: never a list of a huge world's groups
            groups[kind] = {
                "size": grid.group_size(kind),
                "groups": grid.group_count(kind),
                "crossing": crossing_count(grid, kind, n),
            }
        placement = {"role": layout.role, "devices_per_node": n, "groups": groups}
    rollout = None
    ro = job.rollout
    if ro is not None:

        def v(t):
            return t.value if t is not None and t.known else None

        ep = ro.ep if ro.ep is not None else job.value("actor_rollout_ref.rollout.expert_parallel_size")
        rollout = {
            "engine": v(ro.engine),
            "tp": v(ro.tp),
            "dp": v(ro.dp),
            "ep": v(ep),
            "pp": v(ro.pp),
            "gpus": v(ro.gpus) if ro.gpus is not None else None,
            "replicas": None,
            "replica_size": None,
        }
        if isinstance(replicas, RolloutReplicas):
            rollout["replicas"] = replicas.count
            rollout["replica_size"] = replicas.size if replicas.count else None
            # TP groups are consecutive blocks of TP ranks within replicas that tile the world
            rollout["tp_groups_crossing"] = (
                blocks_crossing(replicas.count * replicas.size, replicas.tp, per_node.value)
                if per_node.known and per_node.value
                else 0
            )
        elif isinstance(replicas, str):
            rollout["error"] = replicas
    return placement, rollout


def _memory(job) -> dict | None:
    from shardcheck.memory.estimate import estimate

    try:
        e = estimate(job, job.device_choice)
    except InputError:
        return None
    cap = e.device.memory_bytes
    doc: dict = {
        "device": e.device.name,
        "capacity_bytes": cap,
        "device_note": e.device.note,
        "stages": [],
        "rollout": None,
        "problems": list(e.problems),
    }
    if e.train is not None:
        for s in e.train.stages:
            terms = {k: b for k, b in s.bytes.items() if k not in NOT_TERMS}
            allocated = s.bytes.get("allocated", sum(terms.values()))
            if s.total > allocated:  # the device total over what torch allocates (the caching allocator's share)
                terms["overhead"] = s.total - allocated
            doc["stages"].append(
                {
                    "stage": s.stage,
                    "ranks": list(s.ranks),
                    "label": s.ranks_text(),
                    "layers": s.layers,
                    "bytes": terms,
                    "allocated_bytes": allocated,
                    "allocated_gib": round(allocated / GIB, 2),
                    "total_bytes": s.total,
                    "total_gib": round(s.total / GIB, 2),
                    "percent": round(100 * s.total / cap, 1),
                }
            )
    ro = e.rollout
    if ro is not None:
        weights = ro.weights_bytes
        kv = max(0, ro.kv_budget_bytes)
        resident = ro.training_resident_bytes
        doc["rollout"] = {
            "engine": ro.engine,
            "bytes": {"weights": weights, "kv_cache": kv, "reserve": ro.reserve_bytes, "training_resident": resident},
            "total_bytes": weights + kv + ro.reserve_bytes + resident,
            "max_concurrent_full_requests": ro.max_concurrent_full_requests,
            "requests_per_engine": ro.requests_per_engine,
        }
        total = doc["rollout"]["total_bytes"]
        doc["rollout"]["total_gib"] = round(total / GIB, 2)
        doc["rollout"]["percent"] = round(100 * total / cap, 1)
    return doc


def verdict_word(result: Result | None) -> str:
    if result is None:
        return "absent"
    return result.verdict.word


def compare(path: str, before: Side, after: Side) -> ScriptDiff:
    """The differences between two judged versions of one script."""
    changes: list[Change] = []

    def add(what: str, a, b) -> None:
        if a != b:
            changes.append(Change(what, a, b))

    rb, ra = before.result, after.result
    add("verdict", verdict_word(rb), verdict_word(ra))
    add("layout_valid", rb.layout_valid if rb else None, ra.layout_valid if ra else None)
    jb, ja = (rb.job if rb else None), (ra.job if ra else None)
    add("framework", _fw(jb), _fw(ja))
    add("model", jb.model.name if jb and jb.model else None, ja.model.name if ja and ja.model else None)
    for role in dict.fromkeys([*before.layouts, *after.layouts]):
        lb, la = before.layouts.get(role) or {}, after.layouts.get(role) or {}
        for name in LAYOUT_FIELDS:
            add(f"{role}.{name}", lb.get(name), la.get(name))
    pb = (before.placement or {}).get("groups", {})
    pa = (after.placement or {}).get("groups", {})
    for kind in dict.fromkeys([*pb, *pa]):
        if (pb.get(kind) or {}).get("crossing") != (pa.get(kind) or {}).get("crossing"):
            add(
                f"placement.{kind}",
                _crossing_text(kind, pb.get(kind), before.placement),
                _crossing_text(kind, pa.get(kind), after.placement),
            )
    ob, oa = before.rollout or {}, after.rollout or {}
    for name in ROLLOUT_FIELDS:
        add(f"rollout.{name}", ob.get(name), oa.get(name))
    peak_b, peak_a = _peak(before.memory), _peak(after.memory)
    add("memory.peak_gib", peak_b and peak_b["total_gib"], peak_a and peak_a["total_gib"])
    new, resolved, kept = match_findings(rb.findings if rb else [], ra.findings if ra else [])
    d = ScriptDiff(path, before, after, changes, new, resolved, kept)
    d.summary = summary_line(d)
    return d


def _fw(job) -> str | None:
    return f"{job.framework} {job.framework_version}" if job is not None else None


def _crossing_text(kind: str, g: dict | None, placement: dict | None) -> str | None:
    if g is None or placement is None:
        return None
    name = LABELS.get(kind, kind.upper())
    if g["size"] <= 1:
        return f"{name} 1"
    if not g["crossing"]:
        return f"{name} {g['size']}: inside nodes of {placement['devices_per_node']}"
    return f"{name} {g['size']}: {g['crossing']} of {g['groups']} groups cross nodes of {placement['devices_per_node']}"


def _peak(memory: dict | None) -> dict | None:
    if not memory or not memory["stages"]:
        return None
    return max(memory["stages"], key=lambda s: s["total_bytes"])


def match_findings(before: list, after: list) -> tuple[list, list, list]:
    """(new, resolved, kept): a finding is kept when the same rule fires for the same engine role on both
    sides, with the same message if one such exists, else the first of that rule (its figures may change
    with the layout); line numbers are not compared (an edit above moves them)."""
    left = list(before)
    new: list = []
    kept: list = []
    for f in after:
        match = next((b for b in left if (b.rule, b.role, b.message) == (f.rule, f.role, f.message)), None)
        if match is None:
            match = next((b for b in left if (b.rule, b.role) == (f.rule, f.role)), None)
        if match is None:
            new.append(f)
        else:
            left.remove(match)
            kept.append(f)
    return new, left, kept


def folding_needed(layout: dict | None) -> bool:
    """Whether the expert layout relies on MoE parallel folding (megatron-core ≥ 0.10: the expert grid
    EP·ETP·EDP·PP is its own factorisation of the world, rules/megatron_parallel_state.py); before it the
    experts were split inside the data-parallel group with ETP = TP."""
    if not layout or not layout.get("ep") or layout["ep"] <= 1:
        return False
    dp, ep, etp, tp = layout.get("dp"), layout["ep"], layout.get("etp"), layout.get("tp")
    return dp is None or dp % ep != 0 or (etp is not None and etp != tp)


def summary_line(d: ScriptDiff) -> str:
    """One line for a review: the after side's verdict, what moved across node boundaries, the peak."""
    if d.skipped:
        return "not a launch script on either side; skipped"
    ra = d.after.result
    if ra is None:
        return "deleted"
    parts: list[str] = []
    word = verdict_word(ra)
    head = "after: " + word
    job = ra.job
    actor = d.after.layouts.get("actor")
    if job is not None and word == "valid":
        head += f" on {job.framework} {job.framework_version}"
        if actor and actor.get("strategy") == "megatron" and folding_needed(actor):
            head += " with megatron-core ≥ 0.10"
    elif job is not None:
        errors = sorted({f.rule for f in ra.findings if f.severity == "error"})
        if errors:
            head += f" ({', '.join(errors[:3])}{' …' if len(errors) > 3 else ''})"
        if ra.layout_valid and actor and actor.get("strategy") == "megatron":
            head += "; the Megatron-Core layout itself is valid"
            if folding_needed(actor):
                head += " with megatron-core ≥ 0.10"
    elif ra.error is not None:
        head += f": {ra.error}"
    if d.before.result is None:
        head += " (new file)"
    parts.append(head)
    pb = (d.before.placement or {}).get("groups", {})
    pa = (d.after.placement or {}).get("groups", {})
    for kind, g in pa.items():
        old = pb.get(kind)
        if old is None:
            continue
        name = LABELS.get(kind, kind.upper())
        if old["crossing"] and not g["crossing"]:
            parts.append(f"{name} groups now stay inside a node")
        elif g["crossing"] and not old["crossing"]:
            parts.append(f"{name} groups now cross nodes ({g['crossing']} of {g['groups']})")
    peak_b, peak_a = _peak(d.before.memory), _peak(d.after.memory)
    if peak_b and peak_a:
        delta = (peak_a["total_bytes"] - peak_b["total_bytes"]) / GIB
        if abs(delta) >= 0.005:
            sign = "−" if delta < 0 else "+"
            where = (
                f"stage {peak_a['label']}"
                if peak_a["label"] == peak_b["label"]
                else f"stage {peak_b['label']} → {peak_a['label']}"
            )
            parts.append(
                f"peak {sign}{abs(delta):.2f} GiB ({peak_b['total_gib']:.2f} → {peak_a['total_gib']:.2f} GiB, {where})"
            )
        else:
            parts.append(f"peak unchanged ({peak_a['total_gib']:.2f} GiB)")
    counts = f"findings: {len(d.new)} new, {len(d.resolved)} resolved, {len(d.kept)} kept"
    parts.append(counts)
    return "; ".join(parts)


# ---- entry points ------------------------------------------------------------------------------------------


@dataclass
class DiffOptions:
    env: dict[str, str] | None = None
    model_config: str | None = None
    device: str | None = None
    host_memory: int | None = None
    jobs: int = 0  # worker processes for the checks; 0: one per CPU (at most 8) when there are many scripts
    time_limit: float | None = None  # the per-input guard of each side (guard.run_input); None: no limit
    memory_limit: int | None = None

    def kwargs(self) -> dict:
        return {
            "env": self.env,
            "model_config": self.model_config,
            "device": self.device,
            "host_memory": self.host_memory,
            "time_limit": self.time_limit,
            "memory_limit": self.memory_limit,
        }


def diff_files(before: str, after: str, options: DiffOptions | None = None) -> list[ScriptDiff]:
    """Two scripts on disk (e.g. a copy before an edit, and the edited one)."""
    o = options or DiffOptions()
    sb = judge(before, before, before, **o.kwargs())
    sa = judge(after, after, after, **o.kwargs())
    return [compare(after, sb, sa)]


def parse_rev_range(spec: str | None) -> tuple[str, str | None]:
    """``None`` → (HEAD, work tree); ``REV`` → (REV, work tree); ``A..B`` → (A, B)."""
    if not spec:
        return "HEAD", None
    if "..." in spec:
        raise InputError(f"--git {spec}: use A..B (two dots): shardcheck compares the two revisions as given")
    if ".." in spec:
        a, _, b = spec.partition("..")
        return a or "HEAD", b or "HEAD"
    return spec, None


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    """Relative model paths in a script resolve against the current directory, as at launch: for a side read
    from git objects that is the same directory inside that revision's temporary tree."""
    old = Path.cwd()
    try:
        os.chdir(path)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.chdir(old)


def diff_git(
    spec: str | None, paths: list[str] | None = None, options: DiffOptions | None = None, cwd: Path | None = None
) -> list[ScriptDiff]:
    """Compare launch scripts between two revisions (or a revision and the work tree).

    ``paths`` (relative to ``cwd`` or absolute, inside the repository) limit the comparison: a file is
    compared (and reported even without a launch), a directory stands for its changed scripts; without
    them every changed ``*.sh`` / ``*.bash`` file is compared, and those without a launch on either
    side are left out.
    """
    from shardcheck.review.git_source import RevisionTree, changed_files, is_script_path, repo_root, resolve_rev

    o = options or DiffOptions()
    here = (cwd or Path.cwd()).resolve()
    root = repo_root(here).resolve()
    rev_a, rev_b = parse_rev_range(spec)
    commit_a = resolve_rev(root, rev_a)
    commit_b = resolve_rev(root, rev_b) if rev_b is not None else None
    explicit: set[str] = set()  # files named on the command line: reported even without a launch
    changed = [p for p in changed_files(root, commit_a, commit_b) if is_script_path(p)]
    if paths:
        wanted = []
        for given in paths:
            p = _repo_path(root, here, given)
            below = [c for c in changed if p in ("", ".") or c.startswith(p.rstrip("/") + "/")]
            if (root / p).is_dir() or (below and not (root / p).is_file()):  # a directory: its changed scripts
                wanted += [c for c in below if c not in wanted]
            elif p not in wanted:
                wanted.append(p)
                explicit.add(p)
    else:
        wanted = changed
    rel_cwd = here.relative_to(root) if here.is_relative_to(root) else Path()
    label_a = rev_a if rev_b is not None or rev_a != "HEAD" else "HEAD"
    label_b = rev_b if rev_b is not None else "work tree"
    out: list[ScriptDiff] = []
    tree_a = RevisionTree(root, commit_a)
    tree_b = RevisionTree(root, commit_b) if commit_b is not None else None
    try:
        tree_a.materialise(wanted)
        if tree_b is not None:
            tree_b.materialise(wanted)
        tasks = [(str(tree_a.local(p)), p, label_a, str(tree_a.root / rel_cwd)) for p in wanted if tree_a.has(p)]
        if tree_b is not None:
            tasks += [(str(tree_b.local(p)), p, label_b, str(tree_b.root / rel_cwd)) for p in wanted if tree_b.has(p)]
        else:
            tasks += [(str(root / p), p, label_b, str(here)) for p in wanted if (root / p).is_file()]
        judged = _judge_all(tasks, o)
        sides_a = {p: judged.get((label_a, p)) or Side(label_a, None) for p in wanted}
        sides_b = {p: judged.get((label_b, p)) or Side(label_b, None) for p in wanted}
    finally:
        tree_a.close()
        if tree_b is not None:
            tree_b.close()
    for p in wanted:
        if p in explicit and not sides_a[p].exists and not sides_b[p].exists:
            raise InputError(f"{p}: neither in {label_a} nor in {label_b}; give the path of a launch script there")
        d = compare(p, sides_a[p], sides_b[p])
        if p in explicit or not d.skipped:
            out.append(d)
    return out


PARALLEL_FROM = 8  # sides to judge before worker processes pay for themselves (each check takes ~0.1 s)


def _judge_task(task: tuple[str, str, str, str], options: DiffOptions) -> Side:
    """One side: read the script where it lies, from the directory relative model paths resolve against."""
    local, shown, label, cwd = task
    with _cwd(Path(cwd)):
        return judge(local, shown, label, **options.kwargs())


def _judge_all(tasks: list[tuple[str, str, str, str]], o: DiffOptions) -> dict[tuple[str, str], Side]:
    """Judge every side, in worker processes when there are many (``DiffOptions.jobs``)."""
    jobs = o.jobs or min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(tasks) < PARALLEL_FROM:
        return {(t[2], t[1]): _judge_task(t, o) for t in tasks}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method)) as pool:
        sides = list(pool.map(partial(_judge_task, options=o), tasks, chunksize=max(1, len(tasks) // (4 * jobs))))
    return {(t[2], t[1]): side for t, side in zip(tasks, sides)}


def _repo_path(root: Path, here: Path, given: str) -> str:
    p = Path(given)
    full = (p if p.is_absolute() else here / p).resolve()
    if not full.is_relative_to(root):
        raise InputError(f"{given}: outside the repository {root}; give a path inside it")
    return full.relative_to(root).as_posix()
