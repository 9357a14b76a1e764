"""VLLM-EPLB beyond its case file: EPLB without expert parallelism, and eplb_config given as vLLM's JSON text."""

from __future__ import annotations

import pytest

from shardcheck.api import check
from shardcheck.rules.examples import verl_launch
from shardcheck.rules.vllm_engine import redundant_experts

RO = "actor_rollout_ref.rollout"


def _messages(tmp_path, words: str) -> list[str]:
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(words, gpus=6))
    return [f.message for f in check(path).findings if f.rule == "VLLM-EPLB"]


def test_eplb_without_expert_parallel(tmp_path):
    (message,) = _messages(tmp_path, f"{RO}.tensor_model_parallel_size=2 +{RO}.engine_kwargs.vllm.enable_eplb=True")
    assert message.startswith("enable_expert_parallel must be True to use EPLB.")


def test_silent_without_eplb(tmp_path):
    assert (
        _messages(tmp_path, f"{RO}.tensor_model_parallel_size=2 {RO}.data_parallel_size=3 {RO}.expert_parallel_size=6")
        == []
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, 0),
        ({"num_redundant_experts": 4}, 4),
        ('{"num_redundant_experts": 2}', 2),
        ("{oops", None),
        ({"num_redundant_experts": "x"}, None),
    ],
)
def test_redundant_experts(given, expected):
    assert redundant_experts(given) == expected
