"""Accelerator probes answered by the cluster the user names (issue 28, item 1; inputs/shell_probe.py)."""

from __future__ import annotations

import textwrap

import pytest

from shardcheck.api import check
from shardcheck.errors import SettingsError
from shardcheck.inputs.bash import read_bash_text
from shardcheck.inputs.shell_probe import Machine, answer
from shardcheck.rules.examples import verl_launch
from shardcheck.settings import read_settings

H100 = Machine("cuda", 8, 2, "--device h100")
NPU = Machine("npu", 16, None, "--device 910c")


def var(src: str, name: str, machine=None, env=None):
    reading = read_bash_text(textwrap.dedent(src).lstrip("\n").encode(), "t.sh", env, machine=machine)
    return reading.variables[name].as_scalar()


KIND = "DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}\n"


@pytest.mark.parametrize(
    ("machine", "value"),
    [(H100, "gpu"), (NPU, "npu")],
)
def test_the_torch_npu_probe_is_answered_by_the_device(machine, value):
    field = var(KIND, "DEVICE", machine)
    assert field.text == value
    origin = field.segs[0].origin
    assert (origin.line, origin.text) == (1, f"accelerator probe, answered by {machine.given}")


def test_without_a_device_the_probe_stays_unknown_and_names_device():
    field = var(KIND, "DEVICE")
    assert field.text is None
    assert "--device" in field.unknowns[0].unknown


def test_an_environment_value_still_wins_over_the_probe():
    assert var(KIND, "DEVICE", H100, {"DEVICE": "npu"}).text == "npu"


@pytest.mark.parametrize(
    "probe",
    [
        '$(python -c "import torch_npu" &>/dev/null && echo npu || echo cuda)',
        "`python3 -c 'import torch_npu' > /dev/null 2>&1 && echo npu || echo cuda`",
        "$(python3 -c 'from torch_npu.contrib import transfer_to_npu' 2>&1 >/dev/null && echo npu || echo cuda)",
    ],
)
def test_the_probe_is_recognised_by_what_it_asks_not_its_text(probe):
    assert var(f"D={probe}\n", "D", H100).text == "cuda"
    assert var(f"D={probe}\n", "D", NPU).text == "npu"


@pytest.mark.parametrize(
    ("probe", "cuda", "npu"),
    [
        ("$(nvidia-smi -L | wc -l)", "8", "0"),
        ("$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)", "8", "0"),
        ("$(python3 -c 'import torch; print(torch.cuda.device_count())')", "8", "0"),
        ("$(python3 -c 'import torch, torch_npu; print(torch.npu.device_count())')", "", "16"),
        ("$(echo $CUDA_VISIBLE_DEVICES | tr ',' '\\n' | wc -l)", "8", "16"),
        ("$(echo ${CUDA_VISIBLE_DEVICES} | tr ',' ' ' | wc -w)", "8", "16"),
        ("$(echo $CUDA_VISIBLE_DEVICES | awk -F, '{print NF}')", "8", "16"),
    ],
)
def test_device_counts(probe, cuda, npu):
    assert var(f"N={probe}\n", "N", H100).text == cuda
    assert var(f"N={probe}\n", "N", NPU).text == npu


def test_a_visible_devices_count_uses_the_value_the_script_or_env_sets():
    probe = "N=$(echo $CUDA_VISIBLE_DEVICES | tr ',' '\\n' | wc -l)\n"
    assert var("export CUDA_VISIBLE_DEVICES=0,1,2,3\n" + probe, "N", H100).text == "4"
    assert var(probe, "N", H100, {"CUDA_VISIBLE_DEVICES": "0,1"}).text == "2"
    assert var("CUDA_VISIBLE_DEVICES=$(cat f)\n" + probe, "N", H100).text is None


def test_a_count_without_devices_per_node_is_unknown_and_says_which_setting():
    field = var("N=$(nvidia-smi -L | wc -l)\n", "N", Machine("cuda", None, None, "--device h100"))
    assert field.text is None
    assert "devices-per-node" in field.unknowns[0].unknown


def test_a_probe_as_an_if_condition():
    src = """
        if python3 -c "import torch_npu" &>/dev/null; then K=npu; else K=cuda; fi
        if npu-smi info > /dev/null 2>&1; then J=npu; else J=cuda; fi
    """
    assert var(src, "K", H100).text == "cuda"
    assert var(src, "J", NPU).text == "npu"
    unknown = var(src, "K")
    assert unknown.text is None and "--device" in unknown.unknowns[0].unknown


