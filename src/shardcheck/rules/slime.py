"""slime's own start-up checks (THUDM/slime main): slime/utils/arguments.py ``slime_validate_args``,
slime/backends/megatron_utils/arguments.py ``validate_args``, slime/backends/sglang_utils/arguments.py
``validate_args`` and the rollout engine count (slime/utils/http_utils.py ``get_rollout_num_engines``)."""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.rules.base import Finding, engines, finding, need, rule, where
from shardcheck.rules.divisors import divisors


@rule("SLIME-BATCH-REQUIRED", "error", "--rollout-batch-size is required", frameworks=("slime",))
def rollout_batch_required(job: Job) -> Iterator[Finding]:
    """
    slime declares `--rollout-batch-size` (prompts per rollout step) with `required=True`.

    Why:
    argparse stops with `the following arguments are required: --rollout-batch-size` before anything starts.

    Fix:
    Add `--rollout-batch-size N`.

    Source:
    slime/utils/arguments.py, add_slime_arguments (batch sizes).
    """
    if need(job.value("--rollout-batch-size"), "--rollout-batch-size") is None:
        yield finding(
            "SLIME-BATCH-REQUIRED",
            '--rollout-batch-size is not given (argparse: "the following arguments '
            'are required: --rollout-batch-size")',
            job.cluster.nnodes.origin.first_script_line() or job.cluster.nnodes.origin,
            fix="add --rollout-batch-size N (prompts per rollout step)",
        )


@rule("SLIME-DYN-TOKENS", "error", "--use-dynamic-batch-size needs --max-tokens-per-gpu", frameworks=("slime",))
def dynamic_tokens(job: Job) -> Iterator[Finding]:
    """
    Dynamic batching packs micro-batches up to a token budget per GPU; slime needs that budget.

    Why:
    `slime_validate_args` asserts `max_tokens_per_gpu must be set when use_dynamic_batch_size is set`.

    Fix:
    Add `--max-tokens-per-gpu` (about the longest sample over CP).

    Source:
    slime/utils/arguments.py, slime_validate_args.
    """
    dyn_t = job.value("--use-dynamic-batch-size")
    if (
        need(dyn_t, "--use-dynamic-batch-size")
        and need(job.value("--max-tokens-per-gpu"), "--max-tokens-per-gpu") is None
    ):
        yield finding(
            "SLIME-DYN-TOKENS",
            "--use-dynamic-batch-size without --max-tokens-per-gpu (slime: "
            '"max_tokens_per_gpu must be set when use_dynamic_batch_size is set")',
            where(dyn_t),
            fix="add --max-tokens-per-gpu N",
        )


@rule("SLIME-GBS-STEPS", "error", "--global-batch-size must agree with --num-steps-per-rollout", frameworks=("slime",))
def gbs_steps(job: Job) -> Iterator[Finding]:
    """
    With `--num-steps-per-rollout S` slime sets the global batch to
    rollout_batch_size · n_samples_per_prompt // S; a `--global-batch-size` given too must equal it.

    Why:
    `slime_validate_args` asserts `global_batch_size G is not equal to rollout_batch_size R *
    n_samples_per_prompt N // num_steps_per_rollout S`.

    Fix:
    Drop one of the two flags, or make them agree.

    Source:
    slime/utils/arguments.py, slime_validate_args.
    """
    steps = need(job.value("--num-steps-per-rollout"), "--num-steps-per-rollout")
    gbs_t = job.value("--global-batch-size")
    gbs = need(gbs_t, "--global-batch-size")
    if steps is None or gbs is None:
        return
    rbs = need(job.value("--rollout-batch-size"), "--rollout-batch-size")
    n = need(job.value("--n-samples-per-prompt"), "--n-samples-per-prompt")
    if rbs is None or not steps:
        return
    expected = rbs * n // steps
    if gbs != expected:
        yield finding(
            "SLIME-GBS-STEPS",
            f'slime: "global_batch_size {gbs} is not equal to rollout_batch_size {rbs} * '
            f'n_samples_per_prompt {n} // num_steps_per_rollout {steps}"',
            where(gbs_t),
            fix=f"--global-batch-size {expected}, or remove it",
        )


