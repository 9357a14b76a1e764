"""The training length and learning-rate schedule checks a Megatron-LM or slime launch makes at start-up.

Megatron-LM (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0, compared tag by tag):
- megatron/training/arguments.py ``validate_args``: iteration- vs sample-based training (the asserts
  after "Iteration-based training"; the batch-size rampup assert is there up to core_v0.16.1, and from
  core_v0.17.0 ``--skip-train`` skips the block), ``args.min_lr <= args.lr`` and the weight-decay
  increment asserts;
- megatron/training/training.py ``get_optimizer_param_scheduler``: ``lr_decay_iters`` defaults to
  ``train_iters`` (``lr_decay_samples`` to ``train_samples``), the steps are those times the global
  batch, the warmup is ``lr_warmup_fraction · lr_decay_steps`` when a fraction is given;
- megatron/core/optimizer_param_scheduler.py ``OptimizerParamScheduler.__init__``: bare asserts
  (``lr_decay_steps > 0``, ``lr_warmup_steps < lr_decay_steps``, ``wsd_decay_steps is not None`` for WSD,
  ``min_lr >= 0``, ``init_lr <= max_lr``, ``start_wd >= 0``, ``end_wd >= start_wd``) and "both override
  and use-checkpoint are set.". The asserts are the same in every tag read.

slime builds its own scheduler (slime/backends/megatron_utils/model.py ``get_optimizer_param_scheduler``,
THUDM/slime v0.2.2 … main 624b824): always iteration-based, ``train_iters = num_rollout ·
rollout_batch_size · n_samples_per_prompt // global_batch_size``, then the same OptimizerParamScheduler.

A Megatron-LM launch that gives neither ``--train-iters`` nor ``--train-samples`` (or only zeros) stops in
``get_optimizer_param_scheduler`` ("either train-iters or train-samples should be provided."), one without
``--lr`` (default None) while the optimizer is built (MLM-TRAIN-LENGTH, MLM-LR-NEEDED). ``setup_model_and_optimizer``
builds no optimizer with ``--skip-train`` from core_v0.16.0 (core_v0.17.0 on: unless ``--perform-rl-step``
without ``--no-load-optim``); before, it builds one anyway.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.origin import Traced
from shardcheck.rules.base import Finding, finding, need, rule, where
from shardcheck.rules.megatron_lm import FLAG_FRAMEWORKS

# From core_v0.17.0 validate_args skips the training-length block with --skip-train, and no longer asserts
# the batch-size rampup for iteration-based training (NVIDIA/Megatron-LM, megatron/training/arguments.py).
SKIP_TRAIN_EXEMPTS = (0, 17)


def _minor(job: Job) -> tuple[int, int]:
    return tuple(int(p) for p in job.megatron_core_version.split(".")[:2])  # type: ignore[return-value]


def _v(job: Job, flag: str):
    return need(job.value(flag), flag)


def _given(job: Job, flag: str) -> bool:
    """Whether ``flag`` holds a value (an unknown one stops the rule: VALUE-UNKNOWN)."""
    return _v(job, flag) is not None


def _skip_train(job: Job) -> bool:
    return bool(_v(job, "--skip-train"))


# NVIDIA/Megatron-LM megatron/training/training.py setup_model_and_optimizer: --skip-train builds no optimizer
# (and so no scheduler) from core_v0.16.0; from core_v0.17.0 an RL step (--perform-rl-step) still builds one
# unless --no-load-optim. Up to core_v0.15 the optimizer and its scheduler are always built.
SKIP_TRAIN_NO_OPTIMIZER = (0, 16)


def _builds_optimizer(job: Job) -> bool:
    """Whether Megatron-LM builds the optimizer and its scheduler at start-up."""
    if not _skip_train(job) or _minor(job) < SKIP_TRAIN_NO_OPTIMIZER:
        return True
    if _minor(job) >= (0, 17) and "--perform-rl-step" in job.values and _v(job, "--perform-rl-step"):
        return not (_given(job, "--no-load-optim") and _v(job, "--no-load-optim"))
    return False


@rule(
    "MLM-TRAIN-MODE",
    "error",
    "Iteration-based and sample-based training flags cannot be mixed",
    frameworks=FLAG_FRAMEWORKS,
)
def train_mode(job: Job) -> Iterator[Finding]:
    """
    `--train-iters` makes the run iteration-based: its LR decay, warmup and batch size are counted in
    iterations; `--train-samples` makes it sample-based. Megatron-LM refuses the other mode's flags, and
    `--lr-warmup-fraction` together with a warmup count.

    Why:
    `validate_args` asserts, for iteration-based training, `expected iteration-based training`
    (`--train-samples` given), `expected iteration-based learning rate decay` (`--lr-decay-samples`),
    `expected iteration-based learning rate warmup` (`--lr-warmup-samples`), `expected no batch-size
    rampup for iteration-based training` (`--rampup-batch-size`, up to core_v0.16) and `can only
    specify one of lr-warmup-fraction and lr-warmup-iters`; for sample-based training `expected
    sample-based training` (`--train-iters 0` given), `expected sample-based learning rate decay`,
    `expected sample-based learnig rate warmup` and `can only specify one of lr-warmup-fraction and
    lr-warmup-samples`. From core_v0.17 `--skip-train` skips
    these checks.

    Fix:
    Keep the flags of one mode; give the warmup either as a fraction or as a count.

    Source:
    megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    if _minor(job) >= SKIP_TRAIN_EXEMPTS and _skip_train(job):
        return
    iters_t, samples_t = job.value("--train-iters"), job.value("--train-samples")
    iters, samples = need(iters_t, "--train-iters"), need(samples_t, "--train-samples")
    fraction = _given(job, "--lr-warmup-fraction")
    checks: list[tuple[bool, str, str]] = []
    if iters:
        checks = [
            (samples is not None, "--train-samples", "expected iteration-based training"),
            (_given(job, "--lr-decay-samples"), "--lr-decay-samples", "expected iteration-based learning rate decay"),
            (
                _v(job, "--lr-warmup-samples") != 0,
                "--lr-warmup-samples",
                "expected iteration-based learning rate warmup",
            ),
        ]
        if _minor(job) < SKIP_TRAIN_EXEMPTS:
            checks.append(
                (
                    _given(job, "--rampup-batch-size"),
                    "--rampup-batch-size",
                    "expected no batch-size rampup for iteration-based training",
                )
            )
        checks.append(
            (
                fraction and _v(job, "--lr-warmup-iters") != 0,
                "--lr-warmup-iters",
                "can only specify one of lr-warmup-fraction and lr-warmup-iters",
            )
        )
        mode = f"--train-iters {iters}"
    elif samples:
        checks = [
            (iters is not None, "--train-iters", "expected sample-based training"),  # --train-iters 0 given
            (_given(job, "--lr-decay-iters"), "--lr-decay-iters", "expected sample-based learning rate decay"),
            (_v(job, "--lr-warmup-iters") != 0, "--lr-warmup-iters", "expected sample-based learnig rate warmup"),
            (
                fraction and _v(job, "--lr-warmup-samples") != 0,
                "--lr-warmup-samples",
                "can only specify one of lr-warmup-fraction and lr-warmup-samples",
            ),
        ]
        mode = f"--train-samples {samples}"
    for failed, flag, text in checks:
        if failed:  # the first failing assert stops validate_args
            yield finding(
                "MLM-TRAIN-MODE",
                f'{mode} with {flag} (Megatron-LM: "{text}")',
                where(job.value(flag)),
                fix=f"remove {flag}",
            )
            return


