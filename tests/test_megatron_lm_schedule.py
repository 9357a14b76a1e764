"""The training-length and LR-schedule rules (rules/megatron_lm_schedule.py) and the validate_args checks added
with them (MLM-FLAG-REMOVED, MLM-SEQ-POSITIONS, MLM-PRECISION in rules/megatron_lm.py): each fires on a bad launch
and is silent on a good one, per Megatron-LM version where the checks differ, for Megatron-LM and slime launches;
differential tests against megatron-core's own OptimizerParamScheduler and TransformerConfig (the installed wheel),
and against Megatron-LM's own parse_args + validate_args and then get_optimizer_param_scheduler (MEGATRON_LM_GIT).
"""

from __future__ import annotations

import io
import json
import os
import random
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import shardcheck
from shardcheck.rules.examples import MEGATRON_LM_SCHEDULE as EXAMPLE_SCHEDULE
from shardcheck.rules.examples import SMALL_MOE, megatron_lm_launch, slime_launch

SMALL_MOE_MHA = SMALL_MOE.replace("--group-query-attention --num-query-groups 4 ", "")

SCHEDULE_RULES = (
    "MLM-TRAIN-MODE",
    "MLM-LR-STEPS",
    "MLM-LR-RANGE",
    "MLM-WD-INCR",
    "MLM-SCHED-OVERRIDE",
    "MLM-FLAG-REMOVED",
    "MLM-SEQ-POSITIONS",
    "MLM-PRECISION",
    "MLM-TP-COMM-OVERLAP",
    "MLM-MLA-GQA",
    "MLM-ENCODER-FLAGS",
    "MLM-OVERLAP-PARAM-GATHER",
    "MLM-TRAIN-LENGTH",
    "MLM-LR-NEEDED",
    "MLM-MROPE-SECTION",
    "MLM-MLA-DOWN-PROJ",
)


def _findings(tmp_path, text: str, **kw) -> list:
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = shardcheck.check(str(path), **kw)
    unknown = [f for f in result.findings if f.rule == "VALUE-UNKNOWN" and f.data.get("rule") in SCHEDULE_RULES]
    assert not unknown, [f.message for f in unknown]
    return [f for f in result.findings if f.rule in SCHEDULE_RULES]


