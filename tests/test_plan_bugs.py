"""shardcheck plan, issue 30's bugs: each fails without its fix, and stays silent on good input."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from launches import verl_qwen3_moe

from shardcheck.api import resolve_script
from shardcheck.plan import plan_script
from shardcheck.plan.search import PlanError, errors_of, knob_view, plan_job
from shardcheck.report.plan_report import render_plan_text
from shardcheck.rules.registry import run_rules


@pytest.fixture(scope="module")
def moe_job(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "run.sh"
    path.write_text(verl_qwen3_moe())
    return path, replace(resolve_script(path), device_choice="H200-SXM-141GB")


# --- every device of the hardware table plans, or says what is missing -----------------------------------


def test_h800_plans(moe_job):
    """plan --device h800 raised KeyError in estimate/speeds.py: H800 (and A800) have speeds now."""
    _, job = moe_job
    for device in ("h800", "a800"):
        result = plan_job(job, device=device, top=1)
        assert result.plans and result.plans[0].step.total > 0


def test_device_without_speeds_is_one_usage_line(moe_job):
    from shardcheck.estimate.speeds import names as speed_names
    from shardcheck.memory.devices import names as device_names

    _, job = moe_job
    assert set(speed_names()) <= set(device_names())
    missing = sorted(set(device_names()) - set(speed_names()))
    assert "L4-24GB" in missing
    with pytest.raises(PlanError, match="no speeds for it.*plan on one of"):
        plan_job(job, device="L4-24GB", top=1)
    with pytest.raises(PlanError, match="no speeds"):
        plan_job(job, device="memory=103079215104", top=1)  # --device-memory 96GiB


# --- Megatron-LM with full recompute: the plan deletes the flags appended ones cannot unset -------------------

ROOT = Path(__file__).resolve().parents[1]
MLM = ROOT / "examples" / "megatron_lm_pretrain_gpt.sh"
FULL = "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"


def test_full_recompute_megatron_lm_script_gets_proven_plans(tmp_path):
    """Every Megatron-LM script with full recompute got no plan: the proposal appended --recompute-granularity
    selective (or nothing for none) and --recompute-method stayed; now the plan deletes those flags and the
    proof re-reads the script without them."""
    path = tmp_path / "full.sh"
    path.write_text(MLM.read_text().replace("--bf16", f"--bf16 {FULL}"))
    result = plan_script(path, device="h100", top=3)
    assert result.proven and result.plans, result.counts
    unset = [p for p in result.plans if p.removed]
    assert unset, "the fastest plans drop full recompute"
    for plan in unset:
        assert {flag for flag, _, _ in plan.removed} >= {"--recompute-method", "--recompute-num-layers"}
        assert all(where.endswith(":22") for _, _, where in plan.removed)
        job = resolve_script(
            path,
            extra_args=tuple(w for line in plan.lines for w in line.split()),
            drop_args=tuple((f, v) for f, v, _ in plan.removed),
        )
        assert knob_view(job) == knob_view(plan.job)
        assert not errors_of(run_rules(replace(job, device_choice="H100-SXM-80GB"))[0])


def test_script_without_recompute_deletes_nothing():
    result = plan_script(MLM, device="h100", top=2)
    assert result.plans and all(not p.removed for p in result.plans)


def test_dropped_flags_take_their_value_words_only(tmp_path):
    path = tmp_path / "drop.sh"
    path.write_text(MLM.read_text().replace("--bf16", "--bf16 --recompute-granularity=full --recompute-method uniform"))
    drop = (("--recompute-granularity", True), ("--recompute-method", True), ("--use-distributed-optimizer", False))
    job = resolve_script(path, drop_args=drop)
    assert job.value("--recompute-granularity").value is None
    assert job.value("--recompute-method").value is None
    assert job.value("--use-distributed-optimizer").value is False
    assert job.value("--train-iters").value == 10000  # the words after them are kept


# --- the step time does not grow with the dynamic batch's token budget ---------------------------------------


def _dynamic(path, cap: int):
    from shardcheck.estimate.step_time import predict
    from shardcheck.memory.estimate import estimate

    words = (
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={cap}",
    )
    job = replace(resolve_script(path, extra_args=words), device_choice="H200-SXM-141GB")
    step, why = predict(job)
    assert why is None, why
    est = estimate(job, job.device_choice)
    return step, max(s.total for s in est.train.stages)


def test_step_time_does_not_grow_with_ppo_max_token_len(moe_job):
    """verl's Qwen3-8B example went from 178 s at 3,072 to 2,826 s at 49,152: the tokens of a step are fixed
    (8 prompts × 2 responses × 4,096 tokens here); the cap only sizes the micro batches (the memory still grows)."""
    path, _ = moe_job
    small, small_peak = _dynamic(path, 4096)
    large, large_peak = _dynamic(path, 65536)
    assert large.phases["update"] == pytest.approx(small.phases["update"], rel=0.15)
    assert large.phases["old_log_prob"] == pytest.approx(small.phases["old_log_prob"], rel=0.15)
    assert large.train_flops == pytest.approx(small.train_flops, rel=0.01)
    assert large_peak > small_peak  # the memory's bound: a micro batch of the whole budget


def test_fixed_micro_batches_time_as_before(moe_job):
    from shardcheck.estimate.step_time import timed_batches
    from shardcheck.memory.estimate import adapter_for

    _, job = moe_job
    lay = job.layout("actor")
    settings = adapter_for(job).train_settings(job, lay, 2)
    assert settings.step_tokens is None and timed_batches(settings) is settings


# --- a script whose own layer split fails still has its layouts searched -------------------------------------

BROKEN_SPLIT = (
    "    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8 \\\n"
    "    +actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_first_pipeline_stage=7 \\\n"
)


def test_broken_split_script_is_planned(tmp_path):
    """48 layers, PP 8, 7 on the first stage: the other 41 do not split over 7 stages. The rollout screen timed
    each rollout with the script's broken split and left every one out, so 0 layouts were searched; the rollout
    is timed alone now, and every candidate has a split of its own."""
    path = tmp_path / "split.sh"
    text = verl_qwen3_moe(tp=1, ep=1)
    path.write_text(text.replace("    trainer.nnodes", BROKEN_SPLIT + "    trainer.nnodes"))
    result = plan_script(path, device="h200", top=2)
    assert not result.current_valid
    assert result.counts["layouts"] > 0 and result.plans
    assert not result.untimed_rollouts
    assert "does not start or fit: MCORE-TC-UNEVEN-MIDDLE" in render_plan_text(result)


# --- plan --model NAME --world N: the documented form searches its layouts ---------------------------------


@pytest.mark.parametrize(
    "model,world,per_node,device,seq",
    [
        ("Qwen3-8B", 8, 8, "h100", 4096),
        ("Qwen3-235B-A22B-Instruct-2507", 256, 16, "910c", 262144),
    ],
)
def test_plan_model_form_finds_plans(model, world, per_node, device, seq):
    """The rollout screen judged vLLM's start-up memory beside the written launch's own training layout (TP 1,
    no offload) and rejected every rollout layout; those rules read the training side, and judge each candidate."""
    from shardcheck.plan import plan_model

    result = plan_model(model, world=world, devices_per_node=per_node, device=device, seq_len=seq, top=1)
    assert result.counts["layouts"] > 0 and result.plans and result.proven
    assert not result.rollouts_rejected


def test_plan_model_beyond_the_models_context_says_why():
    """Qwen3-235B-A22B (40,960 positions) at 256K: no rollout starts, and the output names the rule."""
    from shardcheck.plan import plan_model

    result = plan_model(
        "Qwen3-235B-A22B", world=256, devices_per_node=16, device="910c", seq_len=262144, top=1, proof=False
    )
    assert not result.plans and "VERL-RO-MAXLEN" in result.rollouts_rejected
    text = render_plan_text(result)
    assert "no rollout layout starts" in text and "max_position_embeddings (40960)" in text


# --- the shown order: distinct rows, never first a warned plan, the script's savers among ties --------------

EXAMPLE = ROOT / "src" / "shardcheck" / "examples" / "qwen3_235b_256k.sh"


@pytest.fixture(scope="module")
def example_plans():
    return plan_script(EXAMPLE, device="910c", top=6), plan_script(EXAMPLE, device="910c", top=6, proof=False)


def test_one_row_per_distinct_layout(example_plans):
    """The top 10 repeated one training layout over rollout DP, rank orders and "first = last 16"."""
    from shardcheck.plan.ranking import Ranking

    result, _ = example_plans
    rank = Ranking({}, 94, (False, False), ())
    keys = [rank.distinct(p.layout, p.rollout) for p in result.plans]
    assert len(result.plans) == 6 and len(set(keys)) == len(keys)
    raw = plan_job(resolve_script(EXAMPLE), device="910c", top=6, distinct=False)
    raw_keys = [rank.distinct(p.layout, p.rollout) for p in raw.plans]
    assert len(set(raw_keys)) < len(raw_keys)  # by time alone they repeat


def test_first_plan_is_unwarned_and_keeps_offload(example_plans):
    """The example's #1 made check warn VLLM-MEM-WAKE and dropped offload (1.1 s of 2,525: a tie)."""
    from shardcheck.plan.ranking import warnings_of
    from shardcheck.plan.search import INPUT_RULES

    result, _ = example_plans
    first = result.plans[0]
    assert "VLLM-MEM-WAKE" not in warnings_of(first, INPUT_RULES)
    assert first.memory.offload is True
    fastest = min(p.seconds for p in result.plans)
    assert first.seconds <= fastest * 1.03
    job = resolve_script(EXAMPLE, extra_args=tuple(first.lines))
    findings = run_rules(replace(job, device_choice="Ascend-910C"))[0]
    assert not [f for f in findings if f.rule == "VLLM-MEM-WAKE"]


