"""``shardcheck.verify``: shardcheck's verdict proved with the real megatron-core (``--verify``).

The end-to-end tests need torch and megatron-core (``.[verify]``) and run one worker subprocess for the
module; the comparison, rank selection and availability tests are pure Python and always run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.megatron.direct import job_from_sizes
from shardcheck.job import ModelFacts
from shardcheck.mesh.grid import build_grid
from shardcheck.origin import Origin, Traced
from shardcheck.verify import VerifyReport, compare, verify_available, verify_job, verify_jobs
from shardcheck.verify.compare import config_rule_of, plan_engine, select_ranks

CASES = Path(__file__).parent / "data" / "cases"
SCRIPTS = ("qwen3_235b_256k_after", "qwen3_235b_256k_before", "qwen3_235b_256k_etp_unset")
needs_megatron = pytest.mark.skipif(verify_available() is not None, reason=str(verify_available()))

QWEN3_235B = ModelFacts(
    name="Qwen3-235B-A22B",
    source="test",
    origin=Origin(kind="model", text="test"),
    num_hidden_layers=94,
    num_attention_heads=64,
    num_key_value_heads=4,
    hidden_size=4096,
    num_experts=128,
)


@pytest.fixture(scope="module")
def verified():
    """The three known scripts (all 256 ranks compared) and two small layouts, in one worker run."""
    results = {name: check(CASES / f"{name}.sh") for name in SCRIPTS}
    small = [
        job_from_sizes(
            world=64,
            devices_per_node=8,
            tp=2,
            pp=4,
            cp=2,
            ep=4,
            etp=1,
            vpp=2,
            first_stage_layers=22,
            last_stage_layers=24,
            model=QWEN3_235B,
        ),  # valid, 64 ranks
        job_from_sizes(world=16, tp=4, pp=2, cp=1, ep=8, etp=2, model=QWEN3_235B),  # EP·ETP·PP = 32 > 16
        job_from_sizes(world=8, tp=2, pp=2, ep=2, etp=1),  # no model: the layout alone
    ]
    jobs = [r.job for r in results.values()] + small
    findings = [r.findings for r in results.values()] + [None, None, None]
    reports = verify_jobs(jobs, findings, all_ranks_limit=256)
    return dict(zip(list(SCRIPTS) + ["small_valid", "small_fold", "no_model"], reports))


@needs_megatron
@pytest.mark.parametrize(
    "name, stages",
    [
        ("qwen3_235b_256k_after", [5] + [6] * 14 + [5]),
        ("qwen3_235b_256k_before", [11] + [12] * 6 + [11]),
    ],
)
def test_valid_scripts_agree_with_megatron(verified, name, stages):
    report = verified[name]
    assert report.agrees, report.text()
    assert report.megatron_version == "0.16.1"
    assert report.ranks_checked == list(range(256))
    assert re.fullmatch(r"verified against megatron-core 0\.16\.1: agrees \(256 ranks, \d+\.\d s\)", report.text())
    (engine,) = report.engines
    assert engine["megatron"]["valid"] is True and engine["shardcheck"]["valid"] is True
    assert (engine["megatron"]["dp"], engine["megatron"]["edp"]) == (1, 1)
    assert engine["megatron"]["config_valid"] is True and engine["megatron"]["layers_per_stage"] == stages
    assert engine["shardcheck"]["layers_per_stage"] == stages
    json.dumps(report.to_dict())


@needs_megatron
def test_etp_unset_is_invalid_on_both_sides(verified):
    report = verified["qwen3_235b_256k_etp_unset"]
    assert report.agrees, report.text()
    (engine,) = report.engines
    assert engine["megatron"]["valid"] is False
    assert engine["megatron"]["error"] == (
        "RuntimeError: world_size (256) is not divisible by expert_tensor_model_pipeline_parallel size (512)"
    )
    assert engine["shardcheck"]["valid"] is False
    assert [rule for rule, _ in engine["shardcheck"]["errors"]] == ["MCORE-PS-EXPERT-FOLD"]
    # the model itself builds: verl's add_bias_linear=False allows ETP 2 with experts
    assert engine["megatron"]["config_valid"] is True
    assert report.text().startswith(
        "verified against megatron-core 0.16.1: agrees (megatron-core rejects it too: "
        "RuntimeError: world_size (256) is not divisible by"
    )


@needs_megatron
def test_small_layouts_agree_on_every_rank(verified):
    report = verified["small_valid"]
    assert report.agrees, report.text()
    assert report.ranks_checked == list(range(64))
    assert report.engines[0]["megatron"]["layers_per_stage"] == [22, 24, 24, 24]
    fold = verified["small_fold"]
    assert fold.agrees, fold.text()
    assert fold.engines[0]["megatron"]["error"].startswith("RuntimeError: world_size (16) is not divisible")
    bare = verified["no_model"]
    assert bare.agrees, bare.text()
    assert "case" in bare.engines[0] and "model" not in bare.engines[0]["case"]
    assert any("no model" in n and "not compared" in n for n in bare.notes)
    assert bare.text().startswith("verified against megatron-core 0.16.1: agrees (8 ranks, ")


@needs_megatron
def test_wrong_expectations_are_caught(verified):
    """Feed compare() deliberately wrong shardcheck expectations next to megatron-core's real result."""
    result = check(CASES / "qwen3_235b_256k_after.sh")
    plan = plan_engine(result.job, result.job.layouts[0], result.findings, all_ranks_limit=256)
    megatron = verified["qwen3_235b_256k_after"].engines[0]["megatron"]
    assert megatron["config_valid"] is True
    # engines[] leaves the groups out (they agreed above); give compare() shardcheck's, so only the
    # deliberately wrong field can differ
    real = dict(megatron, groups={str(r): g for r, g in plan.expected.groups.items()})
    assert compare(plan.case, real, plan.expected) == []

    wrong = replace(
        plan.expected,
        config_valid=False,
        config_errors=[("MCORE-TC-HEADS-TP", 'megatron-core: "num_attention_heads (64) must be ..."')],
    )
    (line,) = compare(plan.case, real, wrong)
    assert line.startswith("[actor] model build: megatron-core accepts") and "shardcheck says invalid" in line

    wrong = replace(plan.expected, layers_per_stage=[6] * 15 + [4])
    (line,) = compare(plan.case, real, wrong)
    assert line.startswith("[actor] layers per stage: megatron-core [5, 6,")

    wrong = replace(plan.expected, dp=2)
    assert compare(plan.case, real, wrong) == ["[actor] DP: megatron-core 1 != shardcheck 2"]


