"""vLLM engine checks a verl rollout reaches at start-up (vllm/config/model.py, model_executor/layers/linear.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from shardcheck.frameworks.verl.engine_versions import nearest_checked
from shardcheck.job import Job
from shardcheck.rules.base import Finding, finding, need, rule, where
from shardcheck.rules.divisors import divisors

RO = "actor_rollout_ref.rollout"


def _vllm_tp(job: Job) -> int | None:
    if job.rollout is None:
        return None
    if need(job.value(f"{RO}.name"), f"{RO}.name") != "vllm":
        return None
    return need(job.rollout.tp, f"{RO}.tensor_model_parallel_size")


@rule(
    "VLLM-TP-HEADS",
    "error",
    "Rollout TP must divide the attention heads (vLLM)",
    needs_model=True,
    frameworks=("verl", "verl-gen"),
    engine="vllm",
)
def vllm_heads(job: Job) -> Iterator[Finding]:
    """
    vLLM shards attention heads over its tensor-parallel ranks.

    Why:
    `ModelConfig.verify_with_parallel_config` raises `ValueError: Total number of attention heads (H)
    must be divisible by tensor parallel size (T).` when the rollout server starts.

    Fix:
    Choose a rollout TP that divides the head count.

    Versions:
    The same condition and text in vLLM 0.11.0 (vllm/config/model.py) and 0.12.0 (vllm/config/model.py,
    called from config/vllm.py VllmConfig).

    Source:
    vllm/config/model.py ModelConfig.verify_with_parallel_config (vLLM 0.2x-0.33).
    """
    tp = _vllm_tp(job)
    heads = job.model.num_attention_heads
    if tp and heads and heads % tp:
        yield finding(
            "VLLM-TP-HEADS",
            f"Total number of attention heads ({heads}) must be divisible by tensor parallel "
            f"size ({tp}). (vLLM, {job.model.name})",
            where(job.rollout.tp),
            fix=f"{RO}.tensor_model_parallel_size in {', '.join(map(str, divisors(heads)))}",
        )


@rule(
    "VLLM-TP-KV",
    "error",
    "Rollout TP and the KV heads must divide one another (vLLM)",
    needs_model=True,
    frameworks=("verl", "verl-gen"),
    engine="vllm",
)
def vllm_kv_heads(job: Job) -> Iterator[Finding]:
    """
    vLLM splits the KV heads over TP ranks when there are at least as many as ranks, and replicates
    them (TP / KV copies) when there are fewer; either way one must divide the other. Latent
    attention (MLA) has no KV heads to split.

    Why:
    `QKVParallelLinear.__init__` fails `ensure_divisibility` with `AssertionError: T is not
    divisible by K` while the rollout model is loaded.

    Fix:
    Choose a rollout TP that divides the KV heads or is a multiple of them.

    Versions:
    The same split and assertion text in vLLM 0.11.0 and 0.12.0 (model_executor/layers/linear.py
    QKVParallelLinear, distributed/utils.py ensure_divisibility).

    Source:
    vllm/model_executor/layers/linear.py QKVParallelLinear.__init__ (vLLM 0.2x-0.33).
    """
    tp = _vllm_tp(job)
    kv = job.model.num_key_value_heads
    if not tp or not kv or job.model.mla:
        return
    if tp >= kv and tp % kv:
        message = f"{tp} is not divisible by {kv}"
    elif tp < kv and kv % tp:
        message = f"{kv} is not divisible by {tp}"
    else:
        return
    yield finding(
        "VLLM-TP-KV",
        f'{job.model.name} has {kv} KV heads and rollout TP is {tp} (vLLM: "{message}")',
        where(job.rollout.tp),
        fix=f"a rollout TP dividing {kv} or a multiple of it",
    )


def derived_max_len(model) -> tuple[float, str]:
    """vLLM's derived maximum length and the key it came from (vllm/config/model.py _get_and_verify_max_len)."""
    derived: float = model.max_position_embeddings
    key = "max_position_embeddings"
    if model.model_max_length:
        derived, key = model.model_max_length, "model_max_length"
    rope = model.rope_scaling
    if rope and "gemma3" not in (model.model_type or ""):
        factor = 1.0
        rope_type = rope.get("rope_type", "default")
        if rope_type not in ("su", "longrope", "llama3"):
            factor = rope.get("factor", factor)
            if rope_type == "yarn" and rope.get("original_max_position_embeddings"):
                derived = rope["original_max_position_embeddings"]
        derived *= factor if factor is not None else 1.0
    return derived, key