@rule(
    "SLIME-GBS-ROLLOUT",
    "error",
    "One rollout must hold at least one global batch: rollout batch · samples ≥ global batch",
    frameworks=("slime",),
)
def gbs_per_rollout(job: Job) -> Iterator[Finding]:
    """
    Each rollout yields `--rollout-batch-size` × `--n-samples-per-prompt` samples, and slime trains
    on them in steps of `--global-batch-size` samples: `rollout_batch_size · n_samples_per_prompt //
    global_batch_size` steps per rollout. Fewer samples than one global batch give no step. Samples
    beyond whole steps are dropped (logged only).

    Why:
    After the first rollout has been generated, slime's data split stops: `AssertionError:
    num_rollouts (N) < global_batch_size (G); need at least one rollout per step.`

    Versions:
    slime v0.3.x and main: `build_dp_schedule` (slime/utils/dp_schedule.py, each sample its own
    rollout id unless a custom rollout sets one); v0.2.x: `RolloutManager` raises `ValueError: Not
    enough samples N for global_batch_size G` (slime/ray/rollout.py, unless
    `--disable-rollout-trim-samples` or `--use-dynamic-global-batch-size`).

    Fix:
    Lower `--global-batch-size` to at most rollout batch · samples (a divisor of it wastes no
    sample), or give `--num-steps-per-rollout` instead.

    Source:
    slime/utils/dp_schedule.py build_dp_schedule (THUDM/slime v0.3.1, main 624b824);
    slime/ray/rollout.py (v0.2.2); slime/utils/arguments.py slime_validate_args.
    """
    if job.value("--num-steps-per-rollout").value is not None:
        return  # slime derives the global batch from the rollout (SLIME-GBS-STEPS checks a given one)
    gbs_t = job.value("--global-batch-size")
    gbs = need(gbs_t, "--global-batch-size")
    rbs_t, n_t = job.value("--rollout-batch-size"), job.value("--n-samples-per-prompt")
    rbs, n = need(rbs_t, "--rollout-batch-size"), need(n_t, "--n-samples-per-prompt")
    if gbs is None or rbs is None or n is None or rbs * n >= gbs:
        return
    samples = rbs * n
    yield finding(
        "SLIME-GBS-ROLLOUT",
        f'slime: "num_rollouts ({samples}) < global_batch_size ({gbs}); need at least one rollout per step." '
        f"— a rollout yields --rollout-batch-size {rbs} × --n-samples-per-prompt {n} = {samples} samples",
        where(gbs_t, rbs_t, n_t),
        fix=f"--global-batch-size {samples} (or a divisor of it), or --rollout-batch-size {-(-gbs // n)} or more",
    )


