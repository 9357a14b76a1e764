"""Megatron-LM's settings for the memory estimate, from its flags (megatron/training/arguments.py, main).

- dtype: ``--bf16`` / ``--fp16``, else fp32 (validate_args sets ``params_dtype``);
- gradients: Megatron DDP's ``main_grad`` buffer is fp32 when ``accumulate_allreduce_grads_in_fp32``,
  which validate_args turns on under ``--bf16`` unless ``--grad-reduce-in-bf16`` or a 16-bit
  ``--main-grads-dtype`` (precision-aware optimizer); else the parameters' dtype;
- optimizer: Adam keeps an fp32 main copy of 16-bit parameters (none in fp32 training) and
  ``exp_avg`` / ``exp_avg_sq`` (fp32, or ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` with
  ``--use-precision-aware-optimizer``); ``--use-distributed-optimizer`` (default off) shards it;
  ``--optimizer-cpu-offload`` (``--optimizer-offload-fraction``, default 1.0) moves Adam's moments of that share
  to the host, and with ``--use-precision-aware-optimizer`` their fp32 master too (memory_settings.hybrid_offload);
- recompute: ``--recompute-granularity`` / ``-method`` / ``-num-layers`` / ``--recompute-modules``
  (default core_attn, TransformerConfig.__post_init__); ``--recompute-activations`` is selective;
- batch: one micro batch is ``--micro-batch-size × --seq-length`` tokens; a pipeline runs
  ``--global-batch-size / (--micro-batch-size · DP)`` micro batches per step (global batch default
  micro · DP, validate_args);
- logits: megatron/core/tensor_parallel/cross_entropy.py ``vocab_parallel_cross_entropy`` takes an fp32
  copy of the 16-bit logits and turns it into the softmax and the gradient in place: one fp32 buffer;
  ``--cross-entropy-loss-fusion`` (native, megatron/core/fusions/fused_cross_entropy.py) runs the same steps
  in ``jit_fuser`` functions whose results are new tensors: a second fp32 buffer while the loss is computed;
- vocab padding: ``--make-vocab-size-divisible-by`` (128) × TP (vocab_size_with_padding);
- kernels (``kernels``): ``--attention-backend unfused`` / ``local`` or ``--transformer-impl local`` (the local
  spec's DotProductAttention) keep the s-wide softmax; ``--hidden-dropout`` (0.1) and ``--attention-dropout``
  (0.1), TransformerConfig's defaults, keep their masks (activations.py);
- ``--mtp-num-layers`` (megatron/core/transformer/multi_token_prediction.py): each MTP depth on the last
  stage is an embedding-input norm, a hidden-state norm, an eh_proj (2h → h, column-parallel), one transformer
  layer of the decoder's kind and a final norm; it shares the embedding and the output layer;
- ``--fine-grained-activation-offload`` with ``--offload-modules``: the listed modules' inputs go to the host;
- ``--use-megatron-fsdp`` with ``--data-parallel-sharding-strategy`` (optim_grads_params): Megatron-FSDP shards
  optimizer state (optim), + gradients (optim_grads), + parameters (optim_grads_params) over DP·CP
  (megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py);
- ``--fp8-param-gather``: the compute weights are fp8 (1 byte), the distributed optimizer's fp32 main copy stays.
Megatron-LM moves nothing to the host between phases, and pre-training has no rollout.
"""

from __future__ import annotations

from shardcheck.frameworks.memory_settings import (
    FixKeys,
    Kernels,
    Logits,
    OffloadShares,
    Recompute,
    RolloutSettings,
    TrainSettings,
    cuda_graph_note,
    dtype_bytes,
    fp8_format,
    hybrid_offload,
    opt_fields,
    optional,
    require_adam,
)
from shardcheck.frameworks.memory_settings import setting as flag
from shardcheck.job import Job, MegatronLayout
from shardcheck.origin import UnknownValue


def weight_bytes(job: Job) -> int:
    if flag(job, "--bf16") or flag(job, "--fp16"):
        return 2
    return 4