def test_a_probe_in_an_and_or_list():
    src = "python3 -c 'import torch_npu' 2>/dev/null && D=npu || D=cuda\n"
    assert var(src, "D", H100).text == "cuda"
    assert var(src, "D", NPU).text == "npu"
    assert var(src, "D").text is None  # before: both assignments ran and D read "cuda" whatever the machine


def test_a_case_on_an_unanswered_probe_names_device():
    src = KIND + 'case "$DEVICE" in\n  npu) N=16 ;;\n  gpu) N=8 ;;\nesac\n'
    assert var(src, "N", H100).text == "8"
    assert "give it with --device" in var(src, "N").unknowns[0].unknown


def test_a_case_on_an_uncounted_probe_names_devices_per_node():
    src = 'N=$(nvidia-smi -L | wc -l)\ncase "$N" in\n  8) TP=8 ;;\n  *) TP=1 ;;\nesac\n'
    field = var(src, "TP", Machine("cuda", None, None, "--device h100"))
    assert "give it with devices-per-node in [tool.shardcheck]" in field.unknowns[0].unknown


def test_an_output_not_modelled_asks_for_env():
    field = var("S=$(python3 -c 'import torch_npu'; echo $?)\n", "S", H100)
    assert field.text is None and "--env" in field.unknowns[0].unknown


def test_scheduler_variables():
    assert var("N=$SLURM_NNODES\n", "N", H100).text == "2"
    assert var("G=$SLURM_GPUS_ON_NODE\n", "G", H100).text == "8"
    unknown = var("N=$SLURM_NNODES\n", "N")
    assert unknown.text is None and "set nodes" in unknown.unknowns[0].unknown


def test_an_echo_of_a_variable_is_not_guessed():
    assert answer("$(python3 -c 'import torch_npu' && echo $NPU || echo cuda)", NPU, 1).text is None


@pytest.mark.parametrize(
    "text", ["$(date +%s)", "$(hostname)", "$(python3 -c 'print(1)')", "$(echo npu)", "$(nvidia-smi -L | sort)"]
)
def test_other_substitutions_are_no_probe(text):
    assert answer(text, H100, 1) is None


def test_check_decides_the_probe_with_device(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        KIND + 'case "$DEVICE" in\n  npu) N=16 ;;\n  gpu) N=8 ;;\nesac\n' + verl_launch(model="Qwen3-8B", gpus="$N")
    )
    unknown = check(script)
    assert any(f.rule == "VALUE-UNKNOWN" and "--device" in f.message for f in unknown.findings)
    decided = check(script, device="h100")
    assert decided.job.cluster.devices_per_node.value == 8
    assert not any(f.rule == "VALUE-UNKNOWN" for f in decided.findings)


def test_the_report_says_where_a_count_came_from(tmp_path, capsys):
    from shardcheck.cli import main

    (tmp_path / "pyproject.toml").write_text("[tool.shardcheck]\ndevices-per-node = 8\n")
    script = tmp_path / "run.sh"
    script.write_text("GPUS=$(nvidia-smi -L | wc -l)\n" + verl_launch(model="Qwen3-8B", gpus="$GPUS"))
    main(["check", str(script), "--device", "h100", "--exit-zero"])
    out = capsys.readouterr().out
    assert "devices   line 1: accelerator probe, answered by --device h100, devices-per-node = 8" in out


def test_cluster_settings(tmp_path):
    toml = tmp_path / "pyproject.toml"
    toml.write_text('[tool.shardcheck]\ndevice = "h100"\nnodes = 4\ndevices-per-node = 8\nonline = true\n')
    s = read_settings(toml)
    assert (s.device, s.nodes, s.devices_per_node, s.online) == ("h100", 4, 8, True)
    script = tmp_path / "run.sh"
    script.write_text("N=$SLURM_NNODES\n" + verl_launch(model="Qwen3-8B", nodes="$N"))
    assert check(script).job.cluster.nnodes.value == 4


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('device = "h9000"', "not a known device"),
        ("devices-per-node = 0", "positive whole number"),
        ('nodes = "4"', "positive whole number"),
        ('online = "yes"', "true or false"),
    ],
)
def test_bad_cluster_settings_are_one_line(tmp_path, line, said):
    toml = tmp_path / "pyproject.toml"
    toml.write_text(f"[tool.shardcheck]\n{line}\n")
    with pytest.raises(SettingsError, match=said) as err:
        read_settings(toml)
    assert str(err.value).startswith(f"{toml}:2:") and "\n" not in str(err.value)