@needs_megatron
def test_worker_protocol_through_the_shim():
    case = [
        {
            "world": 8,
            "tp": 2,
            "pp": 2,
            "cp": 1,
            "ep": 2,
            "etp": 1,
            "ranks": [0, 7],
            "model": {
                "num_layers": 6,
                "hidden_size": 256,
                "num_attention_heads": 4,
                "num_moe_experts": 4,
                "num_layers_in_first_pipeline_stage": 2,
            },
        }
    ]
    # the fixture above ran `python -m shardcheck.verify.worker`; this is the tests' shim over it
    shim = Path(__file__).parent / "oracle" / "megatron_oracle.py"
    proc = subprocess.run(
        [sys.executable, str(shim)], input=json.dumps(case), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (res,) = json.loads(proc.stdout)
    assert res["valid"] is True and res["config_valid"] is True and res["layers_per_stage"] == [2, 4]
    assert res["groups"]["7"]["tp"] == [6, 7]


# --------------------------------------------------------------------------------- pure Python


def _plan(job):
    from shardcheck.rules.registry import run_rules

    return plan_engine(job, job.layouts[0], run_rules(job)[0], all_ranks_limit=64)


def _agreeing_result(plan) -> dict:
    """What megatron-core would return if it agreed with shardcheck's expectation."""
    e = plan.expected
    return {
        "valid": e.valid,
        "error": None,
        "dp": e.dp,
        "edp": e.edp,
        "groups": {str(r): g for r, g in (e.groups or {}).items()},
        "config_valid": e.config_valid,
        "config_error": None,
        "layers_per_stage": e.layers_per_stage,
    }


def test_compare_config_verdicts_and_first_error():
    job = job_from_sizes(world=16, tp=16, model=replace(QWEN3_235B, num_attention_heads=40, num_key_value_heads=8))
    plan = _plan(job)
    assert plan.expected.config_valid is False
    assert [r for r, _ in plan.expected.config_errors] == ["MCORE-TC-HEADS-TP"]
    result = dict(
        _agreeing_result(plan),
        config_valid=False,
        config_error="ValueError: num_attention_heads (40) must be a multiple of tensor_model_parallel_size (16).",
    )
    assert compare(plan.case, result, plan.expected) == []
    # megatron-core's first error is another check than the one shardcheck reports
    other = dict(
        result,
        config_error="ValueError: num_query_groups (8) must be a multiple or divisor of "
        "tensor_model_parallel_size (16).",
    )
    (line,) = compare(plan.case, other, plan.expected)
    assert "is MCORE-TC-QG-TP's check, but shardcheck reports MCORE-TC-HEADS-TP" in line
    # the same rule, but shardcheck quotes a different text
    quoted = 'x (megatron-core: "num_attention_heads (40) must divide TP")'
    worded = replace(plan.expected, config_errors=[("MCORE-TC-HEADS-TP", quoted)])
    (line,) = compare(plan.case, result, worded)
    assert "shardcheck quotes 'num_attention_heads (40) must divide TP'" in line
    # megatron-core accepts what shardcheck rejects
    (line,) = compare(plan.case, dict(result, config_valid=True, config_error=None), plan.expected)
    assert "megatron-core accepts" in line and "MCORE-TC-HEADS-TP" in line
    # a check shardcheck has no rule for
    (line,) = compare(plan.case, dict(result, config_error="ValueError: something new"), plan.expected)
    assert "a check shardcheck has no rule for" in line


def test_compare_parallel_state_and_groups():
    plan = _plan(job_from_sizes(world=16, tp=2, pp=2, ep=2, etp=1))
    good = _agreeing_result(plan)
    assert compare(plan.case, good, plan.expected) == []
    bad = json.loads(json.dumps(good))
    bad["groups"]["3"]["tp"] = [3, 4]
    assert compare(plan.case, bad, plan.expected) == [
        "[actor] rank 3 tp group: megatron-core [3, 4] != shardcheck [2, 3]"
    ]
    raised = dict(good, valid=False, error="RuntimeError: world_size (16) is not divisible by 3")
    lines = compare(plan.case, raised, plan.expected)
    assert lines[0].startswith("[actor] parallel state: megatron-core raises (RuntimeError: world_size (16)")
    assert any(line.startswith("[actor] rank grid:") for line in lines)
    assert compare(plan.case, dict(good, error="OracleError: boom", valid=False), plan.expected) == [
        "[actor] the megatron-core worker failed: OracleError: boom"
    ]


def test_config_rule_of_megatron_texts():
    assert (
        config_rule_of("AssertionError: num_layers_per_pipeline_rank 6             should be divisible by vp_size 4")
        == "MCORE-BUILD-VPP"
    )
    assert (
        config_rule_of('ValueError: Using recompute_granularity: full so recompute_method must be "block" or "uniform"')
        == "MCORE-TC-RECOMPUTE"
    )
    assert (
        config_rule_of("AssertionError: num_moe_experts % ep_size == 0 (128 % 48; BaseMoELayer.__init__)")
        == "MCORE-BUILD-EXPERTS-EP"
    )
    assert config_rule_of("ValueError: unrelated") is None


def test_model_dict_follows_verl_and_the_overrides():
    result = check(CASES / "qwen3_235b_256k_after.sh")
    plan = plan_engine(result.job, result.job.layouts[0], result.findings)
    model = plan.case["model"]
    assert model["num_layers"] == 94 and model["num_attention_heads"] == 64 and model["num_query_groups"] == 4
    assert model["num_moe_experts"] == 128
    assert (model["num_layers_in_first_pipeline_stage"], model["num_layers_in_last_pipeline_stage"]) == (5, 5)
    assert (model["recompute_granularity"], model["recompute_method"], model["recompute_num_layers"]) == (
        "full",
        "uniform",
        1,
    )
    assert model["moe_token_dispatcher_type"] == "alltoall" and model["variable_seq_lengths"] is True
    assert model["add_bias_linear"] is False and model["sequence_parallel"] is True
    assert plan.case["etp"] == 1 and plan.case["world"] == 256


def test_select_ranks():
    assert select_ranks(64, None, 8, 64) == (list(range(64)), "all 64 ranks (world 64 <= 64)")
    grid = build_grid(world=4096, tp=8, pp=16, cp=2, ep=64, etp=1)
    ranks, why = select_ranks(4096, grid, 16, 64)
    assert {0, 4095} <= set(ranks)
    assert set(grid.group_of("pp", 0)) <= set(ranks) and set(grid.group_of("pp", 4095)) <= set(ranks)
    assert {15, 16} <= set(ranks)  # a node boundary
    assert {1, 7, 8, 16} <= set(ranks)  # steps along TP and CP (dense) and EP (expert)
    assert len(ranks) < 200 and "representative" in why and "PP stages" in why


def test_unknown_sizes_are_unverified_without_running_megatron():
    job = job_from_sizes(world=16, tp=2)
    layout = replace(job.layouts[0], pp=Traced(None, Origin(kind="cli", text="x"), "PP is computed at run time"))
    report = verify_job(replace(job, layouts=(layout,)))
    assert not report.agrees and not report.engines
    assert report.unverified == ["[actor] not verified: unknown PP (PP is computed at run time)"]
    assert "not verified: unknown PP" in report.text()


def test_verify_available_without_megatron(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec

    missing = {"torch", "megatron"}

    def fake(name, *args, **kwargs):
        if name.split(".")[0] in missing:
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    hint = verify_available()
    assert hint is not None and "\n" not in hint
    assert hint.endswith("pip install 'shardcheck[verify]'")
    assert "(torch and megatron-core not installed)" in hint
    missing = {"megatron"}
    assert "(megatron-core not installed)" in verify_available()

    def broken(name, *args, **kwargs):  # a parent package that cannot be imported
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(importlib.util, "find_spec", broken)
    assert verify_available().endswith("pip install 'shardcheck[verify]'")


def test_verify_does_not_import_torch_in_the_parent():
    code = (
        "import sys; from shardcheck.verify import verify_available, verify_job; verify_available(); "
        "print(sorted(m for m in ('torch', 'megatron') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_report_text_lists_each_disagreement():
    report = VerifyReport(
        path="x",
        disagreements=["[actor] DP: megatron-core 1 != shardcheck 2", "[ref] y"],
        megatron_version="0.16.1",
        engines=[{}],
        ranks_checked=[0],
        world=1,
    )
    assert not report.agrees
    assert report.text().splitlines() == [
        "verified against megatron-core 0.16.1: disagrees: [actor] DP: megatron-core 1 != shardcheck 2",
        "verified against megatron-core 0.16.1: disagrees: [ref] y",
    ]
    assert report.to_dict()["agrees"] is False


def test_cli_check_and_mesh_verify(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    from shardcheck.cli import EXAMPLE, main

    assert main(["check", str(EXAMPLE), "--verify"]) == 0
    assert "verified against megatron-core 0.16.1: agrees" in capsys.readouterr().out
    assert (
        main(["mesh", "--world", "16", "--tp", "2", "--cp", "2", "--pp", "2", "--ep", "4", "--etp", "1", "--verify"])
        == 0
    )
    assert "agrees (16 ranks" in capsys.readouterr().out


def test_cli_verify_without_megatron_says_how_to_install(monkeypatch, capsys):
    import shardcheck.verify as verify
    from shardcheck.cli import EXAMPLE, main

    monkeypatch.setattr(
        verify, "verify_available", lambda: "--verify needs torch and megatron-core: pip install 'shardcheck[verify]'"
    )
    assert main(["check", str(EXAMPLE), "--verify"]) == 2
    assert "pip install 'shardcheck[verify]'" in capsys.readouterr().err