FIRING = [
    ("megatron-lm", "--train-iters 10 --train-samples 5", "MLM-TRAIN-MODE", '"expected iteration-based training"'),
    ("megatron-lm", "--train-iters 10 --lr-decay-samples 5", "MLM-TRAIN-MODE", "iteration-based learning rate decay"),
    (
        "megatron-lm",
        "--train-iters 10 --lr-warmup-fraction 0.1 --lr-warmup-iters 2",
        "MLM-TRAIN-MODE",
        "can only specify one of lr-warmup-fraction and lr-warmup-iters",
    ),
    # --train-iters 0 is falsy: the run is sample-based, and validate_args wants train_iters None
    ("megatron-lm", "--train-iters 0 --train-samples 100", "MLM-TRAIN-MODE", '"expected sample-based training"'),
    ("megatron-lm", "--train-samples 100 --lr-decay-iters 5", "MLM-TRAIN-MODE", "sample-based learning rate decay"),
    ("megatron-lm", "--train-samples 100 --lr-warmup-iters 5", "MLM-TRAIN-MODE", "sample-based learnig rate warmup"),
    (
        "megatron-lm",
        "--train-samples 100 --lr-warmup-fraction 0.1 --lr-warmup-samples 2",
        "MLM-TRAIN-MODE",
        "lr-warmup-fraction and lr-warmup-samples",
    ),
    ("megatron-lm", "--train-iters 10 --lr-decay-iters 0", "MLM-LR-STEPS", "asserts lr_decay_steps > 0"),
    ("megatron-lm", "--train-iters 10 --lr-warmup-iters 10", "MLM-LR-STEPS", "lr_warmup_steps < lr_decay_steps"),
    ("megatron-lm", "--train-iters 10 --lr-warmup-fraction 1.5", "MLM-LR-STEPS", "lr_warmup_steps < lr_decay_steps"),
    ("megatron-lm", "--train-samples 10 --lr-warmup-samples 20", "MLM-LR-STEPS", "a decay of 10 samples"),
    ("megatron-lm", "--train-iters 10 --lr-decay-style WSD", "MLM-LR-STEPS", "without --lr-wsd-decay-iters"),
    ("megatron-lm", "--train-samples 10 --lr-decay-style WSD", "MLM-LR-STEPS", "without --lr-wsd-decay-samples"),
    ("megatron-lm", "--lr 1e-4 --min-lr -1e-5", "MLM-LR-RANGE", "asserts min_lr >= 0.0"),
    ("megatron-lm", "--lr 1e-4 --lr-warmup-init 1e-3", "MLM-LR-RANGE", "asserts init_lr <= max_lr"),
    ("megatron-lm", "--end-weight-decay 0.1", "MLM-WD-INCR", "args.end_weight_decay is None"),
    ("megatron-lm", "--weight-decay -0.1", "MLM-WD-INCR", "asserts start_wd >= 0.0"),
    (
        "megatron-lm",
        "--weight-decay-incr-style cosine --start-weight-decay 0.1 --end-weight-decay 0.0",
        "MLM-WD-INCR",
        "asserts end_wd >= start_wd",
    ),
    # slime: train_iters = 2 rollouts × 32 × 8 // 256 = 2 iterations
    ("slime", "--num-rollout 2 --lr-warmup-iters 2", "MLM-LR-STEPS", "--global-batch-size 256 = 2, no"),
    ("slime", "--num-rollout 100 --lr-decay-iters 0", "MLM-LR-STEPS", "asserts lr_decay_steps > 0"),
    ("slime", "--min-lr 1e-5", "MLM-LR-RANGE", "--min-lr 1e-05 above --lr 1e-06"),  # slime's --lr default 1e-6
    ("slime", "--train-iters 10 --train-samples 5", "MLM-TRAIN-MODE", "expected iteration-based training"),
    ("megatron-lm", "--batch-size 8", "MLM-FLAG-REMOVED", "use --micro-batch-size instead"),
    ("megatron-lm", "--warmup 10", "MLM-FLAG-REMOVED", "use --lr-warmup-fraction instead"),
    ("slime", "--model-parallel-size 2", "MLM-FLAG-REMOVED", "use --tensor-model-parallel-size instead"),
    ("megatron-lm", "--seq-length 65536", "MLM-SEQ-POSITIONS", '"max_position_embeddings (40960) must be greater'),
    ("megatron-lm", "--decoder-seq-length 50000", "MLM-SEQ-POSITIONS", ">= args.decoder_seq_length"),
    ("slime", "--seq-length 65536", "MLM-SEQ-POSITIONS", "must be greater than or equal to seq_length (65536)"),
    ("megatron-lm", "--fp16 --bf16", "MLM-PRECISION", "asserts not args.bf16 when args.fp16"),
    ("megatron-lm", "--bf16 --fp16-lm-cross-entropy", "MLM-PRECISION", "lm cross entropy in fp16 only support"),
    ("megatron-lm", "--fp32-residual-connection", "MLM-PRECISION", "residual connection in fp32 only supported"),
    ("megatron-lm", "--tp-comm-overlap --sequence-parallel", "MLM-TP-COMM-OVERLAP", "(TP 1: validate_args turns"),
    ("slime", "--tensor-model-parallel-size 2 --tp-comm-overlap", "MLM-TP-COMM-OVERLAP", "GEMM overlap can happen"),
    ("megatron-lm", "--multi-latent-attention", "MLM-MLA-GQA", "mutually exclusive with multi latent attention"),
    ("megatron-lm", "--encoder-seq-length 4096", "MLM-ENCODER-FLAGS", "asserts args.encoder_seq_length is None"),
    ("slime", "--position-embedding-type mrope", "MLM-MROPE-SECTION", '"--mrope-section should be set when using'),
    (
        "megatron-lm",
        "--overlap-param-gather --overlap-grad-reduce",
        "MLM-OVERLAP-PARAM-GATHER",
        "distributed optimizer",
    ),
    (
        "megatron-lm",
        "--use-megatron-fsdp --overlap-param-gather",
        "MLM-OVERLAP-PARAM-GATHER",
        "Must use --overlap-param-gather with --overlap-grad-reduce",
    ),
]