@rule(
    "SLIME-CLUSTER-GPUS",
    "error",
    "The actor's and the rollout's GPUs must fit the Ray cluster the script starts",
    frameworks=("slime",),
)
def cluster_gpus(job: Job) -> Iterator[Finding]:
    """
    slime places all its GPUs in one Ray placement group: the actor's (`--actor-num-nodes` ×
    `--actor-num-gpus-per-node`) plus the rollout's (`--rollout-num-gpus`); with `--colocate` the
    larger of the two. The critic shares the actor's GPUs. Checked only when the script itself
    starts the whole cluster: one `ray start --head --num-gpus N`, no other `ray start` (not even
    inside an `ssh` string), and a one-node actor (`--actor-num-nodes 1`; a multi-node job's workers
    may join from outside the script).

    Why:
    No error: slime waits for the placement group without a timeout, logging `Waiting for placement
    group of N GPUs (elapsed Ts): G GPUs registered with Ray, A available.` every 30 s.

    Versions:
    slime v0.3.x and main (`_get_placement_group_layout`); v0.2.x also added the critic's
    `--critic-num-nodes` × `--critic-num-gpus-per-node` (the actor's by default) for PPO, which
    this rule does not count.

    Fix:
    Fewer actor or rollout GPUs, `--colocate`, or more GPUs in `ray start --num-gpus` (more nodes).

    Source:
    slime/ray/placement_group.py `_get_placement_group_layout`, `_create_placement_group`
    (THUDM/slime main 624b824, v0.3.1); slime/utils/arguments.py slime_validate_args (the debug
    modes and --colocate).
    """
    cluster_t = job.values.get("ray cluster GPUs")
    if cluster_t is None:
        return
    cluster = need(cluster_t, "ray start --num-gpus")
    nodes_t, per_t = job.cluster.nnodes, job.cluster.devices_per_node
    if need(nodes_t, "--actor-num-nodes") != 1:
        return
    actor = need(per_t, "--actor-num-gpus-per-node")
    if need(job.value("--debug-train-only"), "--debug-train-only"):
        wanted, how = actor, "the actor's (--debug-train-only)"
    else:
        rollout_t = job.rollout.gpus if job.rollout is not None else None
        rollout = need(rollout_t, "--rollout-num-gpus") if rollout_t is not None else None
        if rollout is None:
            return  # slime needs --rollout-num-gpus without --colocate (its own error)
        if need(job.value("--debug-rollout-only"), "--debug-rollout-only"):
            wanted, how = rollout, "the rollout's (--debug-rollout-only)"
        elif need(job.value("--colocate"), "--colocate"):
            wanted, how = max(actor, rollout), f"max(actor {actor}, rollout {rollout}) with --colocate"
        else:
            wanted, how = actor + rollout, f"actor {actor} + rollout {rollout}"
    if wanted <= cluster:
        return
    yield finding(
        "SLIME-CLUSTER-GPUS",
        f"slime asks Ray for a placement group of {wanted} GPUs ({how}) but the Ray cluster this script "
        f"starts has {cluster} (no worker joins in the script): slime waits forever "
        f'("Waiting for placement group of {wanted} GPUs ...: {cluster} GPUs registered with Ray")',
        where(cluster_t, job.value("--rollout-num-gpus"), per_t, nodes_t),
        fix=(f"--rollout-num-gpus {cluster - actor}, " if cluster > actor else "")
        + f"--colocate, or a cluster of {wanted} GPUs",
    )


@rule("SLIME-UNEVEN-PP1", "error", "First/last pipeline stage layer counts need PP > 1", frameworks=("slime",))
def uneven_pp1(job: Job) -> Iterator[Finding]:
    """
    `--decoder-first-pipeline-num-layers` / `--decoder-last-pipeline-num-layers` describe a
    pipeline; slime rejects them with a single stage.

    Why:
    slime's `validate_args` asserts `decoder_first_pipeline_num_layers and
    decoder_last_pipeline_num_layers should be None when pipeline_model_parallel_size is 1.`

    Fix:
    Remove the uneven flags or raise PP.

    Source:
    slime/backends/megatron_utils/arguments.py, validate_args.
    """
    for e in engines(job):
        first = need(e.first_stage_layers, "--decoder-first-pipeline-num-layers")
        last = need(e.last_stage_layers, "--decoder-last-pipeline-num-layers")
        if need(e.pp, "--pipeline-model-parallel-size") == 1 and (first is not None or last is not None):
            yield finding(
                "SLIME-UNEVEN-PP1",
                'uneven pipeline flags with PP 1 (slime: "decoder_first_pipeline_num_layers '
                "and decoder_last_pipeline_num_layers should be None when "
                'pipeline_model_parallel_size is 1.")',
                where(e.first_stage_layers, e.last_stage_layers),
                fix="remove the --decoder-first/last-pipeline-num-layers flags, or use PP > 1",
            )


