"""verl's FSDP / FSDP2 engine: Ulysses sequence parallelism and the FSDP device mesh (verl 0.9.1).

Each FSDP engine (actor, ref, critic) builds its own meshes in ``FSDPEngine._init_device_mesh``
(verl/workers/engine/fsdp/transformer_impl.py): an FSDP mesh from ``fsdp_size``
(verl/workers/engine/fsdp/utils.py ``create_device_mesh``) and, with Ulysses SP > 1, a
``(world // sp, sp)`` dp×sp mesh. The model is patched for Ulysses attention in
verl/models/transformers/monkey_patch.py ``apply_monkey_patch``.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import FsdpLayout, Job
from shardcheck.rules.base import Finding, finding, need, rule, where
from shardcheck.rules.divisors import divisors

REMOVE_PADDING = {
    "actor": "actor_rollout_ref.model.use_remove_padding",
    "ref": "actor_rollout_ref.model.use_remove_padding",
    "critic": "critic.model.use_remove_padding",
}
# verl 0.9.1 apply_monkey_patch: multimodal model types whose text model is patched to slice its
# inputs across the Ulysses group (patch_vlm_for_ulysses_input_slicing, or kimi_vl's own).
ULYSSES_VLM_TYPES = frozenset(
    {"qwen2_5_vl", "qwen2_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "kimi_vl", "qwen3_5", "qwen3_5_moe"}
)
# verl 0.9.1 patches the linear-attention (Gated DeltaNet) layers of these model types for Ulysses
# (qwen3_5_gated_delta_net_forward); other linear-attention layers run on the local shard only.
ULYSSES_LINEAR_ATTENTION_TYPES = frozenset({"qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"})


def _sp_engines(job: Job, roles: tuple[str, ...] = ("actor", "ref", "critic")) -> Iterator[tuple[FsdpLayout, int]]:
    """The FSDP engines of ``roles`` with their known SP size; an engine whose SP comes from the same
    script line as an earlier one's (the ref following the actor's key) is left out, so one edit gets one finding."""
    seen: set[tuple[str, int]] = set()
    for lay in job.fsdp_layouts:
        if lay.role not in roles:
            continue
        sp = need(lay.sp, _sp_key(lay))
        line = lay.sp.origin.first_script_line()
        if line is not None and (line.location, sp) in seen:
            continue
        if line is not None:
            seen.add((line.location, sp))
        yield lay, sp


def _sp_key(lay: FsdpLayout) -> str:
    """The key that set the engine's SP (the role-level key when it overrides the engine's)."""
    return lay.sp_key or f"{lay.key_prefix}.ulysses_sequence_parallel_size"


def _same_model_roles(job: Job) -> tuple[str, ...]:
    """The roles built from the job's model: the actor and ref, and the critic when its
    ``critic.model.path`` is written the same as ``actor_rollout_ref.model.path``."""
    critic, actor = job.value("critic.model.path"), job.model_path
    same = critic.known and actor.known and critic.value == actor.value
    return ("actor", "ref", "critic") if same else ("actor", "ref")


def _divisors(n: int) -> list[int]:
    return divisors(n)


def ulysses_sizes(heads: int, kv_heads: int) -> list[int]:
    """SP sizes verl's Ulysses attention accepts: heads % sp == 0 and (kv % sp == 0 or sp % kv == 0)."""
    return [s for s in _divisors(heads) if kv_heads % s == 0 or s % kv_heads == 0]


@rule("VERL-FSDP-SP-WORLD", "error", "Ulysses SP must divide the world size", frameworks=("verl",), engine="fsdp")
def sp_divides_world(job: Job) -> Iterator[Finding]:
    """
    Each FSDP engine with Ulysses SP > 1 lays the world out as a `(world // sp, sp)` dp×sp device
    mesh; verl does not check that SP divides the world.

    Why:
    With `world % sp != 0` the mesh leaves the last ranks out of every SP group, and verl's
    `get_data_parallel_size` (`world // sp`) disagrees with the mesh: the engine fails or hangs at
    start-up on those ranks.

    Fix:
    Choose an SP size that divides trainer.nnodes · trainer.n_gpus_per_node.

    Source:
    verl/workers/engine/fsdp/transformer_impl.py FSDPEngine._init_device_mesh and
    get_data_parallel_size (verl 0.9.1); torch/distributed/device_mesh.py init_device_mesh.
    """
    world_t = job.cluster.world
    for lay, sp in _sp_engines(job):
        world = need(world_t, "world size")
        if world % sp:
            good = _divisors(world)
            yield finding(
                "VERL-FSDP-SP-WORLD",
                f"[{lay.role}] Ulysses SP {sp} does not divide the world {world}: the ({world // sp}, {sp}) "
                f"dp×sp mesh leaves {world % sp} rank(s) in no SP group",
                where(lay.sp, world_t),
                role=lay.role,
                fix=f"{_sp_key(lay)} in {', '.join(map(str, good[:12]))}",
            )


