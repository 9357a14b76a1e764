"""What the memory estimate needs from a job, framework-neutral: each framework's adapter fills these.

Each framework package has a ``memory_settings`` module (``frameworks/<name>/memory_settings.py``)
with ``train_settings``, ``rollout_settings`` (and, for verl, ``fsdp_train_settings`` and
``critic_settings``) filling the dataclasses here, and ``fix_keys(job)``: the settings its
memory findings name. A value they need that is unknown stops them with
:class:`~shardcheck.origin.UnknownValue` (its text says what is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shardcheck.origin import UnknownValue, need

DTYPE_BYTES = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "auto": 2,
}


# The value of a Traced, or UnknownValue ("NAME is unknown (why)") when it is unknown: origin.need, under the name
# the memory settings read it by.
known = need


def optional(job, key: str):
    """A setting's value, or None when it is unknown or absent (a flag of another version, an unset key)."""
    traced = job.value(key)
    return traced.value if traced.known else None


def fp8_format(value) -> str | None:
    """The FP8 format a launch asks for (``e4m3`` / ``hybrid``); None for bf16 (unset, ``False``, ``None``)."""
    if value in (None, False, "", "None", "none", "null", "False", "false"):
        return None
    return str(value).lower()


def setting(job, key: str):
    """The value of a framework setting (a verl key or a Megatron-LM / slime flag); UnknownValue when unknown."""
    return known(job.value(key), key)


