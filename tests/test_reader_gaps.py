"""Reader constructs real scripts use (issue 12): each one read as bash would, and a silent twin for each."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from shardcheck.api import check, resolve_script
from shardcheck.cli import main

V = "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer"
TP = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
VPP = "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size"


def _job(tmp_path, text: str, env=None, args=()):
    path = tmp_path / "run.sh"
    path.write_text(text)
    return resolve_script(path, env, args=args)


def _rules(tmp_path, text: str, env=None) -> dict:
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path, env)
    assert result.error is None, result.error
    return {f.rule: f for f in result.findings}


CASE = f"""MODE=${{MODE:-big}}
case "$MODE" in
  small) TP=2 ;;
  big|huge) TP=4 ;;
  *) TP=8 ;;
esac
{V} {TP}=$TP
"""


@pytest.mark.parametrize(("env", "tp"), [({}, 4), ({"MODE": "small"}, 2), ({"MODE": "huge"}, 4), ({"MODE": "x"}, 8)])
def test_case_with_known_subject_takes_its_branch(tmp_path, env, tp):
    assert _job(tmp_path, CASE, env).layout("actor").tp.value == tp


def test_case_with_unknown_subject_names_the_variable(tmp_path):
    text = CASE.replace("MODE=${MODE:-big}", "MODE=$(hostname)")
    tp = _job(tmp_path, text).layout("actor").tp
    assert not tp.known and "$MODE" in tp.unknown and "line 2" in tp.unknown


def test_case_without_a_match_runs_nothing(tmp_path):
    text = f"TP=1\ncase big in small) TP=2 ;; esac\n{V} {TP}=$TP\n"
    assert _job(tmp_path, text).layout("actor").tp.value == 1


def test_undecided_if_names_the_variables(tmp_path):
    text = f'if [ "$GPUS" -gt 8 ]; then TP=8; else TP=4; fi\n{V} {TP}=$TP\n'
    tp = _job(tmp_path, text).layout("actor").tp
    assert not tp.known and "$GPUS" in tp.unknown
    assert _job(tmp_path, text, {"GPUS": "16"}).layout("actor").tp.value == 8


@pytest.mark.parametrize(("flag", "vpp"), [("1", 2), ("0", None)])
def test_test_and_or_assignment(tmp_path, flag, vpp):
    """`[ c ] && x=a || x=b` gives a when c holds, else b (it was read as x=b, hiding a VPP of 2)."""
    text = f'USE_VPP={flag}\n[ "$USE_VPP" = 1 ] && VPP=2 || VPP=null\n{V} {VPP}=$VPP\n'
    assert _job(tmp_path, text).layout("actor").vpp.value == vpp


def test_test_and_or_unknown_is_unknown(tmp_path):
    text = f"[ -f /etc/x ] && VPP=2 || VPP=null\n{V} {VPP}=$VPP\n"
    vpp = _job(tmp_path, text).layout("actor").vpp
    assert not vpp.known and "line 1" in vpp.unknown


def test_plain_and_list_still_runs_both(tmp_path):
    text = f"cd /tmp && {V} {TP}=2\n"
    assert _job(tmp_path, text).layout("actor").tp.value == 2


def test_escaped_space_before_comment(tmp_path):
    """bash passes a ' ' word (Hydra rejects it) and ends the command at the comment."""
    text = f"{V} \\\n  trainer.nnodes=1 \\ # one node\n  trainer.n_gpus_per_node=4\n"
    rules = _rules(tmp_path, text)
    assert rules["SHELL-CONTINUATION"].line == 2
    assert "HYDRA-OVERRIDE" in rules
    assert _job(tmp_path, text).cluster.devices_per_node.value == 8  # the line below is not part of it
    silent = _rules(tmp_path, f"{V} \\\n  trainer.nnodes=1 \\\n  trainer.n_gpus_per_node=4 # one node\n")
    assert "SHELL-CONTINUATION" not in silent and "HYDRA-OVERRIDE" not in silent


@pytest.mark.parametrize(
    ("tail", "expect"), [("\n", "unexpected token `newline'"), (" \\\n  trainer.nnodes=1\n", "reads as redirections")]
)
def test_placeholder_is_shell_syntax(tmp_path, tail, expect):
    text = f"{V} \\\n  actor_rollout_ref.model.path=<your model path>{tail}"
    finding = _rules(tmp_path, text)["SHELL-SYNTAX"]
    assert finding.line == 2 and expect in finding.message


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_placeholder_agrees_with_bash(tmp_path):
    """bash -n (parse only) rejects the placeholder at the end of a command, accepts it before another word."""
    bad, good = tmp_path / "bad.sh", tmp_path / "good.sh"
    bad.write_text(f"{V} \\\n  actor_rollout_ref.model.path=<MODEL>\n")
    good.write_text(f"{V} \\\n  actor_rollout_ref.model.path=<MODEL> \\\n  trainer.nnodes=1\n")
    assert subprocess.run(["bash", "-n", str(bad)], capture_output=True, check=False).returncode == 2
    assert subprocess.run(["bash", "-n", str(good)], capture_output=True, check=False).returncode == 0


def test_real_redirections_are_not_placeholders(tmp_path):
    text = f'cat <input.txt >out.txt\necho "<a>" > x\n{V} trainer.nnodes=1 2>&1 | tee log.txt\n'
    assert "SHELL-SYNTAX" not in _rules(tmp_path, text)


@pytest.mark.parametrize("entry", ['python3 "${SLIME_DIR}/train.py"', "python3 ${SLIME_DIR}/train.py"])
def test_unknown_directory_known_file_name(tmp_path, entry):
    text = (
        f"ray job submit -- {entry} --actor-num-nodes 1 --actor-num-gpus-per-node 8 --rollout-num-gpus 8 "
        "--rollout-num-gpus-per-engine 8 --rollout-batch-size 32 --n-samples-per-prompt 8 "
        "--global-batch-size 256 --tensor-model-parallel-size 2\n"
    )
    job = _job(tmp_path, text)
    assert job.framework == "slime" and job.layout("actor").tp.value == 2


def test_unknown_directory_unknown_file_is_no_launch(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text('python3 "${DIR}/${ENTRY}" --x 1\n')
    assert check(path).error is not None


@pytest.mark.parametrize("runner", ['bash -c "$CMD"', 'srun -N 1 bash -c "$CMD"', 'nohup sh -c "$CMD"'])
def test_command_string_run_by_bash_c(tmp_path, runner):
    text = f'CMD="{V} {TP}=2 trainer.nnodes=1"\n{runner}\n'
    job = _job(tmp_path, text)
    assert job.layout("actor").tp.value == 2
    assert job.layout("actor").tp.origin.first_script_line().line == 1


def test_bash_c_with_unknown_string_is_no_launch(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text('bash -c "$(cat cmd.txt)"\n')
    assert "no launch command" in check(path).error


def test_other_module_is_named(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("python3 -m pip install x\npython3 -m my.trainer a=b\n")
    error = check(path).error
    assert "not modelled: my.trainer" in error and "pip" not in error.split("not modelled")[1].split("(")[0]


def test_positional_parameters_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "run.sh"
    path.write_text(f'{V} trainer.nnodes=1 "$@"\n')
    assert _job(tmp_path, path.read_text(), args=("trainer.n_gpus_per_node=4",)).cluster.devices_per_node.value == 4
    assert _job(tmp_path, path.read_text()).cluster.devices_per_node.value == 8
    main(["check", str(path), "--format", "json", "--", "trainer.n_gpus_per_node=2"])
    assert '"world": 2' in capsys.readouterr().out


def test_unterminated_quote_is_unusable_input(tmp_path, capsys):
    path = tmp_path / "run.sh"
    path.write_text(f'{V} trainer.nnodes="1\n')
    assert main(["check", str(path)]) == 1  # an unusable input: one INPUT-UNUSABLE error line (README)
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "unterminated double quote" in x]
    assert "run.sh:1: INPUT-UNUSABLE error" in line
    assert check(path).status == "failed"
    path.write_text(f'{V} trainer.nnodes=1\necho "unclosed\n')  # after the launch: bash has started it
    assert check(path).error is None


def test_arithmetic_error_at_its_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(f"N=4\nX=$((2+))\n{V} trainer.nnodes=$X\n")
    error = check(path).error
    assert error.startswith(f"{path}:2:") and "operand expected" in error
    path.write_text(f"N=4\nX=$((2+N))\n{V} trainer.nnodes=$X\n")
    assert check(path).error is None


def test_case_subject_from_cli_env(tmp_path, capsys):
    path = tmp_path / "run.sh"
    path.write_text(CASE)
    main(["check", str(path), "--format", "json", "--env", "MODE=small"])
    small = capsys.readouterr().out
    main(["check", str(path), "--format", "json"])
    default = capsys.readouterr().out
    assert '"tp": 2' in small and '"tp": 2' not in default and '"tp": 4' in default


@pytest.mark.parametrize(
    "entry", ['"${MEGATRON_DIR}/pretrain_gpt.py"', "${D}/pretrain_gpt.py", "$MEGATRON_PATH/pretrain_gpt.py"]
)
def test_unknown_directory_megatron_lm_entry(tmp_path, entry):
    job = _job(tmp_path, f"torchrun --nproc-per-node 8 {entry} --tensor-model-parallel-size 2\n")
    assert job.framework == "megatron-lm" and job.layout("actor").tp.value == 2


@pytest.mark.parametrize("runner", ["srun $CMD", "srun -N 1 --ntasks-per-node 1 $CMD"])
def test_command_string_run_by_srun(tmp_path, runner):
    job = _job(tmp_path, f'CMD="{V} {TP}=2 trainer.nnodes=1"\n{runner}\n')
    assert job.framework == "verl" and job.layout("actor").tp.value == 2
    assert job.layout("actor").tp.origin.first_script_line().line == 1
