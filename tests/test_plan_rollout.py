"""The rollout in the step time and the planner: a rollout whose time is unknown is never a free one; vLLM's
uneven expert split is sized at its busiest rank; a decode step reads the experts its replica's tokens reach."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shardcheck.api import resolve_script
from shardcheck.estimate.step_time import architecture_of, experts_touched, predict
from shardcheck.memory.estimate import rollout_params
from shardcheck.memory.params import Sharding, stage_params
from shardcheck.origin import UnknownValue
from shardcheck.plan import plan_script
from shardcheck.report.plan_report import render_plan_text

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "shardcheck" / "examples" / "qwen3_235b_256k.sh"


@pytest.fixture(scope="module")
def qwen235():
    job = resolve_script(EXAMPLE)
    return architecture_of(job.model)


def test_vllm_uneven_experts_are_sized_at_the_busiest_rank(qwen235):
    arch = qwen235
    assert arch.experts == 128
    layers = tuple(range(arch.num_layers))
    one_each = stage_params(arch, layers, 0, Sharding(4, 128, 1, 1))  # 128 experts over 128 ranks: one each
    # EP 256 > 128 experts: vLLM's first 128 ranks hold one expert, the others none (determine_expert_map)
    assert rollout_params(arch, "vllm", 4, 256) == one_each
    # EP 48: 128 = 2·48 + 32, the first 32 ranks hold 3
    per_expert = one_each.expert // 1
    assert rollout_params(arch, "vllm", 4, 48).expert == 3 * per_expert
    assert rollout_params(arch, "vllm", 4, 48).dense == one_each.dense
    # an even split is the plain count
    assert rollout_params(arch, "vllm", 4, 32) == stage_params(arch, layers, 0, Sharding(4, 32, 1, 1))
    # other engines are sized only where the experts divide
    with pytest.raises(UnknownValue, match="experts 128 over 256"):
        rollout_params(arch, "sglang", 4, 256)


def test_decode_reads_the_experts_the_replica_requests_reach(qwen235):
    arch = qwen235  # top-8 of 128
    miss = 1 - 8 / 128
    # EP 128 over TP 4: 32 DP ranks, one running request each, but the replica gets only 8 requests
    assert experts_touched(arch, 1, 128, 4, 8) == pytest.approx(1 - miss**8)
    assert experts_touched(arch, 1, 128, 4, None) == pytest.approx(1 - miss**32)
    assert experts_touched(arch, 1, 128, 4, 64) == pytest.approx(1 - miss**32)
    # no EP: the engine's own batch
    assert experts_touched(arch, 3, 1, 4, 8) == pytest.approx(1 - miss**3)


def _sglang_copy(tmp_path: Path) -> Path:
    """The 256K example with SGLang as the engine: without DP attention verl gives it tp_size = TP · DP = 128,
    which does not split Qwen3-235B's 64 heads, so the rollout cannot be sized."""
    path = tmp_path / "sglang.sh"
    path.write_text(EXAMPLE.read_text().replace("rollout.name=vllm", "rollout.name=sglang"))
    return path


def test_unknown_rollout_makes_the_step_unknown(tmp_path):
    job = replace(resolve_script(_sglang_copy(tmp_path)), device_choice="Ascend-910C")
    step, why = predict(job)
    assert step is None
    assert why.startswith("rollout: ") and "heads 64 over 128" in why


def test_plan_never_ranks_an_untimed_rollout_as_free(monkeypatch):
    """The rules accept every vLLM rollout layout of the example that the memory estimate sizes, so the untimed
    case is made here: the estimate cannot size rollout EP 256 (as before vLLM's uneven split was modelled).
    Those layouts are left out — never ranked with a 0 s rollout — and the report says how many and why."""
    import shardcheck.memory.estimate as memory_estimate

    real = memory_estimate.rollout_params

    def unsized_at_256(arch, engine, tp, ep):
        if ep == 256:
            raise UnknownValue("the rollout layout does not split the model evenly (experts 128 over 256)")
        return real(arch, engine, tp, ep)

    monkeypatch.setattr(memory_estimate, "rollout_params", unsized_at_256)
    result = plan_script(EXAMPLE, device="910c", top=3, proof=False)
    assert result.plans
    for plan in result.plans:
        assert plan.step.rollout > 100 and plan.rollout.ep != 256
    # rollout TP 1, 2, 4, 8, 16 with DP = 256 / TP: five layouts, one reason
    assert result.counts["rollouts_untimed"] == 5 and len(result.untimed_rollouts) == 1
    text = render_plan_text(result)
    assert "rollout layout(s) whose rollout time is unknown (never ranked as free)" in text
    assert "experts 128 over 256" in text


def test_256k_example_plans_time_their_rollout():
    """The bug this file was written for: rollout EP 256 > 128 experts was unknown, so its rollout was 0 s
    and such plans ranked first. Every plan now carries a rollout time."""
    result = plan_script(EXAMPLE, device="910c", top=5, proof=False)
    assert result.plans and not result.untimed_rollouts
    for plan in result.plans:
        assert plan.step.rollout > 100  # 16 requests of 255K generated tokens: thousands of decode steps
    assert result.current is not None and result.current.step.rollout > 100