def dynamic_micro_batches(job, budget: int, samples: int, longest: int) -> tuple[int, int, int, str]:
    """Dynamic batch size: (tokens per micro batch, micro batches per step, longest sequence, the bound used).

    Without ``--sample-tokens`` the bound: every micro batch full at the token ``budget`` and, at most, every
    sample its own micro batch. With ``--sample-tokens MEAN[,MAX]``: the ``samples`` of a step carry
    ``samples · MEAN`` tokens, packed into ``ceil(tokens / budget)`` balanced micro batches (verl
    ``rearrange_micro_batches``, verl/utils/seqlen_balancing.py; slime ``get_minimum_num_micro_batch_size``,
    slime/utils/seqlen_balancing.py), none smaller than one sample of MAX tokens.
    """
    if job.sample_tokens is None:
        return budget, max(1, samples), longest, f"the token budget ({budget:,} tokens per micro batch)"
    mean, top = job.sample_tokens
    total = max(1, samples) * mean
    count = max(1, -(-total // budget))
    tokens = max(-(-total // count), top or 0)
    return tokens, count, top or mean, f"--sample-tokens {mean}" + (f",{top}" if top else "")


ADAM = ("adam", "adamw")


class SettingNotModelled(UnknownValue):
    """A setting whose memory the estimate does not model: what it sizes is left unknown, and MEM-NOT-MODELLED
    says so in ``check`` (an info line, not a silent skip); ``key``: the setting, whose line it points at."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def cuda_graph_note(settings_on: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The not-modelled (key, line) for the CUDA-graph settings a launch turns on, given as (key, as written)."""
    if not settings_on:
        return ()
    shown = ", ".join(text for _, text in settings_on)
    return (
        (settings_on[0][0], f"CUDA graphs ({shown}): their static buffers and memory pool are not in the estimate"),
    )


def require_adam(job, key: str, sep: str) -> None:
    """Only Adam's state is sized (fp32 master + two moments); another optimizer leaves it unknown.

    bitsandbytes' 8-bit optimizers (``AdamW8bit``, ``PagedAdamW8bit``, …; verl's FSDP ``optim.optimizer_impl:
    bitsandbytes.optim``) keep uint8 moments with per-block fp32 scales, and small tensors in 32 bits
    (bitsandbytes/optim/optimizer.py ``min_8bit_size``): not modelled, and said so."""
    name = str(setting(job, key)).lower()
    if "8bit" in name:
        raise SettingNotModelled(
            f"{key}{sep}{name}: bitsandbytes' 8-bit optimizer state is not modelled (shardcheck sizes Adam's "
            "fp32 / 16-bit state only); the training peak is not judged",
            key,
        )
    if name not in ADAM:
        raise UnknownValue(f"{key}{sep}{name}: shardcheck sizes Adam's state only")


# Megatron-Core's optimizer CPU offload (megatron/core/optimizer/__init__.py builds a HybridDeviceOptimizer with
# ``param_update_in_fp32=True``; megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py, NVIDIA/Megatron-LM@
# d98e8a64ddf3): ``_get_sub_optimizer_param_groups`` gives the first ``offload_fraction`` of the parameters (by
# element count) to a CPU Adam over pinned fp32 host copies, the rest to a GPU Adam. Its sub-optimizers get only
# lr / betas / eps / weight decay, so both moments are fp32 whatever --exp-avg-dtype says.
OFFLOAD_MASTER = 4  # the fp32 parameter the sub-optimizers step
OFFLOAD_MOMENTS = 8  # exp_avg + exp_avg_sq, fp32
OFFLOAD_HOST_GRAD = 4  # ``cpu_copy_map_grad``: a pinned fp32 gradient per offloaded parameter


@dataclass(frozen=True, slots=True)
class OffloadShares:
    """Megatron's optimizer CPU offload: optimizer bytes per parameter, the share of them on the device, the
    host's bytes as a share of them, and the share of the fp32 master on the device."""

    state_bytes: int
    on_device: float
    host: float
    master_on_device: float


def hybrid_offload(fraction: float, precision_aware: bool) -> OffloadShares:
    """The optimizer's bytes under Megatron's optimizer CPU offload with ``fraction`` offloaded.

    Without the precision-aware optimizer the distributed optimizer hands the HybridDeviceOptimizer its fp32
    main-parameter shards (distrib_optimizer.py ``_build_model_and_main_param_groups``); an offloaded one is
    cloned to the host, but the device shard stays (the model's bf16 copy is refreshed from it) and receives the
    update back (``param_copy_back_gpu_hook``): only the two moments leave the device. With the precision-aware
    optimizer the groups are bf16 views of the model's parameters, and ``param_update_in_fp32`` makes the fp32
    copy on the device for the kept part only, on the host for the offloaded part."""
    if not 0.0 <= fraction <= 1.0:
        raise UnknownValue("--optimizer-offload-fraction is not between 0 and 1")
    state = OFFLOAD_MASTER + OFFLOAD_MOMENTS
    master = 1 - fraction if precision_aware else 1.0
    on_device = master * OFFLOAD_MASTER + (1 - fraction) * OFFLOAD_MOMENTS
    host = fraction * (state + OFFLOAD_HOST_GRAD)  # the fp32 copy, both moments and a pinned fp32 gradient
    return OffloadShares(state, on_device / state, host / state, master)


def opt_fields(o: OffloadShares) -> dict:
    """The TrainSettings fields of the optimizer's bytes."""
    return {
        "state_bytes": o.state_bytes,
        "optimizer_on_device": o.on_device,
        "optimizer_host_share": o.host,
        "master_on_device": o.master_on_device,
    }


def dtype_bytes(name, key: str) -> int:
    text = str(name).replace("torch.", "").lower()
    if text not in DTYPE_BYTES:
        raise UnknownValue(f"{key}={name} is not a dtype shardcheck sizes")
    return DTYPE_BYTES[text]


@dataclass(frozen=True, slots=True)
class Kernels:
    """How a layer computes: flash/fused attention or the unfused core attention, and which dropouts run."""

    flash: bool = True
    hidden_dropout: bool = False  # a 1-byte mask after attention and after the MLP
    attention_dropout: bool = False  # a 1-byte mask and the 2-byte dropped softmax (unfused attention only)
    # megatron-core < 0.12 weights the experts' outputs by the routing probabilities in the token unpermutation,
    # which keeps those outputs (the combine input) for backward; from 0.12 the experts' activation applies them
    moe_probs_at_combine: bool = False
    # Transformer Engine FP8 GEMMs (set by memory/estimate.py from TrainSettings.fp8 / fp8_recipe; see
    # memory/activations.py ``fp8_layer_delta``): bytes per element of a linear layer's input saved for backward
    # as FP8 (data and scales; None: bf16 GEMMs), whether the recipe is delayed scaling (Megatron-Core then does
    # not set ``save_original_input`` on linear_proj and the shared experts' fc1), and whether the routed experts'
    # fc1 input leaves the device (fine-grained offload of ``expert_fc1``).
    fp8_bytes: float | None = None
    fp8_delayed: bool = False
    fp8_fc1_offloaded: bool = False


@dataclass(frozen=True, slots=True)
class Recompute:
    """Activation recompute as Megatron-Core reads it (verl: ``override_transformer_config.recompute_*``)."""

    granularity: str | None = None  # None | "selective" | "full"
    method: str | None = None  # "uniform" | "block" (full only)
    num_layers: int | None = None
    modules: frozenset[str] = frozenset({"core_attn"})


@dataclass(frozen=True, slots=True)
class Logits:
    fused: bool = False  # a fused linear + cross-entropy that never holds the whole logits
    entropy: bool = False  # the entropy is computed too (two more fp32 tensors)
    entropy_chunk: int | None = None  # tokens per chunk when the entropy is computed in chunks
    fp32_buffers: int = 2  # whole fp32 [tokens, vocab/TP] tensors beside the 16-bit logits (verl: 2)
    fp32_transient: int = 0  # more fp32 [tokens, vocab/TP] tensors alive only while the loss is computed


@dataclass(frozen=True, slots=True)
class Lora:
    """LoRA on the trained model: the base weights are frozen (no gradients, no optimizer state) and adapters of
    ``rank`` on the ``modules`` are trained. ``modules`` are shardcheck's names for the linear layers
    (memory/params.py ``LORA_MODULES``); ``fused``: Megatron-Core's fused modules (one adapter on linear_qkv and
    on linear_fc1) rather than HF's separate q/k/v and gate/up projections."""

    rank: int
    modules: frozenset[str]
    fused: bool


@dataclass(frozen=True, slots=True)
class TrainSettings:
    """The update step's settings that size its memory."""

    weight_bytes: int
    grad_bytes: int
    state_bytes: int  # optimizer bytes per parameter (Adam: fp32 master + two moments)
    distributed_optimizer: bool
    optimizer_on_device: float  # the share of state_bytes on the device (Megatron's optimizer CPU offload)
    tokens_per_micro_batch: int
    sequence_length: int
    micro_batches: int  # the most micro batches one pipeline runs per update
    recompute: Recompute
    logits: Logits
    ref_on_device: bool = False  # a colocated reference model's weights stay on the device
    param_offload: str | None = None  # the setting that moves weights and grads to the host between phases
    optimizer_offload: str | None = None  # the setting that moves optimizer state to the host between phases
    param_host_copy: bool = True  # offloaded weights and grads are copied to the host (False: released)
    vocab_divisible_by: int | None = None
    # FSDP: the model's layers keep only their inputs (HF gradient checkpointing), parameters stay
    # gathered between forward and backward (reshard_after_forward off), and FSDP2's CPUOffloadPolicy
    # keeps sharded weights, grads and optimizer on the host through the update.
    checkpointing: bool = False
    gathered_between_passes: bool = False
    host_resident: bool = False
    # Megatron: the layer's kernels and dropout; MTP depth (--mtp-num-layers: that many extra transformer
    # layers, with their own norms and projection, on the last stage); the modules whose inputs fine-grained
    # activation offload moves to the host; Megatron-FSDP's sharding strategy (None: Megatron DDP);
    # fp8 compute weights (--fp8-param-gather: 1 byte per parameter instead of the 16-bit copy).
    kernels: Kernels = field(default_factory=Kernels)
    mtp_layers: int = 0
    lora: Lora | None = None  # LoRA: only the adapters are trained
    offload_modules: frozenset[str] = frozenset()
    fsdp_sharding: str | None = None
    fp8_params: bool = False
    microbatch_group: int | None = None  # interleaved 1F1B: micro batches per group and chunk (None: PP)
    # which sample-length bound sized the micro batch (dynamic batch size): "max tokens per GPU" or
    # "--sample-tokens MEAN[,MAX]"
    batch_bound: str | None = None
    # dynamic batch size sized at the token budget alone: the tokens one pipeline runs per update (its samples ×
    # their length). The memory counts every sample as a full micro batch at the budget (its bound); the step time
    # packs these tokens into micro batches of the budget (step_time.timed_batches). None: the micro batches are
    # the step's own (a fixed micro batch size, or --sample-tokens)
    step_tokens: int | None = None
    # Megatron-Core DDP's overlap_grad_reduce / overlap_param_gather: the step time, not the memory, reads them
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    # Transformer Engine FP8 training (Megatron-LM --fp8-format / --fp8-recipe, verl
    # override_transformer_config.fp8 / fp8_recipe): the format ("e4m3" | "hybrid"; None: bf16 GEMMs) and the
    # scaling recipe; and Megatron-Core's overlap_moe_expert_parallel_comm (EP all-to-all under another micro
    # batch's compute). The step time reads them.
    fp8: str | None = None
    fp8_recipe: str | None = None
    overlap_moe_a2a: bool = False
    # Megatron's optimizer CPU offload: the host's bytes as a share of state_bytes (None: 1 − optimizer_on_device),
    # and the share of the fp32 master copy on the device (hybrid_offload: all of it unless precision-aware)
    optimizer_host_share: float | None = None
    master_on_device: float = 1.0
    # what the job turns on that the estimate leaves out (CUDA graphs): (key, line) each, MEM-NOT-MODELLED says them
    not_modelled: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RolloutSettings:
    """The inference engine's settings that size its KV cache."""

    engine: str
    tp: int
    dp: int
    ep: int
    dtype_bytes: int
    memory_fraction: float  # vLLM gpu_memory_utilization / SGLang mem_fraction_static
    max_num_batched_tokens: int
    max_num_seqs: int | None
    request_tokens: int  # one full-length request: prompt + response
    max_model_len: int
    requests_per_step: int | None
    replicas: int | None
    colocated: bool = True  # the engines share the trainer's devices (verl's hybrid engine, slime --colocate)


@dataclass(frozen=True, slots=True)
class CriticSettings:
    """A colocated critic whose state stays on the device during the actor's update unless offloaded."""

    keeps_params: bool  # weights and grads stay (no param offload)
    keeps_optimizer: bool
    engine: str  # "megatron" | "fsdp"
    tokens_per_micro_batch: int | None = None  # its own update's micro batches (None: unknown)


@dataclass(frozen=True)
class FixKeys:
    """The settings a framework's memory findings name: (the key a finding points at, the fix's text)."""

    activations: tuple[str, str]
    logits: tuple[str, str]
    optimizer: tuple[str, str]
    weights: tuple[str, str]
    memory_fraction: str  # vLLM gpu_memory_utilization / SGLang mem_fraction_static
    max_model_len: str
    rollout_dp: str
    response: str
    offload: tuple[str, str, str]  # the two keys MEM-HOST points at, and its fix