SILENT = [
    ("megatron-lm", "--train-iters 10 --lr-warmup-fraction 0.1 --lr 1e-4 --min-lr 1e-5"),
    ("megatron-lm", "--train-iters 10 --lr-decay-iters 8 --lr-warmup-iters 7 --lr-decay-style cosine"),
    ("megatron-lm", "--train-samples 1000 --lr-warmup-samples 10 --lr-decay-style WSD --lr-wsd-decay-samples 100"),
    ("megatron-lm", "--train-iters 10 --lr-decay-style WSD --lr-wsd-decay-iters 2"),
    ("megatron-lm", "--weight-decay-incr-style linear --start-weight-decay 0.0 --end-weight-decay 0.1"),
    ("megatron-lm", "--use-checkpoint-opt_param-scheduler"),
    ("megatron-lm", ""),  # the example launch's own --train-iters 1000 --lr 3e-4
    ("megatron-lm", "--train-samples 1000"),  # sample-based: no --train-iters wanted
    ("slime", "--num-rollout 100 --lr-warmup-iters 10"),
    ("slime", "--num-epoch 1 --lr-warmup-iters 10"),  # the dataset decides num_rollout: unknown, not a guess
    ("slime", "--num-epoch 1 --rollout-batch-size $RBS"),  # nothing to judge: no VALUE-UNKNOWN for the batch
    ("slime", "--num-rollout 2 --num-steps-per-rollout 4 --lr-warmup-iters 2"),
    ("megatron-lm", "--micro-batch-size 2 --tensor-model-parallel-size 2"),
    ("megatron-lm", "--seq-length 40960 --decoder-seq-length 40960"),
    ("megatron-lm", "--fp16 --fp16-lm-cross-entropy --fp32-residual-connection"),
    ("slime", "--bf16 --fp32-residual-connection"),
    ("megatron-lm", "--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap"),
    ("megatron-lm", "--num-layers 48 --seq-length 4096"),
    ("megatron-lm", "--use-megatron-fsdp --overlap-grad-reduce --overlap-param-gather"),
    ("slime", "--overlap-param-gather"),  # slime turns the distributed optimizer on itself: not judged
    ("megatron-lm", "--position-embedding-type mrope --mrope-section 16 24 24"),
    ("megatron-lm", "--position-embedding-type rope"),
]


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "run.sh"
    path.write_text(text)
    return str(path)


def _launch(framework: str, flags: str) -> str:
    return megatron_lm_launch(flags) if framework == "megatron-lm" else slime_launch(flags)


@pytest.mark.parametrize(("framework", "flags", "rule_id", "text"), FIRING)
def test_fires(tmp_path, framework, flags, rule_id, text):
    found = _findings(tmp_path, _launch(framework, flags))
    assert [f.rule for f in found] == [rule_id], [f.message for f in found]
    assert text in found[0].message
    assert found[0].origin is not None and found[0].line == 1


@pytest.mark.parametrize(("framework", "flags"), SILENT)
def test_silent(tmp_path, framework, flags):
    assert _findings(tmp_path, _launch(framework, flags)) == []


def test_train_length_and_lr_needed(tmp_path):
    """Megatron-LM stops without a length (get_optimizer_param_scheduler) or an --lr (the optimizer's lr None);
    a zero length counts as none; slime sets both itself."""
    (length,) = _findings(tmp_path, megatron_lm_launch("--lr 1e-4", schedule=""))
    assert length.rule == "MLM-TRAIN-LENGTH" and length.line == 1
    assert length.message.startswith("neither --train-iters nor --train-samples")
    assert '"either train-iters or train-samples should be provided."' in length.message
    (zero,) = _findings(tmp_path, megatron_lm_launch("--train-iters 0 --lr 1e-4", schedule=""))
    assert zero.rule == "MLM-TRAIN-LENGTH" and zero.message.startswith("--train-iters 0 (")
    (lr,) = _findings(tmp_path, megatron_lm_launch("--train-iters 10", schedule=""))
    assert lr.rule == "MLM-LR-NEEDED" and lr.line == 1 and "float(max_lr)" in lr.message
    both = _findings(tmp_path, megatron_lm_launch("", schedule=""))
    assert sorted(f.rule for f in both) == ["MLM-LR-NEEDED", "MLM-TRAIN-LENGTH"]
    assert _findings(tmp_path, slime_launch("--num-rollout 100")) == []  # slime: its own length, --lr 1e-6


