"""Memory findings from the estimate (shardcheck/memory): training peak, rollout KV cache, host RAM.

A figure that is exact (parameters, gradients and optimizer states follow from the layout) gives an
error when it alone overflows a device named with ``--device``; a figure that includes estimated terms
(activations, logits, workspace, vLLM's profiling reserve), or a device assumed from ``trainer.device``,
gives a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.interface import MEMORY_FRAMEWORKS, memory_fix_keys
from shardcheck.frameworks.memory_settings import FixKeys
from shardcheck.frameworks.verl.engine_versions import nearest_checked
from shardcheck.job import Job
from shardcheck.memory.devices import GIB
from shardcheck.memory.estimate import MemoryEstimate, RolloutMemory, StageMemory, estimate
from shardcheck.rules.base import Finding, finding, rule, where


def job_estimate(job: Job, train_of: Job | None = None) -> MemoryEstimate | None:
    """The estimate the MEM rules judge for ``job`` (computed once per job; the planner shares it).
    ``train_of``: a job that differs from this one only in the rollout engine's sizes, whose training part is
    taken as it is (memory.estimate ``train_of``)."""
    if train_of is not None and "memory" not in job.run_cache:
        base = _estimate(train_of)
        if base is not None and job.layout("actor") is not None:
            job.run_cache["memory"] = estimate(job, job.device_choice, train_of=base)
    return _estimate(job)


def _estimate(job: Job) -> MemoryEstimate | None:
    if job.layout("actor") is None and job.fsdp_layout("actor") is None:
        return None
    if "memory" not in job.run_cache:  # the four MEM rules judge one estimate per run
        job.run_cache["memory"] = estimate(job, job.device_choice)
    return job.run_cache["memory"]


def _keys(job: Job) -> FixKeys:
    return memory_fix_keys(job)


def _engine_sizes(job: Job) -> tuple:
    """The sizes a finding may point at when no better line exists: the training engine's, then the cluster."""
    layout = job.layout("actor")
    if layout is not None:
        return layout.pp, layout.tp, job.cluster.nnodes
    return job.fsdp_layout("actor").sp, job.cluster.nnodes


def _beyond_every_preset(exact_bytes: int, est: MemoryEstimate) -> str:
    """On an assumed device: when the certain terms alone exceed the largest preset of that device kind,
    no variant fits, so the overflow is an error all the same (its text says so); else ""."""
    if est.device.note is None:
        return ""
    from shardcheck.memory.devices import largest_of_kind

    largest = largest_of_kind(est.device.kind)
    if exact_bytes <= largest.memory_bytes:
        return ""
    return (
        f"; weights, grads and optimizer alone exceed even the largest {est.device.kind} preset, "
        f"{largest.name} {_gib(largest.memory_bytes)}"
    )


def _severity(certain: bool, est: MemoryEstimate) -> str | None:
    """The rule's own severity when the overflow is certain on a named device; else a warning."""
    return None if certain and est.device.note is None else "warning"


def _assumed(est: MemoryEstimate) -> str:
    return f" ({est.device.note})" if est.device.note else ""


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _ranks(s: StageMemory) -> str:
    return f"stage{'s' * (len(s.ranks) > 1)} {s.ranks_text(', ')}"


def _train_fix(s: StageMemory, keys: FixKeys) -> tuple[str, str, str]:
    """The largest term of a stage and the change that shrinks it."""
    b = s.bytes
    term = max(("weights", "grads", "optimizer", "activations", "logits"), key=lambda k: b[k])
    key, fix = getattr(keys, term) if term in ("activations", "logits", "optimizer") else keys.weights
    return term, key, fix


