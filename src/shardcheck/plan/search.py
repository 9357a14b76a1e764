"""Search the layouts of a job: keep those every start-up rule accepts and whose peak fits, fastest first.

A candidate is the script's job with the plan's keys set (the framework's ``plan_keys.apply``), judged by
``run_rules`` — the rules ``check`` runs, all of them — and by the memory estimate the MEM rules use,
with a stated margin below the device's memory. Candidates are visited in order of a lower bound of
their step time (compute only: every communication term is ≥ 0), refined to the model's time before
they are judged, so the first ``top`` valid ones are the fastest the model knows; ``keep_all`` judges the
whole (pruned) space instead (tests compare that set with a brute-force enumeration).
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import time
from dataclasses import dataclass, field, replace

from shardcheck.errors import ShardcheckError
from shardcheck.estimate.step_time import StepTime, rollout_time, step_time
from shardcheck.job import Job
from shardcheck.memory.devices import Device, device_for
from shardcheck.origin import UnknownValue
from shardcheck.plan.ranking import MODEL_ERROR, Ranking, savers_lost, warnings_of
from shardcheck.plan.space import (
    Memory,
    Rollout,
    Space,
    TrainLayout,
    divisors,
    memory_options,
    recompute_options,
    rollout_layouts,
    train_layouts,
)
from shardcheck.rules.memory import job_estimate
from shardcheck.rules.registry import Finding, run_rules

DEFAULT_MARGIN = 0.10  # the planned peak stays below 90 % of the device's memory
ADAPTERS = {
    "verl": "shardcheck.frameworks.verl.plan_keys",
    "megatron-lm": "shardcheck.frameworks.megatron_lm.plan_keys",
    "slime": "shardcheck.frameworks.megatron_lm.plan_keys",
}
# Rules about the input's words (an unknown key, a shell construct): no layout changes them, so a plan is
# judged without them; the report says which the script has (shardcheck.rules.registry._INPUT_RULES).
INPUT_RULES = (
    "SHELL-",
    "HYDRA-",
    "VERL-CFG-UNKNOWN-KEY",
    "VERL-CFG-ADDED-",
    "VERL-CONFIG-",
    "MODEL-",
    "MLM-FLAG-",
    "VALUE-BAD-",
)
ROLLOUT_RULES = ("VERL-RO-", "VLLM-", "SGLANG-", "MEM-ROLLOUT-")
# Rollout rules that also read what the colocated training side keeps on the device (its weights, gradients and
# optimizer state unless offloaded): the rollout screen holds the script's own training layout, so these would
# reject a rollout that another training layout (more sharding, offload) makes start. They judge each candidate
# with its own training layout in ``judge`` instead.
TRAINING_SIDE_RULES = ("VLLM-MEM-STARTUP", "VLLM-MEM-WAKE")


def rollout_rejects(findings: list[Finding]) -> bool:
    """The rollout screen's verdict: an error of a rollout rule that reads the rollout's sizes alone."""
    return any(f.rule.startswith(ROLLOUT_RULES) and f.rule not in TRAINING_SIDE_RULES for f in errors_of(findings))


class PlanError(ShardcheckError):
    """The job cannot be planned (no model, an FSDP engine, an unknown size): one line saying why."""


@dataclass
class Plan:
    layout: TrainLayout
    memory: Memory
    rollout: Rollout | None
    job: Job
    changes: dict[str, object]
    lines: list[str]
    peak_bytes: int
    step: StepTime
    findings: list[Finding] = field(default_factory=list)
    rank: int = 0
    removed: list[tuple[str, bool, str]] = field(default_factory=list)  # (flag, takes a value, where) to delete

    @property
    def seconds(self) -> float:
        return self.step.total


@dataclass
class PlanResult:
    job: Job
    device: Device
    margin: float
    plans: list[Plan]
    current: Plan | None
    current_valid: bool
    current_errors: list[Finding]
    current_rank: int | None  # None: not among the layouts visited (rank_floor says how many are faster)
    rank_floor: int
    input_errors: list[Finding]
    counts: dict[str, int]
    seconds: float
    proven: bool = False
    untimed_rollouts: dict[str, Rollout] = field(default_factory=dict)  # left out: rollout time unknown (why)
    # when no rollout layout passed the rollout rules: each rule that rejected one -> its first message
    rollouts_rejected: dict[str, str] = field(default_factory=dict)


def adapter_for(job: Job):
    name = ADAPTERS.get(job.framework)
    if name is None:
        raise PlanError(f"plan searches verl, Megatron-LM and slime Megatron jobs; {job.framework} is not one")
    return importlib.import_module(name)


def space_for(job: Job, adapter) -> Space:
    model = job.model
    if model is None or not model.num_hidden_layers or not model.num_attention_heads:
        raise PlanError(f"no model facts ({job.model_problem or 'model not found'}); give --model-config")
    if job.layout("actor") is None:
        raise PlanError(
            "plan searches Megatron layouts; this job's training engine is not Megatron "
            "(set actor_rollout_ref.actor.strategy=megatron to plan one)"
        )
    world = job.cluster.world
    if not world.known or not world.value:
        raise PlanError(f"the world size is unknown ({world.unknown}); give it with --env")
    lay = job.layout("actor")
    return default_space(
        world.value,
        job.cluster.devices_per_node.value or world.value,
        model.num_hidden_layers,
        model.num_attention_heads,
        model.num_key_value_heads or model.num_attention_heads,
        model.num_experts or 0,
        adapter,
        job.rollout is not None,
        account=(bool(lay.account_for_embedding.value), bool(lay.account_for_loss.value)),
    )


def default_space(
    world: int,
    per_node: int,
    layers: int,
    heads: int,
    kv_heads: int,
    experts: int,
    adapter,
    rollout: bool,
    account: tuple[bool, bool] = (False, False),
) -> Space:
    """The space ``plan`` searches by default (docs/plan.md): TP and rollout TP within a node, ETP 1 or TP,
    VPP up to 4, first / last stages of ceil(L/PP) − 2 … ceil(L/PP) layers; every other size any divisor."""
    within = tuple(d for d in divisors(world) if d <= per_node)
    return Space(
        world=world,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        experts=experts,
        orders=adapter.ORDERS,
        tp=within,
        pp=tuple(d for d in divisors(world) if d <= layers),
        cp=tuple(divisors(world)),
        ep=tuple(d for d in divisors(world) if not experts or experts % d == 0) if experts else (1,),
        etp=(None, 1) if experts else (None,),
        vpp=(None, 2, 3, 4),
        end_spread=2,
        offload=adapter.OFFLOAD,
        rollout=rollout and adapter.ROLLOUT,
        rollout_tp=within,
        rollout_dp=tuple(divisors(world)),
        account=account,
    )


def _knobs(t: TrainLayout, m: Memory, r: Rollout | None) -> dict[str, object]:
    _, gran, method, layers = m.recompute
    out: dict[str, object] = {
        "tp": t.tp,
        "pp": t.pp,
        "cp": t.cp,
        "ep": t.ep,
        "etp": t.etp,
        "vpp": t.vpp,
        "first": t.first,
        "last": t.last,
        "order": t.order,
        "recompute_granularity": gran,
        "recompute_method": method,
        "recompute_num_layers": layers,
        "distributed_optimizer": m.distributed_optimizer,
    }
    if m.offload is not None:
        out["param_offload"] = out["optimizer_offload"] = m.offload
    if r is not None:
        out.update(rollout_tp=r.tp, rollout_dp=r.dp, rollout_ep=r.ep)
    return out


def changes_of(adapter, base: dict[str, object], knobs: dict[str, object]) -> dict[str, object]:
    out = {k: v for k, v in knobs.items() if k in adapter.KNOBS and base.get(k, object()) != v}
    if any(k.startswith("recompute_") for k in out):  # the three recompute keys go together
        out.update(
            {
                k: knobs[k]
                for k in ("recompute_granularity", "recompute_method", "recompute_num_layers")
                if base.get(k) != knobs[k] or k == "recompute_granularity"
            }
        )
    return out


def errors_of(findings: list[Finding], skip: tuple[str, ...] = INPUT_RULES) -> list[Finding]:
    """The findings that reject a layout: errors and VALUE-UNKNOWN, less the rules about the input's words."""
    return [f for f in findings if (f.severity == "error" or f.rule == "VALUE-UNKNOWN") and not f.rule.startswith(skip)]