@rule("SLIME-SGL-DP-ATTN", "error", "--sglang-dp-size > 1 needs --sglang-enable-dp-attention", frameworks=("slime",))
def sglang_dp_attention(job: Job) -> Iterator[Finding]:
    """
    slime runs SGLang data parallelism only as DP attention inside an engine.

    Why:
    slime's SGLang `validate_args` asserts `args.sglang_enable_dp_attention` when
    `sglang_dp_size > 1` (a bare AssertionError).

    Fix:
    Add `--sglang-enable-dp-attention`, or drop `--sglang-dp-size`.

    Source:
    slime/backends/sglang_utils/arguments.py, validate_args.
    """
    if job.rollout is None:
        return
    dp_t = job.rollout.dp
    if need(dp_t, "--sglang-dp-size") > 1 and not need(job.rollout.dp_attention, "--sglang-enable-dp-attention"):
        yield finding(
            "SLIME-SGL-DP-ATTN",
            f"--sglang-dp-size {dp_t.value} without --sglang-enable-dp-attention (slime "
            "asserts args.sglang_enable_dp_attention)",
            where(dp_t),
            fix="add --sglang-enable-dp-attention",
        )


@rule("SLIME-SGL-PP", "error", "GPUs per engine must divide by --sglang-pp-size", frameworks=("slime",))
def sglang_pp(job: Job) -> Iterator[Finding]:
    """
    An SGLang engine's GPUs are split into `--sglang-pp-size` pipeline stages of TP GPUs each.

    Why:
    slime's SGLang `validate_args` asserts `rollout_num_gpus_per_engine (N) must be divisible by
    sglang_pipeline_parallel_size (P)`.

    Fix:
    Choose a PP size dividing the GPUs per engine.

    Source:
    slime/backends/sglang_utils/arguments.py, validate_args.
    """
    if job.rollout is None:
        return
    n = need(job.rollout.tp, "--rollout-num-gpus-per-engine")
    p = need(job.rollout.pp, "--sglang-pp-size")
    if p > 1 and n % p:
        yield finding(
            "SLIME-SGL-PP",
            f'slime: "rollout_num_gpus_per_engine ({n}) must be divisible by sglang_pipeline_parallel_size ({p})"',
            where(job.rollout.pp, job.rollout.tp),
            fix=f"--sglang-pp-size in {', '.join(map(str, divisors(n)))}",
        )


@rule("SLIME-RO-ENGINES", "warning", "The rollout GPUs must be whole engines", frameworks=("slime",))
def rollout_engines(job: Job) -> Iterator[Finding]:
    """
    slime starts rollout_num_gpus // rollout_num_gpus_per_engine SGLang engines (at least one): GPUs
    beyond whole engines stay idle, and fewer GPUs than one engine cannot hold it.

    Why:
    Idle GPUs cost as much as busy ones; an engine larger than the rollout's GPUs fails placement.

    Fix:
    Make `--rollout-num-gpus` a multiple of `--rollout-num-gpus-per-engine`.

    Source:
    slime/utils/http_utils.py get_rollout_num_engines; slime/ray/rollout.py.
    """
    if job.rollout is None or job.rollout.gpus is None:
        return
    gpus = need(job.rollout.gpus, "--rollout-num-gpus")
    per = need(job.rollout.tp, "--rollout-num-gpus-per-engine")
    if not gpus or per < 1 or gpus % per == 0:
        return
    engines_n = gpus // per
    text = (
        f"{gpus} rollout GPUs hold {engines_n} engine{'s' * (engines_n != 1)} of {per} GPUs; {gpus - engines_n * per} "
        "stay idle"
        if engines_n
        else f"one engine needs {per} GPUs but the rollout has {gpus}"
    )
    yield finding(
        "SLIME-RO-ENGINES",
        text,
        where(job.rollout.gpus, job.rollout.tp),
        fix=f"--rollout-num-gpus {max(1, engines_n) * per}",
    )
