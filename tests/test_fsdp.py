"""verl's FSDP / FSDP2 engine: resolution of the engine keys, the batch rules judged with DP = world / SP,
the Ulysses rules, and the JSON layout (the issue's Qwen2.5-14B example)."""

from __future__ import annotations

import json

import pytest
from test_rules import FSDP, script

from shardcheck.api import check
from shardcheck.report.json_report import result_to_dict

A = "actor_rollout_ref.actor"
REF = "actor_rollout_ref.ref"
RO = "actor_rollout_ref.rollout"


def run(tmp_path, text: str, env=None):
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path, env)
    assert result.error is None, result.error
    return result


def rules(result, rule_id: str):
    return [f for f in result.findings if f.rule == rule_id]


def qwen14(tmp_path, nodes: int, sp: int):
    """The issue's example: Qwen2.5-14B (40 heads, 8 KV heads) at 64K context under FSDP."""
    text = (
        f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
        f"actor_rollout_ref.model.path=/models/Qwen2.5-14B trainer.nnodes={nodes} "
        f"trainer.n_gpus_per_node=8 data.max_prompt_length=2048 data.max_response_length=63488 "
        f"data.train_batch_size=32 {A}.ppo_mini_batch_size=16 {A}.use_dynamic_bsz=True "
        f"{A}.ppo_max_token_len_per_gpu=16384 {A}.ulysses_sequence_parallel_size={sp} "
        f"{RO}.name=vllm {RO}.tensor_model_parallel_size=4 {RO}.n=8 {RO}.max_model_len=65536\n"
    )
    return run(tmp_path, text)


def test_qwen25_14b_sp8_on_8_gpus_is_valid(tmp_path):
    result = qwen14(tmp_path, nodes=1, sp=8)
    assert result.valid is True, [(f.rule, f.message) for f in result.findings]
    layout = result_to_dict(result)["layout"]
    assert layout["strategy"] == "fsdp" and layout["sp"] == 8 and layout["dp"] == 1 and layout["world"] == 8
    assert layout["fsdp_size"] == -1 and layout["shard"] == 8 and layout["replicate"] == 1
    assert layout["tp"] is None and layout["pp"] is None and layout["layers_per_stage"] is None


def test_qwen25_14b_sp16_on_16_gpus_is_an_error_listing_valid_sizes(tmp_path):
    result = qwen14(tmp_path, nodes=2, sp=16)
    found = rules(result, "VERL-FSDP-SP-HEADS")
    assert result.valid is False and result.layout_valid is False
    assert len(found) == 1 and "num_attention_heads 40 must be divisible by ulysses_sp_size 16" in found[0].message
    assert "in 1, 2, 4, 8, 40 " in found[0].fix
    assert found[0].fix.startswith(f"{A}.ulysses_sequence_parallel_size")  # the key the script set
    assert found[0].line == 1


@pytest.mark.parametrize(
    ("heads", "kv", "valid"),
    [
        (40, 8, [1, 2, 4, 8, 40]),
        (32, 4, [1, 2, 4, 8, 16, 32]),
        (28, 4, [1, 2, 4, 28]),
        (64, 64, [1, 2, 4, 8, 16, 32, 64]),
    ],
)
def test_ulysses_sizes(heads, kv, valid):
    from shardcheck.rules.verl_fsdp import ulysses_sizes

    assert ulysses_sizes(heads, kv) == valid


def test_kv_heads_rule_fires_when_heads_divide(tmp_path):
    # Qwen2.5-7B: 28 heads, 4 KV heads; SP 14 divides the heads, but neither 4 % 14 nor 14 % 4.
    result = run(tmp_path, script(f"{A}.ulysses_sequence_parallel_size=14", model="Qwen2.5-7B", gpus=14, config=FSDP))
    found = rules(result, "VERL-FSDP-SP-HEADS")
    assert found and "num_key_value_heads 4 must be divisible by ulysses_sp_size 14 or vise versa" in found[0].message