def optimizer(job: Job, *, bf16: bool | None = None) -> tuple[int, OffloadShares]:
    """(grad bytes, the optimizer's bytes per parameter and where they live: memory_settings.hybrid_offload);
    ``bf16`` overrides the flag (slime sets it itself)."""
    bf16 = bool(flag(job, "--bf16")) if bf16 is None else bf16
    params = 2 if bf16 else weight_bytes(job)
    aware = bool(flag(job, "--use-precision-aware-optimizer"))
    main_grads = dtype_bytes(flag(job, "--main-grads-dtype"), "--main-grads-dtype") if aware else 4
    if bf16:
        fp32_grads = not flag(job, "--grad-reduce-in-bf16") and main_grads == 4
    else:
        fp32_grads = bool(flag(job, "--accumulate-allreduce-grads-in-fp32"))
    grad = 4 if fp32_grads else params
    require_adam(job, "--optimizer", " ")
    moments = (
        (
            dtype_bytes(flag(job, "--exp-avg-dtype"), "--exp-avg-dtype")
            + dtype_bytes(flag(job, "--exp-avg-sq-dtype"), "--exp-avg-sq-dtype")
        )
        if aware
        else 8
    )
    master = 4 if params < 4 else 0  # the mixed-precision optimizer's fp32 main parameters
    if flag(job, "--optimizer-cpu-offload"):
        return grad, hybrid_offload(float(flag(job, "--optimizer-offload-fraction")), aware)
    return grad, OffloadShares(master + moments, 1.0, 0.0, 1.0)


def recompute(job: Job) -> Recompute:
    granularity = flag(job, "--recompute-granularity")
    if granularity is None and flag(job, "--recompute-activations"):
        granularity = "selective"  # validate_args: --recompute-activations means selective recompute
    if granularity not in (None, "full", "selective"):
        raise UnknownValue(f"--recompute-granularity {granularity}: Megatron-LM accepts full or selective")
    modules = flag(job, "--recompute-modules") or ["core_attn"]
    return Recompute(
        granularity=granularity,
        method=flag(job, "--recompute-method") if granularity == "full" else None,
        num_layers=flag(job, "--recompute-num-layers"),
        modules=frozenset(modules),
    )


def kernels(job: Job) -> Kernels:
    """Flash or unfused attention, and which dropouts keep masks (TransformerConfig defaults: 0.1 each)."""
    backend = str(flag(job, "--attention-backend") or "auto").rsplit(".", 1)[-1].lower()
    impl = str(flag(job, "--transformer-impl") or "transformer_engine")
    unfused = backend in ("unfused", "local") or impl == "local"
    return Kernels(
        flash=not unfused,
        hidden_dropout=float(flag(job, "--hidden-dropout")) > 0,
        attention_dropout=float(flag(job, "--attention-dropout")) > 0,
    )


def extra_settings(job: Job) -> dict:
    """The TrainSettings fields Megatron-LM and slime read alike: kernels, MTP, offload, FSDP, fp8, DP overlap."""
    offload = (
        frozenset(flag(job, "--offload-modules") or ())
        if flag(job, "--fine-grained-activation-offloading")
        else frozenset()
    )
    fsdp = str(flag(job, "--data-parallel-sharding-strategy")) if flag(job, "--use-megatron-fsdp") else None
    return {
        "kernels": kernels(job),
        "mtp_layers": flag(job, "--mtp-num-layers") or 0,
        "offload_modules": offload,
        "microbatch_group": flag(job, "--microbatch-group-size-per-virtual-pipeline-stage"),
        "fsdp_sharding": fsdp,
        "fp8_params": bool(flag(job, "--fp8-param-gather")),
        "overlap_grad_reduce": bool(flag(job, "--overlap-grad-reduce")),
        "overlap_param_gather": bool(flag(job, "--overlap-param-gather")),
        # --fp8-format (e4m3 | hybrid) turns on Transformer Engine's FP8 GEMMs, --fp8-recipe picks the scaling
        # (megatron/training/arguments.py; megatron/core/fp8_utils.py); --overlap-moe-expert-parallel-comm
        # (core 0.14 on) overlaps the EP all-to-all with another micro batch's compute
        "fp8": fp8_format(optional(job, "--fp8-format")),
        "fp8_recipe": optional(job, "--fp8-recipe"),
        "overlap_moe_a2a": bool(optional(job, "--overlap-moe-expert-parallel-comm")),
        "not_modelled": cuda_graphs(job),
    }