def test_order_puts_warned_plans_last_and_ties_by_fewest_changes():
    from types import SimpleNamespace as NS

    from shardcheck.plan.ranking import Ranking
    from shardcheck.plan.space import Memory, Rollout, TrainLayout

    def plan(tp, seconds, changes, warn=False, offload=False):
        t = TrainLayout(tp, 1, 1, 1, None, None, None, None, "tp-cp-ep-dp-pp")
        finding = NS(rule="VLLM-MEM-WAKE", severity="warning")
        return NS(
            layout=t,
            rollout=Rollout(1, 1, 1),
            memory=Memory(("none", None, None, None), True, offload),
            seconds=seconds,
            changes=dict.fromkeys(range(changes)),
            findings=[finding] if warn else [],
        )

    base = {"param_offload": True}
    warned = plan(1, 100.0, 1, warn=True)
    tie_many = plan(2, 101.0, 5, offload=True)
    tie_few = plan(4, 102.0, 2, offload=True)
    drops_offload = plan(8, 100.5, 1, offload=False)
    slow = plan(16, 150.0, 1, offload=True)
    again = plan(2, 101.5, 6, offload=True)  # tie_many's layout again: not a row of its own
    order = Ranking(base, 4, (False, False), ()).order(
        [warned, tie_many, tie_few, drops_offload, slow, again], lambda p: {"param_offload": p.memory.offload}
    )
    assert order == [tie_few, tie_many, drops_offload, slow, warned]