def test_skip_train_builds_no_optimizer_from_0_16(tmp_path):
    """setup_model_and_optimizer skips the optimizer and its scheduler with --skip-train from core_v0.16.0; from
    core_v0.17.0 an RL step builds it unless --no-load-optim."""
    text = megatron_lm_launch("--skip-train", schedule="")
    assert sorted(f.rule for f in _findings(tmp_path, text, megatron_core_version="0.15")) == [
        "MLM-LR-NEEDED",
        "MLM-TRAIN-LENGTH",
    ]
    assert _findings(tmp_path, text, megatron_core_version="0.16") == []
    rl = megatron_lm_launch("--skip-train --perform-rl-step", schedule="")
    assert len(_findings(tmp_path, rl, megatron_core_version="0.18")) == 2
    rl_no_optim = megatron_lm_launch("--skip-train --perform-rl-step --no-load-optim", schedule="")
    assert _findings(tmp_path, rl_no_optim, megatron_core_version="0.18") == []
    # the scheduler's own asserts likewise: reached with --skip-train up to core_v0.15
    text = megatron_lm_launch("--train-iters 10 --lr-decay-iters 0 --skip-train")
    assert [f.rule for f in _findings(tmp_path, text, megatron_core_version="0.15")] == ["MLM-LR-STEPS"]


def test_rampup_assert_only_up_to_0_16(tmp_path):
    text = megatron_lm_launch("--train-iters 10 --rampup-batch-size 16 16 1000")
    (old,) = _findings(tmp_path, text, megatron_core_version="0.16")
    assert "expected no batch-size rampup for iteration-based training" in old.message
    assert _findings(tmp_path, text, megatron_core_version="0.17") == []


def test_seq_positions_text_by_version(tmp_path):
    text = megatron_lm_launch("--seq-length 65536")
    (old,) = _findings(tmp_path, text, megatron_core_version="0.10")
    assert "asserts args.max_position_embeddings >= args.seq_length" in old.message  # bare before core_v0.11
    (new,) = _findings(tmp_path, text, megatron_core_version="0.11")
    assert '"max_position_embeddings (40960) must be greater than or equal to seq_length (65536)."' in new.message


def test_precision_equals_transformer_config(tmp_path):
    """megatron-core's TransformerConfig refuses fp16 with bf16 as validate_args does (the same condition)."""
    module = pytest.importorskip("megatron.core.transformer.transformer_config")
    for fp16 in (False, True):
        for bf16 in (False, True):
            words = " ".join(w for w, on in (("--fp16", fp16), ("--bf16", bf16)) if on)
            found = _findings(tmp_path, megatron_lm_launch(words))
            try:
                module.TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, fp16=fp16, bf16=bf16)
                refused = False
            except ValueError as e:
                refused = "Only one of self.fp16" in str(e)
            assert bool(found) == refused, (words, found)