@rule(
    "MEM-TRAIN-OOM",
    "error",
    "A pipeline stage's predicted training peak exceeds the device memory",
    needs_model=True,
    frameworks=MEMORY_FRAMEWORKS,
)
def train_oom(job: Job) -> Iterator[Finding]:
    """
    The update step's peak on one device of each pipeline stage class: weights, fp32 gradients, Adam
    state (sharded by the distributed optimizer), activations of the micro batches the 1F1B schedule
    keeps in flight, the last stage's logits and the step's transient workspaces: together the
    `allocated` figure (what `torch.cuda.max_memory_allocated` would show). The rule compares the
    device peak `total` with the device: `allocated` plus the caching allocator's fragmentation and
    the memory outside it (`shardcheck memory --explain` lists each term's formula and source).
    Exact terms alone over a device named with `--device`: error; over it only with the estimated
    terms, or on a device assumed from `trainer.device`: warning.

    Why:
    The first update step dies with an out-of-memory error after rollout, reward and log-prob passes
    have already run — the most expensive point to find out.

    Fix:
    The message names the largest term and the key (verl) or flag (Megatron-LM, slime) that shrinks
    it: recompute or fewer tokens for
    activations, fused kernels for logits, distributed optimizer or offload for optimizer state,
    more model parallelism for weights.

    Source:
    shardcheck/memory/estimate.py (terms and their sources); Korthikanti et al. 2022 for activations.
    """
    est = _estimate(job)
    if est is None or est.train is None:
        return
    cap = est.device.memory_bytes
    phases = [("", est.train)] + ([("the critic's update, ", est.critic_train)] if est.critic_train else [])
    for phase, train in phases:
        for s in train.stages:
            if s.total > cap:
                yield _train_oom(job, est, s, phase, train.batch_bound, cap)


def _train_oom(job: Job, est: MemoryEstimate, s: StageMemory, phase: str, batch_bound: str | None, cap: int) -> Finding:
    b = s.bytes
    exact = sum(b.get(k, 0) for k in ("weights", "grads", "optimizer", "ref_weights", "critic_state", "actor_state"))
    term, key, fix = _train_fix(s, _keys(job))
    parts = ", ".join(
        f"{k} {_gib(b[k])}"
        for k in (
            "weights",
            "grads",
            "optimizer",
            "gathered",
            "activations",
            "logits",
            "ref_weights",
            "critic_state",
            "actor_state",
            "workspace",
        )
        if b.get(k)
    )
    certain = exact > cap
    beyond = _beyond_every_preset(exact, est)
    bound = f"; micro batches sized at {batch_bound}" if batch_bound else ""
    return finding(
        "MEM-TRAIN-OOM",
        f"{phase}{_ranks(s)} ({s.layers} layers): predicted device peak {_gib(s.total)} (allocated "
        f"{_gib(b['allocated'])}) > {est.device.name} "
        f"{_gib(cap)} ({parts}); {'weights, grads and optimizer alone exceed it' if certain else f'largest: {term}'}"
        f"{bound}{_assumed(est)}{beyond}",
        where(job.value(key), *_engine_sizes(job)),
        fix=fix,
        severity="error" if beyond else _severity(certain, est),
        scope=_ranks(s),
    )


def _one_request(r: RolloutMemory) -> int:
    return r.kv_bytes_per_token * r.max_model_len + r.state_bytes_per_request


