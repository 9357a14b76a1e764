"""Architectures read from their HF config.json that shardcheck refused before (issue 12, item 4).

gpt-oss: tests/data/models/gpt-oss-20b/config.json is openai/gpt-oss-20b's config.json (transformers
4.55.0.dev0). Its parameter count, as transformers' GptOssForCausalLM holds it and as Megatron-Core builds it
through Megatron-Bridge's GPTOSSProvider, is 20,914,757,184; tests/test_memory.py compares the per-stage counts
with megatron-core's own GPTModel (softmax_type "learnable", add_bias_linear).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from shardcheck.api import memory
from shardcheck.memory.params import Sharding, stage_params
from shardcheck.models.architecture import NotModelled, architecture
from shardcheck.models.facts import read_config_json
from shardcheck.rules.examples import verl_launch

MODELS = Path(__file__).parent / "data" / "models"
GPT_OSS_20B = MODELS / "gpt-oss-20b"


def _total(arch) -> int:
    return stage_params(arch, tuple(range(arch.num_layers)), 0, Sharding(1, 1, 1, 1)).total


def test_gpt_oss_is_counted_from_its_config():
    arch = architecture(read_config_json(GPT_OSS_20B / "config.json"))
    assert (arch.experts, arch.topk, arch.moe_ffn, len(arch.moe_layers)) == (32, 4, 2880, 24)
    assert arch.linear_bias and arch.qkv_bias and arch.attention_sinks and arch.quantized
    assert _total(arch) == 20_914_757_184
    # without the sinks (64 per layer) and the biases the count would be short: they are what it reads
    plain = dataclasses.replace(arch, attention_sinks=False)
    assert _total(arch) - _total(plain) == 24 * 64
    assert _total(dataclasses.replace(arch, linear_bias=False)) < _total(plain)


def test_gpt_oss_attention_sinks_split_over_tp():
    arch = architecture(read_config_json(GPT_OSS_20B / "config.json"))
    one = stage_params(arch, (0,), 0, Sharding(4, 1, 1, 1))
    plain = stage_params(dataclasses.replace(arch, attention_sinks=False), (0,), 0, Sharding(4, 1, 1, 1))
    assert one.dense - plain.dense == 64 // 4


def test_other_linear_attention_is_still_refused(tmp_path):
    cfg = (GPT_OSS_20B / "config.json").read_text().replace('"gpt_oss"', '"minimax_m1"')
    (tmp_path / "config.json").write_text(cfg)
    with pytest.raises(NotModelled, match="minimax_m1"):
        architecture(read_config_json(tmp_path / "config.json"))


LAUNCH = verl_launch(
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 actor_rollout_ref.actor.megatron."
    "expert_model_parallel_size=8 actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1",
    model="gpt-oss-20b",
    nodes=2,
)


def test_a_gpt_oss_launch_gets_a_training_estimate(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(LAUNCH)
    result = memory(script, model_config=str(GPT_OSS_20B), device="H100")
    assert result.error is None, result.error
    assert result.estimate.train is not None, result.estimate.problems
    assert not [p for p in result.estimate.problems if "gpt_oss" in p]
    # before: "model_type 'gpt_oss' is not one whose Megatron-Core layers shardcheck counts"; now its stages hold
    # the experts of EP 8 (4 of 32 per rank), biases included
    assert result.estimate.train.stages[0].params.expert == 24 * 4 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)