def cuda_graphs(job: Job) -> tuple[tuple[str, str], ...]:
    """The CUDA-graph flags a training launch turns on: their static input / output buffers and private memory
    pool (megatron/core/transformer/cuda_graphs.py, Transformer Engine ``make_graphed_callables``) are not
    modelled. ``--cuda-graph-impl`` (core_v0.15 on; none | local | transformer_engine | full_iteration),
    ``--enable-cuda-graph`` and ``--external-cuda-graph`` (earlier), ``--optimizer-cuda-graph``."""
    impl = optional(job, "--cuda-graph-impl")
    on = [("--cuda-graph-impl", f"--cuda-graph-impl {impl}")] if impl not in (None, "none") else []
    on += [
        (n, n) for n in ("--enable-cuda-graph", "--external-cuda-graph", "--optimizer-cuda-graph") if optional(job, n)
    ]
    return cuda_graph_note(on)


def logits(job: Job, fp32_buffers: int) -> Logits:
    fused = bool(flag(job, "--cross-entropy-loss-fusion")) and flag(job, "--cross-entropy-fusion-impl") == "native"
    return Logits(fp32_buffers=fp32_buffers, fp32_transient=1 if fused else 0)


def micro_batch_count(job: Job, micro: int, dp: int) -> int:
    gbs = flag(job, "--global-batch-size")
    return max(1, (gbs or micro * dp) // (micro * dp))


def train_settings(job: Job, layout: MegatronLayout, dp: int) -> TrainSettings:
    micro, seq = flag(job, "--micro-batch-size"), flag(job, "--seq-length")
    if not micro or not seq:
        raise UnknownValue("--micro-batch-size and --seq-length are required by Megatron-LM (validate_args)")
    grad, opt = optimizer(job)
    return TrainSettings(
        weight_bytes=weight_bytes(job),
        grad_bytes=grad,
        distributed_optimizer=bool(flag(job, "--use-distributed-optimizer")),
        **opt_fields(opt),
        tokens_per_micro_batch=micro * seq,
        sequence_length=seq,
        micro_batches=micro_batch_count(job, micro, dp),
        recompute=recompute(job),
        logits=logits(job, 1),
        vocab_divisible_by=flag(job, "--make-vocab-size-divisible-by"),
        **extra_settings(job),
    )


def rollout_settings(job: Job, moe: bool, max_position_embeddings: int | None) -> RolloutSettings | None:
    return None  # pre-training: no inference engine


TRAIN_FIX_KEYS = dict(  # the training settings Megatron-LM and slime name alike
    activations=(
        "--recompute-granularity",
        "--recompute-granularity full --recompute-method uniform "
        "--recompute-num-layers 1, or fewer tokens per micro batch (--micro-batch-size, --seq-length / "
        "--max-tokens-per-gpu), or a larger --context-parallel-size",
    ),
    logits=(
        "--tensor-model-parallel-size",
        "a larger --tensor-model-parallel-size (the vocab is split over TP), or fewer tokens per micro batch",
    ),
    weights=(
        "--pipeline-model-parallel-size",
        "a larger --pipeline-model-parallel-size, --expert-model-parallel-size "
        "or --tensor-model-parallel-size (fewer parameters per device)",
    ),
)
FIX_KEYS = FixKeys(
    **TRAIN_FIX_KEYS,
    optimizer=(
        "--use-distributed-optimizer",
        "--use-distributed-optimizer (shards Adam's state over DP), a larger "
        "DP, or --optimizer-cpu-offload --use-precision-aware-optimizer",
    ),
    memory_fraction="-",
    max_model_len="-",
    rollout_dp="-",
    response="-",
    offload=(
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction",
        "a smaller --optimizer-offload-fraction, or more nodes",
    ),
)


def fix_keys(job: Job) -> FixKeys:
    return FIX_KEYS
