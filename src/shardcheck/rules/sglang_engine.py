"""SGLang engine checks a verl rollout reaches at start-up (SGLang 0.5.12, the version verl 0.9.1 pins).

verl's SGLang server (verl/workers/rollout/sglang_rollout/async_sglang_server.py
``SGLangHttpServer.launch_server``) starts one SGLang engine per replica with ``tp_size = rollout
TP · DP`` (the whole replica), ``dp_size = rollout DP``, ``ep_size = rollout EP``,
``mem_fraction_static = gpu_memory_utilization`` and ``engine_kwargs.sglang.*`` applied last.
Inside SGLang the attention is split over ``attn_tp_size = tp_size / dp_size`` ranks with DP
attention and over all ``tp_size`` ranks without it (sglang/srt/layers/dp_attention.py
``compute_dp_attention_world_info``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shardcheck.job import Job
from shardcheck.origin import Traced
from shardcheck.rules.megatron_parallel_state import where
from shardcheck.rules.registry import Finding, finding, need, rule
from shardcheck.rules.divisors import divisors

RO = "actor_rollout_ref.rollout"
SGL = f"{RO}.engine_kwargs.sglang"
# Model types whose SGLang 0.5.12 attention splits heads over attn_tp_size (sglang/srt/models/*.py
# call get_attention_tp_size); the others (llama, qwen2, mixtral, ...) split over the whole tp_size.
_ATTN_TP_MODELS = frozenset({
    "qwen3", "qwen3_moe", "qwen2_moe", "qwen3_next", "qwen3_5", "qwen3_vl", "deepseek_v2", "deepseek_v3", "kimi_k2",
    "glm4_moe", "gpt_oss", "llama4", "bailing_moe", "minimax_m2", "exaone4", "longcat_flash", "kimi_linear",
    "step3p5", "phimoe", "mimo_v2", "sarvam_moe", "falcon_h1",
})


@dataclass(frozen=True, slots=True)
class _Engine:
    tp: int  # rollout TP (verl's tensor_model_parallel_size)
    dp: int
    ep: int
    dp_attention: bool
    dp_attention_t: Traced

    @property
    def tp_size(self) -> int:
        """SGLang's tp_size: the whole replica (verl passes TP · DP)."""
        return self.tp * self.dp

    @property
    def dp_attention_on(self) -> bool:
        return self.dp_attention and self.dp > 1  # ServerArgs._handle_data_parallelism: off when dp_size == 1

    def attn_tp(self, model_type: str | None) -> int:
        if self.dp_attention_on and model_type in _ATTN_TP_MODELS:
            return self.tp_size // self.dp
        return self.tp_size


def _sglang(job: Job) -> _Engine | None:
    if job.framework != "verl" or job.rollout is None:
        return None
    if need(job.value(f"{RO}.name"), f"{RO}.name") != "sglang":
        return None
    tp = need(job.rollout.tp, f"{RO}.tensor_model_parallel_size")
    dp = need(job.rollout.dp, f"{RO}.data_parallel_size")
    ep = need(job.value(f"{RO}.expert_parallel_size"), f"{RO}.expert_parallel_size")
    attn_t = job.value(f"{SGL}.enable_dp_attention")
    return _Engine(tp, dp, ep, bool(need(attn_t, f"{SGL}.enable_dp_attention")), attn_t)


def _split_text(engine: _Engine) -> str:
    if engine.dp_attention_on:
        return f"attention TP = tp_size {engine.tp_size} / dp_size {engine.dp} with DP attention"
    return f"SGLang tp_size = rollout TP {engine.tp} · DP {engine.dp} = {engine.tp_size}"