@rule(
    "VLLM-MAXLEN-DERIVED",
    "error",
    "Rollout max_model_len must not exceed vLLM's RoPE-derived maximum",
    needs_model=True,
    frameworks=("verl", "verl-gen"),
    engine="vllm",
)
def vllm_derived_max_len(job: Job) -> Iterator[Finding]:
    """
    vLLM derives the longest context from the model's own config.json: max_position_embeddings
    (or model_max_length) times the RoPE scaling factor, except that YaRN starts from
    `original_max_position_embeddings` and llama3 / longrope add no factor. verl's own check
    (VERL-RO-MAXLEN) only compares with max_position_embeddings, and verl's
    `model.override_config` never reaches vLLM, which reads config.json itself. With max_model_len
    unset verl passes max_position_embeddings.

    Why:
    `ModelConfig` raises `ValueError: User-specified max_model_len (X) is greater than the derived
    max_model_len (max_position_embeddings=D or model_max_length=None in model's config.json).`
    when the rollout server starts (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set on the workers).

    Fix:
    Lower max_model_len to the derived length, or edit rope_scaling in the model's config.json.

    Versions:
    The same condition and text in vLLM 0.8.5, 0.9.1 (vllm/config.py), 0.11.0, 0.12.0 and 0.24.0 (vllm/
    config/model.py), except for how the derived length is printed: 0.8.5 … 0.11.0 print it as a whole
    number for su / longrope / llama3 RoPE and without RoPE scaling (no factor applied); 0.12.0 (verl
    0.7.0 … 0.8.0) multiplies by the factor, 1.0 if none, whenever the model has RoPE parameters, and
    its `patch_rope_parameters` (transformers_utils/config.py, transformers < 5) makes them from
    rope_scaling or, lacking it, from `rope_theta`: a float for every RoPE model but Gemma 3; 0.24.0
    prints a float when rope_scaling / rope_parameters are given.

    Source:
    vllm/config/model.py _get_and_verify_max_len and
    vllm/transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key (vLLM 0.24.0,
    the version verl 0.9.1 pins; newer vLLM may differ);
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer._validate_configs (verl 0.9.1).
    """
    if _vllm_tp(job) is None:
        return
    mml_t = job.value(f"{RO}.max_model_len")
    given = need(mml_t, f"{RO}.max_model_len")
    limit = job.model.max_positions() if given is not None else job.model.max_position_embeddings
    if not limit:
        return
    mml = given or limit  # verl: None -> max_position_embeddings
    if mml > limit:
        return  # VERL-RO-MAXLEN: verl rejects it before vLLM sees it
    message = max_len_error(job.model, mml, job.vllm_version)
    if message is not None:
        yield finding(
            "VLLM-MAXLEN-DERIVED",
            f"{message} (vLLM; rope_scaling {job.model.rope_scaling}, {job.model.source})",
            where(mml_t, job.model_path),
            fix=f"{RO}.max_model_len={int(derived_max_len(job.model)[0])} or less",
        )