def test_role_level_sp_overrides_the_engine_and_reaches_the_ref(tmp_path):
    result = run(
        tmp_path,
        script(
            f"{A}.use_kl_loss=True {A}.ulysses_sequence_parallel_size=4 "
            f"{A}.fsdp_config.ulysses_sequence_parallel_size=2",
            config=FSDP,
        ),
    )
    job = result.job
    assert [lay.role for lay in job.fsdp_layouts] == ["actor", "ref", "critic"]
    assert job.fsdp_layout("actor").sp.value == 4 and job.fsdp_layout("ref").sp.value == 4
    assert job.fsdp_layout("critic").sp.value == 1
    assert job.trainer_dp("actor").value == 2 and job.trainer_dp("critic").value == 8
    assert not rules(result, "VERL-FSDP-REF-SP")


def test_engine_level_sp_does_not_reach_the_ref(tmp_path):
    result = run(
        tmp_path, script(f"{A}.use_kl_loss=True {A}.fsdp_config.ulysses_sequence_parallel_size=4", config=FSDP)
    )
    assert result.job.fsdp_layout("ref").sp.value == 1
    found = rules(result, "VERL-FSDP-REF-SP")
    assert found and found[0].fix.startswith(f"{REF}.fsdp_config.ulysses_sequence_parallel_size=4")


def test_no_ref_no_critic_without_kl_and_gae(tmp_path):
    result = run(tmp_path, script("algorithm.adv_estimator=grpo", config=FSDP))
    assert [lay.role for lay in result.job.fsdp_layouts] == ["actor"]


def test_megatron_jobs_have_no_fsdp_layouts_and_fsdp_jobs_no_megatron_ones(tmp_path):
    megatron = run(tmp_path, script())
    assert megatron.job.fsdp_layouts == () and megatron.job.layouts
    assert result_to_dict(megatron)["layout"]["strategy"] == "megatron"
    assert result_to_dict(megatron)["layout"]["sp"] is None
    fsdp = run(tmp_path, script(f"{A}.strategy=fsdp2", config=FSDP))
    assert fsdp.job.layouts == () and fsdp.job.fsdp_layout("actor").strategy.value == "fsdp2"
    assert fsdp.job.fsdp_layout("ref") is None or fsdp.job.fsdp_layout("ref").strategy.value == "fsdp2"


def test_hybrid_sharding_sizes(tmp_path):
    result = run(
        tmp_path, script(f"{A}.fsdp_config.fsdp_size=8 {A}.fsdp_config.param_offload=True", nodes=2, config=FSDP)
    )
    layout = result_to_dict(result)["layout"]
    assert (layout["shard"], layout["replicate"], layout["param_offload"]) == (8, 2, True)
    assert result.valid is True


def test_fsdp_size_zero_is_an_error(tmp_path):
    found = rules(run(tmp_path, script(f"{A}.fsdp_config.fsdp_size=0", config=FSDP)), "VERL-FSDP-SIZE")
    assert found and "divides by zero" in found[0].message


# The batch rules judge FSDP jobs with DP = world / SP (verl FSDPEngine.get_data_parallel_size).


def test_mini_batch_is_split_over_world_over_sp(tmp_path):
    # 8 GPUs, SP 2: DP 4. mini 6 · n 1 = 6 does not divide over 4; with SP 1 (DP 8) it does not either,
    # and with SP 4 (DP 2) it does.
    base = f"data.train_batch_size=24 {A}.ppo_mini_batch_size=6"
    found = rules(
        run(tmp_path, script(f"{base} {A}.ulysses_sequence_parallel_size=2", config=FSDP)), "VERL-ENG-MINI-DP"
    )
    assert found and "self.engine.get_data_parallel_size()=4" in found[0].message
    assert not rules(
        run(tmp_path, script(f"{base} {A}.ulysses_sequence_parallel_size=4", config=FSDP)), "VERL-ENG-MINI-DP"
    )