def test_version_dependent_validate_args_checks(tmp_path):
    # core_v0.9.0 checks --tp-comm-overlap before turning --sequence-parallel off with TP 1; later ones after it
    text = megatron_lm_launch("--tp-comm-overlap --sequence-parallel")
    assert _findings(tmp_path, text, megatron_core_version="0.9") == []
    assert [f.rule for f in _findings(tmp_path, text, megatron_core_version="0.10")] == ["MLM-TP-COMM-OVERLAP"]
    # --position-embedding-type mrope (and its --mrope-section assert) from core_v0.12.0
    text = megatron_lm_launch("--position-embedding-type mrope")
    assert [f.rule for f in _findings(tmp_path, text, megatron_core_version="0.12")] == ["MLM-MROPE-SECTION"]
    assert "MLM-MROPE-SECTION" not in {
        f.rule for f in shardcheck.check(_write(tmp_path, text), megatron_core_version="0.11").findings
    }
    # --mla-down-proj-fusion (and its assert) from core_v0.17.0
    text = megatron_lm_launch("--mla-down-proj-fusion")
    (fused,) = _findings(tmp_path, text, megatron_core_version="0.17")
    assert fused.rule == "MLM-MLA-DOWN-PROJ" and fused.message.endswith('requires --multi-latent-attention")')
    fine = megatron_lm_launch("--mla-down-proj-fusion --multi-latent-attention", model=SMALL_MOE_MHA)
    assert _findings(tmp_path, fine, megatron_core_version="0.19") == []
    # the MLA / GQA assert is there from core_v0.16.0
    text = megatron_lm_launch("--multi-latent-attention")
    assert _findings(tmp_path, text, megatron_core_version="0.15") == []
    assert [f.rule for f in _findings(tmp_path, text, megatron_core_version="0.16")] == ["MLM-MLA-GQA"]
    # --overlap-param-gather: Megatron-FSDP allows it from core_v0.14, dist_muon from core_v0.17; each its own text
    text = megatron_lm_launch("--overlap-param-gather --overlap-grad-reduce --optimizer dist_muon --use-megatron-fsdp")
    assert _findings(tmp_path, text, megatron_core_version="0.19") == []
    (old,) = _findings(tmp_path, megatron_lm_launch("--overlap-param-gather"), megatron_core_version="0.13")
    assert old.message.endswith('"--overlap-param-gather only supported with distributed optimizer")')
    (new,) = _findings(tmp_path, megatron_lm_launch("--overlap-param-gather"), megatron_core_version="0.17")
    assert new.message.endswith('supported with distributed optimizer, megatron fsdp, or dist_muon")')


def test_skip_train_exempts_from_0_17(tmp_path):
    text = megatron_lm_launch("--train-iters 10 --train-samples 5 --skip-train")
    assert [f.rule for f in _findings(tmp_path, text, megatron_core_version="0.16")] == ["MLM-TRAIN-MODE"]
    assert _findings(tmp_path, text, megatron_core_version="0.19") == []
    # no optimizer is built with --skip-train: the scheduler's asserts are not reached
    assert _findings(tmp_path, megatron_lm_launch("--train-iters 10 --lr-decay-iters 0 --skip-train")) == []


# -- differential: megatron-core's OptimizerParamScheduler ------------------------------------------------------


