"""Megatron-Core MoE and distributed-optimizer checks a launch reaches at start-up (megatron-core 0.16.1).

verl hands them through each engine's ``override_transformer_config``; Megatron-LM and slime as flags.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.origin import Origin, Traced
from shardcheck.rules.base import Finding, engines, finding, need, rule, where

# TransformerConfig.__post_init__: the load-balancing types moe_expert_capacity_factor works with.
_CAPACITY_BALANCING = ("aux_loss", "seq_aux_loss", "global_aux_loss", "none")
_DEFAULT = Traced(None, Origin(kind="default", text="default of megatron-core TransformerConfig"))


def _override_settings(job: Job) -> Iterator[tuple[str, str, Traced, Traced, Traced]]:
    """verl: each engine's own override_transformer_config."""
    for e in engines(job):
        otc = e.transformer_overrides
        yield (
            e.role,
            f"{e.key_prefix}.override_transformer_config.",
            otc.get("moe_expert_capacity_factor", _DEFAULT),
            otc.get(
                "moe_router_load_balancing_type",
                Traced("aux_loss", Origin(kind="default", text="megatron-core default aux_loss")),
            ),
            otc.get("moe_pad_expert_input_to_capacity", _DEFAULT),
        )


def _flag_settings(job: Job) -> Iterator[tuple[str, str, Traced, Traced, Traced]]:
    """Megatron-LM and slime: the command line's flags."""
    yield (
        "actor",
        "--",
        job.value("--moe-expert-capacity-factor"),
        job.value("--moe-router-load-balancing-type"),
        job.value("--moe-pad-expert-input-to-capacity"),
    )


# Where each framework sets the MoE options: (role, how to set it, capacity factor, load-balancing type,
# pad-to-capacity) per engine.
_MOE_SETTINGS = {"verl": _override_settings, "megatron-lm": _flag_settings, "slime": _flag_settings}


def _moe_settings(job: Job) -> Iterator[tuple[str, str, Traced, Traced, Traced]]:
    return _MOE_SETTINGS[job.framework](job)


@rule(
    "MCORE-TC-MOE-CAPACITY",
    "error",
    "The MoE capacity factor needs a load-balancing type that supports it",
    frameworks=("verl", "megatron-lm", "slime"),
    engine="megatron",
)
def moe_capacity(job: Job) -> Iterator[Finding]:
    """
    `moe_expert_capacity_factor` (token dropping) works only with the `aux_loss`, `seq_aux_loss`,
    `global_aux_loss` or `none` load-balancing types; `moe_pad_expert_input_to_capacity` needs a
    capacity factor.

    Why:
    `TransformerConfig.__post_init__` raises `ValueError: moe_expert_capacity_factor only works with
    aux_loss, seq_aux_loss, global_aux_loss or none load balancing` (or `moe_expert_capacity_factor
    must be set to use moe_pad_expert_input_to_capacity`) when the model is built.

    Fix:
    Use a supported load-balancing type, or drop the capacity factor; set a capacity factor before
    asking to pad to it.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ (megatron-core 0.16.1).
    """
    for role, prefix, capacity_t, balancing_t, pad_t in _moe_settings(job):
        capacity = need(capacity_t, f"{prefix}moe_expert_capacity_factor")
        pad = need(pad_t, f"{prefix}moe_pad_expert_input_to_capacity")
        if capacity is not None and capacity >= 0:  # a negative factor becomes None (no dropping)
            balancing = need(balancing_t, f"{prefix}moe_router_load_balancing_type")
            kinds = balancing if isinstance(balancing, list) else [balancing]
            bad = [k for k in kinds if k not in _CAPACITY_BALANCING]
            if bad:
                yield finding(
                    "MCORE-TC-MOE-CAPACITY",
                    f"[{role}] moe_expert_capacity_factor {capacity} with load balancing {', '.join(bad)}: "
                    'megatron-core: "moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, '
                    'global_aux_loss or none load balancing"',
                    where(balancing_t, capacity_t),
                    fix=f"{prefix}moe_router_load_balancing_type aux_loss (or seq_aux_loss, global_aux_loss, "
                    "none), or drop the capacity factor",
                    role=role,
                )
        elif pad:
            yield finding(
                "MCORE-TC-MOE-CAPACITY",
                f"[{role}] moe_pad_expert_input_to_capacity without a capacity factor: megatron-core: "
                '"moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"',
                where(pad_t),
                fix=f"set {prefix}moe_expert_capacity_factor (e.g. 1.0) or drop the padding",
                role=role,
            )