def test_real_batch_divides_by_the_gpus_for_fsdp(tmp_path):
    # validate_config: minimal_bsz = n_gpus for non-megatron strategies, whatever SP and micro are.
    found = rules(
        run(
            tmp_path,
            script(
                f"data.train_batch_size=12 {A}.ppo_mini_batch_size=4 {A}.ulysses_sequence_parallel_size=4", config=FSDP
            ),
        ),
        "VERL-CFG-REAL-BSZ",
    )
    assert found and "minimal possible batch size (8)" in found[0].message
    assert not rules(
        run(
            tmp_path,
            script(
                f"data.train_batch_size=16 {A}.ppo_mini_batch_size=4 {A}.ppo_micro_batch_size_per_gpu=2", config=FSDP
            ),
        ),
        "VERL-CFG-REAL-BSZ",
    )


def test_token_budget_is_multiplied_by_sp(tmp_path):
    long = f"{A}.use_dynamic_bsz=True data.max_prompt_length=1024 data.max_response_length=32768"
    found = rules(run(tmp_path, script(long, config=FSDP)), "VERL-ENG-DYN-TOKENS")
    assert found and "· SP 1 =" in found[0].message
    assert not rules(
        run(tmp_path, script(f"{long} {A}.ulysses_sequence_parallel_size=4", config=FSDP)), "VERL-ENG-DYN-TOKENS"
    )


def test_micro_batch_per_rank_uses_fsdp_dp(tmp_path):
    # mini 16 over DP 8 (SP 1) = 2 per rank: micro 4 does not divide; with SP 4, DP 2: 8 per rank, it does.
    base = f"data.train_batch_size=16 {A}.ppo_mini_batch_size=16 {A}.ppo_micro_batch_size_per_gpu=4"
    assert rules(run(tmp_path, script(base, config=FSDP)), "VERL-ENG-MICRO-DIV")
    assert not rules(
        run(tmp_path, script(f"{base} {A}.ulysses_sequence_parallel_size=4", config=FSDP)), "VERL-ENG-MICRO-DIV"
    )


def test_actor_micro_batch_messages_for_fsdp(tmp_path):
    none = rules(run(tmp_path, script(f"{A}.ppo_micro_batch_size_per_gpu=null", config=FSDP)), "VERL-ACT-MBS")
    assert none and "Please set at least one of" in none[0].message
    legacy = rules(
        run(tmp_path, script(f"{A}.ppo_micro_batch_size_per_gpu=null {A}.ppo_micro_batch_size=8", config=FSDP)),
        "VERL-ACT-MBS",
    )
    assert legacy and "deprecated" in legacy[0].message


def test_vlm_without_verl_slicing_patch_warns(tmp_path):
    model = tmp_path / "llava"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llava",
                "vision_config": {"model_type": "clip_vision_model"},
                "text_config": {
                    "model_type": "llama",
                    "num_hidden_layers": 32,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "hidden_size": 4096,
                },
            }
        )
    )
    text = script(f"{A}.ulysses_sequence_parallel_size=2", config=FSDP).replace("/models/Qwen3-30B-A3B", str(model))
    found = rules(run(tmp_path, text), "VERL-FSDP-SP-NOPATCH")
    assert found and "type llava" in found[0].message
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "qwen2_5_vl",
                "vision_config": {"depth": 32},
                "text_config": {
                    "model_type": "qwen2_5_vl_text",
                    "num_hidden_layers": 28,
                    "num_attention_heads": 28,
                    "num_key_value_heads": 4,
                    "hidden_size": 3584,
                },
            }
        )
    )
    assert not rules(run(tmp_path, text), "VERL-FSDP-SP-NOPATCH")


def test_unknown_sp_is_reported_not_assumed(tmp_path):
    result = run(tmp_path, script(f"{A}.ulysses_sequence_parallel_size=$SP", config=FSDP))
    assert result.valid is None
    assert any(f.rule == "VALUE-UNKNOWN" and "$SP" in f.message for f in result.findings)
    assert result_to_dict(result)["layout"]["sp"] is None
    assert run(tmp_path, script(f"{A}.ulysses_sequence_parallel_size=$SP", config=FSDP), env={"SP": "2"}).valid


