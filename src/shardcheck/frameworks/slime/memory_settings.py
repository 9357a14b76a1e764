"""slime's settings for the memory estimate (THUDM/slime main), on top of Megatron-LM's flags.

Training (slime runs Megatron-LM's ``validate_args`` on its flags, so precision, gradients, Adam and
recompute read as in frameworks/megatron_lm/memory_settings.py), with slime's own rules:
- slime/backends/megatron_utils/arguments.py ``_set_default_megatron_args``: the distributed optimizer is
  always on and ``bf16 = not fp16``;
- one micro batch (slime/utils/dp_schedule.py ``build_dp_schedule``): with ``--use-dynamic-batch-size``,
  samples packed up to ``--max-tokens-per-gpu × CP`` tokens per micro batch (CP then splits it; a single
  longer sample gets a micro batch of its own), at most one sample per micro batch, so at most
  ``global batch / DP`` per step; else ``--micro-batch-size`` samples of at most one full sample
  (``--rollout-max-context-len``, else prompt + response), ``global batch / (micro · DP)`` per step;
  the global batch is ``--global-batch-size``, else ``--rollout-batch-size × --n-samples-per-prompt /
  --num-steps-per-rollout`` (slime_validate_args);
- logits (slime/utils/ppo_utils.py ``_VocabParallelLogProbEntropy``): an fp32 copy of the logits and the
  softmax buffer; with ``--entropy-coef`` ≠ 0 the fp32 logits are also kept for the entropy's backward
  (slime/backends/megatron_utils/loss.py ``get_log_probs_and_entropy``: ``with_entropy_grad``);
  ``--log-probs-chunk-size`` is not modelled (the whole micro batch is sized: an upper bound);
- offload (slime/utils/arguments.py ``slime_validate_args``): ``--colocate`` turns ``offload_train`` on
  (unless ``--release-train`` or ``--no-offload-train``), ``--offload`` and ``--offload-train`` set it, PPO's
  critic forces it; the actor's weights, gradients and optimizer state leave the device during rollout,
  and ``disable_param/grad_buffers_cpu_backup`` means only the optimizer state is copied to the host.
Rollout: SGLang engines of ``--rollout-num-gpus-per-engine`` GPUs; with DP attention
(``--sglang-enable-dp-attention``) each of ``--sglang-dp-size`` attention groups has TP = engine GPUs / DP
(the dense weights are sized at that TP: an upper bound); ``--sglang-ep-size`` splits the experts.
``--sglang-mem-fraction-static`` is (weights + KV pool) / device memory (sglang 0.5.15.post1 server_args.py);
when absent SGLang derives it from the device, the chunked-prefill size, the CUDA-graph batch sizes, TP·PP
and DP attention (``_handle_gpu_memory_settings``), which the estimate does not reproduce: unknown.
Requests: ``--rollout-max-context-len``, else ``--rollout-max-prompt-len + --rollout-max-response-len``;
``--rollout-batch-size × --n-samples-per-prompt`` per step, over ``rollout GPUs / GPUs per engine`` engines.
"""

from __future__ import annotations

from shardcheck.frameworks.megatron_lm import memory_settings as mlm
from shardcheck.frameworks.memory_settings import (
    FixKeys,
    Logits,
    RolloutSettings,
    TrainSettings,
    dynamic_micro_batches,
    known,
    opt_fields,
)
from shardcheck.frameworks.memory_settings import setting as flag
from shardcheck.job import Job, MegatronLayout
from shardcheck.origin import UnknownValue


def sample_tokens(job: Job) -> int | None:
    """The longest sample: --rollout-max-context-len, else prompt + response (None: not bounded)."""
    context = flag(job, "--rollout-max-context-len")
    if context:
        return context
    prompt, response = flag(job, "--rollout-max-prompt-len"), flag(job, "--rollout-max-response-len")
    return prompt + response if prompt and response else None


def global_batch(job: Job) -> int:
    gbs = flag(job, "--global-batch-size")
    if gbs:
        return gbs
    steps = flag(job, "--num-steps-per-rollout")
    rollout = flag(job, "--rollout-batch-size")
    if steps and rollout:
        return rollout * flag(job, "--n-samples-per-prompt") // steps
    raise UnknownValue("the global batch is unknown: give --global-batch-size (or --num-steps-per-rollout)")


def offload_train(job: Job) -> str | None:
    """The flag that makes slime offload the training actor during rollout (None: it stays)."""
    if "--no-offload-train" in _given(job) and "--offload-train" in _given(job):
        raise UnknownValue("both --offload-train and --no-offload-train are given")
    if str(flag(job, "--advantage-estimator")) == "ppo":
        return "--advantage-estimator ppo"  # slime_validate_args: the critic forces offload_train
    for name in ("--offload-train", "--offload"):
        if flag(job, name):
            return name
    if flag(job, "--colocate") and not flag(job, "--release-train") and "--no-offload-train" not in _given(job):
        return "--colocate"
    return None