@rule(
    "VERL-FSDP-SP-HEADS",
    "error",
    "Ulysses SP must divide the attention heads; KV heads and SP must divide one another",
    needs_model=True,
    frameworks=("verl",),
    engine="fsdp",
)
def sp_heads(job: Job) -> Iterator[Finding]:
    """
    verl's Ulysses attention splits the attention heads over the SP group: the heads must divide
    by SP, and the KV heads must divide by SP or SP by the KV heads (then each KV head is
    repeated `sp / kv` times). Checked for the actor and ref, and for the critic when
    `critic.model.path` names the same model.

    Why:
    `apply_monkey_patch` asserts `num_attention_heads H must be divisible by ulysses_sp_size S`, or
    `num_key_value_heads K must be divisible by ulysses_sp_size S or vise versa`, when the model
    is built: after Ray start-up and the model download.

    Fix:
    Choose an SP size from the list in the message.

    Source:
    verl/models/transformers/monkey_patch.py apply_monkey_patch (verl 0.9.1).
    """
    m = job.model
    if m.num_attention_heads is None:
        return
    heads, kv = m.num_attention_heads, m.num_key_value_heads or m.num_attention_heads
    for lay, sp in _sp_engines(job, _same_model_roles(job)):
        if sp <= 1:
            continue
        if heads % sp:
            text = f"num_attention_heads {heads} must be divisible by ulysses_sp_size {sp}"
        elif not (kv % sp == 0 or sp % kv == 0):
            text = f"num_key_value_heads {kv} must be divisible by ulysses_sp_size {sp} or vise versa"
        else:
            continue
        valid = ulysses_sizes(heads, kv)
        yield finding(
            "VERL-FSDP-SP-HEADS",
            f"[{lay.role}] {text} (verl apply_monkey_patch; {m.name}: {heads} heads, {kv} KV heads)",
            where(lay.sp),
            role=lay.role,
            fix=f"{_sp_key(lay)} in {', '.join(map(str, valid))} (heads % sp = 0 and KV heads % sp = 0 "
            "or sp % KV heads = 0)",
        )


@rule(
    "VERL-FSDP-SP-NOPATCH",
    "warning",
    "Ulysses SP on a model verl does not patch for it",
    needs_model=True,
    frameworks=("verl",),
    engine="fsdp",
)
def sp_unpatched(job: Job) -> Iterator[Finding]:
    """
    verl shards the sequence for Ulysses itself for text models, but a multimodal model's inputs
    are sliced only after its embedding, by a patch verl installs for a fixed list of model types;
    and linear-attention layers need their own patch (verl 0.9.1 has one for Qwen3.5 only).

    Why:
    verl raises nothing. On an unpatched multimodal model every SP rank runs the whole sequence, so
    SP saves no activation memory (the reported case: an OOM at 74 GiB with SP 8); unpatched
    linear-attention layers see only their rank's part of the sequence.

    Fix:
    Set SP to 1 and reach the context length another way (Megatron's CP), or use a patched model type.

    Source:
    verl/models/transformers/monkey_patch.py apply_monkey_patch and patch_vlm_for_ulysses_input_slicing;
    verl/workers/engine/fsdp/transformer_impl.py FSDPEngine.prepare_model_inputs (VLM inputs are
    not sliced there), verl 0.9.1; verl-project/verl#7476.
    """
    m = job.model
    vlm = m.vision_model_type is not None and m.vision_model_type not in ULYSSES_VLM_TYPES
    linear = m.linear_attention and not ({m.model_type, m.vision_model_type} & ULYSSES_LINEAR_ATTENTION_TYPES)
    if not (vlm or linear):
        return
    for lay, sp in _sp_engines(job, _same_model_roles(job)):
        if sp <= 1:
            continue
        if vlm:
            text = (
                f"{m.name} is a multimodal model of type {m.vision_model_type}, which verl does not patch to slice "
                f"its inputs: each of the {sp} SP ranks runs the whole sequence (no activation memory saved)"
            )
        else:
            text = (
                f"{m.name} ({m.model_type}) has linear-attention layers verl does not patch for Ulysses: they "
                "see only their rank's part of each sequence"
            )
        yield finding(
            "VERL-FSDP-SP-NOPATCH",
            f"[{lay.role}] Ulysses SP {sp}: {text}; verl raises nothing",
            where(lay.sp),
            role=lay.role,
            fix=f"{_sp_key(lay)}=1",
        )


