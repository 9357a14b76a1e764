"""The inference servers verl starts besides the rollout: the reward model and distillation teachers (verl 0.9.1).

Each runs vLLM/SGLang replicas of TP·DP·PP devices on a resource pool: the reward model on the
trainer's pool, or on its own (``reward.reward_model.enable_resource_pool``); the teachers on the
distillation pool (``distillation.nnodes`` × ``distillation.n_gpus_per_node``).
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job, ServerLayout
from shardcheck.rules.base import Finding, finding, need, rule, where


def _pool_sizes(s: ServerLayout) -> tuple[int, int]:
    return (
        need(s.nnodes, f"{s.pool_key}.nnodes" if s.pool_key else "trainer.nnodes"),
        need(s.devices_per_node, f"{s.pool_key}.n_gpus_per_node" if s.pool_key else "trainer.n_gpus_per_node"),
    )


@rule(
    "VERL-SRV-POOL",
    "error",
    "A reward model or teacher pool of its own needs nodes and GPUs per node",
    frameworks=("verl",),
)
def server_pool(job: Job) -> Iterator[Finding]:
    """
    A reward model on its own resource pool (`reward.reward_model.enable_resource_pool=True`) takes
    `reward.reward_model.nnodes` × `reward.reward_model.n_gpus_per_node` devices; distillation teachers
    take `distillation.nnodes` × `distillation.n_gpus_per_node`. Both `nnodes` default to 0.

    Why:
    The trainer raises `ValueError: config.reward.reward_model.nnodes must be greater than 0` (or
    `config.distillation.nnodes must be greater than 0`, or the `n_gpus_per_node` twin) while it
    builds its resource pools, before any worker starts.

    Fix:
    Give the pool's node count and GPUs per node, or share the trainer's pool (reward model:
    `enable_resource_pool=False`).

    Source:
    verl/trainer/ppo/v1/trainer_base.py init_resource_pool_mgr (verl 0.9.1).
    """
    for s in job.servers:
        if s.pool_key is None:
            continue
        nnodes, devices = _pool_sizes(s)
        for name, value, traced in (("n_gpus_per_node", devices, s.devices_per_node), ("nnodes", nnodes, s.nnodes)):
            if value <= 0:
                yield finding(
                    "VERL-SRV-POOL",
                    f"[{s.role}] {s.pool_key}.{name} is {value}: verl raises "
                    f'"config.{s.pool_key}.{name} must be greater than 0"',
                    where(traced, s.switch),
                    fix=f"set {s.pool_key}.{name} to a positive number",
                    role=s.role,
                )
                break


@rule(
    "VERL-SRV-REPLICA", "error", "The reward model's or a teacher's replicas must fit their pool", frameworks=("verl",)
)
def server_replicas(job: Job) -> Iterator[Finding]:
    """
    Each reward-model or teacher replica takes TP·DP·PP devices of its pool. The reward model needs
    at least one replica; a single teacher's replica size must divide the distillation pool; several
    teachers' `num_replicas` × replica size must add up to the pool.

    Why:
    The reward loop asserts `Not enough GPUs to run the reward model. world_size (W) <
    rollout_world_size (R).`; distillation raises `ValueError: Single teacher's
    per_replica_world_size (R) must divide the distillation resource pool size (...)` or
    `Sum of teacher (num_replicas * per_replica_world_size) (S) must match the distillation resource
    pool size (...)` when its config is built.

    Fix:
    Lower the server's TP·DP·PP, or give its pool more GPUs.

    Source:
    verl/experimental/reward_loop/reward_model.py RewardModelManager._initialize_llm_servers;
    verl/workers/config/distillation.py DistillationConfig.__post_init__ / _resolve_teacher_models
    (verl 0.9.1).
    """
    teachers = [s for s in job.servers if s.role.startswith("teacher") and s.num_replicas is not None]  # several
    for s in job.servers:
        nnodes, devices = _pool_sizes(s)
        pool = nnodes * devices
        size = need(s.replica_size, f"{s.key_prefix} TP·DP·PP")
        at = where(s.tp, s.dp, s.pp) or s.tp.origin
        sizes = f"TP {s.tp.value} · DP {s.dp.value} · PP {s.pp.value} = {size}"
        if s.role == "reward model" and pool < size:
            yield finding(
                "VERL-SRV-REPLICA",
                f"[{s.role}] {sizes} devices per replica, the pool has {pool}: verl "
                f'asserts "Not enough GPUs to run the reward model. world_size ({pool}) '
                f'< rollout_world_size ({size})."',
                at,
                fix=f"a TP·DP·PP of at most {pool}, or more GPUs for the reward model",
                role=s.role,
            )
        elif s.role.startswith("teacher") and s.num_replicas is None and pool > 0 and pool % size:
            yield finding(
                "VERL-SRV-REPLICA",
                f"[{s.role}] {sizes} does not divide the distillation pool of {pool}: "
                f"verl raises \"Single teacher's per_replica_world_size ({size}) must "
                'divide the distillation resource pool size"',
                at,
                fix=f"a TP·DP·PP dividing {pool}",
                role=s.role,
            )
    if teachers:
        total = 0
        for s in teachers:
            replicas = need(s.num_replicas, f"{s.key_prefix.rsplit('.', 1)[0]}.num_replicas")
            total += replicas * need(s.replica_size, f"{s.key_prefix} TP·DP·PP")
        nnodes, devices = _pool_sizes(teachers[0])
        if total != nnodes * devices:
            parts = " + ".join(f"{s.num_replicas.value}·{s.replica_size.value}" for s in teachers)
            yield finding(
                "VERL-SRV-REPLICA",
                f"[teachers] num_replicas · TP·DP·PP: {parts} = {total}, the distillation "
                f'pool is {nnodes * devices}: verl raises "Sum of teacher (num_replicas '
                f"* per_replica_world_size) ({total}) must match the distillation "
                'resource pool size"',
                where(*(s.num_replicas for s in teachers)),
                fix=f"make the teachers' replicas add up to {nnodes * devices} devices",
                role="teachers",
            )