def knob_view(job: Job) -> dict[str, object]:
    """The plan knobs as the job holds them (to compare a re-resolved job with the planner's)."""
    return adapter_for(job).current(job)


def _peak(job: Job) -> int | None:
    est = job_estimate(job)
    if est is None or est.train is None:
        return None
    return max(s.total for s in est.train.stages)


class _Search:
    def __init__(self, job: Job, device: Device, margin: float, space: Space | None):
        self.adapter = adapter_for(job)
        from shardcheck.memory.devices import device_choice

        self.job = replace(job, device_choice=device_choice(device))  # a --device-memory card stays findable
        self.device = device
        self.limit = device.memory_bytes * (1 - margin)
        self.space = space or space_for(self.job, self.adapter)
        self.base = self.adapter.current(self.job)
        self.bound = _Bound(self)
        self.ranking = Ranking(self.base, self.space.layers, self.space.account, INPUT_RULES)
        self.expressible = getattr(self.adapter, "expressible", None)  # (job, changes) -> bool; None: all are
        self.untimed: dict[str, Rollout] = {}  # why a rollout layout's time is unknown -> the first such layout
        self.rejected: dict[str, str] = {}  # rule -> its message on the first rollout layout the screen rejected
        self.lean_fits: dict[tuple, bool] = {}  # (layout, recompute) -> whether its leanest memory option fits
        self.timed_jobs: dict[tuple, tuple] = {}  # (layout, memory) -> (rollout, job) timed with the first rollout
        self.timed: dict[tuple, float | None] = {}  # (layout, memory, rollout) -> train_seconds
        self.counts = {
            "layouts": 0,
            "memory_options": 0,
            "rollouts": 0,
            "bounded": 0,
            "refined": 0,
            "timed": 0,
            "judged": 0,
            "kept": 0,
        }

    def candidate(self, t: TrainLayout, m: Memory, r: Rollout | None) -> tuple[dict, Job]:
        changes = changes_of(self.adapter, self.base, _knobs(t, m, r))
        return changes, self.adapter.apply(self.job, changes)

    def rollouts(self) -> list[tuple[float, Rollout | None]]:
        """Rollout layouts no rollout rule rejects, with their rollout seconds, fastest first."""
        if not self.space.rollout:
            return [(0.0, None)]
        out = []
        for r in rollout_layouts(self.space):
            self.counts["rollouts"] += 1
            changes = changes_of(self.adapter, self.base, {"rollout_tp": r.tp, "rollout_dp": r.dp, "rollout_ep": r.ep})
            job = self.adapter.apply(self.job, changes)
            job_estimate(job, train_of=self.job)  # only the rollout's sizes differ: the training part is shared
            findings, _ = run_rules(job, only=ROLLOUT_RULES)  # the rollout rules alone decide this screen
            if rollout_rejects(findings):
                first = next(f for f in errors_of(findings) if f.rule.startswith(ROLLOUT_RULES))
                self.rejected.setdefault(first.rule, first.message)
                continue
            try:
                step = rollout_time(job, job_estimate(job))
            except UnknownValue as exc:
                # never ranked as free: a rollout whose time is unknown is left out, and the report says so
                self.counts["rollouts_untimed"] = self.counts.get("rollouts_untimed", 0) + 1
                self.untimed.setdefault(str(exc), r)
                continue
            out.append((step.phases.get("rollout", 0.0) + step.phases.get("sync", 0.0), r))
        out.sort(key=lambda x: x[0])
        return out

    def train_options(self):
        floor = _StaticFloor(self.job)
        for t in train_layouts(self.space):
            self.counts["layouts"] += 1
            chunk = self._chunk(t)
            fits: dict[bool, bool] = {}
            for m in memory_options(self.space, chunk):
                if self._kept(t, m, floor, fits):
                    yield t, m

    def options(self, t: TrainLayout, recompute: tuple, floor: _StaticFloor) -> list[Memory]:
        """The memory options of ``t`` with this recompute (distributed optimizer × offload) that the
        framework can express and the memory floor keeps."""
        fits: dict[bool, bool] = {}
        return [
            m
            for d in self.space.distributed_optimizer
            for o in self.space.offload
            if self._kept(t, m := Memory(recompute, d, o), floor, fits)
        ]

    def _kept(self, t: TrainLayout, m: Memory, floor: _StaticFloor, fits: dict[bool, bool]) -> bool:
        if self.expressible is not None and not self.expressible(
            self.job, changes_of(self.adapter, self.base, _knobs(t, m, None))
        ):
            return False
        if m.distributed_optimizer not in fits:
            fits[m.distributed_optimizer] = floor.bytes(t, m.distributed_optimizer) <= self.limit
        if not fits[m.distributed_optimizer]:
            self.counts["static_pruned"] = self.counts.get("static_pruned", 0) + 1
            return False
        self.counts["memory_options"] += 1
        return True

    def _chunk(self, t: TrainLayout) -> int:
        per = -(-self.space.layers // t.pp)
        return max(1, per // (t.vpp or 1))

    def judge(self, t: TrainLayout, m: Memory, r: Rollout | None) -> Plan | None:
        """The plan of this candidate when every start-up rule accepts it and its peak fits; else None."""
        changes, job = self.candidate(t, m, r)
        timed_r, timed = self.timed_jobs.get((t, m), (None, None))  # the job timed, with its estimate
        if timed is not None and timed_r == r:
            job = timed
        elif timed is not None:
            job_estimate(job, train_of=timed)  # only the rollout's sizes differ: the training part is shared
        self.counts["judged"] += 1
        findings, _ = run_rules(job)
        errors = errors_of(findings)
        peak = _peak(job)
        if errors or peak is None or peak > self.limit:
            return None
        try:
            step = step_time(job, job_estimate(job))
        except UnknownValue:
            return None
        self.counts["kept"] += 1
        removed = self.adapter.removals(self.job, changes) if hasattr(self.adapter, "removals") else []
        lines = self.adapter.lines(self.job, changes)
        return Plan(t, m, r, job, changes, lines, peak, step, findings, removed=removed)

    def lean(self, m: Memory) -> Memory:
        """The option of ``m``'s recompute with the least training memory: the distributed optimizer shards
        the optimizer states and offload moves the ref's weights off the device during the update, so the
        training peak never grows with either (tests/test_plan.py checks this on random layouts)."""
        return Memory(m.recompute, any(self.space.distributed_optimizer), True in self.space.offload or m.offload)

    def train_seconds(self, t: TrainLayout, m: Memory, r: Rollout | None) -> float | None:
        """The model's training-side seconds (everything but the rollout), None when the peak does not fit.

        A layout and recompute whose leanest memory option does not fit are dropped with every other option
        of theirs, after one estimate."""
        if (t, m, r) in self.timed:
            return self.timed[(t, m, r)]
        lean = self.lean(m)
        group = (t, m.recompute)
        if m != lean and group not in self.lean_fits:
            self.train_seconds(t, lean, r)
        if self.lean_fits.get(group) is False:
            return None
        self.timed[(t, m, r)] = seconds = self._train_seconds(t, m, r, lean)
        return seconds

    def _train_seconds(self, t: TrainLayout, m: Memory, r: Rollout | None, lean: Memory) -> float | None:
        _, job = self.candidate(t, m, r)
        self.counts["timed"] += 1
        peak = _peak(job)
        if m == lean and peak is not None:
            self.lean_fits[(t, m.recompute)] = peak <= self.limit
        if peak is None or peak > self.limit:
            return None
        try:
            step = step_time(job, job_estimate(job))
        except UnknownValue:
            return None
        self.timed_jobs[(t, m)] = (r, job)
        return step.total - step.phases.get("rollout", 0.0) - step.phases.get("sync", 0.0)

    def lower_bound(self, t: TrainLayout, m: Memory, r: Rollout | None, *, layout: bool = False) -> float | None:
        """``train_lower_bound`` of the candidate, from parts shared between candidates (equal by test); with
        ``layout`` the tighter bound of its own layout (``_Bound.seconds``)."""
        self.counts["refined" if layout else "bounded"] += 1
        try:
            return self.bound.seconds(t, m, layout=layout)
        except UnknownValue:
            return None


class _Bound:
    """train_lower_bound without building a Job per candidate: the batch settings depend on DP and CP only,
    the layer split on PP, VPP and the stage sizes; both are computed once (by the same functions)."""

    def __init__(self, search: _Search):
        from shardcheck.estimate.speeds import speeds_for
        from shardcheck.estimate.step_time import architecture_of, forward_passes, optimizer_steps
        from shardcheck.memory.estimate import adapter_for

        self.search = search
        job = search.job
        self.arch = architecture_of(job.model) if job.model is not None else None
        self.adapter = adapter_for(job)
        try:
            self.speeds = speeds_for(search.device.name)
        except KeyError:  # a device without measured speeds (--device-memory): no layout is timed, as step_time
            self.speeds = None
        self.steps, self.passes = optimizer_steps(job), forward_passes(job)
        self.settings: dict = {}
        self.splits: dict = {}
        self.shapes: dict = {}

    def family(self, t: TrainLayout) -> tuple:
        """The sizes ``floor`` reads: TP, CP and PP (DP follows from them)."""
        return (t.tp, t.cp, t.pp)

    def floor(self, t: TrainLayout) -> float:
        """A lower bound of ``seconds`` for every layout of ``t``'s family, whatever its virtual pipeline, stage
        sizes and recompute (step_time.pipeline_floor)."""
        from shardcheck.estimate.step_time import pipeline_floor

        if self.arch is None or self.speeds is None:
            raise UnknownValue("no model" if self.arch is None else f"no speeds for {self.search.device.name}")
        g, settings = self._grid(t, None)
        vpp = max(v or 1 for v in self.search.space.vpp)
        return pipeline_floor(self.arch, g, settings, self.speeds, self.steps, self.passes, vpp)

    def _grid(self, t: TrainLayout, recompute: tuple | None):
        """The grid of ``t`` and the training settings of its DP and CP (with ``recompute`` when given)."""
        from shardcheck.estimate.step_time import Grid
        from shardcheck.frameworks.memory_settings import Recompute

        world = self.search.space.world
        etp = t.etp if t.etp is not None else t.tp
        dp, edp = world // (t.tp * t.pp * t.cp), world // (etp * t.ep * t.pp)
        key = (t.cp, dp)
        if key not in self.settings:
            first = Memory(("none", None, None, None), self.search.space.distributed_optimizer[0], None)
            _, job = self.search.candidate(t, first, None)
            self.settings[key] = self.adapter.train_settings(job, job.layout("actor"), dp)
        settings = self.settings[key]
        if recompute is not None:
            _, gran, method, layers = recompute
            settings = replace(settings, recompute=Recompute(gran, method, layers, settings.recompute.modules))
        lay = self.search.job.layout("actor")
        g = Grid(
            tp=t.tp,
            pp=t.pp,
            cp=t.cp,
            ep=t.ep,
            etp=etp,
            dp=dp,
            edp=edp,
            vpp=t.vpp or 1,
            order=t.order,
            sequence_parallel=bool(lay.sequence_parallel.value),
        )
        return g, settings

    def shape(self, t: TrainLayout) -> tuple:
        """What the bound reads of a layout besides the recompute (the bound does not depend on EP, ETP or the
        rank order)."""
        return (t.tp, t.cp, t.pp, t.vpp, t.first, t.last)

    def seconds(self, t: TrainLayout, m: Memory, *, layout: bool = False) -> float:
        """The compute bound of ``t``'s shape; with ``layout``, ``t``'s own passes with their communication
        (step_time.compute_bound ``comm``), a tighter bound of this one layout and recompute."""
        from shardcheck.estimate.step_time import compute_bound
        from shardcheck.frameworks.megatron.pipeline import Split, split_layers, stage_layer_indices

        if self.arch is None or self.speeds is None:
            raise UnknownValue("no model" if self.arch is None else f"no speeds for {self.search.device.name}")
        world = self.search.space.world
        dp = world // (t.tp * t.pp * t.cp)
        # the compute bound does not depend on EP, ETP or the rank order (step_time.layer_seconds ``bound``: the
        # experts at their FLOPs alone): one bound per remaining shape
        shape = (t, m.recompute) if layout else (t.tp, t.cp, t.pp, t.vpp, t.first, t.last, dp, m.recompute)
        if shape in self.shapes:
            return self.shapes[shape]
        g, settings = self._grid(t, m.recompute)
        skey = (t.pp, t.first, t.last, t.vpp)
        if skey not in self.splits:
            L = self.arch.num_layers
            emb, loss = self.search.space.account
            split = split_layers(
                L, t.pp, first=t.first, last=t.last, vpp=t.vpp, account_for_embedding=emb, account_for_loss=loss
            )
            if not isinstance(split, Split):
                raise UnknownValue("split")
            try:
                self.splits[skey] = stage_layer_indices(
                    split, L, vpp=t.vpp, account_for_embedding=emb, account_for_loss=loss
                )
            except ValueError:  # a split that builds fewer layers than the model has (PP 1 with first and last)
                raise UnknownValue("split") from None
        seconds = compute_bound(
            self.arch, g, self.splits[skey], settings, self.speeds, self.steps, self.passes, comm=layout
        )
        self.shapes[shape] = seconds
        return seconds


class _StaticFloor:
    """A lower bound of a layout's peak: the mean over pipeline stages of weights + grads + optimizer state.

    The estimate's peak is its largest stage's total, which holds these terms and more (activations,
    logits, workspace), and the largest stage holds at least the mean: so a layout whose floor exceeds the
    limit cannot fit (tests/test_plan.py checks floor ≤ peak on random layouts). Counts are
    memory/params.py's, per layer kind.
    """

    def __init__(self, job: Job):
        from shardcheck.memory.estimate import adapter_for
        from shardcheck.models.architecture import NotModelled, architecture

        self.arch = self.settings = None
        try:
            self.arch = architecture(job.model)
            lay = job.layout("actor")
            self.settings = adapter_for(job).train_settings(job, lay, 1)
        except (NotModelled, UnknownValue, TypeError, ZeroDivisionError):
            self.arch = None
        self.world = job.cluster.world.value
        self.cache: dict = {}

    def bytes(self, t: TrainLayout, distributed: bool) -> float:
        if self.arch is None or self.settings is None:
            return 0.0
        from shardcheck.memory.params import Sharding, layer_params, padded_vocab

        a, st = self.arch, self.settings
        etp = t.etp if t.etp is not None else t.tp
        sharding = Sharding(t.tp, t.ep, etp, t.pp, st.vocab_divisible_by)
        key = (sharding,)
        if key not in self.cache:
            kinds: dict[tuple[bool, bool], tuple[int, int]] = {}
            dense = expert = 0
            for i in range(a.num_layers):
                kind = a.layer_kind(i)
                if kind not in kinds:
                    kinds[kind] = layer_params(a, i, sharding)
                dense += kinds[kind][0]
                expert += kinds[kind][1]
            rows = padded_vocab(a.vocab, sharding) // t.tp
            # tied unknown (None): the output layer counted, the larger size, so a plan never rests on a guess
            # that it fits
            dense += (rows + a.position_embeddings) * a.hidden + (rows * a.hidden if not a.tied or t.pp > 1 else 0)
            self.cache[key] = (dense, expert)
        dense, expert = self.cache[key]
        dp = self.world // (t.tp * t.pp * t.cp)
        edp = self.world // (etp * t.ep * t.pp)
        shards = (dp * t.cp, edp) if distributed else (1, 1)
        opt = (dense / shards[0] + expert / shards[1]) * st.state_bytes * st.optimizer_on_device
        return ((dense + expert) * (st.weight_bytes + st.grad_bytes) + opt) / t.pp


def _current(search: _Search, findings: list[Finding]) -> tuple[Plan | None, list[Finding], bool]:
    """The script's own layout as a plan (``findings``: every rule's on the script's job), its errors, and
    whether it is valid and fits."""
    job = search.job
    errors = errors_of(findings)
    peak = _peak(job)
    try:
        step = step_time(job, job_estimate(job))
    except UnknownValue:
        step = None
    choice = _base_choice(search)
    if step is None or choice is None:
        return None, errors, False
    t, m, r = choice
    fits = peak is not None and peak <= search.limit
    plan = Plan(t, m, r, job, {}, [], peak or 0, step, findings)
    return plan, errors, not errors and fits


def _base_choice(search: _Search) -> tuple[TrainLayout, Memory, Rollout | None] | None:
    """The script's own layout, memory and rollout choices (None when a size is unknown)."""
    b = search.base
    if any(b.get(k) is None for k in ("tp", "pp", "cp", "ep")):
        return None
    t = TrainLayout(
        b["tp"],
        b["pp"],
        b["cp"],
        b["ep"],
        b.get("etp"),
        b.get("vpp"),
        b.get("first"),
        b.get("last"),
        b.get("order") or search.space.orders[0],
    )
    rc = (
        b.get("recompute_granularity") or "none",
        b.get("recompute_granularity"),
        b.get("recompute_method"),
        b.get("recompute_num_layers"),
    )
    m = Memory(rc, bool(b.get("distributed_optimizer")), b.get("param_offload"))
    r = Rollout(b["rollout_tp"], b["rollout_dp"], b.get("rollout_ep") or 1) if search.space.rollout else None
    return t, m, r


LAYOUT_KEYS = frozenset(("tp", "pp", "cp", "ep", "etp", "vpp", "first", "last", "order"))
ROLLOUT_KEYS = frozenset(("rollout_tp", "rollout_dp", "rollout_ep"))


def nearest(
    job: Job, *, top: int = 3, budget: int = 40, margin: float = DEFAULT_MARGIN, device: str | None = None
) -> list[Plan]:
    """The valid layouts with the fewest changed keys (``check`` names them when no single key fixes a job):
    candidates of the planner's default space in order of their changed-key count, each judged like a plan
    (every rule, the memory margin), until ``top`` are found or ``budget`` were judged."""
    kind = job.cluster.device.value if job.cluster.device.known else None
    search = _Search(job, device_for(device or job.device_choice, kind), margin, None)
    choice = _base_choice(search)
    if choice is None:
        return []
    t0, m0, r0 = choice
    if r0 is not None and (r0.tp is None or r0.dp is None):
        return []
    adapter, base = search.adapter, search.base

    def count(knobs: dict, keys) -> int:
        return len(changes_of(adapter, base, {k: v for k, v in knobs.items() if k in keys}))

    layouts = sorted(
        ((count(_knobs(t, m0, None), LAYOUT_KEYS), i, t) for i, t in enumerate(train_layouts(search.space))),
        key=lambda x: x[:2],
    )
    rollouts: dict[int, list[Rollout | None]] = {}  # by changed-key count; the script's own only if in the space
    if search.space.rollout:
        for r in rollout_layouts(search.space):
            rollouts.setdefault(count(_knobs(t0, m0, r), ROLLOUT_KEYS) if r != r0 else 0, []).append(r)
    else:
        rollouts[0] = [r0]
    screened: dict[Rollout | None, bool] = {}

    def rollout_ok(r: Rollout | None) -> bool:
        """The rollout rules alone accept ``r`` (the planner's rollout screen, search.rollouts)."""
        if r is None:
            return True
        if r not in screened:
            _, cand = search.candidate(t0, m0, r)
            found = run_rules(cand, only=ROLLOUT_RULES)[0]
            screened[r] = not rollout_rejects(found)
        return screened[r]

    by_chunk: dict[int, list[tuple[int, Memory]]] = {}

    def memories(t: TrainLayout) -> list[tuple[int, Memory]]:
        chunk = search._chunk(t)
        if chunk not in by_chunk:
            options = [m0, *(m for m in memory_options(search.space, chunk) if m != m0)]
            costs = []
            for m in options:
                knobs = _knobs(t0, m, None)
                costs.append((count(knobs, set(knobs) - LAYOUT_KEYS - ROLLOUT_KEYS), m))
            by_chunk[chunk] = costs
        return by_chunk[chunk]

    floor = _StaticFloor(search.job)
    peaks: dict[tuple[TrainLayout, Memory], bool] = {}

    def fits(t: TrainLayout, m: Memory, r: Rollout | None) -> bool:
        """The training peak fits the margin (a filter before the full judgement, which checks it again: the
        training stages' peak does not read the rollout's sizes, so it is computed once per layout and memory)."""
        if (t, m) not in peaks:
            if floor.bytes(t, m.distributed_optimizer) > search.limit or len(peaks) >= 8 * budget:
                peaks[(t, m)] = False
            else:
                peak = _peak(search.candidate(t, m, r)[1])
                peaks[(t, m)] = peak is not None and peak <= search.limit
        return peaks[(t, m)]

    found: list[Plan] = []
    judged = 0
    most = max(n for n, _, _ in layouts) + 8 if layouts else 0
    for distance in range(1, most + 1):
        for dt, _, t in layouts:
            if dt > distance:
                break
            for dm, m in memories(t):
                for r in rollouts.get(distance - dt - dm, ()):
                    if not rollout_ok(r) or not fits(t, m, r):
                        continue
                    judged += 1
                    plan = search.judge(t, m, r)
                    if plan is not None:
                        found.append(plan)
                    if len(found) >= top or judged >= budget:
                        return sorted(found, key=lambda p: (len(p.changes), p.seconds))
    return sorted(found, key=lambda p: (len(p.changes), p.seconds))


def plan_job(
    job: Job,
    *,
    device: str | None = None,
    top: int = 5,
    margin: float = DEFAULT_MARGIN,
    space: Space | None = None,
    keep_all: bool = False,
    rank_budget: int = 50,  # candidates judged past the top only to rank the script's own layout
    distinct: bool = True,  # one plan per distinct layout, in plan/ranking.py's order (False: by time alone)
) -> PlanResult:
    """The ``top`` fastest valid layouts of ``job`` (all of them with ``keep_all``), and the script's own rank."""
    started = time.perf_counter()
    kind = job.cluster.device.value if job.cluster.device.known else None
    dev = device_for(device or job.device_choice, kind)
    _require_speeds(dev)
    if job.model is not None:
        from shardcheck.models.architecture import NotModelled, architecture

        try:
            architecture(job.model)
        except NotModelled as exc:
            raise PlanError(f"the model cannot be sized ({exc}); give the value it names, or --model-config") from None
    search = _Search(job, dev, margin, space)
    findings, _ = run_rules(search.job)
    _stop_on_a_blocking_unknown(search, findings)
    current, current_errors, current_valid = _current(search, findings)
    input_errors = [f for f in findings if f.severity == "error" and f.rule.startswith(INPUT_RULES)]
    rollouts = search.rollouts()
    plans: list[Plan] = []
    if keep_all:
        for t, m in search.train_options():
            for _, r in rollouts:
                plan = search.judge(t, m, r)
                if plan is not None:
                    plans.append(plan)
    elif rollouts:
        # an invalid script layout gets no rank: the search stops at the top instead of timing up to it
        plans = _best(search, rollouts, top, current if current_valid else None, rank_budget, distinct)
    plans.sort(key=_order)
    if distinct and not keep_all:
        plans = search.ranking.order(plans, lambda p: _knobs(p.layout, p.memory, p.rollout))
    for i, p in enumerate(plans, 1):
        p.rank = i
    current_rank, floor = None, len(plans)
    if current is not None and current_valid:
        faster = [p for p in plans if _order(p) < _order(current) and p.changes]
        same = next((p for p in plans if not p.changes), None)
        if keep_all or search.counts.get("exhausted") or same is not None:
            current_rank = len(faster) + 1
        floor = len(faster)
    shown = plans if keep_all else plans[:top]
    return PlanResult(
        search.job,
        dev,
        margin,
        shown,
        current,
        current_valid,
        current_errors,
        current_rank,
        floor,
        input_errors,
        search.counts,
        time.perf_counter() - started,
        untimed_rollouts=search.untimed,
        rollouts_rejected=search.rejected if not rollouts else {},
    )


def _stop_on_a_blocking_unknown(search: _Search, findings: list[Finding]) -> None:
    """PlanError naming the VALUE-UNKNOWN of the script that no layout the planner writes settles (an argument
    of unknown content may set any key; a value the planner does not set stays unknown): every candidate would
    be rejected for it, so the search stops at once with that finding and the option that settles it."""
    from shardcheck.rules.causes import cause_key

    unknown = {cause_key(f): f for f in findings if f.rule == "VALUE-UNKNOWN"}
    first = next(search.train_options(), None) if unknown else None
    if first is None:
        return
    probe, _ = run_rules(search.candidate(*first, None)[1])
    blocking = [unknown[k] for k in dict.fromkeys(cause_key(f) for f in probe) if k in unknown]
    if blocking:
        f = blocking[0]
        where = f"{f.origin.location}: " if f.origin is not None and f.origin.location else ""
        raise PlanError(f"{where}{f.message}; no layout settles it: {f.fix}")


def _keeping_savers(search: _Search, t: TrainLayout, m: Memory, r: Rollout | None) -> Plan | None:
    """The plan of ``t`` and ``r`` with ``m``'s recompute and the script's own offload and distributed optimizer
    (None when that is ``m``, is not in the space, or is not valid): offload costs seconds, not a factor, so it
    often ties within the model's error, and the order keeps the script's memory savers among ties."""
    base, space = search.base, search.space
    offload = base.get("param_offload") if base.get("param_offload") in space.offload else m.offload
    dist = base.get("distributed_optimizer")
    dist = dist if dist in space.distributed_optimizer else m.distributed_optimizer
    keep = Memory(m.recompute, dist, offload)
    if keep == m:
        return None
    if search.expressible is not None and not search.expressible(
        search.job, changes_of(search.adapter, base, _knobs(t, keep, None))
    ):
        return None
    return search.judge(t, keep, r)


def _require_speeds(dev: Device) -> None:
    """PlanError naming what is missing when the step-time model has no speeds for ``dev`` (a device the memory
    table knows but estimate/data/device_speeds.json does not, or a --device-memory size)."""
    from shardcheck.estimate.speeds import names

    known = names()
    if dev.name not in known:
        raise PlanError(
            f"--device {dev.name}: the step-time model has no speeds for it (its peak FLOP/s, memory and link "
            f"bandwidths are not in estimate/data/device_speeds.json), so no layout can be timed; plan on one of "
            f"{', '.join(known)}, or judge it with check / memory, which need no speeds"
        )


def _order(p: Plan) -> tuple:
    """Fastest first; among times equal to 0.1 %, fewest changed keys first."""
    return (float(f"{p.seconds:.3g}"), len(p.changes))


def _best(
    search: _Search,
    rollouts: list[tuple[float, Rollout | None]],
    top: int,
    current: Plan | None,
    rank_budget: int,
    distinct: bool = True,
) -> list[Plan]:
    """Best-first over (training option, rollout) pairs: keys start as lower bounds and are refined.

    The heap starts with one entry per family (TP, CP, PP) under its pipeline floor; a family that comes up
    is opened into its bound shapes and recomputes (the sizes the compute bound reads: TP, CP, PP, VPP, the
    stage sizes, DP; docs/plan.md), each under its compute bound; a shape that comes up lists its layouts
    (EP, ETP, rank order) and memory options through the memory floor, each under the bound of its own
    layout with communication; a layout that comes up is timed (one estimate for the leanest memory option
    of its recompute first: when that does not fit, none does), then judged with each rollout in order.
    Every key is still a lower bound of the time of every candidate under it when it is pushed, so the order
    in which candidates are timed and judged is the one a heap of every candidate would give (ties aside)."""
    heap: list[tuple[float, int, int, int, tuple]] = []
    r0 = rollouts[0][1]
    first = rollouts[0][0]
    order = itertools.count()
    families: dict[tuple, dict[tuple, list[TrainLayout]]] = {}
    for t in train_layouts(search.space):
        search.counts["layouts"] += 1
        families.setdefault(search.bound.family(t), {}).setdefault(search.bound.shape(t), []).append(t)
    for shapes in families.values():
        try:
            floor_seconds = search.bound.floor(next(iter(shapes.values()))[0])
        except UnknownValue:
            floor_seconds = 0.0  # no floor: the family's shapes are bounded one by one when it comes up
        heap.append((floor_seconds + first, -2, next(order), 0, shapes))
    heapq.heapify(heap)
    floor = _StaticFloor(search.job)
    exact: dict[int, float] = {}
    plans: list[Plan] = []
    stop_at = current.seconds if current is not None else None
    judged_after_top = 0
    # the shown order (plan/ranking.py) reads every plan within the model's error of the fastest, and wants an
    # unwarned one and ``top`` distinct layouts: the search goes on for them, within the same judging budget
    rank = search.ranking
    reps: dict[tuple, tuple] = {}  # distinct layout -> (warned, tie key) of its best plan found
    fastest: float | None = None
    while heap:
        key, stage, i, j, item = heapq.heappop(heap)
        if len(plans) >= top and judged_after_top >= rank_budget:
            break
        if distinct:
            enough = len(reps) >= top and any(not w for w, _ in reps.values())
            in_band = fastest is not None and key <= fastest * (1 + MODEL_ERROR)
        else:  # by time alone: the first ``top`` plans
            enough, in_band = len(plans) >= top, False
        if enough and not in_band and (stop_at is None or key > stop_at):
            if stop_at is not None and key > stop_at:
                search.counts["exhausted"] = 1  # every layout faster than the script's own was visited
            break
        if stage == -2:  # a family (TP, CP, PP): its shapes, each with its own bound per recompute
            search.counts["families_opened"] = search.counts.get("families_opened", 0) + 1
            for layouts in item.values():
                t = layouts[0]
                for rc in recompute_options(search.space, search._chunk(t)):
                    m = Memory(rc, search.space.distributed_optimizer[0], search.space.offload[0])
                    lb = search.lower_bound(t, m, r0)
                    if lb is not None:
                        heapq.heappush(heap, (max(key, lb + first), -1, next(order), 0, (layouts, rc)))
            continue
        if stage == -1:  # a bound shape: its layouts' memory options, through the memory floor
            search.counts["shapes_opened"] = search.counts.get("shapes_opened", 0) + 1
            layouts, rc = item
            for t in layouts:
                for m in search.options(t, rc, floor):
                    heapq.heappush(heap, (key, 0, next(order), 0, (t, m)))
            continue
        t, m = item
        if stage == 0:  # the shape's bound: refine it to this layout's own, communication included
            refined = search.lower_bound(t, m, r0, layout=True)
            heapq.heappush(heap, (key if refined is None else max(key, refined + first), 1, i, 0, (t, m)))
            continue
        if stage == 1:
            seconds = search.train_seconds(t, m, r0)
            if seconds is None:
                continue
            exact[i] = seconds
            heapq.heappush(heap, (seconds + first, 2, i, 0, (t, m)))
            continue
        r = rollouts[j][1]
        if j + 1 < len(rollouts):
            heapq.heappush(heap, (exact[i] + rollouts[j + 1][0], 2, i, j + 1, (t, m)))
        layout_key = rank.distinct(t, r)
        knobs = _knobs(t, m, r)
        tie = (savers_lost(search.base, knobs), len(changes_of(search.adapter, search.base, knobs)))
        seen = reps.get(layout_key)
        if distinct and seen is not None and not seen[0] and seen[1] <= tie:
            search.counts["duplicates"] = search.counts.get("duplicates", 0) + 1
            continue  # the same layout, no better a representative (and slower): not judged
        plan = search.judge(t, m, r)
        if len(plans) >= top:
            judged_after_top += 1
        found = [plan]
        if distinct and plan is not None and seen is None:
            found.append(_keeping_savers(search, t, m, r))  # the same layout with the script's savers, judged now
        for p in found:
            if p is None:
                continue
            plans.append(p)
            fastest = p.seconds if fastest is None else min(fastest, p.seconds)
            knobs = _knobs(p.layout, p.memory, p.rollout)
            mine = (bool(warnings_of(p, INPUT_RULES)), (savers_lost(search.base, knobs), len(p.changes)))
            if seen is None or mine < seen:
                reps[layout_key] = seen = mine
    else:
        search.counts["exhausted"] = 1
    return plans