def _given(job: Job) -> set[str]:
    return {k for k, t in job.values.items() if k.startswith("--") and t.origin.kind != "default"}


def train_settings(job: Job, layout: MegatronLayout, dp: int) -> TrainSettings:
    if flag(job, "--fp16"):
        raise UnknownValue("--fp16 with slime: shardcheck sizes slime's bf16 training only")
    cp = known(layout.cp, "CP")
    sample = sample_tokens(job)
    gbs = global_batch(job)
    if flag(job, "--use-dynamic-batch-size"):
        cap = flag(job, "--max-tokens-per-gpu")
        if not cap:
            raise UnknownValue("--use-dynamic-batch-size needs --max-tokens-per-gpu")
        tokens, count, longest, bound = dynamic_micro_batches(job, cap * cp, gbs // dp, sample or cap * cp)
        tokens = max(tokens, sample or 0) if job.sample_tokens is None else tokens
        step_tokens = count * sample if sample and job.sample_tokens is None else None
        sample = longest
    else:
        bound = step_tokens = None
        if sample is None:
            raise UnknownValue(
                "the sample length is unknown: give --rollout-max-context-len, or --rollout-max-prompt-len "
                "and --rollout-max-response-len"
            )
        micro = flag(job, "--micro-batch-size")
        tokens, count = micro * sample, max(1, gbs // (micro * dp))
    grad, opt = mlm.optimizer(job, bf16=True)  # bf16 = not fp16
    moved = offload_train(job)
    entropy_grad = float(flag(job, "--entropy-coef")) != 0
    return TrainSettings(
        weight_bytes=2,
        grad_bytes=grad,
        distributed_optimizer=True,
        **opt_fields(opt),
        tokens_per_micro_batch=tokens,
        sequence_length=sample or tokens,
        micro_batches=count,
        recompute=mlm.recompute(job),
        logits=Logits(fp32_buffers=3 if entropy_grad else 2),
        param_offload=moved,
        optimizer_offload=moved,
        param_host_copy=False,
        vocab_divisible_by=flag(job, "--make-vocab-size-divisible-by"),
        batch_bound=bound,
        step_tokens=step_tokens,
        **mlm.extra_settings(job),
    )


def rollout_settings(job: Job, moe: bool, max_position_embeddings: int | None) -> RolloutSettings:
    ro = job.rollout
    per_engine = known(ro.tp, "--rollout-num-gpus-per-engine")
    dp = known(ro.dp, "--sglang-dp-size") if ro.dp_in_engine else 1
    if not per_engine or per_engine % dp:
        raise UnknownValue(f"--rollout-num-gpus-per-engine {per_engine} is not divisible by --sglang-dp-size {dp}")
    fraction = flag(job, "--sglang-mem-fraction-static")
    if fraction is None:
        raise UnknownValue(
            "--sglang-mem-fraction-static is not given; SGLang derives it from the device, chunked "
            "prefill, CUDA-graph sizes and TP (server_args.py _handle_gpu_memory_settings); give it"
        )
    request = sample_tokens(job)
    if request is None:
        raise UnknownValue(
            "the request length is unknown: give --rollout-max-context-len, or --rollout-max-prompt-len "
            "and --rollout-max-response-len"
        )
    gpus = known(ro.gpus, "--rollout-num-gpus") if ro.gpus is not None else None
    per_step = flag(job, "--rollout-batch-size")
    return RolloutSettings(
        engine="sglang",
        tp=per_engine // dp,
        dp=dp,
        ep=(known(ro.ep, "--sglang-ep-size") or 1) if moe else 1,
        dtype_bytes=2,
        memory_fraction=float(fraction),
        max_num_batched_tokens=0,
        max_num_seqs=flag(job, "--sglang-max-running-requests"),
        request_tokens=request,
        max_model_len=flag(job, "--sglang-context-length") or max_position_embeddings or request,
        requests_per_step=per_step * flag(job, "--n-samples-per-prompt") if per_step else None,
        replicas=gpus // per_engine if gpus else None,
        colocated=bool(flag(job, "--colocate")),
    )


FIX_KEYS = FixKeys(
    **mlm.TRAIN_FIX_KEYS,
    # slime always turns the distributed optimizer on (_set_default_megatron_args)
    optimizer=(
        "--optimizer-cpu-offload",
        "--optimizer-cpu-offload --use-precision-aware-optimizer "
        "(with --optimizer-offload-fraction), or a larger DP/EDP",
    ),
    memory_fraction="--sglang-mem-fraction-static",
    max_model_len="--sglang-context-length",
    rollout_dp="--sglang-dp-size",
    response="--rollout-max-response-len",
    offload=(
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction",
        "a smaller --optimizer-offload-fraction, or more nodes",
    ),
)


def fix_keys(job: Job) -> FixKeys:
    return FIX_KEYS