_SLIME_ITERS = ("--num-rollout", "--rollout-batch-size", "--n-samples-per-prompt", "--global-batch-size")


def _slime_train_iters(job: Job) -> tuple[int | None, list[Traced]]:
    """slime's ``train_iters`` (None: not derivable from the flags: ``--num-epoch`` counts the dataset, or
    ``--num-steps-per-rollout`` derives the global batch)."""
    names = _SLIME_ITERS
    if _given(job, "--num-steps-per-rollout") or not _given(job, "--num-rollout"):
        return None, []  # --num-epoch: the dataset's size decides the rollouts
    traced = [job.value(n) for n in names]
    values = [need(t, n) for t, n in zip(traced, names, strict=True)]
    if any(v is None for v in values) or values[3] <= 0:
        return None, traced
    rollouts, rbs, n, gbs = values
    return rollouts * rbs * n // gbs, traced


@rule(
    "MLM-LR-STEPS",
    "error",
    "The LR decay must last at least one step and longer than the warmup",
    frameworks=FLAG_FRAMEWORKS,
)
def lr_steps(job: Job) -> Iterator[Finding]:
    """
    The learning rate warms up over the warmup steps and decays over the decay steps:
    `--lr-decay-iters` (default `--train-iters`; slime: the iterations its rollouts give) or
    `--lr-decay-samples` (default `--train-samples`). The decay needs at least one step, and the warmup
    must end before it; `--lr-decay-style WSD` needs the length of its final decay.

    Why:
    Megatron-LM's `OptimizerParamScheduler.__init__` asserts `lr_decay_steps > 0`, `lr_warmup_steps <
    lr_decay_steps` and, for WSD, `wsd_decay_steps is not None` (bare AssertionErrors) when the
    optimizer is built.

    Fix:
    A positive decay length longer than the warmup (a warmup fraction below 1); with WSD,
    `--lr-wsd-decay-iters` (`--lr-wsd-decay-samples`).

    Source:
    megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler.__init__ and
    megatron/training/training.py get_optimizer_param_scheduler (NVIDIA/Megatron-LM core_v0.9.0 …
    core_v0.19.0); slime/backends/megatron_utils/model.py get_optimizer_param_scheduler (THUDM/slime
    v0.2.2 … main 624b824).
    """
    if not _builds_optimizer(job):
        return  # no optimizer is built
    iters_t, samples_t = job.value("--train-iters"), job.value("--train-samples")
    base: list[Traced] = []
    if "--num-rollout" in job.values:  # slime's flags (frameworks/slime/flags.py): slime's own scheduler
        total, base = _slime_train_iters(job)
        unit, decay_flag, warmup_flag, wsd_flag = "iterations", "--lr-decay-iters", "--lr-warmup-iters", "iters"
        source = "slime's train_iters = " + (
            " × ".join(f"{f} {t.value}" for f, t in zip(_SLIME_ITERS[:3], base, strict=False))
            + (f" // {_SLIME_ITERS[3]} {base[3].value}" if len(base) == 4 else "")
        )
    elif need(iters_t, "--train-iters"):
        total, base = iters_t.value, [iters_t]
        unit, decay_flag, warmup_flag, wsd_flag = "iterations", "--lr-decay-iters", "--lr-warmup-iters", "iters"
        source = "--train-iters"
    elif need(samples_t, "--train-samples"):
        total, base = samples_t.value, [samples_t]
        unit, decay_flag, warmup_flag, wsd_flag = "samples", "--lr-decay-samples", "--lr-warmup-samples", "samples"
        source = "--train-samples"
    else:
        return  # neither: get_optimizer_param_scheduler raises (MLM-TRAIN-LENGTH)
    decay_t = job.value(decay_flag)
    decay = need(decay_t, decay_flag)
    if decay is None:
        if total is None:
            return
        decay_t, what = (base[0] if base else decay_t), f"{source} = {total}, no {decay_flag}"
        decay = total
    else:
        what = f"{decay_flag} {decay}"
    if decay <= 0:
        yield finding(
            "MLM-LR-STEPS",
            f"{what}: the LR decays over {decay} {unit} (Megatron-LM's OptimizerParamScheduler asserts "
            "lr_decay_steps > 0)",
            where(decay_t, *base),
            fix=f"{decay_flag} N with N > 0",
        )
        return
    fraction_t = job.value("--lr-warmup-fraction")
    fraction = need(fraction_t, "--lr-warmup-fraction")
    if fraction is not None:
        late = fraction >= 1
        warm_t, warm_text, fix = fraction_t, f"--lr-warmup-fraction {fraction}", "--lr-warmup-fraction below 1"
    else:
        warm_t = job.value(warmup_flag)
        warmup = need(warm_t, warmup_flag)
        late = warmup >= decay
        warm_text, fix = f"{warmup_flag} {warmup}", f"{warmup_flag} below {decay}"
    if late:
        yield finding(
            "MLM-LR-STEPS",
            f"{warm_text} with a decay of {decay} {unit} ({what}): the warmup does not end before the decay "
            "(Megatron-LM's "
            "OptimizerParamScheduler asserts lr_warmup_steps < lr_decay_steps)",
            where(warm_t, decay_t, *base),
            fix=fix,
        )
        return
    style_t = job.value("--lr-decay-style")
    if need(style_t, "--lr-decay-style") == "WSD" and not _given(job, f"--lr-wsd-decay-{wsd_flag}"):
        yield finding(
            "MLM-LR-STEPS",
            f"--lr-decay-style WSD without --lr-wsd-decay-{wsd_flag} (Megatron-LM's OptimizerParamScheduler "
            "asserts wsd_decay_steps is not None)",
            where(style_t),
            fix=f"add --lr-wsd-decay-{wsd_flag} N",
        )