def test_plan_without_a_path_judges_the_built_in_example(capsys):
    from shardcheck.cli import main

    assert main(["plan", "--device", "910c", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "(built-in example)" in out.splitlines()[0]
    assert "now >" not in out and "bound shapes" not in out and "memory floor" not in out
    assert "× faster" in out and "rollout 4,133.1 →" in out


def test_why_faster_in_words():
    from types import SimpleNamespace as NS

    from shardcheck.plan.space import Memory, Rollout, TrainLayout
    from shardcheck.report.plan_report import why_faster

    def plan(tp, update, rollout):
        t = TrainLayout(tp, 1, 1, 1, None, None, None, None, "tp-cp-ep-dp-pp")
        step = NS(total=update + rollout, phases={"update": update, "rollout": rollout})
        return NS(layout=t, memory=Memory(("none", None, None, None), True, False), rollout=Rollout(2, 1, 1), step=step)

    text = why_faster(plan(2, 50.0, 50.0), plan(1, 100.0, 100.0))
    assert text.startswith("#1 takes 100.0 s a step against the script's 200.0 s (2.00× faster); it changes TP 1 → 2")
    assert "update 100.0 → 50.0 s" in text and "rollout 100.0 → 50.0 s" in text
    assert "within the model's error" in why_faster(plan(2, 101.0, 100.0), plan(1, 100.0, 100.0), True)
    assert "does not start or fit" in why_faster(plan(2, 101.0, 100.0), plan(1, 100.0, 100.0), False)
    assert "cannot be compared" in why_faster(plan(2, 1.0, 1.0), plan(1, 1.0, float("inf")))
