"""Megatron-Core ``parallel_state.initialize_model_parallel`` checks (megatron-core 0.16.1).

The dense grid (TP·CP·DP·PP) and, since core_v0.10.0 ("MoE parallel folding"), the expert grid
(ETP·EP·EDP·PP) are two independent factorisations of the world; they share only PP.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.megatron.versions import FOLDING_SINCE, as_tuple
from shardcheck.job import Job
from shardcheck.mesh.grid import expert_error, vpp_error, world_error
from shardcheck.problems import Kind
from shardcheck.rules.base import Finding, engines, finding, need, rule, where
from shardcheck.rules.divisors import divisors


@rule(
    "MCORE-PS-WORLD",
    "error",
    "The dense grid TP·PP·CP must divide the world size",
    engine="megatron",
    problems=(Kind.GRID_WORLD,),
)
def world_tiling(job: Job) -> Iterator[Finding]:
    """
    Megatron-Core splits the world into a dense grid of TP·CP·DP·PP ranks, so TP·PP·CP must divide
    the number of devices; DP = world / (TP·PP·CP). CP is a factor of its own: DP excludes it.

    Why:
    `initialize_model_parallel` raises `RuntimeError: world_size (W) is not divisible by N` on
    every rank before any model is built, after the job has queued and started.

    Fix:
    Choose TP, PP and CP whose product divides the world (nnodes · devices per node).

    Source:
    megatron/core/parallel_state.py, initialize_model_parallel (megatron-core 0.16.1).
    """
    world = job.cluster.world
    for e in engines(job):
        w = need(world, job.world_name)
        tp, pp, cp = (
            need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size"),
            need(e.pp, f"{e.key_prefix}.pipeline_model_parallel_size"),
            need(e.cp, f"{e.key_prefix}.context_parallel_size"),
        )
        model = tp * pp * cp
        if message := world_error(w, tp, pp, cp):
            yield finding(
                "MCORE-PS-WORLD",
                f"[{e.role}] TP {tp} · PP {pp} · CP {cp} = {model} does not divide world {w} "
                f'(megatron-core: "{message}")',
                where(e.tp, e.pp, e.cp, world),
                fix=f"make TP·PP·CP a divisor of {w}: one of {', '.join(map(str, divisors(w)))}",
                role=e.role,
            )


@rule(
    "MCORE-PS-EXPERT-FOLD",
    "error",
    "The expert grid ETP·EP·PP must divide the world size",
    engine="megatron",
    problems=(Kind.GRID_EXPERT_FOLD,),
)
def expert_grid(job: Job) -> Iterator[Finding]:
    """
    Since megatron-core 0.10 ("MoE parallel folding") the expert layers get their own grid:
    ETP·EP·EDP·PP = world, independent of the dense TP·CP·DP·PP grid. EP may exceed DP and span
    TP and CP ranks; only ETP·EP·PP has to divide the world. EDP = world / (ETP·EP·PP).
    An unset `expert_tensor_parallel_size` (verl's default `null`) means ETP = TP.

    Why:
    `initialize_model_parallel` raises `RuntimeError: world_size (W) is not divisible by
    expert_tensor_model_pipeline_parallel size (N)` at start. The common trap is leaving ETP unset
    with TP > 1: ETP silently becomes TP and multiplies the expert grid.

    Fix:
    Set `actor_rollout_ref.actor.megatron.expert_tensor_parallel_size` (usually 1) or lower EP so
    that ETP·EP·PP divides the world.

    Versions:
    megatron-core 0.10 and later as above (0.10-0.13 word it "decoder world_size (W) ...").
    Before 0.10 there is no expert grid: EP is carved out of DP, so DP = world / (TP·PP·CP) must be
    a multiple of EP ("data_parallel_size (DP) is not divisible by expert_model_parallel_size").
    With CP 8 on 256 devices at TP 2 · PP 16, DP is 1: any EP > 1 fails there and starts on ≥ 0.10.

    Source:
    megatron/core/parallel_state.py, initialize_model_parallel (megatron-core 0.16.1;
    since core_v0.10.0; core_v0.9.0 for the check before folding).
    """
    world = job.cluster.world
    mcore = job.megatron_core_version
    for e in engines(job):
        w = need(world, job.world_name)
        etp = e.etp
        etp_v = need(etp, f"{e.key_prefix}.expert_tensor_parallel_size")
        ep = need(e.ep, f"{e.key_prefix}.expert_model_parallel_size")
        pp = need(e.pp, f"{e.key_prefix}.pipeline_model_parallel_size")
        grid = etp_v * ep * pp
        dp = e.dp(world)
        folding = as_tuple(mcore) >= FOLDING_SINCE
        if not folding and not dp.known:
            continue  # the dense grid does not tile the world: MCORE-PS-WORLD fails first
        message = expert_error(w, etp_v, ep, pp, dp.value, mcore)
        if message is None:
            continue
        if not folding:
            yield finding(
                "MCORE-PS-EXPERT-FOLD",
                f"[{e.role}] DP {dp.value} is not a multiple of EP {ep}: megatron-core {mcore} has no MoE parallel "
                f"folding (it arrived in 0.10), so EP must divide DP = world / (TP·PP·CP) "
                f'(megatron-core {mcore}: "{message}")',
                where(e.ep, e.tp, e.pp, e.cp, world),
                fix=f"run on megatron-core ≥ 0.10 (--megatron-core-version), or an EP dividing {dp.value}",
                role=e.role,
            )
            continue
        unset = e.etp_setting.known and e.etp_setting.value is None
        etp_text = f"ETP {etp_v} (= TP: expert_tensor_parallel_size is unset)" if unset else f"ETP {etp_v}"
        good_etp = [d for d in divisors(w // pp) if (w // pp) % (d * ep) == 0] if w % pp == 0 else []
        good_ep = [d for d in divisors(w // pp) if (w // pp) % (d * etp_v) == 0] if w % pp == 0 else []
        fixes = []
        if good_etp:
            fixes.append(f"{e.key_prefix}.expert_tensor_parallel_size={good_etp[0]}")
        if good_ep:
            fixes.append(f"an EP in {', '.join(map(str, good_ep))}")
        # Anchored on the value a fix changes: ETP where it is written, else EP (an unset ETP that
        # follows TP has TP's line, but the fix sets ETP or changes EP, not TP).
        anchor = where(etp, e.ep, e.pp, world) if good_etp and not unset else where(e.ep, etp, e.pp, world)
        yield finding(
            "MCORE-PS-EXPERT-FOLD",
            f"[{e.role}] EP {ep} · {etp_text} · PP {pp} = {grid} does not divide world {w} "
            f'(megatron-core: "{message}")',
            anchor,
            fix=", or ".join(fixes) or f"make ETP·EP·PP a divisor of {w}",
            role=e.role,
        )


@rule(
    "MCORE-PS-VPP-PP",
    "error",
    "A virtual pipeline size needs pipeline parallelism (PP > 1)",
    engine="megatron",
    problems=(Kind.GRID_VPP_PP,),
)
def vpp_needs_pp(job: Job) -> Iterator[Finding]:
    """
    The interleaved schedule (virtual pipeline, VPP) splits each pipeline stage into chunks; it
    exists only when there is more than one stage.

    Why:
    `initialize_model_parallel` raises `RuntimeError: pipeline-model-parallel size should be
    greater than 1 with interleaved schedule` when VPP is set and PP is 1.

    Fix:
    Remove the virtual pipeline size or raise PP above 1.

    Source:
    megatron/core/parallel_state.py, initialize_model_parallel (megatron-core 0.16.1).
    """
    for e in engines(job):
        vpp = need(e.vpp, f"{e.key_prefix}.virtual_pipeline_model_parallel_size")
        if vpp is None:
            continue
        pp = need(e.pp, f"{e.key_prefix}.pipeline_model_parallel_size")
        if message := vpp_error(vpp, pp):
            yield finding(
                "MCORE-PS-VPP-PP",
                f'[{e.role}] VPP {vpp} with PP {pp} (megatron-core: "{message}")',
                where(e.vpp, e.pp),
                fix=f"{e.key_prefix}.virtual_pipeline_model_parallel_size=null, or PP > 1",
                role=e.role,
            )


def _grid_error(job: Job, rule_id: str, kind: Kind) -> Iterator[Finding]:
    """Findings of ``rule_id`` from building the rank grid (order-string checks), per engine."""
    from shardcheck.mesh.grid import GridError, build_grid

    world = job.cluster.world
    for e in engines(job):
        w = need(world, job.world_name)
        sizes = dict(
            tp=need(e.tp, f"{e.key_prefix}.tensor_model_parallel_size"),
            pp=need(e.pp, f"{e.key_prefix}.pipeline_model_parallel_size"),
            cp=need(e.cp, f"{e.key_prefix}.context_parallel_size"),
            ep=need(e.ep, f"{e.key_prefix}.expert_model_parallel_size"),
            etp=need(e.etp_setting, f"{e.key_prefix}.expert_tensor_parallel_size"),
            vpp=need(e.vpp, f"{e.key_prefix}.virtual_pipeline_model_parallel_size"),
        )
        result = build_grid(world=w, order=e.order, mcore=job.megatron_core_version, **sizes)
        if isinstance(result, GridError) and result.kind is kind:
            yield finding(
                rule_id,
                f'[{e.role}] order {e.order}: megatron-core: "{result.message}"',
                where(e.tp, e.pp, e.cp, e.ep),
                fix="use the default order tp-cp-ep-dp-pp",
                role=e.role,
            )


@rule(
    "MCORE-PS-ORDER-TOKEN",
    "error",
    "Every parallel dimension of size > 1 must be named in the rank order",
    engine="megatron",
    problems=(Kind.GRID_ORDER_TOKEN,),
)
def order_tokens(job: Job) -> Iterator[Finding]:
    """
    Megatron-Core lays ranks out along an order string (default `tp-cp-ep-dp-pp`, first fastest);
    a dimension of size > 1 missing from it cannot be placed. Both the dense and the expert grid
    use the same string, so `tp-pp-dp` fails as soon as CP > 1 or EP > 1.

    Why:
    `RankGenerator.__init__` raises `RuntimeError: The size of (cp) is (2), but you haven'tspecified
    the order (tp-dp-pp).` (Megatron's text, space missing).

    Fix:
    Name every dimension; use the default order.

    Source:
    megatron/core/parallel_state.py RankGenerator.__init__ (megatron-core 0.16.1).
    """
    return _grid_error(job, "MCORE-PS-ORDER-TOKEN", Kind.GRID_ORDER_TOKEN)


@rule(
    "MCORE-PS-ORDER-PPLAST",
    "error",
    "An order not ending in pp needs the same DP for dense and expert layers",
    engine="megatron",
    problems=(Kind.GRID_ORDER_PPLAST,),
)
def order_pp_last(job: Job) -> Iterator[Finding]:
    """
    With PP > 1 and an order that does not end in `pp` (e.g. Megatron-LM's
    `--use-tp-pp-dp-mapping`, `tp-cp-ep-pp-dp`), the dense DP and the expert DP must be equal.

    Why:
    `initialize_model_parallel` asserts `When not using pp-last rank ordering, the data parallel
    size of the attention and moe layers must be the same`.

    Fix:
    Use a pp-last order, or choose EP·ETP = TP·CP.

    Source:
    megatron/core/parallel_state.py initialize_model_parallel (megatron-core 0.16.1).
    """
    return _grid_error(job, "MCORE-PS-ORDER-PPLAST", Kind.GRID_ORDER_PPLAST)


@rule(
    "MCORE-PS-PP-GROUPS",
    "error",
    "Dense and expert pipeline groups must be the same",
    engine="megatron",
    problems=(Kind.GRID_PP_GROUPS,),
)
def pp_groups_agree(job: Job) -> Iterator[Finding]:
    """
    Both grids share the pipeline axis: the PP groups computed from the dense and from the expert
    generator must coincide (always true when `pp` is last in the order).

    Why:
    `initialize_model_parallel` asserts `Pipeline parallel groups are expected to be the same for
    Non-Expert and Expert part`.

    Fix:
    Put `pp` last in the order.

    Source:
    megatron/core/parallel_state.py initialize_model_parallel (megatron-core 0.16.1).
    """
    return _grid_error(job, "MCORE-PS-PP-GROUPS", Kind.GRID_PP_GROUPS)


@rule("MCORE-PS-LOCALITY", "warning", "A TP or EP group spans nodes", engine="megatron")
def group_locality(job: Job) -> Iterator[Finding]:
    """
    Megatron-Core places rank r on node r // devices_per_node and never checks locality. A tensor-
    parallel group (all-reduce in every layer) or an expert-parallel group (all-to-all in every MoE
    layer) that spans nodes runs over the inter-node network, typically 5-20x slower than NVLink/HCCS.

    Why:
    Not an error: the job starts, and runs slowly.

    Fix:
    Lower TP or EP, move the factor to PP or DP, or use larger nodes.

    Source:
    megatron/core/parallel_state.py RankGenerator.get_ranks (megatron-core 0.16.1).
    """
    from shardcheck.mesh.grid import Grid, build_grid
    from shardcheck.mesh.placement import crossings

    world, per_node = job.cluster.world, job.cluster.devices_per_node
    if not (world.known and per_node.known) or per_node.value >= world.value:
        return
    for e in engines(job):
        if not all(t.known for t in (e.tp, e.pp, e.cp, e.ep, e.etp_setting, e.vpp)):
            return
        grid = build_grid(
            world=world.value,
            tp=e.tp.value,
            pp=e.pp.value,
            cp=e.cp.value,
            ep=e.ep.value,
            etp=e.etp_setting.value,
            vpp=e.vpp.value,
            order=e.order,
        )
        if not isinstance(grid, Grid):
            continue
        for c in crossings(grid, per_node.value):
            if c.name not in ("tp", "ep"):
                continue
            yield finding(
                "MCORE-PS-LOCALITY",
                f"[{e.role}] {c.groups_crossing} of {c.groups_total} {c.name.upper()} groups of {c.size} ranks span "
                f"nodes of {per_node.value} devices (e.g. ranks {_ranks(c.example)})",
                where(e.tp if c.name == "tp" else e.ep, per_node),
                fix=c.keeps_local,
                role=e.role,
            )


def _ranks(ranks: tuple[int, ...]) -> str:
    """A rank list for a message: contiguous runs shortened (0-31, or 0, 2, ..., 30)."""
    if len(ranks) <= 6:
        return ", ".join(map(str, ranks))
    step = ranks[1] - ranks[0]
    if all(b - a == step for a, b in zip(ranks, ranks[1:])):
        return f"{ranks[0]}-{ranks[-1]}" if step == 1 else f"{ranks[0]}, {ranks[1]}, …, {ranks[-1]} (stride {step})"
    return ", ".join(map(str, ranks[:4])) + f", … ({len(ranks)} ranks)"