@rule(
    "MCORE-PS-DISTOPT-INSTANCES",
    "error",
    "DP·CP and expert DP must divide by the distributed-optimizer instances",
    frameworks=("megatron-lm", "slime"),
    engine="megatron",
)
def distopt_instances(job: Job) -> Iterator[Finding]:
    """
    With `--num-distributed-optimizer-instances K` the distributed optimizer shards over DP·CP / K
    ranks (and the experts' over EDP / K): both must divide by K.

    Why:
    `initialize_model_parallel` asserts `Data parallel size should be divisible by partial DistOpt
    shard factor` / `Expert data parallel size should be divisible by partial DistOpt shard factor`
    on every rank.

    Fix:
    Choose K dividing both DP·CP and EDP.

    Source:
    megatron/core/parallel_state.py initialize_model_parallel (megatron-core 0.16.1); Megatron-LM passes
    `args.num_distributed_optimizer_instances` (megatron/training/initialize.py).
    """
    # verl does not pass it to initialize_model_parallel (transformer_impl.py _init_device_mesh): not in scope
    k_t = job.value("--num-distributed-optimizer-instances")
    k = need(k_t, "--num-distributed-optimizer-instances")
    if not k or k == 1:
        return
    owner = job.group_owner
    if owner is None:
        return
    world = job.cluster.world
    dp = need(owner.dp(world), "DP")
    cp = need(owner.cp, "--context-parallel-size")
    edp = need(owner.edp(world), "EDP")
    for size, what, text in ((dp * cp, "DP·CP", "Data parallel size"), (edp, "EDP", "Expert data parallel size")):
        if size % k:
            yield finding(
                "MCORE-PS-DISTOPT-INSTANCES",
                f"{what} {size} does not divide by --num-distributed-optimizer-instances {k}: megatron-core: "
                f'"{text} should be divisible by partial DistOpt shard factor"',
                where(k_t),
                fix=f"a K dividing both DP·CP {dp * cp} and EDP {edp}",
            )
            return


def _a2a_verl(job: Job, overrides: dict) -> tuple[str, Traced, Traced]:
    """verl: the actor's override_transformer_config; its provider sets the alltoall dispatcher
    (frameworks/verl/provider.py PROVIDER_DEFAULTS) unless overridden."""
    key = "actor_rollout_ref.actor.megatron.override_transformer_config.overlap_moe_expert_parallel_comm"
    default = Traced("alltoall", Origin(kind="default", text="verl's provider: moe_token_dispatcher_type alltoall"))
    return key, job.value(key), overrides.get("moe_token_dispatcher_type", default)


def _a2a_flags(job: Job, overrides: dict) -> tuple[str, Traced, Traced]:
    """Megatron-LM and slime: the flags (--moe-token-dispatcher-type defaults to allgather)."""
    key = "--overlap-moe-expert-parallel-comm"
    return key, job.value(key), job.value("--moe-token-dispatcher-type")


# (the overlap's key, its value, the dispatcher) per framework
_A2A_SETTINGS = {"verl": _a2a_verl, "megatron-lm": _a2a_flags, "slime": _a2a_flags}


@rule(
    "MCORE-TC-MOE-A2A-OVERLAP",
    "error",
    "The EP all-to-all overlap needs EP > 1, a virtual pipeline when PP > 1, and no full recompute",
    frameworks=("verl", "megatron-lm", "slime"),
    engine="megatron",
)
def moe_a2a_overlap(job: Job) -> Iterator[Finding]:
    """
    `overlap_moe_expert_parallel_comm` (Megatron-LM `--overlap-moe-expert-parallel-comm`, megatron-core
    0.14 on; Megatron-Bridge `moe_a2a_overlap`) overlaps the EP all-to-all of one micro batch with another's
    compute: it needs expert parallelism, a virtual pipeline when PP > 1, no full recompute, and the
    alltoall or flex token dispatcher (Megatron-LM's `--moe-token-dispatcher-type` defaults to allgather;
    verl's provider sets alltoall).

    Why:
    `TransformerConfig.__post_init__` asserts `overlap_moe_expert_parallel_comm is only supported with
    expert model parallelism`, `If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be
    specified when pipeline_model_parallel_size > 1`, `overlap_moe_expert_parallel_comm is supported with
    alltoall/flex token dispatcher` and `disable full recomputation when enabling
    overlap_moe_expert_parallel_comm` when the model is built.

    Fix:
    Set EP > 1 and a virtual pipeline size with PP > 1, the alltoall dispatcher, selective recompute, or
    drop the overlap.

    Source:
    megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ (megatron-core 0.14.0,
    0.15.0, 0.16.1).
    """
    lay = job.layout("actor")
    if lay is None:
        return
    key, overlap_t, dispatcher_t = _A2A_SETTINGS[job.framework](job, lay.transformer_overrides)
    if not overlap_t.known or not overlap_t.value:
        return
    ep, pp = need(lay.ep, "EP"), need(lay.pp, "PP")
    vpp = need(lay.vpp, "VPP")
    gran_t = lay.transformer_overrides.get("recompute_granularity")
    gran = need(gran_t, "recompute_granularity") if gran_t is not None else None
    dispatcher = need(dispatcher_t, "moe_token_dispatcher_type")
    # in megatron-core's order: the virtual pipeline, EP, the dispatcher, recompute
    if pp > 1 and not vpp:
        message = (
            "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when "
            "pipeline_model_parallel_size > 1"
        )
        what, fix = f"with PP {pp} and no virtual pipeline", "set a virtual pipeline size, or drop the overlap"
    elif ep <= 1:
        message = "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"
        what, fix = "with EP 1", "set EP > 1, or drop the overlap"
    elif dispatcher not in ("alltoall", "flex"):
        message = "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"
        what, fix = f"with the {dispatcher} dispatcher", "moe_token_dispatcher_type alltoall (or flex)"
    elif gran == "full":
        message = "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
        what, fix = "with full recompute", "use selective recompute, or drop the overlap"
    else:
        return
    yield finding(
        "MCORE-TC-MOE-A2A-OVERLAP",
        f'[actor] {key} {what}: megatron-core: "{message}"',
        where(overlap_t),
        fix=fix,
        role="actor",
    )
