"""Numbers out of every range say what is wrong with them (issue 27, item 8): a model config's sizes past 2^53,
negative or below their bound, and NaN, infinite, negative or huge real numbers (``rope_theta``, a RoPE
``factor``); a script's value that is infinite, NaN or past 2^40. Each is bad input at its line; real
configs' values stay silent."""

from __future__ import annotations

import json

import pytest
from launches import SMALL_MODEL_CONFIG

from shardcheck.api import check
from shardcheck.models.facts import real_problem, whole_problem

BASE = SMALL_MODEL_CONFIG
LAUNCH = (
    "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=8 "
    "actor_rollout_ref.model.path=Qwen/Qwen3-8B {extra}\n"
)


def _config_text(field: str) -> str:
    """BASE (less the key ``field`` sets) with ``field`` on the last line but one."""
    key = json.loads("{" + field + "}").popitem()[0]
    return json.dumps({k: v for k, v in BASE.items() if k != key}, indent=1)[:-2] + ",\n " + field + "\n}"


def _config_error(tmp_path, text: str) -> str | None:
    path = tmp_path / "config.json"
    path.write_text(text)
    script = tmp_path / "run.sh"
    script.write_text(LAUNCH.format(extra=""))
    return check(script, model_config=str(path)).error


@pytest.mark.parametrize(
    "field, expected",
    [
        ('"hidden_size": 4611686018427387904', '"hidden_size": 4611686018427387904 is too large (> 2^53'),
        ('"vocab_size": 1e300', '"vocab_size": 1e+300 is too large (> 2^53'),
        ('"num_hidden_layers": -2', '"num_hidden_layers": -2 is negative (a whole number ≥ 1)'),
        ('"num_hidden_layers": 0', '"num_hidden_layers": 0 is less than 1 (a whole number ≥ 1)'),
        ('"kv_lora_rank": -1', '"kv_lora_rank": -1 is negative (a whole number ≥ 0)'),
        ('"hidden_size": NaN', '"hidden_size": NaN is not a finite number (a whole number ≥ 1)'),
        ('"hidden_size": 1024.5', '"hidden_size": 1024.5 is not a whole number ≥ 1'),
        ('"rope_theta": NaN', '"rope_theta": NaN is not a finite number (a number > 0)'),
        ('"rope_theta": Infinity', '"rope_theta": Infinity is not a finite number'),
        ('"rope_theta": -10000.0', '"rope_theta": -10000.0 is negative (a number > 0)'),
        ('"rope_theta": 0', '"rope_theta": 0 is zero (a number > 0)'),
        ('"rope_theta": 1e300', '"rope_theta": 1e+300 is too large (> 2^53'),
        ('"rope_theta": "big"', '"rope_theta": "big" is not a number > 0'),
        ('"partial_rotary_factor": -Infinity', '"partial_rotary_factor": -Infinity is not a finite number'),
        ('"rope_scaling": {"rope_type": "yarn", "factor": NaN}', '"rope_scaling.factor": NaN is not a finite number'),
        (
            '"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": -1}',
            '"rope_scaling.original_max_position_embeddings": -1 is negative',
        ),
        ('"rope_parameters": {"rope_theta": NaN}', '"rope_parameters.rope_theta": NaN is not a finite number'),
        (
            '"rope_parameters": {"full_attention": {"rope_theta": -1}}',
            '"rope_parameters.rope_theta": -1 is negative',
        ),
    ],
)
def test_config_number_out_of_range_says_what_is_wrong(tmp_path, field, expected):
    text = _config_text(field)
    error = _config_error(tmp_path, text)
    assert error is not None and expected in error, error
    assert error.endswith("give the model's config.json") and "\n" not in error
    assert f"config.json:{text.splitlines().index(' ' + field) + 1}:" in error  # the line of the field


@pytest.mark.parametrize(
    "field",
    [
        '"rope_theta": 1000000.0',
        '"rope_theta": 500000',
        '"partial_rotary_factor": 0.5',
        '"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}',
        '"rope_scaling": {"type": "linear", "factor": 2}',
        '"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}',
        '"rope_parameters": {"full_attention": {"rope_theta": 1000000.0}, "sliding_attention": {"rope_theta": 1e4}}',
        '"rope_scaling": null',
        '"hidden_size": 9007199254740992',  # 2^53 itself: the largest exact size
        '"kv_lora_rank": 0',
    ],
)
def test_config_numbers_in_range_are_read(tmp_path, field):
    text = _config_text(field)
    assert _config_error(tmp_path, text) is None


