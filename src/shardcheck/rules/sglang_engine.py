"""SGLang engine checks a rollout reaches at start-up (SGLang 0.5.12, the version verl 0.9.1 pins).

The framework says how it starts the SGLang server (``frameworks.interface.sglang_server``: verl
gives one engine the whole replica, slime one engine per ``--rollout-num-gpus-per-engine``); the
rules here judge the server's sizes against the model.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.interface import sglang_server
from shardcheck.job import Job
from shardcheck.rules.base import Finding, finding, need, rule, where
from shardcheck.rules.divisors import divisors

RO = "actor_rollout_ref.rollout"
SGL = f"{RO}.engine_kwargs.sglang"


@rule(
    "SGLANG-TP-HEADS",
    "error",
    "SGLang's attention TP must divide the attention heads",
    needs_model=True,
    frameworks=("verl", "verl-gen", "slime"),
    engine="sglang",
)
def sglang_heads(job: Job) -> Iterator[Finding]:
    """
    verl gives SGLang the whole replica as its tensor-parallel size (rollout TP · DP); without DP
    attention every one of those ranks holds a slice of the heads, with DP attention each DP group's
    TP ranks do (for the models whose SGLang code splits over the attention TP size).

    Why:
    The model's attention module asserts `self.total_num_heads % attn_tp_size == 0` (a bare
    `AssertionError`) while each SGLang rank loads the model.

    Fix:
    Turn on DP attention, or choose TP · DP dividing the heads.

    Source:
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server
    (tp_size = TP · DP, verl 0.9.1); sglang/srt/layers/dp_attention.py
    compute_dp_attention_world_info; sglang/srt/models/qwen3_moe.py Qwen3MoeAttention.__init__ and
    llama.py LlamaAttention.__init__ (SGLang 0.5.12).
    """
    engine = sglang_server(job)
    heads = job.model.num_attention_heads
    if engine is None or not heads:
        return
    split = engine.attn_tp(job.model.model_type)
    if engine.dp_attention_on and job.model.model_type is None:
        # a model given by Megatron-LM flags (slime) has no HF model type, so which split SGLang's model code uses
        # is unknown: judge the attention TP, which fails whenever the whole tp_size (its multiple) fails too
        split = engine.tp_size // engine.dp
    if split < 1:
        return  # tp_size below dp_size: SGLang's server arguments refuse it before any model loads
    if heads % split:
        good = divisors(heads)
        yield finding(
            "SGLANG-TP-HEADS",
            f"{job.model.name} has {heads} attention heads, split over {split} ranks "
            f"({engine.split_text()}): SGLang asserts total_num_heads % attn_tp_size == 0",
            where(*engine.sizes),
            fix=f"an attention TP in {', '.join(map(str, good))}"
            + (
                ""
                if engine.dp_attention_on or engine.dp == 1
                else f"; or {engine.dp_attention_key} (attention TP = {engine.attention_tp_said})"
            ),
        )


@rule(
    "SGLANG-TP-KV",
    "error",
    "SGLang's attention TP and the KV heads must divide one another",
    needs_model=True,
    frameworks=("verl", "verl-gen", "slime"),
    engine="sglang",
)
def sglang_kv_heads(job: Job) -> Iterator[Finding]:
    """
    SGLang splits the KV heads over the attention TP ranks when there are at least as many, and
    replicates them when there are fewer; one must divide the other. Latent attention (MLA) has no
    KV heads to split.

    Why:
    The attention module asserts `total_num_kv_heads % attn_tp_size == 0` (or `attn_tp_size %
    total_num_kv_heads == 0`) while the model loads.

    Fix:
    Choose an attention TP that divides the KV heads or is a multiple of them.

    Source:
    sglang/srt/models/qwen3_moe.py Qwen3MoeAttention.__init__ (SGLang 0.5.12);
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server (verl 0.9.1).
    """
    engine = sglang_server(job)
    kv = job.model.num_key_value_heads
    if engine is None or not kv or job.model.mla:
        return
    split = engine.attn_tp(job.model.model_type)
    if split < 1:
        return  # tp_size below dp_size: SGLang's server arguments refuse it before any model loads
    if (split >= kv and split % kv) or (split < kv and kv % split):
        yield finding(
            "SGLANG-TP-KV",
            f"{job.model.name} has {kv} KV heads and attention TP {split} "
            f"({engine.split_text()}): neither divides the other",
            where(*engine.sizes),
            fix=f"an attention TP dividing {kv} or a multiple of it",
        )


@rule("SGLANG-DP-ATTN", "error", "SGLang rollout DP > 1 needs DP attention", frameworks=("verl",), engine="sglang")
def sglang_dp_attention(job: Job) -> Iterator[Finding]:
    """
    verl already gives SGLang the whole replica (TP · DP ranks) as tp_size. Without DP attention
    SGLang's data-parallel controller starts dp_size engines of tp_size ranks each, DP · TP · DP
    devices, more than the replica has; across nodes SGLang refuses it outright.

    Why:
    A replica on several nodes fails `ServerArgs.check_server_args`: `multi-node data parallel is not
    supported unless dp attention!`; on one node the second engine's devices do not exist (its
    base GPU id is past the replica's devices) and the server fails to start.

    Fix:
    Turn on DP attention, or fold the DP into rollout TP / more replicas.

    Source:
    sglang/srt/server_args.py ServerArgs.check_server_args and _handle_data_parallelism;
    sglang/srt/managers/data_parallel_controller.py DataParallelController.launch_dp_schedulers
    (SGLang 0.5.12); verl/workers/rollout/sglang_rollout/async_sglang_server.py (verl 0.9.1).
    """
    engine = sglang_server(job)
    if engine is None or engine.dp <= 1 or engine.dp_attention:
        return
    g_t = job.value(f"{RO}.n_gpus_per_node")
    size = need(job.rollout.pp, f"{RO}.pipeline_model_parallel_size") * engine.tp_size
    nodes = size // min(need(g_t, f"{RO}.n_gpus_per_node"), size)
    if nodes > 1:
        message = (
            f"multi-node data parallel is not supported unless dp attention! (SGLang; the replica spans {nodes} nodes)"
        )
    else:
        message = (
            f"without DP attention SGLang starts dp_size {engine.dp} engines of tp_size {engine.tp_size} "
            f"devices each ({engine.dp * engine.tp_size} devices); the replica has {engine.tp_size}"
        )
    yield finding(
        "SGLANG-DP-ATTN",
        message,
        where(job.rollout.dp, engine.dp_attention_setting),
        fix=f"+{SGL}.enable_dp_attention=True, or {RO}.data_parallel_size=1",
    )


@rule(
    "SGLANG-EP-EXPERTS",
    "error",
    "SGLang's expert parallel size must divide the routed experts",
    needs_model=True,
    frameworks=("verl", "verl-gen", "slime"),
    engine="sglang",
)
def sglang_experts(job: Job) -> Iterator[Finding]:
    """
    With `expert_parallel_size` > 1 each SGLang rank holds experts / EP routed experts.

    Why:
    `FusedMoE.__init__` asserts `(num_experts - num_shared_slots) % self.moe_ep_size == 0` while the
    model loads.

    Fix:
    Choose rollout TP · DP (= EP) dividing the expert count.

    Source:
    sglang/srt/layers/moe/fused_moe_triton/layer.py FusedMoE.__init__ (SGLang 0.5.12).
    """
    engine = sglang_server(job)
    experts = job.model.num_experts
    if engine is None or not experts or engine.ep is None or engine.ep <= 1:
        return
    if engine.ep >= 1 and experts % engine.ep:
        good = [d for d in divisors(experts) if d > 1]
        yield finding(
            "SGLANG-EP-EXPERTS",
            f"{job.model.name} has {experts} routed experts, rollout EP {engine.ep}: "
            "SGLang asserts (num_experts - num_shared_slots) % moe_ep_size == 0",
            where(engine.ep_setting),
            fix=f"{engine.ep_said} in {', '.join(map(str, good[:12]))}",
        )


@rule(
    "SGLANG-MEM-FRACTION",
    "error",
    "SGLang's mem_fraction_static must lie strictly between 0 and 1",
    frameworks=("verl",),
    engine="sglang",
)
def sglang_mem_fraction(job: Job) -> Iterator[Finding]:
    """
    verl passes `rollout.gpu_memory_utilization` to SGLang as `mem_fraction_static` (unless
    `engine_kwargs.sglang.mem_fraction_static` is set): the share of the device for weights plus KV
    cache. SGLang sizes the KV pool as the free memory after loading minus (1 − fraction) of the
    memory before loading.

    Why:
    At 0 or below the pool is empty: `RuntimeError: Not enough memory. Please try to increase
    --mem-fraction-static.`; at 1 or above the pool takes all free memory (more above 1) and nothing
    is left for activations and CUDA graphs, so the server runs out of memory while starting.

    Fix:
    Set gpu_memory_utilization (or engine_kwargs.sglang.mem_fraction_static) between 0 and 1.

    Source:
    sglang/srt/model_executor/model_runner_kv_cache_mixin.py _profile_available_bytes and
    sglang/srt/model_executor/pool_configurator.py MemoryPoolConfig.__post_init__ (SGLang 0.5.12);
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server (verl 0.9.1).
    """
    if sglang_server(job) is None:
        return
    own_t = job.value(f"{SGL}.mem_fraction_static")
    frac_t = (
        own_t if need(own_t, f"{SGL}.mem_fraction_static") is not None else job.value(f"{RO}.gpu_memory_utilization")
    )
    frac = need(frac_t, f"{RO}.gpu_memory_utilization")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or 0 < frac < 1:
        return
    why = (
        'the KV cache pool is empty: "Not enough memory. Please try to increase --mem-fraction-static."'
        if frac <= 0
        else "the KV cache pool takes all free memory, none is left for activations and CUDA graphs"
    )
    yield finding(
        "SGLANG-MEM-FRACTION",
        f"mem_fraction_static = {frac}: {why} (SGLang)",
        where(frac_t),
        fix=f"{RO}.gpu_memory_utilization=0.5 (any value between 0 and 1; SGLang counts weights + KV cache)",
    )