@rule("SGLANG-TP-HEADS", "error", "SGLang's attention TP must divide the attention heads", needs_model=True)
def sglang_heads(job: Job) -> Iterator[Finding]:
    """
    verl gives SGLang the whole replica as its tensor-parallel size (rollout TP · DP); without DP
    attention every one of those ranks holds a slice of the heads, with DP attention each DP group's
    TP ranks do (for the models whose SGLang code splits over the attention TP size).

    Why:
    The model's attention module asserts `self.total_num_heads % attn_tp_size == 0` (a bare
    `AssertionError`) while each SGLang rank loads the model.

    Bad:
    A 64-head model with `rollout.name=sglang`, rollout TP 4 and DP 32, no DP attention: 64 % 128.

    Good:
    `+actor_rollout_ref.rollout.engine_kwargs.sglang.enable_dp_attention=True` (attention TP 4), or
    rollout DP 1.

    Fix:
    Turn on DP attention, or choose TP · DP dividing the heads.

    Source:
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server
    (tp_size = TP · DP, verl 0.9.1); sglang/srt/layers/dp_attention.py
    compute_dp_attention_world_info; sglang/srt/models/qwen3_moe.py Qwen3MoeAttention.__init__ and
    llama.py LlamaAttention.__init__ (SGLang 0.5.12).
    """
    engine = _sglang(job)
    heads = job.model.num_attention_heads
    if engine is None or not heads:
        return
    split = engine.attn_tp(job.model.model_type)
    if heads % split:
        good = divisors(heads)
        yield finding("SGLANG-TP-HEADS", f"{job.model.name} has {heads} attention heads, split over {split} ranks "
                                         f"({_split_text(engine)}): SGLang asserts total_num_heads % attn_tp_size == 0",
                      where(job.rollout.tp, job.rollout.dp),
                      fix=f"an attention TP in {', '.join(map(str, good))}"
                          + ("" if engine.dp_attention_on or engine.dp == 1 else
                             f"; or {SGL}.enable_dp_attention=True (attention TP = rollout TP {engine.tp})"))


@rule("SGLANG-TP-KV", "error", "SGLang's attention TP and the KV heads must divide one another", needs_model=True)
def sglang_kv_heads(job: Job) -> Iterator[Finding]:
    """
    SGLang splits the KV heads over the attention TP ranks when there are at least as many, and
    replicates them when there are fewer; one must divide the other. Latent attention (MLA) has no
    KV heads to split.

    Why:
    The attention module asserts `total_num_kv_heads % attn_tp_size == 0` (or `attn_tp_size %
    total_num_kv_heads == 0`) while the model loads.

    Bad:
    4 KV heads, rollout TP 2 and DP 3 without DP attention (tp_size 6).

    Good:
    Rollout TP 2 and DP 4 (tp_size 8), or DP attention on.

    Fix:
    Choose an attention TP that divides the KV heads or is a multiple of them.

    Source:
    sglang/srt/models/qwen3_moe.py Qwen3MoeAttention.__init__ (SGLang 0.5.12);
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server (verl 0.9.1).
    """
    engine = _sglang(job)
    kv = job.model.num_key_value_heads
    if engine is None or not kv or job.model.mla:
        return
    split = engine.attn_tp(job.model.model_type)
    if (split >= kv and split % kv) or (split < kv and kv % split):
        yield finding("SGLANG-TP-KV", f"{job.model.name} has {kv} KV heads and attention TP {split} "
                                      f"({_split_text(engine)}): neither divides the other",
                      where(job.rollout.tp, job.rollout.dp), fix=f"an attention TP dividing {kv} or a multiple of it")


@rule("SGLANG-DP-ATTN", "error", "SGLang rollout DP > 1 needs DP attention")
def sglang_dp_attention(job: Job) -> Iterator[Finding]:
    """
    verl already gives SGLang the whole replica (TP · DP ranks) as tp_size. Without DP attention
    SGLang's data-parallel controller starts dp_size engines of tp_size ranks each, DP · TP · DP
    devices, more than the replica has; across nodes SGLang refuses it outright.

    Why:
    A replica on several nodes fails `ServerArgs.check_server_args`: `multi-node data parallel is not
    supported unless dp attention!`; on one node the second engine's devices do not exist (its
    base GPU id is past the replica's devices) and the server fails to start.

    Bad:
    `rollout.name=sglang rollout.data_parallel_size=2` without DP attention.

    Good:
    `+actor_rollout_ref.rollout.engine_kwargs.sglang.enable_dp_attention=True`, or rollout DP 1.

    Fix:
    Turn on DP attention, or fold the DP into rollout TP / more replicas.

    Source:
    sglang/srt/server_args.py ServerArgs.check_server_args and _handle_data_parallelism;
    sglang/srt/managers/data_parallel_controller.py DataParallelController.launch_dp_schedulers
    (SGLang 0.5.12); verl/workers/rollout/sglang_rollout/async_sglang_server.py (verl 0.9.1).
    """
    engine = _sglang(job)
    if engine is None or engine.dp <= 1 or engine.dp_attention:
        return
    g_t = job.value(f"{RO}.n_gpus_per_node")
    size = need(job.rollout.pp, f"{RO}.pipeline_model_parallel_size") * engine.tp_size
    nodes = size // min(need(g_t, f"{RO}.n_gpus_per_node"), size)
    if nodes > 1:
        message = f"multi-node data parallel is not supported unless dp attention! (SGLang; the replica spans {nodes} nodes)"
    else:
        message = (f"without DP attention SGLang starts dp_size {engine.dp} engines of tp_size {engine.tp_size} "
                   f"devices each ({engine.dp * engine.tp_size} devices); the replica has {engine.tp_size}")
    yield finding("SGLANG-DP-ATTN", message, where(job.rollout.dp, engine.dp_attention_t),
                  fix=f"+{SGL}.enable_dp_attention=True, or {RO}.data_parallel_size=1")


