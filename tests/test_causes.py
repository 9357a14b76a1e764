"""One finding per cause (issue 28 item 4): the values one unknown variable leaves unknown are one VALUE-UNKNOWN
naming it, its line and the option that settles it; --env over a folder warns only of a name no file reads; plan
stops at once on an unknown no layout settles."""

from __future__ import annotations

import time

import pytest

from shardcheck.api import check
from shardcheck.cli import main
from shardcheck.rules.examples import verl_launch

M = "actor_rollout_ref.actor.megatron"


def _unknown(result) -> list:
    return [f for f in result.findings if f.rule == "VALUE-UNKNOWN"]


def test_one_unset_variable_is_one_finding(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        verl_launch(
            f"{M}.tensor_model_parallel_size=$TP critic.megatron.tensor_model_parallel_size=$TP "
            "actor_rollout_ref.rollout.tensor_model_parallel_size=$TP",
            before="TP=$MY_TP",
        )
    )
    (f,) = _unknown(check(script))
    assert f.line == 1 and len(f.members) >= 2
    assert f.message.startswith("$MY_TP is not set in the script, so ")
    assert f"{M}.tensor_model_parallel_size" in f.message and "critic.megatron" in f.message
    assert f.fix == "give --env MY_TP=..., or set it in the script"
    assert check(script, {"MY_TP": "2"}).valid is True  # the option named settles it


def test_values_set_in_one_undecided_case_are_one_finding(tmp_path):
    before = 'case "$DEVICE" in\n  gpu) TP=2; PP=1 ;;\n  npu) TP=4; PP=2 ;;\nesac\n'
    script = tmp_path / "run.sh"
    script.write_text(
        verl_launch(f"{M}.tensor_model_parallel_size=$TP {M}.pipeline_model_parallel_size=$PP", before=before)
    )
    (f,) = _unknown(check(script))
    assert "$PP and $TP depend on the case at line 1" in f.message or "$TP and $PP depend on the case" in f.message
    assert f.fix == "give --env DEVICE=..., or set it in the script"
    assert check(script, {"DEVICE": "gpu"}).valid is True


def test_two_causes_stay_two_findings(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(verl_launch(f"{M}.tensor_model_parallel_size=$A {M}.pipeline_model_parallel_size=$B"))
    found = _unknown(check(script))
    assert len(found) == 2 and {f.fix for f in found} == {
        "give --env A=..., or set it in the script",
        "give --env B=..., or set it in the script",
    }


def test_a_script_argument_is_settled_by_args(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(verl_launch(f"{M}.tensor_model_parallel_size=$1"))
    (f,) = _unknown(check(script))
    assert f.fix == "give the script's arguments after --: shardcheck check SCRIPT -- ARGS"


def test_env_over_a_folder_warns_once_and_only_when_no_file_reads_it(tmp_path, capsys):
    for name in ("a.sh", "b.sh", "c.sh"):
        (tmp_path / name).write_text(verl_launch(before="N=${NNODES:-1}"))
    (tmp_path / "d.sh").write_text(verl_launch())  # reads no variable at all
    main(["check", "--no-fix-proof", "-q", "--env", "NNODES=1", "--env", "NOPE=1", str(tmp_path)])
    lines = [line for line in capsys.readouterr().out.splitlines() if "SHELL-ENV-UNUSED" in line]
    assert lines == [
        f"{tmp_path / 'a.sh'}: SHELL-ENV-UNUSED warning: --env NOPE: none of the 4 scripts reads $NOPE, so the value "
        "changes nothing"
    ]


def test_env_unused_on_one_file_is_still_said(tmp_path, capsys):
    (tmp_path / "a.sh").write_text(verl_launch())
    main(["check", "--no-fix-proof", "-q", "--env", "NNODES=1", str(tmp_path / "a.sh")])
    assert "SHELL-ENV-UNUSED warning: --env NNODES:" in capsys.readouterr().out


RAY_UNKNOWN = """\
RAY=(ray_kwargs.ray_init.runtime_env.py_executable=null)
if [ "${USE_UV:-1}" != 0 ] && [ "$(hostname)" = gpu ]; then
    RAY=(ray_kwargs.ray_init.runtime_env.py_executable=uv)
fi
"""


def test_plan_stops_at_once_on_an_unknown_no_layout_settles(tmp_path):
    from shardcheck.plan import PlanError, plan_script

    script = tmp_path / "run.sh"
    script.write_text(verl_launch('"${RAY[@]}"', before=RAY_UNKNOWN))
    started = time.perf_counter()
    with pytest.raises(PlanError, match=r"run.sh:3: argument .* is unknown .*; no layout settles it") as exc:
        plan_script(script, proof=False)
    assert time.perf_counter() - started < 10
    assert "\n" not in str(exc.value)


def test_plan_does_not_stop_on_a_size_it_sets_itself(tmp_path):
    from launches import verl_qwen3_moe

    from shardcheck.plan import plan_script

    script = tmp_path / "run.sh"
    launch = verl_qwen3_moe()
    script.write_text(launch)
    assert plan_script(script, proof=False, top=1).plans
    script.write_text(RAY_UNKNOWN.replace("$(hostname)", "cpu") + launch.rstrip("\n") + ' "${RAY[@]}"\n')
    assert plan_script(script, proof=False, top=1).plans  # the condition is known: nothing blocks the search
