"""verl's SFT trainers (framework ``verl-sft``): the device mesh and the batch split.

``verl.trainer.fsdp_sft_trainer`` (verl ≤ 0.7.0) and ``verl.trainer.sft_trainer`` (verl ≥ 0.6.0, engine workers) both
run one model over the torchrun world. DP is world / Ulysses SP (FSDP) or world / (TP·PP·CP) (Megatron engine);
see frameworks/verl/sft/resolve.py for the sources.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.problems import Kind, Problem
from shardcheck.rules.base import Finding, Message, NotJudged, finding, need, rule, where
from shardcheck.rules.divisors import divisors

FSDP_SFT = "verl.trainer.fsdp_sft_trainer"
TBS = "data.train_batch_size"
MICRO = "data.micro_batch_size_per_gpu"


def _world(job: Job) -> int:
    return need(job.cluster.world, job.world_name)


@rule(
    "VERL-SFT-SP-WORLD",
    "error",
    "The SFT trainer's Ulysses SP must divide the world",
    frameworks=("verl-sft",),
    engine="fsdp",
)
def sp_world(job: Job) -> Iterator[Finding]:
    """
    The SFT trainer lays the torchrun world out as a (dp, sp) device mesh of world / SP by SP ranks.

    Why:
    `init_device_mesh(mesh_shape=(world_size // sp, sp))` fails at start when SP does not divide the world.

    Fix:
    Choose an SP size that divides the world (torchrun --nnodes · --nproc-per-node).

    Source:
    verl/trainer/fsdp_sft_trainer.py run_sft (verl 0.7.0); verl/workers/engine/fsdp/transformer_impl.py
    FSDPEngine device mesh (verl 0.9.1).
    """
    for lay in job.fsdp_layouts:
        sp = need(lay.sp, lay.sp_key)
        world = _world(job)
        if world % sp:
            yield finding(
                "VERL-SFT-SP-WORLD",
                f"Ulysses SP {sp} does not divide the world {world}: the (dp, sp) device mesh cannot be built",
                where(lay.sp),
                fix=f"{lay.sp_key} in {', '.join(map(str, divisors(world)))}",
            )


@rule(
    "VERL-SFT-BATCH-DP",
    "error",
    "The SFT batch must split evenly over the data-parallel ranks",
    frameworks=("verl-sft",),
)
def batch_dp(job: Job) -> Iterator[Finding]:
    """
    Each data-parallel rank loads `train_batch_size / DP` samples a step. `fsdp_sft_trainer` asserts the division
    (an error at start); `sft_trainer` floors it, so the global batch is smaller than asked (a warning), and
    nothing at all when it is below DP (a DataLoader batch size of 0: an error).

    Why:
    fsdp_sft_trainer: `Global batch size ... is not divisible by dp size ...` (assert). sft_trainer: its
    DataLoader gets `train_batch_size // dp_size`.

    Fix:
    Make `data.train_batch_size` a multiple of DP.

    Source:
    verl/trainer/fsdp_sft_trainer.py FSDPSFTTrainer._normalize_config_bsz (verl 0.7.0);
    verl/trainer/sft_trainer.py SFTTrainer._build_dataloader (verl 0.9.1).
    """
    dp_t = job.trainer_dp("actor")
    if dp_t is None:
        return
    dp = need(dp_t, "the trainer's DP")
    if dp is None:  # SP does not divide the world: VERL-SFT-SP-WORLD says so
        raise NotJudged
    batch_t = job.value(TBS)
    batch = need(batch_t, TBS)
    if batch % dp == 0:
        return
    fix = f"{TBS}={max(dp, batch // dp * dp)}"
    if job.entry == FSDP_SFT:
        yield finding(
            "VERL-SFT-BATCH-DP",
            f"Global batch size {batch} is not divisible by dp size {dp} (fsdp_sft_trainer asserts it at start)",
            where(batch_t),
            fix=fix,
        )
    elif batch < dp:
        yield finding(
            "VERL-SFT-BATCH-DP",
            f"train_batch_size {batch} < DP {dp}: each rank's DataLoader gets a batch size of {batch} // {dp} = 0",
            where(batch_t),
            fix=fix,
        )
    else:
        used = batch // dp * dp
        yield finding(
            "VERL-SFT-BATCH-DP",
            f"train_batch_size {batch} is not a multiple of DP {dp}: each rank loads {batch // dp} samples, so a "
            f"step trains on {used}, not {batch}",
            where(batch_t),
            fix=fix,
            severity="warning",
        )


@rule(
    "VERL-SFT-MICRO",
    "error",
    "fsdp_sft_trainer's per-rank batch must split into micro-batches",
    frameworks=("verl-sft",),
)
def micro(job: Job) -> Iterator[Finding]:
    """
    fsdp_sft_trainer splits each rank's `train_batch_size / DP` samples into micro-batches of
    `micro_batch_size_per_gpu` and asserts the division.

    Why:
    `assert self.config.data.train_batch_size % self.config.data.micro_batch_size_per_gpu == 0` after the batch is
    divided by DP.

    Fix:
    Choose a micro-batch size that divides the per-rank batch.

    Source:
    verl/trainer/fsdp_sft_trainer.py FSDPSFTTrainer._normalize_config_bsz (verl 0.7.0).
    """
    if job.entry != FSDP_SFT:
        return
    dp_t = job.trainer_dp("actor")
    if dp_t is None:
        return
    dp, batch = need(dp_t, "the trainer's DP"), need(job.value(TBS), TBS)
    if dp is None:  # SP does not divide the world: VERL-SFT-SP-WORLD says so
        raise NotJudged
    micro_t = job.value(MICRO)
    size = need(micro_t, MICRO)
    if batch % dp or (batch // dp) % size == 0:
        return
    per_rank = batch // dp
    yield finding(
        "VERL-SFT-MICRO",
        f"the per-rank batch {batch} / DP {dp} = {per_rank} is not divisible by {MICRO} {size}",
        where(micro_t),
        fix=f"{MICRO} in {', '.join(map(str, divisors(per_rank)))}",
    )


@rule(
    "VERL-SFT-SP-RMPAD",
    "error",
    "fsdp_sft_trainer's sequence parallelism needs remove-padding",
    frameworks=("verl-sft",),
)
def sp_rmpad(job: Job) -> Iterator[Finding]:
    """
    fsdp_sft_trainer's Ulysses sequence parallelism works on the packed (remove-padding) inputs only.

    Why:
    `assert self.use_remove_padding, "Sequence parallel is only supported when remove_padding is enabled"` when the
    model is built.

    Fix:
    Set `use_remove_padding=true`, or SP 1.

    Source:
    verl/trainer/fsdp_sft_trainer.py FSDPSFTTrainer._build_model_optimizer (verl 0.7.0).
    """
    if job.entry != FSDP_SFT or not job.fsdp_layouts:
        return
    lay = job.fsdp_layouts[0]
    if need(lay.sp, lay.sp_key) <= 1:
        return
    rmpad_t = job.value("use_remove_padding")
    if not need(rmpad_t, "use_remove_padding"):
        yield finding(
            "VERL-SFT-SP-RMPAD",
            f"Sequence parallel is only supported when remove_padding is enabled ({lay.sp_key} = {lay.sp.value})",
            where(rmpad_t, lay.sp),
            fix="use_remove_padding=true",
        )


@rule(
    "VERL-ENTRY-ABSENT",
    "error",
    "A verl entry point the judged verl version does not have",
    notes=(Kind.ENTRY_ABSENT,),
    frameworks=("verl-sft", "verl-gen"),
)
def entry_absent(p: Problem) -> Message:
    """
    The launch runs a verl module (`python -m verl.trainer.fsdp_sft_trainer`, ...) that the verl version judged
    does not ship; the launch is judged with the newest bundled version that has it.

    Why:
    `python -m` fails at once with `No module named ...`.

    Fix:
    Run the entry point that version has (`verl.trainer.sft_trainer` replaced `fsdp_sft_trainer` in 0.7.1), or
    install a version that has it.

    Source:
    the @hydra.main entry points of each verl wheel (tools/build_verl_catalogue.py).
    """
    having = f"; present in verl {p['having']}" if p["having"] else ""
    return f"verl {p['version']} has no {p['module']}{having}", None
