"""SGLang / vLLM rollout rules, the critic's batch rules and the 256K example, beyond one row per rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_rules import OTC, RO, SGL, A, M, rule_findings, script

from shardcheck.api import check
from shardcheck.report.text import render_text

CASES_DIR = Path(__file__).parent / "data" / "cases"


def test_sglang_heads_use_attention_tp_with_dp_attention(tmp_path):
    # Qwen3-30B-A3B: 32 heads. TP 4 · DP 16 = tp_size 64 without DP attention; attention TP 4 with it.
    base = f"{RO}.name=sglang {RO}.tensor_model_parallel_size=4 {RO}.data_parallel_size=16"
    found, _ = rule_findings(tmp_path, script(base, nodes=8), "SGLANG-TP-HEADS")
    assert found and "split over 64 ranks" in found[0].message and "enable_dp_attention=True" in found[0].fix
    found, _ = rule_findings(tmp_path, script(f"{base} {SGL}.enable_dp_attention=True", nodes=8), "SGLANG-TP-HEADS")
    assert not found


def test_sglang_multi_node_replica_quotes_sglang(tmp_path):
    text = script(f"{RO}.name=sglang {RO}.tensor_model_parallel_size=8 {RO}.data_parallel_size=2", nodes=2)
    found, _ = rule_findings(tmp_path, text, "SGLANG-DP-ATTN")
    assert "multi-node data parallel is not supported unless dp attention!" in found[0].message


def test_sglang_engine_kwarg_mem_fraction_wins(tmp_path):
    text = script(f"{RO}.name=sglang {RO}.gpu_memory_utilization=0.5 {SGL}.mem_fraction_static=0")
    found, _ = rule_findings(tmp_path, text, "SGLANG-MEM-FRACTION")
    assert found and "Not enough memory" in found[0].message


def test_vllm_rules_stay_silent_for_sglang_and_back(tmp_path):
    found, _ = rule_findings(tmp_path, script(f"{RO}.name=sglang {RO}.max_num_batched_tokens=128"), "VLLM-MNS-MNBT")
    assert not found
    found, _ = rule_findings(tmp_path, script(f"{RO}.gpu_memory_utilization=1.0"), "SGLANG-MEM-FRACTION")
    assert not found


def test_vllm_derived_length_text(tmp_path):
    from test_rules import CASES

    found, _ = rule_findings(tmp_path, CASES["VLLM-MAXLEN-DERIVED"][0], "VLLM-MAXLEN-DERIVED")
    assert (
        "User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=65536.0 or model_max_length=None"
    ) in found[0].message
    assert "max_model_len=65536" in found[0].fix


def test_llama3_rope_adds_no_factor_and_no_alarm(tmp_path):
    found, _ = rule_findings(tmp_path, script(model="Llama-3.1-8B"), "VLLM-MAXLEN-DERIVED")
    assert not found


def test_chunked_prefill_off_raises_the_token_budget_first(tmp_path):
    text = script(f"{RO}.enable_chunked_prefill=False {RO}.max_num_batched_tokens=128")
    found, _ = rule_findings(tmp_path, text, "VLLM-MNS-MNBT")
    assert not found  # verl raises it to max_model_len 40960 >= 256


@pytest.mark.parametrize("critic", ["algorithm.adv_estimator=gae", "algorithm.adv_estimator=grpo critic.enable=True"])
def test_critic_mini_batch_over_critic_dp(tmp_path, critic):
    # critic.megatron sizes default to 1: critic DP 8, the actor's DP (TP 2) is 4.
    text = script(f"{critic} {M}.tensor_model_parallel_size=2 data.train_batch_size=4 {A}.ppo_mini_batch_size=4")
    found, _ = rule_findings(tmp_path, text, "VERL-ENG-MINI-DP")
    assert [f.role for f in found] == ["critic"] and "DP 8" in found[0].message


def test_no_critic_with_grpo(tmp_path):
    text = script(
        f"algorithm.adv_estimator=grpo {M}.tensor_model_parallel_size=2 data.train_batch_size=4 "
        f"{A}.ppo_mini_batch_size=4 critic.ppo_micro_batch_size_per_gpu=null"
    )
    for rule_id in ("VERL-ENG-MINI-DP", "VERL-ACT-MBS"):
        found, _ = rule_findings(tmp_path, text, rule_id)
        assert not found, rule_id


def test_critic_micro_batch_and_token_budget(tmp_path):
    found, _ = rule_findings(tmp_path, script("critic.ppo_micro_batch_size_per_gpu=null"), "VERL-ACT-MBS")
    assert found[0].role == "critic" and "[critic] Please set at least one of" in found[0].message
    text = script("data.max_prompt_length=1024 data.max_response_length=32768")
    found, _ = rule_findings(tmp_path, text, "VERL-ENG-DYN-TOKENS")
    assert [f.role for f in found] == ["critic"]  # the critic's engine packs by tokens even with static batches
    assert found[0].fix.startswith("+critic.ppo_infer_max_token_len_per_gpu=33792")


def test_critic_train_batch_at_least_mini(tmp_path):
    text = script(f"data.train_batch_size=8 {A}.ppo_mini_batch_size=8 critic.ppo_mini_batch_size=16")
    found, _ = rule_findings(tmp_path, text, "VERL-ACT-TBS-MINI")
    assert [f.role for f in found] == ["critic"]


def test_vpp_with_dynamic_batch_size_needs_pp_samples_per_rank(tmp_path):
    vpp = f"{M}.pipeline_model_parallel_size=4 {M}.virtual_pipeline_model_parallel_size=2 {A}.use_dynamic_bsz=True"
    found, _ = rule_findings(
        tmp_path, script(f"{vpp} data.train_batch_size=4 {A}.ppo_mini_batch_size=4"), "VERL-ENG-VPP-MB"
    )
    assert found and "Requested 4 non-empty micro-batches, but a rank has only 2 forced groups." in found[0].message
    found, _ = rule_findings(
        tmp_path, script(f"{vpp} data.train_batch_size=8 {A}.ppo_mini_batch_size=8"), "VERL-ENG-VPP-MB"
    )
    assert not found  # verl rounds the count up to a multiple of PP itself


@pytest.mark.skipif(not CASES_DIR.is_dir(), reason="shared cases not present")
def test_256k_example_has_only_the_hydra_error_and_prints_the_rollout():
    result = check(CASES_DIR / "qwen3_235b_256k_after.sh")
    errors = [f.rule for f in result.findings if f.severity == "error"]
    assert errors == ["VERL-CFG-UNKNOWN-KEY"]
    assert "rollout    vllm: TP 4, DP 32, EP 128, PP 1; 2 replicas of 128 devices" in render_text([result])
    assert not [f for f in result.findings if f.rule == "VLLM-MNS-REQUESTS"]  # 16 requests, 64 engines of 16


@pytest.mark.skipif(not CASES_DIR.is_dir(), reason="shared cases not present")
def test_misspelt_pipeline_stage_key_is_caught_with_its_consequence(tmp_path):
    text = (
        (CASES_DIR / "qwen3_235b_256k_after.sh")
        .read_text()
        .replace("num_layers_in_first_pipeline_stage", "num_layers_in_first_pipline_stage")
    )
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path)
    typo = [f for f in result.findings if f.rule == "VERL-MC-OTC-KEY"]
    assert typo and "did you mean num_layers_in_first_pipeline_stage" in typo[0].message and typo[0].line == 63
    assert any(f.rule == "MCORE-TC-UNEVEN-MIDDLE" for f in result.findings)


def test_otc_key_ignores_real_fields(tmp_path):
    found, _ = rule_findings(tmp_path, script(f"{OTC}.recompute_granularity=selective"), "VERL-MC-OTC-KEY")
    assert not found