@rule("SGLANG-EP-EXPERTS", "error", "SGLang's expert parallel size must divide the routed experts", needs_model=True)
def sglang_experts(job: Job) -> Iterator[Finding]:
    """
    With `expert_parallel_size` > 1 each SGLang rank holds experts / EP routed experts.

    Why:
    `FusedMoE.__init__` asserts `(num_experts - num_shared_slots) % self.moe_ep_size == 0` while the
    model loads.

    Bad:
    128 experts with rollout TP 4 · DP 6 = EP 24.

    Good:
    EP 32 (TP 4 · DP 8), or EP 1.

    Fix:
    Choose rollout TP · DP (= EP) dividing the expert count.

    Source:
    sglang/srt/layers/moe/fused_moe_triton/layer.py FusedMoE.__init__ (SGLang 0.5.12).
    """
    engine = _sglang(job)
    experts = job.model.num_experts
    if engine is None or not experts or engine.ep is None or engine.ep <= 1:
        return
    if experts % engine.ep:
        good = [d for d in divisors(experts) if d > 1]
        yield finding("SGLANG-EP-EXPERTS", f"{job.model.name} has {experts} routed experts, rollout EP {engine.ep}: "
                                           "SGLang asserts (num_experts - num_shared_slots) % moe_ep_size == 0",
                      where(job.value(f"{RO}.expert_parallel_size")),
                      fix=f"a rollout EP (= TP · DP) in {', '.join(map(str, good[:12]))}")


@rule("SGLANG-MEM-FRACTION", "error", "SGLang's mem_fraction_static must lie strictly between 0 and 1")
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

    Bad:
    `actor_rollout_ref.rollout.gpu_memory_utilization=1.0` with `rollout.name=sglang`.

    Good:
    0.5 (verl's default) to 0.9.

    Fix:
    Set gpu_memory_utilization (or engine_kwargs.sglang.mem_fraction_static) between 0 and 1.

    Source:
    sglang/srt/model_executor/model_runner_kv_cache_mixin.py _profile_available_bytes and
    sglang/srt/model_executor/pool_configurator.py MemoryPoolConfig.__post_init__ (SGLang 0.5.12);
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.launch_server (verl 0.9.1).
    """
    if _sglang(job) is None:
        return
    own_t = job.value(f"{SGL}.mem_fraction_static")
    frac_t = own_t if need(own_t, f"{SGL}.mem_fraction_static") is not None else job.value(f"{RO}.gpu_memory_utilization")
    frac = need(frac_t, f"{RO}.gpu_memory_utilization")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or 0 < frac < 1:
        return
    why = ("the KV cache pool is empty: \"Not enough memory. Please try to increase --mem-fraction-static.\""
           if frac <= 0 else "the KV cache pool takes all free memory, none is left for activations and CUDA graphs")
    yield finding("SGLANG-MEM-FRACTION", f"mem_fraction_static = {frac}: {why} (SGLang)", where(frac_t),
                  fix=f"{RO}.gpu_memory_utilization=0.5 (any value between 0 and 1; SGLang counts weights + KV cache)")
