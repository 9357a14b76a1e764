"""shardcheck plan, issue 30's bugs: each fails without its fix, and stays silent on good input."""

from __future__ import annotations

from dataclasses import replace

import pytest
from launches import verl_qwen3_moe

from shardcheck.api import resolve_script
from shardcheck.plan.search import PlanError, plan_job


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