@rule("VERL-FSDP-SP-RMPAD", "error", "Ulysses SP needs use_remove_padding", frameworks=("verl",), engine="fsdp")
def sp_needs_remove_padding(job: Job) -> Iterator[Finding]:
    """
    Ulysses SP slices the packed (padding-free) token stream, so the FSDP engine refuses SP > 1
    without `use_remove_padding` (the actor and ref read `actor_rollout_ref.model`, the critic
    `critic.model`).

    Why:
    `FSDPEngine.__init__` raises `When using sequence parallelism (ulysses_sequence_parallel_size
    > 1), you must enable use_remove_padding.` in every worker.

    Fix:
    Enable use_remove_padding, or set SP to 1.

    Source:
    verl/workers/engine/fsdp/transformer_impl.py FSDPEngine.__init__; verl/workers/config/actor.py
    FSDPActorConfig.validate (verl 0.9.1).
    """
    for lay, sp in _sp_engines(job):
        if sp <= 1:
            continue
        key = REMOVE_PADDING[lay.role]
        flag_t = job.value(key)
        if not need(flag_t, key):
            yield finding(
                "VERL-FSDP-SP-RMPAD",
                f"[{lay.role}] When using sequence parallelism (ulysses_sequence_parallel_size > 1), you "
                f"must enable `use_remove_padding`. (verl FSDPEngine; SP {sp}, {key} is off)",
                where(flag_t, lay.sp),
                role=lay.role,
                fix=f"{key}=True, or {_sp_key(lay)}=1",
            )


@rule(
    "VERL-FSDP-SIZE",
    "error",
    "fsdp_size must be -1 (the whole world) or divide the world size",
    frameworks=("verl",),
    engine="fsdp",
)
def fsdp_size_divides(job: Job) -> Iterator[Finding]:
    """
    `fsdp_config.fsdp_size` -1 (or any value ≥ world) shards every parameter over the whole world;
    a smaller value builds a `(world // fsdp_size, fsdp_size)` ddp×fsdp mesh (hybrid sharding:
    shard within groups of fsdp_size, replicate across them). verl checks neither divisibility nor 0.

    Why:
    `fsdp_size` 0 divides by zero in `create_device_mesh`; a size that does not divide the world
    builds a mesh that leaves ranks out, and the engine fails or hangs at start-up.

    Versions:
    verl 0.4.0 … 0.5.0: the ref's `fsdp_config` has no `fsdp_size`; the ref is built in the actor's worker on
    the actor's mesh (fsdp_workers.py ActorRolloutRefWorker.__init__, verl 0.5.0), so the actor's size is
    judged, once. From 0.6.0 each engine has its own.

    Fix:
    Use -1 or a divisor of the world size.

    Source:
    verl/workers/engine/fsdp/utils.py create_device_mesh; verl/workers/engine/fsdp/transformer_impl.py
    FSDPEngine._init_device_mesh (verl 0.9.1).
    """
    world_t = job.cluster.world
    judged = set()
    for lay in job.fsdp_layouts:
        key = lay.size_key or f"{lay.key_prefix}.fsdp_size"
        if key in judged:  # verl 0.4.0 … 0.5.0: the ref is built on the actor's mesh, judged once
            continue
        judged.add(key)
        size = need(lay.fsdp_size, key)
        world = need(world_t, "world size")
        if size < 0 or size >= world or (size > 0 and world % size == 0):
            continue
        why = (
            "0 divides by zero in create_device_mesh"
            if size == 0
            else (f"the ({world // size}, {size}) ddp×fsdp mesh leaves {world % size} rank(s) out")
        )
        good = [d for d in _divisors(world) if d < world]
        yield finding(
            "VERL-FSDP-SIZE",
            f"[{lay.role}] fsdp_size {size} does not divide the world {world}: {why}",
            where(lay.fsdp_size, world_t),
            role=lay.role,
            fix=f"{key}=-1 (whole world) or one of {', '.join(map(str, good[:12]))}",
        )