@rule(
    "MEM-ROLLOUT-KV",
    "error",
    "One request of max_model_len tokens does not fit the rollout KV cache",
    needs_model=True,
    frameworks=MEMORY_FRAMEWORKS,
)
def rollout_kv(job: Job) -> Iterator[Finding]:
    """
    vLLM sizes its KV cache as `gpu_memory_utilization` × device memory minus the weights and its
    profiled activations, and refuses to start when the cache cannot hold one request of
    `max_model_len` tokens. SGLang (slime) holds weights and its KV pool in `--sglang-mem-fraction-static`
    × device memory and stops when the pool is empty ("Not enough memory. Please try to increase
    --mem-fraction-static.", sglang 0.5.15.post1 srt/model_executor/pool_configurator.py); a request
    longer than the pool is never scheduled. KV bytes per token per device: 2 · layers · max(1, KV heads / TP) ·
    head_dim · 2 bytes (MLA: the latent, kv_lora_rank + rope dim, on every TP rank).

    Why:
    vLLM's v1 engine (0.24.0: `vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory`) raises
    `ValueError: To serve at least one request with the model's max seq len (N), (X GiB KV cache is
    needed, which is larger than the available KV cache memory (Y GiB)` while verl starts the
    rollout servers (`No available memory for the cache blocks` when nothing is left at all).
    vLLM 0.8.5, 0.9.1, 0.11.0 and 0.12.0 (verl 0.4.0 … 0.8.0) say "the models's max seq len" (same
    condition, in `check_enough_kv_cache_memory`).
    Error when the request does not fit even without vLLM's profiling reserve on a device named
    with `--device`; warning when it fails only with the reserve, or on an assumed device.

    Fix:
    Raise `gpu_memory_utilization`, raise the rollout TP (fewer KV heads and weights per device), or
    lower `max_model_len`.

    Source:
    vllm 0.24.0 vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory), vllm/v1/worker/gpu_worker.py
    (determine_available_memory); shardcheck/memory/estimate.py (kv_bytes_per_token).
    """
    est = _estimate(job)
    if est is None or est.rollout is None:
        return
    r = est.rollout
    keys = _keys(job)
    need_bytes = _one_request(r)
    if need_bytes <= r.kv_budget_bytes:
        return
    # certain only when the weights are exact (a quantized checkpoint may load in fewer bytes)
    certain = need_bytes > r.kv_budget_bytes + r.reserve_bytes and r.weights_exact
    util = job.value(keys.memory_fraction)
    budget = f"({max(0, r.kv_budget_bytes) / GIB:.2f} GiB)"
    if r.engine == "sglang":
        # sglang 0.5.15.post1 srt/model_executor/pool_configurator.py (an empty pool) and
        # model_runner_kv_cache_mixin.py (weights over the static budget); a request longer than the pool
        # cannot be scheduled.
        said = (
            'SGLang: "Not enough memory. Please try to increase --mem-fraction-static." — '
            if r.kv_budget_bytes <= 0
            else "SGLang's KV pool cannot hold one request of the context length — "
        )
        head = f"{said}{need_bytes / GIB:.2f} GiB KV cache per request of {r.max_model_len} tokens, pool {budget}"
    else:
        # vLLM before 0.24 spells it "models's" (v1/core/kv_cache_utils.py, 0.8.5, 0.9.1, 0.11.0, 0.12.0)
        whose = "model's" if nearest_checked("vllm", job.vllm_version) == "0.24.0" else "models's"
        head = (
            f'vLLM: "To serve at least one request with the {whose} max seq len ({r.max_model_len}), '
            f"({need_bytes / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f'{budget}"'
        )
    yield finding(
        "MEM-ROLLOUT-KV",
        f"{head} — {r.kv_bytes_per_token} bytes per token per device at "
        f"rollout TP {r.tp}; available = {util.value} × {est.device.name} {_gib(est.device.memory_bytes)} − "
        f"{_gib(r.weights_bytes)} of weights"
        + ("" if certain else f" − vLLM's ≈{_gib(r.reserve_bytes)} profiling reserve (estimated)")
        + _assumed(est),
        where(util, job.value(keys.max_model_len), job.rollout.tp, job.cluster.nnodes),
        fix=f"raise {keys.memory_fraction}, raise the rollout TP, or lower {keys.max_model_len}",
        severity=_severity(certain, est),
    )


@rule(
    "MEM-ROLLOUT-CONCURRENCY",
    "warning",
    "Fewer full-length requests fit the KV cache than one engine gets per step",
    needs_model=True,
    frameworks=MEMORY_FRAMEWORKS,
)
def rollout_concurrency(job: Job) -> Iterator[Finding]:
    """
    Each step sends `train_batch_size × n` requests, spread over the rollout replicas and over the
    DP engines of each replica. When fewer requests of `max_prompt_length + max_response_length`
    tokens fit in one engine's KV cache than the engine gets, the rest wait or are preempted and
    recomputed: the step is slower, not broken.

    Why:
    Generation time grows with the number of waves; with 256K responses one extra wave is hours.

    Fix:
    More rollout replicas (DP), a larger `gpu_memory_utilization`, a larger rollout TP, or
    shorter `max_response_length`.

    Source:
    verl/experimental/agent_loop (requests per step); vLLM scheduler preemption
    (vllm/v1/core/sched/scheduler.py); shardcheck/memory/estimate.py.
    """
    est = _estimate(job)
    if est is None or est.rollout is None:
        return
    r = est.rollout
    wanted = r.requests_per_engine
    if wanted is None or r.max_concurrent_full_requests >= wanted or _one_request(r) > r.kv_budget_bytes:
        return
    yield finding(
        "MEM-ROLLOUT-CONCURRENCY",
        f"each rollout engine (TP {r.tp}) gets {wanted} requests per step but its KV cache holds "
        f"{r.max_concurrent_full_requests} of {r.request_tokens} tokens at once "
        f"({_gib(max(0, r.kv_budget_bytes))} budget, {_gib(r.request_bytes)} each)",
        where(job.value(_keys(job).memory_fraction), job.rollout.dp, job.rollout.tp, job.cluster.nnodes),
        fix=f"raise {_keys(job).memory_fraction} or the rollout DP ({_keys(job).rollout_dp}), "
        f"or lower {_keys(job).response}",
    )