def test_the_bound_functions():
    assert whole_problem(1 << 53, 1) is None and whole_problem((1 << 53) + 1, 1).startswith("is too large")
    assert whole_problem(True, 1) == "is not a whole number ≥ 1"
    assert real_problem(1e-9, 0) is None and real_problem(float("nan"), 0).startswith("is not a finite")


def _findings(tmp_path, extra: str, rule: str) -> list[str]:
    script = tmp_path / "run.sh"
    script.write_text(LAUNCH.format(extra=extra))
    return [f.message for f in check(script).findings if f.rule == rule]


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("data.train_batch_size=1e400", "data.train_batch_size = inf: not a finite number; must be a whole number ≥ 1"),
        ("data.train_batch_size=nan", "data.train_batch_size = nan: not a finite number; must be"),
        (
            "actor_rollout_ref.rollout.gpu_memory_utilization=-1e400",
            "actor_rollout_ref.rollout.gpu_memory_utilization = -inf: not a finite number",
        ),
        (
            "data.max_prompt_length=4611686018427387904",
            "data.max_prompt_length = 4611686018427387904: too large (> 2^40); must be a whole number ≥ 1",
        ),
    ],
)
def test_script_value_out_of_every_range_says_why(tmp_path, extra, expected):
    messages = _findings(tmp_path, extra, "VALUE-BAD-RANGE")
    assert any(expected in m for m in messages), messages


def test_script_value_below_its_range_names_the_range_only(tmp_path):
    assert _findings(tmp_path, "data.train_batch_size=-1", "VALUE-BAD-RANGE") == [
        "data.train_batch_size = -1: must be a whole number ≥ 1"
    ]
    assert _findings(tmp_path, "data.train_batch_size=1024", "VALUE-BAD-RANGE") == []


def test_megatron_lm_flag_past_2_40_says_so(tmp_path):
    script = tmp_path / "pretrain.sh"
    script.write_text(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 4611686018427387904 "
        "--num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16 --lr 3e-4 --train-iters 10\n"
    )
    messages = [f.message for f in check(script).findings if f.rule == "VALUE-BAD-RANGE"]
    assert messages == ["--hidden-size 4611686018427387904: too large (> 2^40); must be a whole number ≥ 1"]
    script.write_text(script.read_text().replace("4611686018427387904", "1024"))
    assert [f.message for f in check(script).findings if f.rule == "VALUE-BAD-RANGE"] == []


@pytest.mark.parametrize(
    "value, why",
    [("4611686018427387904", ": too large (> 2^40)"), ("1e400", ": not a finite number"), ("0", ""), ("8", None)],
)
def test_parallel_size_out_of_every_range_says_why(tmp_path, value, why):
    script = tmp_path / "run.sh"
    script.write_text(LAUNCH.format(extra="").replace("trainer.nnodes=1", f"trainer.nnodes={value}"))
    messages = [f.message for f in check(script).findings if f.rule == "VALUE-BAD-SIZE"]
    if why is None:
        assert messages == []
    else:
        shown = "inf" if value == "1e400" else value
        assert messages == [f"trainer.nnodes must be a positive integer (at most 2^40), got {shown}{why}"]


@pytest.mark.parametrize(("value", "bad"), [("0", False), ("2", False), ("-1", True)])
def test_megatron_lm_mtp_num_layers_0_is_no_mtp(tmp_path, value, bad):
    """--mtp-num-layers 0 turns MTP off (megatron-core 0.16.1 builds no MTP block for 0 layers); MindSpeed-LLM's
    deepseek4 acceptance scripts pass it (a false VALUE-BAD-RANGE on 4 scripts of the ecosystem corpus)."""
    script = tmp_path / "pretrain.sh"
    script.write_text(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
        f"--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 "
        f"--lr 3e-4 --train-iters 10 --mtp-num-layers {value}\n"
    )
    messages = [f.message for f in check(script).findings if f.rule == "VALUE-BAD-RANGE"]
    assert messages == ([f"--mtp-num-layers {value}: must be a whole number ≥ 0"] if bad else [])