@rule(
    "VERL-FSDP-CRITIC-SP",
    "warning",
    "The critic's role-level Ulysses size does not reach its engine",
    frameworks=("verl",),
    engine="fsdp",
)
def critic_sp_ignored(job: Job) -> Iterator[Finding]:
    """
    For the actor and ref verl copies the deprecated role-level `ulysses_sequence_parallel_size`
    into the engine config; for the critic it does not: the critic engine reads only
    `critic.fsdp.ulysses_sequence_parallel_size`, and `critic.ulysses_sequence_parallel_size` enters
    only a start-up batch check.

    Why:
    No error: the critic runs with another SP than the one set (usually 1, full-length sequences
    per rank: more activation memory, and another DP).

    Fix:
    Set `critic.fsdp.ulysses_sequence_parallel_size` (and drop the role-level key).

    Source:
    verl/workers/config/critic.py FSDPCriticConfig.__post_init__ and validate;
    verl/workers/config/actor.py FSDPActorConfig.__post_init__ (the copy the critic lacks), verl 0.9.1.
    """
    lay = job.fsdp_layout("critic")
    if lay is None:
        return
    role_t = job.value("critic.ulysses_sequence_parallel_size")
    role_sp = need(role_t, "critic.ulysses_sequence_parallel_size")
    engine_sp = need(lay.sp, _sp_key(lay))
    if role_sp > 1 and role_sp != engine_sp:  # the role-level key left at 1 is just unused
        yield finding(
            "VERL-FSDP-CRITIC-SP",
            f"critic.ulysses_sequence_parallel_size is {role_sp} but the critic engine uses "
            f"critic.fsdp.ulysses_sequence_parallel_size = {engine_sp} (verl does not copy the role-level key)",
            where(role_t),
            role="critic",
            fix=f"critic.fsdp.ulysses_sequence_parallel_size={role_sp}",
        )


@rule(
    "VERL-FSDP-REF-SP",
    "warning",
    "The ref engine's Ulysses SP differs from the actor's",
    frameworks=("verl",),
    engine="fsdp",
)
def ref_sp_differs(job: Job) -> Iterator[Finding]:
    """
    The ref follows the actor's deprecated role-level `ulysses_sequence_parallel_size`, but not the
    actor's `fsdp_config.ulysses_sequence_parallel_size`: setting only the latter leaves the ref at
    its own engine value (1 by default).

    Why:
    No error at start: the ref runs whole sequences per rank (its long-context log-prob pass can
    run out of memory where the actor fits) over another DP than the one the batch is padded for.

    Fix:
    Set `actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size` to the actor's, or use
    the actor-level key.

    Source:
    verl/trainer/config/ref/dp_ref.yaml (ref.ulysses_sequence_parallel_size interpolates the
    actor-level key); verl/workers/config/actor.py FSDPActorConfig.__post_init__;
    verl/workers/engine_workers.py ActorRolloutRefWorker.init_model (verl 0.9.1).
    """
    actor, ref = job.fsdp_layout("actor"), job.fsdp_layout("ref")
    if actor is None or ref is None:
        return
    a = need(actor.sp, _sp_key(actor))
    r = need(ref.sp, _sp_key(ref))
    if a != r:
        yield finding(
            "VERL-FSDP-REF-SP",
            f"the actor's Ulysses SP is {a} but the ref's is {r}",
            where(actor.sp, ref.sp),
            role="ref",
            fix=f"{_sp_key(ref)}={a}, or set actor_rollout_ref.actor.ulysses_sequence_parallel_size={a} "
            "(the ref follows it)",
        )


@rule(
    "VERL-FSDP-OFFLOAD-POLICY", "warning", "offload_policy is read only by FSDP2", frameworks=("verl",), engine="fsdp"
)
def offload_policy_fsdp1(job: Job) -> Iterator[Finding]:
    """
    `fsdp_config.offload_policy=True` asks FSDP2 to keep parameters, gradients and optimizer state
    on the CPU (`CPUOffloadPolicy`); the FSDP1 engine (`strategy: fsdp`, verl's default) never
    reads the key.

    Why:
    No error: with strategy fsdp nothing is offloaded by this key, and a memory plan that counted
    on it runs out of GPU memory.

    Fix:
    Switch the role to fsdp2, or use param_offload / optimizer_offload.

    Source:
    verl/workers/engine/fsdp/transformer_impl.py FSDPEngine._build_fsdp_module (only the fsdp2 branch
    reads offload_policy), verl 0.9.1.
    """
    for lay in job.fsdp_layouts:
        policy = need(lay.offload_policy, f"{lay.key_prefix}.offload_policy")
        strategy = need(lay.strategy, f"{lay.role} strategy")
        if policy and strategy == "fsdp":
            yield finding(
                "VERL-FSDP-OFFLOAD-POLICY",
                f"[{lay.role}] {lay.key_prefix}.offload_policy=True has no effect with strategy fsdp "
                "(only verl's FSDP2 branch builds a CPUOffloadPolicy)",
                where(lay.offload_policy, lay.strategy),
                role=lay.role,
                fix=f"set the {lay.role} strategy to fsdp2, or use {lay.key_prefix}.param_offload=True "
                f"and {lay.key_prefix}.optimizer_offload=True",
            )