@rule(
    "MLM-LR-RANGE",
    "error",
    "The learning rates must be ordered: 0 ≤ --min-lr ≤ --lr and --lr-warmup-init ≤ --lr",
    frameworks=FLAG_FRAMEWORKS,
)
def lr_range(job: Job) -> Iterator[Finding]:
    """
    The schedule moves the learning rate between `--lr-warmup-init`, `--lr` (its peak) and `--min-lr`
    (its floor).

    Why:
    `validate_args` asserts `args.min_lr <= args.lr`, and `OptimizerParamScheduler.__init__` asserts
    `min_lr >= 0.0`, `max_lr >= min_lr` and `init_lr <= max_lr` (bare AssertionErrors).

    Fix:
    Order the rates: `0 ≤ --min-lr ≤ --lr`, `--lr-warmup-init ≤ --lr`.

    Source:
    megatron/training/arguments.py validate_args, megatron/core/optimizer_param_scheduler.py
    OptimizerParamScheduler.__init__ (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0); slime's `--lr`
    default 1e-6 (slime/utils/arguments.py).
    """
    lr_t, min_t, init_t = job.value("--lr"), job.value("--min-lr"), job.value("--lr-warmup-init")
    lr, low, init = need(lr_t, "--lr"), need(min_t, "--min-lr"), need(init_t, "--lr-warmup-init")
    if lr is None:
        return  # no --lr: MLM-LR-NEEDED
    if low > lr:
        yield finding(
            "MLM-LR-RANGE",
            f"--min-lr {low} above --lr {lr} (Megatron-LM's validate_args asserts args.min_lr <= args.lr)",
            where(min_t, lr_t),
            fix=f"--min-lr {lr / 10:g}",
        )
    elif not _builds_optimizer(job):
        return
    elif low < 0:
        yield finding(
            "MLM-LR-RANGE",
            f"--min-lr {low} is negative (Megatron-LM's OptimizerParamScheduler asserts min_lr >= 0.0)",
            where(min_t),
            fix="--min-lr 0",
        )
    elif init > lr:
        yield finding(
            "MLM-LR-RANGE",
            f"--lr-warmup-init {init} above --lr {lr} (Megatron-LM's OptimizerParamScheduler asserts "
            "init_lr <= max_lr)",
            where(init_t, lr_t),
            fix=f"--lr-warmup-init {low:g}",
        )