def _random_schedule(rng: random.Random) -> dict:
    """Flags of an iteration- or sample-based run that validate_args accepts (so that only the scheduler's
    asserts can fail)."""
    iters = rng.random() < 0.6
    n = rng.choice([1, 5, 10, 100])
    out: dict = {"--train-iters" if iters else "--train-samples": n}
    unit = "iters" if iters else "samples"
    if rng.random() < 0.5:
        out[f"--lr-decay-{unit}"] = rng.choice([0, 1, n, n, 2 * n, 2 * n])
    if rng.random() < 0.3:
        out["--lr-warmup-fraction"] = rng.choice([0.0, 0.1, 0.5, 0.99, 1.0])
    elif rng.random() < 0.5:
        out[f"--lr-warmup-{unit}"] = rng.choice([0, 0, 1, n // 2, n])
    out["--lr-decay-style"] = rng.choice(["linear", "cosine", "WSD", "constant"])
    if out["--lr-decay-style"] == "WSD" and rng.random() < 0.7:
        out[f"--lr-wsd-decay-{unit}"] = rng.choice([1, n])
    out["--lr"] = rng.choice([1e-4, 1e-3])
    out["--min-lr"] = rng.choice([0.0, 0.0, 1e-5, 1e-4, 5e-4, -1e-6])
    if out["--min-lr"] > out["--lr"]:
        out["--min-lr"] = out["--lr"]  # validate_args' own min_lr <= lr is not the scheduler's
    out["--lr-warmup-init"] = rng.choice([0.0, 0.0, 1e-5, 1e-2])
    if rng.random() < 0.4:
        out["--weight-decay-incr-style"] = rng.choice(["linear", "cosine"])
        out["--start-weight-decay"] = rng.choice([-0.1, 0.0, 0.0, 0.1])
        out["--end-weight-decay"] = rng.choice([0.0, 0.05, 0.2])
    else:
        out["--weight-decay"] = rng.choice([0.0, 0.1, 0.1, -0.01])
    for flag in ("--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"):
        if rng.random() < 0.2:
            out[flag] = True
    return out


def _scheduler_arguments(flags: dict, global_batch: int) -> dict:
    """What Megatron-LM's get_optimizer_param_scheduler passes to OptimizerParamScheduler
    (megatron/training/training.py, NVIDIA/Megatron-LM core_v0.16.1; validate_args sets the constant style's
    start/end weight decay to --weight-decay)."""
    g = flags.get
    if g("--train-iters"):
        decay = g("--lr-decay-iters", g("--train-iters")) * global_batch
        wsd = g("--lr-wsd-decay-iters") * global_batch if g("--lr-wsd-decay-iters") is not None else None
        warmup_count = g("--lr-warmup-iters", 0) * global_batch
        wd_steps = g("--train-iters") * global_batch
    else:
        decay = g("--lr-decay-samples", g("--train-samples"))
        wsd = g("--lr-wsd-decay-samples")
        warmup_count = g("--lr-warmup-samples", 0)
        wd_steps = g("--train-samples")
    warmup = g("--lr-warmup-fraction") * decay if g("--lr-warmup-fraction") is not None else warmup_count
    style = g("--weight-decay-incr-style", "constant")
    start = g("--start-weight-decay") if style != "constant" else g("--weight-decay", 0.01)
    end = g("--end-weight-decay") if style != "constant" else g("--weight-decay", 0.01)
    return dict(
        init_lr=g("--lr-warmup-init", 0.0),
        max_lr=g("--lr"),
        min_lr=g("--min-lr", 0.0),
        lr_warmup_steps=warmup,
        lr_decay_steps=decay,
        lr_decay_style=g("--lr-decay-style", "linear"),
        start_wd=start,
        end_wd=end,
        wd_incr_steps=wd_steps,
        wd_incr_style=style,
        use_checkpoint_opt_param_scheduler=bool(g("--use-checkpoint-opt_param-scheduler")),
        override_opt_param_scheduler=bool(g("--override-opt_param-scheduler")),
        wsd_decay_steps=wsd,
        lr_wsd_decay_style="exponential",
    )


class _Optimizer:
    def __init__(self) -> None:
        self.param_groups = [{}]


def test_scheduler_verdicts_equal_megatron_core(tmp_path):
    module = pytest.importorskip("megatron.core.optimizer_param_scheduler")
    rng = random.Random("shardcheck-lr-schedule")
    global_batch = 256  # the example launch's --global-batch-size
    fired_total = raised_total = 0
    for _ in range(120):
        flags = _random_schedule(rng)
        words = " ".join(k if v is True else f"{k} {v}" for k, v in flags.items())
        found = _findings(tmp_path, megatron_lm_launch(words))
        assert all(f.rule != "MLM-TRAIN-MODE" for f in found), (words, found)
        try:
            module.OptimizerParamScheduler(_Optimizer(), **_scheduler_arguments(flags, global_batch))
            raised = None
        except AssertionError as e:
            raised = e
        assert bool(found) == (raised is not None), (words, [f.message for f in found], repr(raised))
        fired_total += bool(found)
        raised_total += raised is not None
    assert 20 < raised_total < 100  # both verdicts are exercised


# -- differential: Megatron-LM's own validate_args -------------------------------------------------------------

MEGATRON_LM_GIT = os.environ.get("MEGATRON_LM_GIT")
# (Megatron-LM tag, megatron-core minor): 0.16 runs on the installed megatron-core 0.16.1, the others on the
# unpacked wheel of their minor under $MEGATRON_CORE_VERSIONS_DIR. (core_v0.12's training package needs einops,
# core_v0.19's is laid out differently: not run here.)
VALIDATE_TAGS = [("core_v0.16.1", "0.16"), ("core_v0.9.0", "0.9")]
WHEELS = os.environ.get("MEGATRON_CORE_VERSIONS_DIR")
ORACLE = Path(__file__).parent / "oracle" / "megatron_lm_validate_oracle.py"
# The validate_args checks of the rules above; each rule's other checks are the scheduler's (not run here).
VALIDATE_FLAGS = [
    ("--train-iters", [None, None, 0, 10]),
    ("--train-samples", [None, None, 1000]),
    ("--lr-decay-samples", [None, None, 500]),
    ("--lr-decay-iters", [None, None, 5]),
    ("--lr-warmup-iters", [None, None, 0, 2]),
    ("--lr-warmup-samples", [None, None, 0, 10]),
    ("--lr-warmup-fraction", [None, None, 0.1]),
    ("--rampup-batch-size", [None, None, None, "16 16 1000"]),
    ("--lr", [None, 1e-4]),
    ("--min-lr", [None, 0.0, 1e-3]),
    ("--weight-decay-incr-style", [None, None, "linear"]),
    ("--start-weight-decay", [None, None, 0.0]),
    ("--end-weight-decay", [None, None, 0.1]),
    ("--batch-size", [None, None, None, None, 4]),
    ("--warmup", [None, None, None, None, 3]),
    ("--seq-length", [None, None, 65536]),
    ("--decoder-seq-length", [None, None, None, 50000]),
    ("--fp16", [False, False, True]),
    ("--bf16", [False, True]),
    ("--fp16-lm-cross-entropy", [False, False, False, True]),
    ("--fp32-residual-connection", [False, False, False, True]),
    ("--tensor-model-parallel-size", [None, 2]),
    ("--sequence-parallel", [False, True]),
    ("--tp-comm-overlap", [False, False, True]),
    ("--encoder-num-layers", [None, None, None, None, 48]),
    ("--encoder-seq-length", [None, None, None, None, 4096]),
    ("--use-distributed-optimizer", [False, True]),
    ("--overlap-grad-reduce", [False, True]),
    ("--overlap-param-gather", [False, False, True]),
]
VALIDATE_RULES = [
    r for r in SCHEDULE_RULES if r not in ("MLM-LR-STEPS", "MLM-SCHED-OVERRIDE", "MLM-TRAIN-LENGTH", "MLM-LR-NEEDED")
]
# The checks get_optimizer_param_scheduler and OptimizerParamScheduler make, once validate_args accepted.
SCHEDULER_RULES = (
    "MLM-TRAIN-LENGTH",
    "MLM-LR-NEEDED",
    "MLM-LR-STEPS",
    "MLM-LR-RANGE",
    "MLM-WD-INCR",
    "MLM-SCHED-OVERRIDE",
)
SCHEDULER_FLAGS = [
    ("--lr-decay-style", [None, None, "WSD"]),
    ("--lr-warmup-init", [None, None, 1e-2]),
    ("--weight-decay", [None, None, -0.01]),
    ("--override-opt_param-scheduler", [False, False, True]),
    ("--use-checkpoint-opt_param-scheduler", [False, True]),
    ("--skip-train", [False, False, False, True]),
]


MROPE_FLAGS = [("--position-embedding-type", [None, "mrope"]), ("--mrope-section", [None, "16 24 24"])]
# A second batch for the scheduler's checks: the length, the rates and the schedule only (most pass validate_args).
SCHEDULE_ONLY_FLAGS = [
    ("--train-iters", [None, 0, 10, 10]),
    ("--train-samples", [None, None, 1000]),
    ("--lr", [None, 1e-4, 1e-4]),
    ("--min-lr", [None, 0.0, 1e-5]),
    ("--lr-decay-iters", [None, 0, 5]),
    ("--lr-warmup-iters", [None, 2, 20]),
    ("--lr-warmup-fraction", [None, 0.1, 1.0]),
    ("--lr-wsd-decay-iters", [None, 2]),
    *SCHEDULER_FLAGS,
]


def _random_flags(rng: random.Random, table: list = VALIDATE_FLAGS + SCHEDULER_FLAGS) -> str:
    words = []
    for flag, choices in table:
        if rng.random() < 0.6:
            continue  # most launches give few of these flags
        value = rng.choice(choices)
        if value is True:
            words.append(flag)
        elif value not in (None, False):
            words.append(f"{flag} {value}")
    return " ".join(words)


@pytest.mark.skipif(not MEGATRON_LM_GIT, reason="MEGATRON_LM_GIT (a Megatron-LM git dir) not set")
@pytest.mark.parametrize(("tag", "minor"), VALIDATE_TAGS)
def test_validate_args_verdicts_equal_megatron_lm(tmp_path, tag, minor):
    env = dict(os.environ)
    if minor == "0.16":
        pytest.importorskip("megatron.core")
    elif not WHEELS or not (Path(WHEELS) / minor / "megatron").is_dir():
        pytest.skip(f"megatron-core {minor} not unpacked under MEGATRON_CORE_VERSIONS_DIR")
    else:
        env["PYTHONPATH"] = str(Path(WHEELS) / minor)
    archive = subprocess.run(
        ["git", f"--git-dir={MEGATRON_LM_GIT}", "archive", tag, "megatron/training", "megatron/legacy"],
        capture_output=True,
        check=True,
    ).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(tmp_path / "mlm", filter="data")
    rng = random.Random("shardcheck-validate-args")
    first = VALIDATE_FLAGS + SCHEDULER_FLAGS + (MROPE_FLAGS if minor != "0.9" else [])  # mrope: core_v0.12.0 on
    flag_sets = [_random_flags(rng, first) for _ in range(150)]
    flag_sets += [_random_flags(rng, SCHEDULE_ONLY_FLAGS) for _ in range(100)]
    # half of the launches without the example's own --train-iters / --lr (MLM-TRAIN-LENGTH, MLM-LR-NEEDED)
    launches = [megatron_lm_launch(f, schedule=rng.choice(["", EXAMPLE_SCHEDULE])) for f in flag_sets]
    cases = [shlex.split(text.split("pretrain_gpt.py", 1)[1]) for text in launches]
    done = subprocess.run(
        [sys.executable, str(ORACLE), str(tmp_path / "mlm")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    if done.returncode != 0:
        pytest.skip(f"Megatron-LM {tag} does not run here: {done.stderr.strip().splitlines()[-1:]}")
    real = json.loads(done.stdout)
    refused = stopped = 0
    for text, (verdict, scheduled) in zip(launches, real, strict=True):
        flags = text.split("--global-batch-size 256", 1)[1].strip()
        every = _findings(tmp_path, text, megatron_core_version=minor)
        found = [f for f in every if f.rule in VALIDATE_RULES and "OptimizerParamScheduler" not in f.message]
        assert bool(found) == (verdict is not None), (flags, verdict, [f.message for f in found])
        if verdict is not None:
            refused += 1
            said = verdict.split(": ", 1)[1]
            if said:  # a bare assert has no text to compare
                assert any(said in f.message for f in found), (flags, verdict, [f.message for f in found])
            continue
        if scheduled == "skipped":
            continue
        # validate_args accepted: what is left is the scheduler's (or nothing, when no optimizer is built)
        later = [f for f in every if f.rule in SCHEDULER_RULES]
        assert bool(later) == (scheduled is not None), (flags, scheduled, [f.message for f in later])
        if scheduled is not None:
            stopped += 1
            kind, said = scheduled.split(": ", 1)
            # each stop is reported on its own: the one the scheduler meets first is among them
            if kind == "TypeError":  # float(max_lr) of a missing --lr
                assert any(f.rule == "MLM-LR-NEEDED" for f in later), (flags, scheduled)
            elif said:
                assert any(said in f.message for f in later), (flags, scheduled, [f.message for f in later])
    assert 50 < refused < 200, refused  # both verdicts exercised
    assert 20 < stopped < 100, stopped  # the scheduler's stops exercised, and its acceptances