@rule(
    "MEM-HOST",
    "error",
    "Offloaded state exceeds the host memory given with --host-memory",
    needs_model=True,
    frameworks=MEMORY_FRAMEWORKS,
)
def host_memory(job: Job) -> Iterator[Finding]:
    """
    verl's `param_offload` / `optimizer_offload` (and Megatron's optimizer CPU offload) keep the
    offloaded state of every device of a node in that node's RAM. Checked only when
    `--host-memory` gives the RAM per node. Megatron-LM and slime: `--optimizer-cpu-offload` keeps
    `--optimizer-offload-fraction` of the optimizer state in host RAM.

    Why:
    The node's kernel kills the worker (OOM killer) when the offloaded weights, gradients and
    optimizer states of all its devices exceed RAM; Ray reports a dead actor.

    Fix:
    Offload less (keep the optimizer on the device), or spread the model over more nodes.

    Versions:
    verl's offload keys mean the same in every bundled release (0.4.0 … 0.9.1, main): a Megatron
    engine's `param_offload` moves its weights and its gradient buffers (legacy megatron_workers.py
    up to 0.7.1, engine/megatron/transformer_impl.py `self.to(..., grad=self._is_offload_param)` from
    0.8.0); `megatron.grad_offload` (in the config of every release but 0.9.1) is read into
    `_is_offload_grad` and used nowhere (megatron_workers.py 0.4.0 … 0.7.1, engine/megatron/
    transformer_impl.py 0.6.0 … 0.9.0, main), so shardcheck counts nothing for it. An FSDP reference model
    is always kept on the host (CPUOffload / CPUOffloadPolicy, fsdp_workers.py up to 0.7.1,
    engine/fsdp/transformer_impl.py from 0.6.0).

    Source:
    verl/utils/megatron_utils.py (offload_megatron_model_to_cpu, offload_megatron_optimizer);
    verl/workers/engine/megatron/transformer_impl.py MegatronEngine (verl 0.8.0, 0.9.0, 0.9.1, main
    2026-08-22); shardcheck/memory/estimate.py (host).
    """
    if job.host_memory_bytes is None:
        return
    est = _estimate(job)
    if est is None or est.host is None or est.host.bytes_per_node is None:
        return
    if est.host.bytes_per_node <= job.host_memory_bytes:
        return
    h = est.host
    keys = _keys(job).offload
    yield finding(
        "MEM-HOST",
        f"{h.devices_per_node} devices per node offload {_gib(h.offloaded_bytes_per_device)} each "
        f"({'; '.join(h.terms)}): {_gib(h.bytes_per_node)} > host memory {_gib(job.host_memory_bytes)}",
        where(job.value(keys[0]), job.value(keys[1]), job.cluster.devices_per_node, job.cluster.nnodes),
        fix=keys[2],
    )


@rule(
    "MEM-NOT-MODELLED",
    "info",
    "A setting whose memory the estimate does not model",
    needs_model=True,
    frameworks=MEMORY_FRAMEWORKS,
)
def not_modelled(job: Job) -> Iterator[Finding]:
    """
    The training estimate leaves out, or cannot size, what some settings allocate; each is said here
    instead of being judged silently. bitsandbytes' 8-bit optimizers (`AdamW8bit`, `PagedAdamW8bit`:
    uint8 moments with per-block fp32 scales, small tensors in 32 bits) stop the training estimate, so
    MEM-TRAIN-OOM does not judge it. CUDA graphs (Megatron-LM `--cuda-graph-impl`, `--enable-cuda-graph`,
    `--external-cuda-graph`, `--optimizer-cuda-graph`; TransformerConfig `cuda_graph_impl` /
    `enable_cuda_graph` through verl's override_transformer_config) keep static input and output
    buffers and a private memory pool that the estimate does not count: its peak may be low.

    Why:
    A launch the estimate cannot size must not read as one that fits.

    Fix:
    Measure the peak of one step on the device (bench/gpu_memory_measure.py); without the setting the
    estimate judges the launch in full.

    Source:
    bitsandbytes/optim/optimizer.py (Optimizer2State, min_8bit_size); megatron/core/transformer/cuda_graphs.py;
    shardcheck/frameworks/memory_settings.py (require_adam, cuda_graph_note).
    """
    est = _estimate(job)
    if est is None:
        return
    for key, text in est.not_modelled:
        yield finding(
            "MEM-NOT-MODELLED",
            text,
            where(job.value(key), *_engine_sizes(job)),
            fix="measure one step's peak on the device (bench/gpu_memory_measure.py)",
        )