def max_len_error(model, max_model_len: int, vllm_version: str | None = None) -> str | None:
    """vLLM's error text for a user-given max_model_len above the derived maximum, or None. The derived length is
    printed as a float once it was multiplied by a RoPE factor: vLLM 0.24.0 multiplies whenever the model has RoPE
    parameters (by 1.0 for su / longrope / llama3); 0.12.0 too, and its RoPE parameters include a config.json with
    only ``rope_theta``; 0.8.5, 0.9.1 and 0.11.0 only for the other rope types (vllm/config.py, vllm/config/model.py
    ``_get_and_verify_max_len``)."""
    derived, key = derived_max_len(model)
    if max_model_len <= derived or (model.model_max_length and max_model_len <= model.model_max_length):
        return None
    rope = model.rope_scaling
    checked = nearest_checked("vllm", vllm_version)
    if checked == "0.24.0":
        multiplied = bool(rope) and "gemma3" not in (model.model_type or "")
    elif checked == "0.12.0":
        # vllm 0.12.0 transformers_utils/config.py patch_rope_parameters (transformers < 5, its pin): rope_scaling,
        # else {"rope_type": "default"} once the config has rope_theta, becomes rope_parameters; config/model.py
        # _get_and_verify_max_len multiplies by the factor (1.0 if none) whenever rope_parameters is set
        multiplied = bool(rope or model.config.get("rope_theta") is not None) and "gemma3" not in (
            model.model_type or ""
        )
    else:
        multiplied = (
            bool(rope)
            and "gemma3" not in (model.model_type or "")
            and rope.get("rope_type", "default") not in ("su", "longrope", "llama3")
        )
    shown = (derived if rope else derived * 1.0) if multiplied else int(derived)  # rope_theta only: times 1.0
    return (
        f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len ({key}={shown} "
        f"or model_max_length={model.model_max_length} in model's config.json)."
    )


@rule(
    "VLLM-MNS-MNBT",
    "error",
    "vLLM's max_num_batched_tokens must be at least max_num_seqs",
    frameworks=("verl", "verl-gen"),
    engine="vllm",
)
def vllm_seqs_vs_tokens(job: Job) -> Iterator[Finding]:
    """
    Each scheduler step must be able to hold one token of every running sequence. verl passes
    `max_num_seqs` and `max_num_batched_tokens` (raised to max_model_len first when chunked prefill
    is off).

    Why:
    `SchedulerConfig.verify_max_model_len` raises `ValueError: max_num_batched_tokens (T) must be
    greater than or equal to max_num_seqs (S).` when the rollout server starts.

    Fix:
    Raise max_num_batched_tokens or lower max_num_seqs.

    Versions:
    The same condition and text in vLLM 0.11.0 (`SchedulerConfig._verify_args`), 0.12.0 and 0.24.0
    (`SchedulerConfig.verify_max_model_len`, vllm/config/scheduler.py).

    Source:
    vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (vLLM 0.24.0);
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer._validate_configs (verl 0.9.1).
    """
    if _vllm_tp(job) is None:
        return
    seqs_t, tokens_t = job.value(f"{RO}.max_num_seqs"), job.value(f"{RO}.max_num_batched_tokens")
    seqs, tokens = need(seqs_t, f"{RO}.max_num_seqs"), need(tokens_t, f"{RO}.max_num_batched_tokens")
    if seqs is None or tokens is None:
        return
    if not need(job.value(f"{RO}.enable_chunked_prefill"), f"{RO}.enable_chunked_prefill"):
        mml = need(job.value(f"{RO}.max_model_len"), f"{RO}.max_model_len")
        mml = mml or (job.model.max_positions() if job.model else None)
        if mml is None:
            return  # verl raises the token budget to an unknown max_model_len
        tokens = max(tokens, mml)
    if tokens < seqs:
        yield finding(
            "VLLM-MNS-MNBT",
            f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs ({seqs}). (vLLM)",
            where(tokens_t, seqs_t),
            fix=f"{RO}.max_num_batched_tokens={seqs} or more, or {RO}.max_num_seqs={tokens} or less",
        )


@rule(
    "VLLM-MNS-REQUESTS",
    "warning",
    "A step's rollout requests exceed what the vLLM engines run at once",
    frameworks=("verl",),
    engine="vllm",
)
def vllm_requests_per_step(job: Job) -> Iterator[Finding]:
    """
    Each step sends `train_batch_size · rollout.n` requests to the world / (TP·DP·PP) replicas; each
    replica runs DP vLLM engines, each scheduling at most `max_num_seqs` sequences at a time. More
    requests than replicas · DP · max_num_seqs wait in the queue: generation takes several waves.

    Why:
    No error: the rollout of every step takes longer than it could (a long response holds its slot
    to the end).

    Fix:
    Raise max_num_seqs (KV cache permitting) or the rollout DP.

    Versions:
    `max_num_seqs` bounds each engine core's scheduler alike in vLLM 0.11.0, 0.12.0 and 0.24.0
    (vllm/config/scheduler.py).

    Source:
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer.launch_server (max_num_seqs,
    data_parallel_size per replica, verl 0.9.1); vllm/config/scheduler.py SchedulerConfig.max_num_seqs
    (per engine core, vLLM 0.24.0).
    """
    if _vllm_tp(job) is None:
        return
    seqs_t = job.value(f"{RO}.max_num_seqs")
    seqs = need(seqs_t, f"{RO}.max_num_seqs")
    world = need(job.cluster.world, "world size")
    tp, dp = need(job.rollout.tp, f"{RO}.tensor_model_parallel_size"), need(job.rollout.dp, f"{RO}.data_parallel_size")
    pp = need(job.rollout.pp, f"{RO}.pipeline_model_parallel_size")
    if seqs is None or world % (tp * dp * pp):
        return  # VERL-RO-WORLD
    engines = world // (tp * dp * pp) * dp
    requests = need(job.value("data.train_batch_size"), "data.train_batch_size") * need(job.value(f"{RO}.n"), f"{RO}.n")
    if requests > engines * seqs:
        waves = -(-requests // (engines * seqs))
        yield finding(
            "VLLM-MNS-REQUESTS",
            f"{requests} requests a step (train_batch_size · n) on {engines} vLLM engines "
            f"of max_num_seqs {seqs}: at most {engines * seqs} run at once, so the "
            f"rollout takes {waves} waves",
            where(seqs_t, job.value("data.train_batch_size")),
            fix=f"{RO}.max_num_seqs={-(-requests // engines)} (KV cache permitting)",
        )


@rule(
    "VLLM-MEM-STARTUP",
    "error",
    "vLLM's gpu_memory_utilization × device must be free when the colocated rollout starts",
    needs_model=True,
    frameworks=("verl",),
    engine="vllm",
)
def vllm_startup_memory(job: Job) -> Iterator[Finding]:
    """
    When vLLM starts it asks for `gpu_memory_utilization` × the device's memory and checks that so
    much is free at that moment. In verl's hybrid (colocated) mode the training engines are built
    first and share the device: what they still hold is not free. At that point each Megatron engine
    holds its weights and gradient buffer unless `param_offload`, and the optimizer's fp32 master copy
    unless `optimizer_offload` (Adam's moments appear at the first step); an FSDP engine its sharded
    parameters unless `param_offload`; the reference model its weights unless its own `param_offload`;
    a colocated critic likewise. The sleep settings (`free_cache_engine`, `enable_sleep_mode`) only
    act after this first start. The free memory shardcheck computes is an upper bound: the training
    process's CUDA context and NCCL buffers are not counted.

    Why:
    The rollout server dies before loading the model with `ValueError: Free memory on device (F/T GiB)
    on startup is less than desired GPU memory utilization (U, R GiB). Decrease GPU memory utilization
    or reduce GPU memory used by other processes.` Error on a device named with `--device`, warning
    on an assumed one.

    Versions:
    The check is in vLLM's v1 GPU worker (0.9.1, 0.11.0 and 0.12.0: `Worker.init_device`, the same
    condition and text; 0.24.0: `request_memory`); vLLM 0.8.5 (verl 0.4.x, 0.5.0) has none: its worker
    only records the free memory and later sizes the KV cache from what is left (v1/worker/
    gpu_worker.py `determine_available_memory`), so the rule is silent there.
    verl's offload keys mean the same in every bundled release: `param_offload` moves a Megatron
    engine's weights and gradient buffers together; `megatron.grad_offload` (every release's config but
    0.9.1's) is read and never used (megatron_workers.py, engine/megatron/transformer_impl.py), so it
    frees nothing here.

    Fix:
    Lower `gpu_memory_utilization` to what is free, or offload the training state at init
    (`param_offload`, `optimizer_offload` of the actor, ref and critic).

    Source:
    vllm 0.24.0 vllm/v1/worker/utils.py request_memory (the check and its text), vllm 0.11.0
    vllm/v1/worker/gpu_worker.py Worker.init_device; verl 0.9.1 verl/workers/engine_workers.py
    init_model (the actor and ref engines before the rollout), verl/workers/engine/megatron/
    transformer_impl.py and fsdp/transformer_impl.py initialize (offload at the end of init);
    shardcheck/memory/estimate.py (_at_startup).
    """
    from shardcheck.frameworks.interface import memory_fix_keys
    from shardcheck.memory.devices import GIB
    from shardcheck.rules.memory import job_estimate

    if _vllm_tp(job) is None or nearest_checked("vllm", job.vllm_version) == "0.8.5":
        return
    est = job_estimate(job)
    if est is None or est.rollout is None or not est.rollout.startup_resident_bytes:
        return
    util_t = job.value(f"{RO}.gpu_memory_utilization")
    util = need(util_t, f"{RO}.gpu_memory_utilization")
    total = est.device.memory_bytes
    free = total - est.rollout.startup_resident_bytes
    message = startup_memory_error(total, free, util)
    if message is None:
        return
    keys = memory_fix_keys(job).offload
    assumed = f" ({est.device.note})" if est.device.note else ""
    room = math.floor(100 * free / total) / 100
    yield finding(
        "VLLM-MEM-STARTUP",
        f'vLLM: "{message}" at best — the colocated training side '
        f"still holds {est.rollout.startup_resident_bytes / GIB:.2f} GiB of {est.device.name} "
        f"({', '.join(est.rollout.startup_terms)}){assumed}",
        where(util_t, job.value(keys[0]), job.value(keys[1])),
        fix=f"{RO}.gpu_memory_utilization={room} or less, or {keys[0]}=True and {keys[1]}=True",
        severity=None if est.device.note is None else "warning",
    )


def startup_memory_error(total: int, free: int, utilization: float) -> str | None:
    """vLLM's start-up check: its error text when ``free`` bytes are less than ``utilization`` × ``total``, or None
    (vllm 0.24.0 vllm/v1/worker/utils.py request_memory; GiB figures as vllm/utils/mem_utils.py format_gib)."""
    requested = math.ceil(total * utilization)
    if free >= requested:
        return None

    def gib(n: int) -> str:
        return f"{round(n / (1 << 30), 2)}"

    return (
        f"Free memory on device ({gib(free)}/{gib(total)} GiB) on startup is less than desired GPU memory "
        f"utilization ({utilization}, {gib(requested)} GiB)."
    )


@rule(
    "VLLM-MEM-WAKE",
    "warning",
    "vLLM's memory, resumed for each rollout, must fit beside the training state left on the device",
    needs_model=True,
    frameworks=("verl",),
    engine="vllm",
)
def vllm_wake_memory(job: Job) -> Iterator[Finding]:
    """
    With `free_cache_engine` (verl's default) the colocated vLLM sleeps during the update and, at the
    start of every rollout, maps its weights and its whole KV cache again (the sizes it chose at
    start-up). By then the first update has run: the training side keeps its weights and gradients
    unless `param_offload`, its whole Adam state (master and both moments) unless
    `optimizer_offload`, the reference's weights and a colocated critic's state. The start-up check
    (VLLM-MEM-STARTUP) saw only the master copy: a job can start and then run out of memory at its
    second rollout. Warning: vLLM's KV cache size depends on its profiled activations, which
    shardcheck estimates.

    Why:
    A CUDA out-of-memory error while verl resumes the rollout's KV cache (`rollout.resume(tags=
    ["kv_cache"])`, vLLM's `CuMemAllocator.wake_up`), after the first training step.

    Fix:
    `optimizer_offload=True` (and `param_offload=True`) for the actor (and critic), or a lower
    `gpu_memory_utilization`.

    Versions:
    vLLM 0.11.0 and 0.12.0 sleep and wake the same way (vllm/device_allocator/cumem.py
    `CuMemAllocator.sleep` / `wake_up(tags)`).

    Source:
    verl 0.9.1 verl/workers/engine_workers.py ActorRolloutRefWorker rollout_mode (resume weights, sync,
    offload the actor's weights, resume kv_cache); vllm 0.24.0 vllm/device_allocator/cumem.py
    CuMemAllocator.wake_up; shardcheck/memory/estimate.py (_resident, _rollout).
    """
    from shardcheck.frameworks.interface import memory_fix_keys
    from shardcheck.memory.devices import GIB
    from shardcheck.rules.memory import job_estimate

    if _vllm_tp(job) is None:
        return
    if not need(job.value(f"{RO}.free_cache_engine"), f"{RO}.free_cache_engine"):
        return  # vLLM keeps its memory through the update: the update must fit beside it instead
    est = job_estimate(job)
    if est is None or est.rollout is None or not est.rollout.training_resident_bytes:
        return
    r = est.rollout
    total = est.device.memory_bytes
    engine = r.weights_bytes + max(0, r.kv_budget_bytes)
    if r.training_resident_bytes + engine <= total:
        return
    if startup_memory_error(total, total - r.startup_resident_bytes, r_util(job)) is not None:
        return  # it does not even start (VLLM-MEM-STARTUP)
    keys = memory_fix_keys(job).offload
    assumed = f" ({est.device.note})" if est.device.note else ""
    yield finding(
        "VLLM-MEM-WAKE",
        f"each rollout after the first update maps vLLM's weights {r.weights_bytes / GIB:.1f} GiB and KV cache "
        f"{max(0, r.kv_budget_bytes) / GIB:.1f} GiB (estimated) again beside the "
        f"{r.training_resident_bytes / GIB:.1f} GiB the training side keeps "
        f"({', '.join(r.training_resident_terms)}): {(engine + r.training_resident_bytes) / GIB:.1f} GiB > "
        f"{est.device.name} {total / GIB:.1f} GiB — CUDA out of memory when verl resumes the KV cache{assumed}",
        where(job.value(keys[1]), job.value(f"{RO}.gpu_memory_utilization"), job.value(keys[0])),
        fix=f"{keys[1]}=True (Adam's state off the device between updates), {keys[0]}=True, or a lower "
        f"{RO}.gpu_memory_utilization",
    )


def r_util(job: Job) -> float:
    """The rollout's gpu_memory_utilization (known: the memory estimate read it)."""
    return job.value(f"{RO}.gpu_memory_utilization").value


@rule(
    "VLLM-EPLB",
    "error",
    "vLLM's expert load balancing needs expert parallelism and experts that split evenly over EP",
    needs_model=True,
    frameworks=("verl", "verl-gen"),
    engine="vllm",
)
def vllm_eplb(job: Job) -> Iterator[Finding]:
    """
    verl turns on vLLM's expert parallelism when the rollout's `expert_parallel_size` is above 1;
    vLLM's EP group is then the replica's TP · DP ranks. Without expert load balancing (EPLB) vLLM
    spreads uneven experts over the ranks (the first ranks take one more); with
    `engine_kwargs.vllm.enable_eplb=True` every rank must hold the same number of physical experts:
    routed experts plus `eplb_config.num_redundant_experts`.

    Why:
    vLLM refuses to start: `ValueError: enable_expert_parallel must be True to use EPLB.`
    (`ParallelConfig`), or `ValueError: EPLB currently only supports even distribution of experts
    across ranks. Got N experts and E EP ranks.` while the MoE layers are built.

    Versions:
    vLLM 0.24.0 (both as a ValueError); vLLM 0.11.0 and 0.12.0 (verl 0.6.1 … 0.8.0) have the second as
    an `AssertionError: EPLB currently only supports even distribution of experts across ranks.`
    (fused_moe/layer.py `FusedMoE.__init__`, global experts = routed + redundant), the first as in 0.24.0
    (config/parallel.py). vLLM 0.8.5 and 0.9.1 have no EPLB: `enable_eplb` is no engine argument
    (engine/arg_utils.py), so verl 0.6.0's async server fails parsing `--enable-eplb` (`unrecognized
    arguments`) and its sync rollout `EngineArgs(**engine_kwargs)` (`unexpected keyword argument`).
    The rule words it as the vLLM version judged with does (`--vllm-version`, else the one the verl
    version pins: 0.9.1's up to 0.10, vLLM 0.11.0's and 0.12.0's text up to 0.23, 0.24.0's from 0.24; the
    versions between were not read).

    Fix:
    Set `expert_parallel_size` to rollout TP · DP, or choose TP · DP (or the redundant experts) so that
    experts + redundant experts divide by it, or drop enable_eplb.

    Source:
    vllm 0.24.0 vllm/config/parallel.py ParallelConfig (the EPLB checks),
    vllm/model_executor/layers/fused_moe/layer.py (even distribution with EPLB) and
    fused_moe/expert_map_manager.py determine_expert_map (uneven without); verl 0.9.1
    verl/workers/rollout/vllm_rollout/vllm_async_server.py (enable_expert_parallel, engine_kwargs.vllm).
    """
    tp = _vllm_tp(job)
    if tp is None:
        return
    # engine_kwargs.vllm is an open mapping ({} by default) handed to vLLM as it is: an absent key is vLLM's default
    kwargs = need(job.value(f"{RO}.engine_kwargs.vllm"), f"{RO}.engine_kwargs.vllm") or {}
    if not hasattr(kwargs, "get") or kwargs.get("enable_eplb") is not True:
        return
    eplb_t = job.value(f"{RO}.engine_kwargs.vllm.enable_eplb")
    if nearest_checked("vllm", job.vllm_version) in ("0.8.5", "0.9.1"):
        yield finding(
            "VLLM-EPLB",
            f"vLLM {job.vllm_version} has no expert load balancing: enable_eplb is not one of its engine arguments "
            "(verl's server: `unrecognized arguments: --enable-eplb`; its sync rollout: `unexpected keyword "
            "argument 'enable_eplb'`)",
            where(eplb_t),
            fix=f"drop {RO}.engine_kwargs.vllm.enable_eplb, or run a verl whose vLLM has EPLB (0.6.1 on: vLLM 0.11)",
        )
        return
    ep_t = job.value(f"{RO}.expert_parallel_size")
    ep = need(ep_t, f"{RO}.expert_parallel_size")
    if ep <= 1:
        yield finding(
            "VLLM-EPLB",
            "enable_expert_parallel must be True to use EPLB. (vLLM; verl enables it only with "
            f"{RO}.expert_parallel_size > 1, here {ep})",
            where(eplb_t, ep_t),
            fix=f"{RO}.expert_parallel_size=<rollout TP · DP>, or drop engine_kwargs.vllm.enable_eplb",
        )
        return
    experts = job.model.num_experts
    dp = need(job.rollout.dp, f"{RO}.data_parallel_size")
    if not experts:
        return
    extra = redundant_experts(kwargs.get("eplb_config"))
    if extra is None:
        return  # not a number shardcheck can read: vLLM's own EPLBConfig validation judges it
    ranks = tp * dp  # vLLM's EP group (VERL-RO-EP: expert_parallel_size must equal it)
    physical = experts + extra
    if not physical % ranks:
        return
    if nearest_checked("vllm", job.vllm_version) in ("0.11.0", "0.12.0"):
        message = (
            f"AssertionError: EPLB currently only supports even distribution of experts across ranks. (vLLM "
            f"{job.vllm_version}; {job.model.name}: {experts} routed + {extra} redundant = {physical} experts on "
            f"{ranks} EP ranks, rollout TP {tp} · DP {dp})"
        )
    else:
        message = (
            f"EPLB currently only supports even distribution of experts across ranks. Got {physical} experts and "
            f"{ranks} EP ranks. (vLLM; {job.model.name}: {experts} routed + {extra} redundant, EP = rollout TP {tp}"
            f" · DP {dp})"
        )
    yield finding(
        "VLLM-EPLB",
        message,
        where(eplb_t, job.rollout.tp, job.rollout.dp),
        fix=f"+{RO}.engine_kwargs.vllm.eplb_config.num_redundant_experts={extra + (-physical) % ranks}, or "
        f"rollout TP · DP dividing {physical}",
    )


def redundant_experts(eplb_config) -> int | None:
    """``num_redundant_experts`` of a vLLM ``eplb_config`` given as a mapping or as JSON text (vLLM's CLI form);
    0 when it is not given (vllm/config/parallel.py EPLBConfig); None when it cannot be read."""
    import json

    if eplb_config is None:
        return 0
    if isinstance(eplb_config, str):
        try:
            eplb_config = json.loads(eplb_config)
        except ValueError:
            return None
    if not hasattr(eplb_config, "get"):
        return None
    value = eplb_config.get("num_redundant_experts", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