def test_text_report_shows_the_fsdp_layout(tmp_path):
    from shardcheck.report.text import render_text

    out = render_text([run(tmp_path, script(f"{A}.ulysses_sequence_parallel_size=2", config=FSDP))])
    assert "training layout (actor, fsdp): SP 2, DP 4" in out


def test_mesh_of_an_fsdp_job_says_there_are_no_megatron_groups(tmp_path, capsys):
    from shardcheck.cli import main

    path = tmp_path / "run.sh"
    path.write_text(script(f"{A}.ulysses_sequence_parallel_size=2", config=FSDP))
    assert main(["mesh", str(path)]) == 0
    assert "no Megatron-Core engine: this job trains under FSDP" in capsys.readouterr().out


def test_critic_on_the_same_model_gets_the_head_check(tmp_path):
    bad = (
        "algorithm.adv_estimator=gae critic.model.path=/models/Qwen2.5-14B critic.ppo_micro_batch_size_per_gpu=1 "
        "critic.fsdp.ulysses_sequence_parallel_size=16 critic.ulysses_sequence_parallel_size=16"
    )
    found = rules(run(tmp_path, script(bad, model="Qwen2.5-14B", nodes=2, config=FSDP)), "VERL-FSDP-SP-HEADS")
    assert [f.role for f in found] == ["critic"]
    other = bad.replace("critic.model.path=/models/Qwen2.5-14B", "critic.model.path=/models/my-critic")
    assert not rules(run(tmp_path, script(other, model="Qwen2.5-14B", nodes=2, config=FSDP)), "VERL-FSDP-SP-HEADS")


def test_old_critic_engine_spelling_points_at_the_new_one(tmp_path):
    """verl up to v0.7 kept the critic engine under critic.model.fsdp_config (v0.8 moved it to critic.fsdp)."""
    found = rules(
        run(tmp_path, script("critic.model.fsdp_config.param_offload=True", config=FSDP)), "VERL-CFG-UNKNOWN-KEY"
    )
    assert found and "critic.fsdp.param_offload" in found[0].fix


def test_critic_engine_key_alone_is_not_flagged(tmp_path):
    result = run(
        tmp_path, script("algorithm.adv_estimator=gae critic.fsdp.ulysses_sequence_parallel_size=2", config=FSDP)
    )
    assert result.job.fsdp_layout("critic").sp.value == 2
    assert not rules(result, "VERL-FSDP-CRITIC-SP")


@pytest.mark.parametrize("version", ["0.4.0", "0.5.0", "0.7.1"])
def test_critic_mesh_before_0_8_is_read_from_critic_model_fsdp_config(tmp_path, version):
    """verl < 0.8 builds the critic's mesh from critic.model.fsdp_config.fsdp_size (fsdp_workers.py CriticWorker,
    v0.7.1 line 1311): that key decides, and the critic is judged, not left undecided."""
    text = script(
        "algorithm.adv_estimator=gae critic.model.path=/models/Qwen2.5-7B critic.ppo_micro_batch_size_per_gpu=1 "
        "critic.model.fsdp_config.fsdp_size=3",
        config=FSDP,
    )
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path, verl_version=version)
    critic = result.job.fsdp_layout("critic")
    assert critic.key_prefix == "critic.model.fsdp_config" and critic.fsdp_size.value == 3
    found = rules(result, "VERL-FSDP-SIZE")
    assert [f.role for f in found] == ["critic"] and "critic.model.fsdp_config.fsdp_size" in str(found[0].fix or "")
    assert not rules(result, "VALUE-UNKNOWN")
    good = tmp_path / "good.sh"
    good.write_text(text.replace("fsdp_size=3", "fsdp_size=-1"))
    assert not rules(check(good, verl_version=version), "VERL-FSDP-SIZE")


def test_critic_mesh_from_0_8_is_read_from_critic_fsdp(tmp_path):
    result = run(tmp_path, script("algorithm.adv_estimator=gae critic.fsdp.fsdp_size=3", config=FSDP))
    assert result.job.fsdp_layout("critic").key_prefix == "critic.fsdp"