@rule(
    "MLM-WD-INCR",
    "error",
    "--start/--end-weight-decay go with a non-constant --weight-decay-incr-style, and only with it",
    frameworks=FLAG_FRAMEWORKS,
)
def wd_incr(job: Job) -> Iterator[Finding]:
    """
    With `--weight-decay-incr-style constant` (the default) the weight decay is `--weight-decay`;
    `linear` and `cosine` move it from `--start-weight-decay` to `--end-weight-decay`, which must then
    be given, non-negative and not decreasing.

    Why:
    `validate_args` asserts `args.start_weight_decay is None` and `args.end_weight_decay is None` for
    the constant style, `is not None` for the others; `OptimizerParamScheduler.__init__` asserts
    `start_wd >= 0.0` and `end_wd >= start_wd` (bare AssertionErrors).

    Fix:
    Give both with `linear` / `cosine`, neither with `constant`; a non-negative, non-decreasing pair.

    Source:
    megatron/training/arguments.py validate_args, megatron/core/optimizer_param_scheduler.py
    OptimizerParamScheduler.__init__ (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    style_t = job.value("--weight-decay-incr-style")
    style = need(style_t, "--weight-decay-incr-style")
    start_t, end_t = job.value("--start-weight-decay"), job.value("--end-weight-decay")
    start, end = need(start_t, "--start-weight-decay"), need(end_t, "--end-weight-decay")
    if style == "constant":
        given = [
            (f, t) for f, t in (("--start-weight-decay", start_t), ("--end-weight-decay", end_t)) if t.value is not None
        ]
        if given:
            flag, t = given[0]
            yield finding(
                "MLM-WD-INCR",
                f"{flag} {t.value} with --weight-decay-incr-style constant (Megatron-LM's validate_args asserts "
                f"args.{flag[2:].replace('-', '_')} is None)",
                where(t, style_t),
                fix=f"remove {flag}, or --weight-decay-incr-style linear",
            )
            return
        wd_t = job.value("--weight-decay")
        start = end = need(wd_t, "--weight-decay")
        start_t = end_t = wd_t
    else:
        missing = [f for f, v in (("--start-weight-decay", start), ("--end-weight-decay", end)) if v is None]
        if missing:
            yield finding(
                "MLM-WD-INCR",
                f"--weight-decay-incr-style {style} without {missing[0]} (Megatron-LM's validate_args asserts "
                f"args.{missing[0][2:].replace('-', '_')} is not None)",
                where(style_t),
                fix=f"add {' and '.join(f'{m} W' for m in missing)}",
            )
            return
    if not _builds_optimizer(job) or start is None:
        return
    if start < 0:
        yield finding(
            "MLM-WD-INCR",
            f"weight decay {start} is negative (Megatron-LM's OptimizerParamScheduler asserts start_wd >= 0.0)",
            where(start_t),
            fix="a weight decay ≥ 0",
        )
    elif end < start:
        yield finding(
            "MLM-WD-INCR",
            f"--end-weight-decay {end} below --start-weight-decay {start} (Megatron-LM's OptimizerParamScheduler "
            "asserts end_wd >= start_wd)",
            where(end_t, start_t),
            fix=f"--end-weight-decay {start:g} or more",
        )


@rule(
    "MLM-SCHED-OVERRIDE",
    "error",
    "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other",
    frameworks=FLAG_FRAMEWORKS,
)
def sched_override(job: Job) -> Iterator[Finding]:
    """
    `--override-opt_param-scheduler` takes the schedule from the flags, `--use-checkpoint-opt_param-scheduler`
    from the checkpoint loaded; one of them at most.

    Why:
    `OptimizerParamScheduler.__init__` asserts `both override and use-checkpoint are set.`

    Fix:
    Keep one of the two flags.

    Source:
    megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler.__init__ (NVIDIA/Megatron-LM
    core_v0.9.0 … core_v0.19.0).
    """
    if not _builds_optimizer(job):
        return
    over_t = job.value("--override-opt_param-scheduler")
    use_t = job.value("--use-checkpoint-opt_param-scheduler")
    if need(over_t, "--override-opt_param-scheduler") and need(use_t, "--use-checkpoint-opt_param-scheduler"):
        yield finding(
            "MLM-SCHED-OVERRIDE",
            "--override-opt_param-scheduler with --use-checkpoint-opt_param-scheduler (Megatron-LM: "
            '"both override and use-checkpoint are set.")',
            where(use_t, over_t),
            fix="remove one of the two",
        )


@rule(
    "MLM-TRAIN-LENGTH",
    "error",
    "A Megatron-LM run needs its length: --train-iters or --train-samples",
    frameworks=("megatron-lm",),
)
def train_length(job: Job) -> Iterator[Finding]:
    """
    The learning-rate schedule is laid over the run's length: `--train-iters` (iteration-based) or
    `--train-samples` (sample-based). Neither has a default, and a zero counts as not given.

    Why:
    Megatron-LM's `get_optimizer_param_scheduler` raises `Exception('either train-iters or train-samples
    should be provided.')` when neither `args.train_iters` nor `args.train_samples` is set (non-zero), while
    the model and optimizer are set up, before the first step. With `--skip-train` no optimizer is built
    from core_v0.16 (core_v0.17 on: unless `--perform-rl-step` without `--no-load-optim`). slime computes
    its own length from its rollouts (not judged here).

    Fix:
    Add `--train-iters N` (or `--train-samples N` for a sample-based run).

    Source:
    megatron/training/training.py get_optimizer_param_scheduler and setup_model_and_optimizer
    (NVIDIA/Megatron-LM core_v0.9.0 … core_v0.19.0).
    """
    if not _builds_optimizer(job):
        return
    iters_t, samples_t = job.value("--train-iters"), job.value("--train-samples")
    iters, samples = need(iters_t, "--train-iters"), need(samples_t, "--train-samples")
    if iters or samples:
        return
    given = [f"{f} {t.value}" for f, t in (("--train-iters", iters_t), ("--train-samples", samples_t)) if t.value == 0]
    said = " and ".join(given) if given else "neither --train-iters nor --train-samples"
    yield finding(
        "MLM-TRAIN-LENGTH",
        f"{said} (Megatron-LM's get_optimizer_param_scheduler: \"either train-iters or train-samples should be "
        'provided.")',
        where(iters_t, samples_t, job.cluster.nnodes),
        fix="add --train-iters N",
    )


@rule(
    "MLM-LR-NEEDED",
    "error",
    "A Megatron-LM run needs its peak learning rate: --lr",
    frameworks=("megatron-lm",),
)
def lr_needed(job: Job) -> Iterator[Finding]:
    """
    `--lr` is the peak of the learning-rate schedule; Megatron-LM gives it no default (None).

    Why:
    The optimizer is built with `lr=None`: torch's Adam (Megatron-LM's fallback without Transformer Engine
    or apex) refuses it in its constructor (`TypeError: '<=' not supported between instances of 'float'
    and 'NoneType'`); with their FusedAdam, `OptimizerParamScheduler.__init__` stops at `float(max_lr)`
    (`TypeError: float() argument must be a string or a real number, not 'NoneType'`). Either way the run
    stops before its first step. With `--skip-train` no optimizer is built from core_v0.16 (as for
    MLM-TRAIN-LENGTH). slime's `--lr` defaults to 1e-6 (not judged here).

    Fix:
    Add `--lr` with the peak learning rate (e.g. `--lr 3e-4`).

    Source:
    megatron/training/arguments.py (`--lr`, default None), megatron/training/training.py
    get_optimizer_param_scheduler (`max_lr=args.lr`), megatron/core/optimizer/__init__.py (the Adam class),
    megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler.__init__ (NVIDIA/Megatron-LM
    core_v0.9.0 … core_v0.19.0).
    """
    if not _builds_optimizer(job):
        return
    lr_t = job.value("--lr")
    if need(lr_t, "--lr") is None:
        yield finding(
            "MLM-LR-NEEDED",
            "no --lr: Megatron-LM builds the optimizer with lr None and stops with a TypeError "
            "(OptimizerParamScheduler: float(max_lr))",
            where(lr_t, job.cluster.nnodes),
            fix="add --lr 3e-4 (the peak learning rate)",
        )
