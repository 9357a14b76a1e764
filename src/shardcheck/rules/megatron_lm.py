"""Megatron-LM ``validate_args`` checks a Megatron-LM or slime command line reaches.

Megatron-LM main, megatron/training/arguments.py ``validate_args`` (error texts quoted as written,
spaces missing where the source misses them); megatron/core/num_microbatches_calculator.py
``ConstantNumMicroBatchesCalculator`` for the batch check. They judge jobs read from flags
(scope ``frameworks=FLAG_FRAMEWORKS``); verl builds its Megatron config without them.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.problems import Kind, Problem
from shardcheck.rules.base import Finding, Message, engines, finding, need, rule, where
from shardcheck.rules.divisors import divisors

FLAG_FRAMEWORKS = ("megatron-lm", "slime")


def _given(job: Job, name: str) -> bool:
    t = job.value(name)
    return not t.known or t.value is not None


_VPP_FLAGS = (
    "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank",
    "--pipeline-model-parallel-layout",
)


@rule("MLM-VPP-EXCLUSIVE", "error", "At most one way of setting the virtual pipeline", frameworks=FLAG_FRAMEWORKS)
def vpp_exclusive(job: Job) -> Iterator[Finding]:
    """
    `--num-layers-per-virtual-pipeline-stage`, `--num-virtual-stages-per-pipeline-rank` and
    `--pipeline-model-parallel-layout` each set the virtual pipeline; Megatron-LM accepts one.

    Why:
    `validate_args` asserts `No more than one of the following arguments can be set at the same
    time: --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,
    --pipeline-model-parallel-layout.`

    Fix:
    Keep one of the three flags.

    Source:
    megatron/training/arguments.py, validate_args (Megatron-LM main).
    """
    given = [k for k in _VPP_FLAGS if need(job.value(k), k) is not None]
    if len(given) > 1:
        yield finding(
            "MLM-VPP-EXCLUSIVE",
            f'{" and ".join(given)} are both set (Megatron-LM: "No more than one of the following arguments '
            "can be set at the same time: --num-layers-per-virtual-pipeline-stage, "
            '--num-virtual-stages-per-pipeline-rank,--pipeline-model-parallel-layout.")',
            where(*(job.value(k) for k in given[1:])),
            fix=f"remove {given[1]}",
        )


@rule(
    "MLM-VPP-LAYERS",
    "error",
    "--num-layers-per-virtual-pipeline-stage must split each stage evenly",
    frameworks=FLAG_FRAMEWORKS,
)
def vpp_layers(job: Job) -> Iterator[Finding]:
    """
    `--num-layers-per-virtual-pipeline-stage k` derives VPP = (L+e+l) / PP / k: the layers must divide
    by PP, the layers per stage by k, and the split must be even (no first/last stage counts).

    Why:
    `validate_args` asserts `please use --num-virtual-stages-per-pipeline-rank to specify virtual
    pipeline parallel degree when enable uneven pipeline parallelism`, `number of layers of the model
    must be divisible pipeline model parallel size` or `number of layers per pipeline stage must be
    divisible number of layers per virtual pipeline stage`.

    Fix:
    Choose k dividing L / PP, or give `--num-virtual-stages-per-pipeline-rank` instead.

    Source:
    megatron/training/arguments.py, validate_args (Megatron-LM main).
    """
    k_t = job.value("--num-layers-per-virtual-pipeline-stage")
    k = need(k_t, "--num-layers-per-virtual-pipeline-stage")
    if k is None or need(job.value("--num-virtual-stages-per-pipeline-rank"), "--num-virtual-stages-per-pipeline-rank"):
        return
    if need(job.value("--pipeline-model-parallel-layout"), "--pipeline-model-parallel-layout") is not None:
        return
    for e in engines(job):
        first = need(e.first_stage_layers, "--decoder-first-pipeline-num-layers")
        last = need(e.last_stage_layers, "--decoder-last-pipeline-num-layers")
        message = None
        if first is not None or last is not None:
            message = (
                "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree "
                "when enable uneven pipeline parallelism"
            )
            fix = "--num-virtual-stages-per-pipeline-rank V instead of --num-layers-per-virtual-pipeline-stage"
        else:
            layers = need(job.value("--num-layers"), "--num-layers")
            if layers is None:
                continue
            pp = need(e.pp, "--pipeline-model-parallel-size")
            total = (
                layers
                + int(bool(need(e.account_for_embedding, "--account-for-embedding-in-pipeline-split")))
                + int(bool(need(e.account_for_loss, "--account-for-loss-in-pipeline-split")))
            )
            if total % pp:
                message = "number of layers of the model must be divisible pipeline model parallel size"
                fix = f"a PP dividing {total}"
            elif (total // pp) % k:
                per = total // pp
                message = (
                    "number of layers per pipeline stage must be divisible number of layers per virtual pipeline stage"
                )
                fix = f"--num-layers-per-virtual-pipeline-stage dividing {per}: {', '.join(map(str, divisors(per)))}"
        if message:
            yield finding(
                "MLM-VPP-LAYERS",
                f'--num-layers-per-virtual-pipeline-stage {k} (Megatron-LM: "{message}")',
                where(k_t),
                fix=fix,
            )


@rule("MLM-VPP-P2P", "error", "The interleaved schedule without p2p overlap needs PP > 2", frameworks=FLAG_FRAMEWORKS)
def vpp_p2p(job: Job) -> Iterator[Finding]:
    """
    With a virtual pipeline and `--no-overlap-p2p-communication`, Megatron-LM needs more than two
    pipeline stages (with the overlap, the default, PP > 1 is enough: MCORE-PS-VPP-PP).

    Why:
    `validate_args` asserts `When interleaved schedule is used and p2p communication overlap is
    disabled, pipeline-model-parallel size should be greater than 2 to avoid having multiple p2p
    sends and recvs between same 2 ranks per communication batch`.

    Fix:
    Drop `--no-overlap-p2p-communication` or use PP > 2.

    Source:
    megatron/training/arguments.py, validate_args (Megatron-LM main).
    """
    if need(job.value("--no-overlap-p2p-communication"), "--no-overlap-p2p-communication"):
        return  # store_false: True means the overlap is on
    for e in engines(job):
        vpp = need(e.vpp, "virtual pipeline size")
        pp = need(e.pp, "--pipeline-model-parallel-size")
        if vpp is not None and pp <= 2:
            yield finding(
                "MLM-VPP-P2P",
                f'VPP {vpp}, PP {pp} with --no-overlap-p2p-communication (Megatron-LM: "When interleaved '
                "schedule is used and p2p communication overlap is disabled, pipeline-model-parallel size "
                "should be greater than 2 to avoid having multiple p2p sends and recvs between same 2 ranks "
                'per communication batch")',
                where(job.value("--no-overlap-p2p-communication"), e.pp),
                fix="remove --no-overlap-p2p-communication, or --pipeline-model-parallel-size > 2",
            )


@rule(
    "MLM-SEQ-CP",
    "error",
    "With context parallelism the sequence length must divide by 2·CP",
    frameworks=FLAG_FRAMEWORKS,
)
def seq_cp(job: Job) -> Iterator[Finding]:
    """
    Context parallelism splits each sequence into 2·CP chunks (load-balanced), so `--seq-length`
    must be a multiple of 2·CP.

    Why:
    `validate_args` asserts `seq-length should be a multiple of 2 * context-parallel-size if
    context-parallel-size > 1.`

    Fix:
    Round `--seq-length` to a multiple of 2·CP.

    Source:
    megatron/training/arguments.py, validate_args (Megatron-LM main).
    """
    seq_t = job.value("--seq-length")
    seq = need(seq_t, "--seq-length")
    for e in engines(job):
        cp = need(e.cp, "--context-parallel-size")
        if seq is not None and cp > 1 and seq % (2 * cp):
            yield finding(
                "MLM-SEQ-CP",
                f"--seq-length {seq} with CP {cp}: not a multiple of {2 * cp} (Megatron-LM: "
                '"seq-length should be a multiple of 2 * context-parallel-size if '
                'context-parallel-size > 1.")',
                where(seq_t, e.cp),
                fix=f"--seq-length {seq - seq % (2 * cp) or 2 * cp}",
            )


@rule(
    "MLM-KV-CHANNELS",
    "error",
    "Without --kv-channels the hidden size must divide by the heads",
    frameworks=FLAG_FRAMEWORKS,
)
def kv_channels(job: Job) -> Iterator[Finding]:
    """
    Megatron-LM derives the head dimension as `--hidden-size / --num-attention-heads` when
    `--kv-channels` is not given.

    Why:
    `validate_args` asserts `args.hidden_size % args.num_attention_heads == 0` (a bare
    AssertionError, no message) before anything is built.

    Fix:
    Give `--kv-channels` (the model's head dimension).

    Source:
    megatron/training/arguments.py, validate_args (Megatron-LM main).
    """
    if need(job.value("--kv-channels"), "--kv-channels") is not None:
        return
    hidden_t, heads_t = job.value("--hidden-size"), job.value("--num-attention-heads")
    hidden, heads = need(hidden_t, "--hidden-size"), need(heads_t, "--num-attention-heads")
    if hidden and heads and hidden % heads:
        yield finding(
            "MLM-KV-CHANNELS",
            f"--hidden-size {hidden} is not a multiple of --num-attention-heads {heads} "
            "and --kv-channels is not given (Megatron-LM asserts hidden_size % "
            "num_attention_heads == 0)",
            where(hidden_t, heads_t),
            fix="add --kv-channels HEAD_DIM",
        )


@rule(
    "MLM-GQA-FLAG", "warning", "--num-query-groups counts only with --group-query-attention", frameworks=FLAG_FRAMEWORKS
)
def gqa_flag(job: Job) -> Iterator[Finding]:
    """
    Megatron-LM passes `--num-query-groups` to the model only when `--group-query-attention` is
    set; otherwise every attention head gets its own KV head, silently.

    Why:
    The model built is not the one meant, and its checkpoint does not load.

    Fix:
    Add `--group-query-attention`.

    Source:
    megatron/training/arguments.py core_transformer_config_from_args (Megatron-LM main:
    `num_query_groups` is taken only `if args.group_query_attention`).
    """
    groups_t = job.value("--num-query-groups")
    if groups_t.origin.kind == "default" or need(groups_t, "--num-query-groups") is None:
        return
    if not need(job.value("--group-query-attention"), "--group-query-attention"):
        yield finding(
            "MLM-GQA-FLAG",
            f"--num-query-groups {groups_t.value} without --group-query-attention: "
            "Megatron-LM ignores it and builds one KV head per attention head",
            where(groups_t),
            fix="add --group-query-attention",
        )


@rule("MLM-GBS-DIV", "error", "The global batch must divide by micro batch · DP", frameworks=FLAG_FRAMEWORKS)
def gbs_div(job: Job) -> Iterator[Finding]:
    """
    Megatron-LM runs `global batch / (micro batch · DP)` micro-batches per step; the division must
    be exact. slime initialises the same calculator with its `--global-batch-size`.

    Why:
    `ConstantNumMicroBatchesCalculator` asserts `global batch size (G) is not divisible by micro
    batch size (M) times data parallel size (D)` at initialisation.

    Fix:
    Make the global batch a multiple of micro batch · DP.

    Source:
    megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator.__init__
    (megatron-core 0.16.1); slime/backends/megatron_utils/initialize.py (init_num_microbatches_calculator).
    """
    gbs_t, mbs_t = job.value("--global-batch-size"), job.value("--micro-batch-size")
    gbs = need(gbs_t, "--global-batch-size")
    if gbs is None:
        return  # validate_args sets it to micro batch · DP
    mbs = need(mbs_t, "--micro-batch-size") or 1
    for e in engines(job):
        dp = need(e.dp(job.cluster.world), "DP")
        if not dp or not mbs:
            continue  # the grid does not tile the world (MCORE-PS-WORLD), or a size is 0 (VALUE-BAD-*)
        if gbs % (mbs * dp):
            step = mbs * dp
            yield finding(
                "MLM-GBS-DIV",
                f"--global-batch-size {gbs}, micro batch {mbs}, DP {dp} (megatron-core: "
                f'"global batch size ({gbs}) is not divisible by micro batch size ({mbs}) '
                f'times data parallel size ({dp})")',
                where(gbs_t),
                fix=f"--global-batch-size {max(step, gbs - gbs % step)} (a multiple of {step})",
            )


@rule(
    "MLM-FLAG-UNKNOWN",
    "warning",
    "A flag the chosen Megatron-LM version does not have, or a near-miss of one slime has",
    notes=(Kind.FLAG_UNKNOWN,),
    certain=True,
)
def flag_unknown(p: Problem) -> Message:
    """
    A `--flag` that Megatron-LM's `arguments.py` at the chosen megatron-core minor does not declare
    (`pretrain_*.py` launches; the table is generated from that file, with the flags the entry's
    `extra_args_provider` adds), a flag Megatron-LM does not have at all
    (`--virtual-pipeline-model-parallel-size`), or, for slime, a flag one or two letters from one it has.
    A Megatron-LM fork whose code lies in the script's repository (MindSpeed-LLM, Pai-Megatron-Patch, FlagScale,
    a repository carrying its own `megatron/training/arguments.py`) adds the flags its `add_argument` calls declare;
    where its table lies partly outside the repository, its other flags are named once, as not judged (info).

    Why:
    `pretrain_gpt.py` parses with argparse and stops with `unrecognized arguments`; slime parses Megatron-LM's
    arguments with `ignore_unknown_args=True`, so a misspelt size is silently dropped and the default is used.

    Fix:
    Spell the flag as the Megatron-LM version in use does, drop it, or give `--megatron-core-version` for the
    version the launch really runs.

    Source:
    megatron/training/arguments.py, parse_args (NVIDIA/Megatron-LM, core_v0.9.0 to core_v0.19.0);
    slime/backends/megatron_utils/arguments.py.
    """
    if p.args.get("fork"):
        names = p["fork"]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return (
            f"flags of {p['program']}, not judged: {shown} (its code is here, but it builds on {p['missing']}, "
            "which this repository does not hold)",
            f"judge them against {p['program']}'s own argument table",
        )
    if p["meant"] is None:
        return (
            f"{p['flag']} is not a flag of {p['program']} (its megatron/training/arguments.py has no such option; "
            "argparse stops with `unrecognized arguments`)",
            "drop it, or give --megatron-core-version for the version the launch runs",
        )
    if p["close"]:
        whose = "shardcheck knows" if p["program"] is None else f"of {p['program']}"
        return f"{p['flag']} is not a flag {whose}; it is close to {p['meant']}", f"did you mean `{p['meant']}`?"
    return (
        f"{p['flag']} is not a Megatron-LM flag (its arguments.py has no such option)",
        f"did you mean `{p['meant']}`?",
    )


# validate_args, "Deprecated arguments": flags Megatron-LM still declares only to refuse them
# (core_v0.9.0 … core_v0.19.0).
_REMOVED_FLAGS = {
    "--batch-size": "--batch-size argument is no longer valid, use --micro-batch-size instead",
    "--warmup": "--warmup argument is no longer valid, use --lr-warmup-fraction instead",
    "--model-parallel-size": "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead",
}


@rule("MLM-FLAG-REMOVED", "error", "A flag Megatron-LM declares only to refuse it", frameworks=FLAG_FRAMEWORKS)
def flag_removed(job: Job) -> Iterator[Finding]:
    """
    `--batch-size`, `--warmup` and `--model-parallel-size` are still parsed, but only so that
    `validate_args` can stop on them and name their replacements.

    Why:
    `validate_args` asserts `--batch-size argument is no longer valid, use --micro-batch-size instead`,
    `--warmup argument is no longer valid, use --lr-warmup-fraction instead` and `--model-parallel-size
    is no longer valid, use --tensor-model-parallel-size instead`.

    Fix:
    Use the flag the message names.

    Source:
    megatron/training/arguments.py validate_args, "Deprecated arguments" (NVIDIA/Megatron-LM core_v0.9.0 …
    core_v0.19.0).
    """
    for flag, text in _REMOVED_FLAGS.items():
        t = job.value(flag)
        if need(t, flag) is not None:
            yield finding(
                "MLM-FLAG-REMOVED",
                f'{flag} {t.value} (Megatron-LM: "{text}")',
                where(t),
                fix=f"{text.rsplit('use ', 1)[1].removesuffix(' instead')} instead of {flag}",
            )


# From core_v0.11.0 the seq_length assert has a message (NVIDIA/Megatron-LM megatron/training/arguments.py).
_SEQ_MESSAGE_SINCE = (0, 11)


@rule(
    "MLM-SEQ-POSITIONS",
    "error",
    "--max-position-embeddings must be at least the sequence length",
    frameworks=FLAG_FRAMEWORKS,
)
def seq_positions(job: Job) -> Iterator[Finding]:
    """
    The position embedding table (or the RoPE cache) has `--max-position-embeddings` rows; a sequence
    longer than that has positions without one.

    Why:
    `validate_args` asserts `max_position_embeddings (P) must be greater than or equal to seq_length (S).`
    (a bare `args.max_position_embeddings >= args.seq_length` before core_v0.11), and
    `args.max_position_embeddings >= args.decoder_seq_length` (bare).

    Fix:
    Raise `--max-position-embeddings` to the sequence length (the model's own limit), or shorten the sequence.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    pos_t = job.value("--max-position-embeddings")
    pos = need(pos_t, "--max-position-embeddings")
    if pos is None:
        return
    minor = tuple(int(p) for p in job.megatron_core_version.split(".")[:2])
    for flag in ("--seq-length", "--decoder-seq-length"):
        t = job.value(flag)
        seq = need(t, flag)
        if seq is None or pos >= seq:
            continue
        if flag == "--seq-length" and minor >= _SEQ_MESSAGE_SINCE:
            said = (
                f'(Megatron-LM: "max_position_embeddings ({pos}) must be greater than or equal to seq_length ({seq}).")'
            )
        else:
            dest = flag[2:].replace("-", "_")
            said = f"(Megatron-LM's validate_args asserts args.max_position_embeddings >= args.{dest})"
        yield finding(
            "MLM-SEQ-POSITIONS",
            f"{flag} {seq} above --max-position-embeddings {pos} {said}",
            where(t, pos_t),
            fix=f"--max-position-embeddings {seq}, or {flag} {pos}",
        )


@rule(
    "MLM-PRECISION",
    "error",
    "--fp16 and --bf16 exclude each other; fp16/fp32 options need their mode",
    frameworks=FLAG_FRAMEWORKS,
)
def precision(job: Job) -> Iterator[Finding]:
    """
    `--fp16` and `--bf16` choose the training precision, one at a time; `--fp16-lm-cross-entropy` needs
    `--fp16`, and `--fp32-residual-connection` needs `--fp16` or `--bf16`.

    Why:
    `validate_args` asserts `not args.bf16` when `args.fp16` (bare), `lm cross entropy in fp16 only
    support in fp16 mode.` and `residual connection in fp32 only supported when using fp16 or bf16.`

    Fix:
    Keep one of `--fp16` / `--bf16`; drop the option or add its mode.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    fp16_t, bf16_t = job.value("--fp16"), job.value("--bf16")
    fp16, bf16 = need(fp16_t, "--fp16"), need(bf16_t, "--bf16")
    ce_t, res_t = job.value("--fp16-lm-cross-entropy"), job.value("--fp32-residual-connection")
    if fp16 and bf16:
        yield finding(
            "MLM-PRECISION",
            "--fp16 with --bf16 (Megatron-LM's validate_args asserts not args.bf16 when args.fp16)",
            where(bf16_t, fp16_t),
            fix="remove --fp16 or --bf16",
        )
    elif need(ce_t, "--fp16-lm-cross-entropy") and not fp16:
        yield finding(
            "MLM-PRECISION",
            '--fp16-lm-cross-entropy without --fp16 (Megatron-LM: "lm cross entropy in fp16 only support in fp16 '
            'mode.")',
            where(ce_t),
            fix="remove --fp16-lm-cross-entropy",
        )
    elif need(res_t, "--fp32-residual-connection") and not (fp16 or bf16):
        yield finding(
            "MLM-PRECISION",
            '--fp32-residual-connection without --fp16 or --bf16 (Megatron-LM: "residual connection in fp32 only '
            'supported when using fp16 or bf16.")',
            where(res_t),
            fix="add --bf16, or remove --fp32-residual-connection",
        )


def _mcore_minor(job: Job) -> tuple[int, int]:
    return tuple(int(p) for p in job.megatron_core_version.split(".")[:2])  # type: ignore[return-value]


# From core_v0.10.0 validate_args turns --sequence-parallel off with TP 1 *before* the --tp-comm-overlap check;
# core_v0.9.0 checks the flag as given (NVIDIA/Megatron-LM megatron/training/arguments.py).
_SP_OFF_BEFORE_OVERLAP = (0, 10)


@rule(
    "MLM-TP-COMM-OVERLAP",
    "error",
    "--tp-comm-overlap needs sequence parallelism",
    frameworks=FLAG_FRAMEWORKS,
)
def tp_comm_overlap(job: Job) -> Iterator[Finding]:
    """
    The tensor-parallel communication/GEMM overlap splits the sequence-parallel all-gathers and
    reduce-scatters; without sequence parallelism there is nothing to overlap. With TP 1 Megatron-LM
    turns `--sequence-parallel` off first (from core_v0.10), so `--tp-comm-overlap` fails there too.

    Why:
    `validate_args` asserts `Tensor parallel communication/GEMM overlap can happen only when sequence
    parallelism is enabled`.

    Fix:
    Add `--sequence-parallel` (with TP > 1), or drop `--tp-comm-overlap`.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    over_t = job.value("--tp-comm-overlap")
    if not need(over_t, "--tp-comm-overlap"):
        return
    for e in engines(job):
        if _mcore_minor(job) >= _SP_OFF_BEFORE_OVERLAP:
            sp_t = e.sequence_parallel
        else:
            sp_t = job.value("--sequence-parallel")
        if not need(sp_t, "--sequence-parallel"):
            tp = need(e.tp, "--tensor-model-parallel-size")
            why = " (TP 1: validate_args turns --sequence-parallel off)" if tp == 1 else ""
            yield finding(
                "MLM-TP-COMM-OVERLAP",
                f'--tp-comm-overlap without sequence parallelism{why} (Megatron-LM: "Tensor parallel '
                'communication/GEMM overlap can happen only when sequence parallelism is enabled")',
                where(over_t),
                fix="remove --tp-comm-overlap" if tp == 1 else "add --sequence-parallel",
            )
            return


# The MLA/GQA assert is in validate_args from core_v0.16.0 (NVIDIA/Megatron-LM megatron/training/arguments.py).
_MLA_GQA_SINCE = (0, 16)


@rule(
    "MLM-MLA-GQA",
    "error",
    "--group-query-attention and --multi-latent-attention exclude each other",
    frameworks=FLAG_FRAMEWORKS,
)
def mla_gqa(job: Job) -> Iterator[Finding]:
    """
    Multi-latent attention compresses the keys and values its own way; grouped-query attention does
    not apply to it.

    Why:
    From core_v0.16 `validate_args` asserts `Group query attention is mutually exclusive with multi
    latent attention.`

    Fix:
    Drop `--group-query-attention` (and `--num-query-groups`) for an MLA model.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.16.0 … core_v0.19.0).
    """
    if _mcore_minor(job) < _MLA_GQA_SINCE:
        return
    mla_t, gqa_t = job.value("--multi-latent-attention"), job.value("--group-query-attention")
    if need(mla_t, "--multi-latent-attention") and need(gqa_t, "--group-query-attention"):
        yield finding(
            "MLM-MLA-GQA",
            '--group-query-attention with --multi-latent-attention (Megatron-LM: "Group query attention is '
            'mutually exclusive with multi latent attention.")',
            where(gqa_t, mla_t),
            fix="remove --group-query-attention",
        )


# --mla-down-proj-fusion, and validate_args' assert on it, from core_v0.17.0 (NVIDIA/Megatron-LM
# megatron/training/arguments.py).
_MLA_DOWN_PROJ_SINCE = (0, 17)


@rule(
    "MLM-MLA-DOWN-PROJ",
    "error",
    "--mla-down-proj-fusion needs --multi-latent-attention",
    frameworks=FLAG_FRAMEWORKS,
)
def mla_down_proj(job: Job) -> Iterator[Finding]:
    """
    `--mla-down-proj-fusion` fuses the down projections of multi-latent attention; a model without
    MLA has none.

    Why:
    From core_v0.17 `validate_args` asserts `--mla-down-proj-fusion requires --multi-latent-attention`.

    Fix:
    Drop `--mla-down-proj-fusion`, or add `--multi-latent-attention` for an MLA model.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.17.0 … core_v0.19.0).
    """
    if _mcore_minor(job) < _MLA_DOWN_PROJ_SINCE:
        return
    fusion_t = job.value("--mla-down-proj-fusion")
    if need(fusion_t, "--mla-down-proj-fusion") and not need(
        job.value("--multi-latent-attention"), "--multi-latent-attention"
    ):
        yield finding(
            "MLM-MLA-DOWN-PROJ",
            '--mla-down-proj-fusion without --multi-latent-attention (Megatron-LM: "--mla-down-proj-fusion '
            'requires --multi-latent-attention")',
            where(fusion_t),
            fix="remove --mla-down-proj-fusion",
        )


# --position-embedding-type mrope, and validate_args' assert on its --mrope-section, from core_v0.12.0
# (NVIDIA/Megatron-LM megatron/training/arguments.py; before, 'mrope' is not among the choices).
_MROPE_SINCE = (0, 12)


@rule(
    "MLM-MROPE-SECTION",
    "error",
    "--position-embedding-type mrope needs --mrope-section",
    frameworks=FLAG_FRAMEWORKS,
)
def mrope_section(job: Job) -> Iterator[Finding]:
    """
    Multimodal RoPE splits each head's rotary channels into sections (time, height, width);
    `--mrope-section` gives their sizes, and has no default.

    Why:
    From core_v0.12 `validate_args` asserts `--mrope-section should be set when using
    --position-embedding-type mrope.`

    Fix:
    Add `--mrope-section` with the model's sections (e.g. `16 24 24` for Qwen2-VL), or another
    `--position-embedding-type`.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.12.0 … core_v0.19.0).
    """
    if _mcore_minor(job) < _MROPE_SINCE:
        return
    type_t = job.value("--position-embedding-type")
    if need(type_t, "--position-embedding-type") != "mrope":
        return
    if need(job.value("--mrope-section"), "--mrope-section") is None:
        yield finding(
            "MLM-MROPE-SECTION",
            '--position-embedding-type mrope without --mrope-section (Megatron-LM: "--mrope-section should be set '
            'when using --position-embedding-type mrope.")',
            where(type_t),
            fix="add --mrope-section T H W (the model's rotary sections)",
        )


@rule(
    "MLM-ENCODER-FLAGS",
    "error",
    "--num-layers / --seq-length exclude their --encoder-* twins",
    frameworks=FLAG_FRAMEWORKS,
)
def encoder_flags(job: Job) -> Iterator[Finding]:
    """
    `--encoder-num-layers` and `--encoder-seq-length` are older spellings of `--num-layers` and
    `--seq-length`; Megatron-LM takes one of each pair.

    Why:
    `validate_args` asserts `cannot have both num-layers and encoder-num-layers specified`, and
    `args.encoder_seq_length is None` when `--seq-length` is given (bare).

    Fix:
    Keep `--num-layers` / `--seq-length` and drop the `--encoder-*` flag.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    pairs = (
        (
            "--num-layers",
            "--encoder-num-layers",
            '(Megatron-LM: "cannot have both num-layers and encoder-num-layers specified")',
        ),
        (
            "--seq-length",
            "--encoder-seq-length",
            "(Megatron-LM's validate_args asserts args.encoder_seq_length is None)",
        ),
    )
    for flag, twin, said in pairs:
        t, twin_t = job.value(flag), job.value(twin)
        if need(t, flag) is not None and need(twin_t, twin) is not None:
            yield finding(
                "MLM-ENCODER-FLAGS",
                f"{flag} {t.value} with {twin} {twin_t.value} {said}",
                where(twin_t, t),
                fix=f"remove {twin}",
            )


# validate_args' --overlap-param-gather assert, by version: what else allows it, and its text
# (NVIDIA/Megatron-LM megatron/training/arguments.py at each core_v tag).
_PARAM_GATHER = (
    (
        (0, 17),
        ("--use-distributed-optimizer", "--use-megatron-fsdp"),
        "dist_muon",
        "distributed optimizer, megatron fsdp, or dist_muon",
    ),
    ((0, 14), ("--use-distributed-optimizer", "--use-megatron-fsdp"), None, "distributed optimizer or megatron fsdp"),
    ((0, 0), ("--use-distributed-optimizer",), None, "distributed optimizer"),
)


@rule(
    "MLM-OVERLAP-PARAM-GATHER",
    "error",
    "--overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce",
    frameworks=("megatron-lm",),
)
def overlap_param_gather(job: Job) -> Iterator[Finding]:
    """
    Overlapping the parameter all-gather with the forward pass gathers what the distributed optimizer
    sharded, and rides on the gradient reduce-scatter overlap.

    Why:
    `validate_args` asserts `--overlap-param-gather only supported with distributed optimizer` (from
    core_v0.14 `… with distributed optimizer or megatron fsdp`, from core_v0.17 `… with distributed
    optimizer, megatron fsdp, or dist_muon`) and `Must use --overlap-param-gather with
    --overlap-grad-reduce`. slime turns the distributed optimizer on itself, so only Megatron-LM
    launches are judged.

    Fix:
    Add `--use-distributed-optimizer` and `--overlap-grad-reduce`, or drop `--overlap-param-gather`.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    over_t = job.value("--overlap-param-gather")
    if not need(over_t, "--overlap-param-gather"):
        return
    since, allowing, optimizer, text = next(row for row in _PARAM_GATHER if _mcore_minor(job) >= row[0])
    allowed = any(need(job.value(f), f) for f in allowing)
    if optimizer is not None:
        allowed = allowed or need(job.value("--optimizer"), "--optimizer") == optimizer
    if not allowed:
        yield finding(
            "MLM-OVERLAP-PARAM-GATHER",
            f'--overlap-param-gather without {allowing[0]} (Megatron-LM: "--overlap-param-gather only supported '
            f'with {text}")',
            where(over_t),
            fix=f"add {allowing[0]}",
        )
    elif not need(job.value("--overlap-grad-reduce"), "--overlap-grad-reduce"):
        yield finding(
            "MLM-OVERLAP-PARAM-GATHER",
            '--overlap-param-gather without --overlap-grad-reduce (Megatron-LM: "Must use --overlap-param-gather '
            'with --overlap-grad-reduce")',
            where(over_t),
            fix="add --overlap-grad-reduce",
        )
