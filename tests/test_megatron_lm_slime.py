"""Megatron-LM and slime launches: flags, source following, the shipped examples, slime's own scripts."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from shardcheck.api import check, mesh
from shardcheck.frameworks.megatron_lm.flags import MEGATRON_LM_FLAGS, read_flags
from shardcheck.inputs.bash import read_bash, read_bash_text
from shardcheck.inputs.launch import find_launches
from shardcheck.rules.registry import render, rule_id

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def _flags(line: str):
    (launch,) = find_launches(read_bash_text(line.encode() + b"\n", "run.sh").commands)
    return read_flags(launch.args, MEGATRON_LM_FLAGS, {})


def test_flags_last_wins_equals_form_and_booleans():
    f = _flags(
        "python3 pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel "
        "--tensor-model-parallel-size=8 --num-layers 4"
    )
    assert f.get("--tensor-model-parallel-size").value == 8
    assert f.get("--sequence-parallel").value is True
    assert f.get("--pipeline-model-parallel-size").value == 1
    assert f.get("--pipeline-model-parallel-size").origin.kind == "default"
    assert f.get("--no-overlap-p2p-communication").value is True  # store_false: the overlap stays on


def test_unknown_flag_values_are_skipped_and_typos_reported():
    f = _flags("python3 pretrain_gpt.py --some-list 1 2 $(seq 3 4) --tensor-model-paralel-size 4 --num-layers 8")
    assert f.get("--num-layers").value == 8
    assert not f.open_arguments  # the $(...) is a value of --some-list
    assert [rule_id(n.kind) for n in f.notes] == ["MLM-FLAG-UNKNOWN"]
    assert "--tensor-model-parallel-size" in render(f.notes[0]).fix


def test_unknown_word_in_flag_position_is_an_open_argument():
    f = _flags("python3 pretrain_gpt.py --num-layers 8 $EXTRA_ARGS")
    assert len(f.open_arguments) == 1


def test_source_follows_files_with_their_own_origins(tmp_path):
    _write(
        tmp_path,
        "models/m.sh",
        """
        # model
        MODEL_ARGS=(--num-layers ${NL:-12})
    """,
    )
    run = _write(
        tmp_path,
        "run.sh",
        """
        DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
        NL=30 source "${DIR}/models/m.sh"
        . $DIR/missing.sh
        source run.sh
        printf -v TP "%d" 4
        python3 pretrain_gpt.py ${MODEL_ARGS[@]} --tensor-model-parallel-size $TP
    """,
    )
    reading = read_bash(run, display="run.sh")
    (launch,) = find_launches(reading.commands)
    words = [w.text for w in launch.args]
    assert words == ["--num-layers", "30", "--tensor-model-parallel-size", "4"]
    origin = launch.args[0].value_origin(0).first_script_line()
    assert (origin.path, origin.line) == ("models/m.sh", 2)
    assert "NL" not in reading.variables  # `NL=30 source f` holds only while f runs
    messages = [render(d).message for d in reading.diagnostics if rule_id(d.kind) == "SHELL-SOURCE"]
    assert len(messages) == 2
    assert "does not exist" in messages[0] and "already being read" in messages[1]


def test_shipped_slime_example_is_valid_with_its_layout():
    result = check(EXAMPLES / "slime" / "run-qwen3-235B-A22B-8x8.sh")
    assert result.error is None and result.job.framework == "slime"
    assert result.valid is True
    s = result.layout_summary()
    assert (s["world"], s["tp"], s["pp"], s["cp"], s["ep"], s["etp"], s["dp"], s["edp"]) == (64, 4, 4, 2, 16, 1, 2, 1)
    assert s["layers_per_stage"] == [24, 24, 24, 22]
    ro = mesh(result.job).rollout
    assert ro.count == 2 and ro.tp == 32
    assert result.job.rollout.dp.value == 4 and result.job.rollout.ep.value == 32
    last = result.job.layout("actor").last_stage_layers
    assert last.origin.first_script_line().line == 32
    assert result.job.value("--global-batch-size").value == 64


def test_shipped_slime_example_on_one_node_fails_as_megatron_core_does():
    result = check(EXAMPLES / "slime" / "run-qwen3-235B-A22B-1x8-ep8.sh")
    assert result.valid is False
    (f,) = [f for f in result.findings if f.severity == "error"]
    assert f.rule == "MCORE-PS-EXPERT-FOLD"
    assert "world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (16)" in f.message
    assert "EP 8 · ETP 1 · PP 2 = 16" in f.message


def test_shipped_megatron_lm_example_reads_torchrun():
    result = check(EXAMPLES / "megatron_lm_pretrain_gpt.sh")
    assert result.job.framework == "megatron-lm" and result.valid is True
    s = result.layout_summary()
    assert (s["world"], s["vpp"], s["dp"], s["edp"]) == (16, 2, 2, 1)
    assert check(EXAMPLES / "megatron_lm_pretrain_gpt.sh", {"NNODES": "3"}).valid is False


def test_verl_only_rules_stay_silent_on_flag_jobs():
    result = check(EXAMPLES / "slime" / "run-qwen3-235B-A22B-8x8.sh")
    assert not [f for f in result.findings if f.rule.startswith(("VERL-", "VLLM-"))]


def test_tp_pp_dp_mapping_sets_megatron_lms_order(tmp_path):
    run = _write(
        tmp_path,
        "run.sh",
        """
        torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --num-attention-heads 8 --use-tp-pp-dp-mapping \\
            --pipeline-model-parallel-size 2 --expert-model-parallel-size 8 --num-experts 8 \\
            --expert-tensor-parallel-size 1 --tensor-model-parallel-size 1 --context-parallel-size 1
    """,
    )
    result = check(run)
    assert result.job.layout("actor").order == "tp-cp-ep-pp-dp"
    assert "MCORE-PS-EXPERT-FOLD" in {f.rule for f in result.findings}


@pytest.mark.skipif(not os.environ.get("SLIME_CHECKOUT"), reason="set SLIME_CHECKOUT to a slime checkout")
def test_every_slime_script_is_read_without_a_crash():
    root = Path(os.environ["SLIME_CHECKOUT"]) / "scripts"
    scripts = sorted(p for p in root.rglob("run*.sh"))
    assert scripts, f"no run*.sh under {root}"
    counts = {"read": 0, "valid": 0, "invalid": 0, "undecided": 0}
    for path in scripts:
        result = check(path)
        assert result.error is None, result.error  # every launch script has a recognised launch
        assert result.job.framework == "slime", path
        counts["read"] += 1
        counts[{True: "valid", False: "invalid", None: "undecided"}[result.valid]] += 1
    print(counts)
