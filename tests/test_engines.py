"""Every engine verl builds is judged from its own section (issue 12): ref, critic, reward model, teachers."""

from __future__ import annotations

from pathlib import Path

from shardcheck.api import check
from shardcheck.report.json_report import result_to_dict
from shardcheck.report.text import render_text

CASE = Path(__file__).with_name("data") / "cases" / "qwen3_235b_256k_after.sh"
ENV = {"WORK_DIR": "/data"}
REF_OTC = "++actor_rollout_ref.ref.megatron.override_transformer_config.use_flash_attn=True"
V = "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer actor_rollout_ref.model.path=/m/Qwen3-30B-A3B"


def _case(tmp_path: Path, *extra: str) -> tuple[Path, dict[str, int]]:
    """The 256K example with ``extra`` lines added to its REF array; returns the path and each line's number."""
    text = CASE.read_text().replace("REF=(\n", "REF=(\n" + "".join(f"    {w}\n" for w in extra))
    path = tmp_path / "run.sh"
    path.write_text(text)
    lines = {w: i + 1 for i, line in enumerate(text.splitlines()) for w in extra if line.strip() == w}
    return path, lines


def test_ref_override_loses_the_actors_split(tmp_path):
    """use_kl_loss builds the ref; its ++override replaces the inherited dict: megatron-core's assert, at that line."""
    path, lines = _case(tmp_path, "actor_rollout_ref.actor.use_kl_loss=True", REF_OTC)
    result = check(path, ENV)
    (f,) = [f for f in result.findings if f.rule == "MCORE-BUILD-LAYERS-PP"]
    assert f.severity == "error" and f.message.startswith("[ref] 94 layers, PP 16")
    assert "num_layers should be divisible by pipeline_model_parallel_size" in f.message
    assert f.line == lines[REF_OTC]
    text = render_text([result])
    assert f"line {lines[REF_OTC]}: {REF_OTC} replaced" in text
    assert "first-stage layers: actor 5, ref -" in text
    doc = result_to_dict(result)
    first = next(d for d in doc["engine_differences"]["ref"] if d["setting"] == "first-stage layers")
    assert (first["actor"], first["value"], first["line"]) == (5, None, lines[REF_OTC])


def test_ref_without_override_follows_the_actor(tmp_path):
    path, _ = _case(tmp_path, "actor_rollout_ref.actor.use_kl_loss=True")
    result = check(path, ENV)
    assert not [f for f in result.findings if f.rule.startswith("MCORE-")]
    assert "the ref engine resolves to the same config" in render_text([result])
    assert "engine_differences" not in result_to_dict(result)


def test_ref_override_without_kl_builds_no_ref(tmp_path):
    """Without use_kl_loss / use_kl_in_reward verl builds no ref: its section is not judged."""
    path, _ = _case(tmp_path, REF_OTC)
    assert not [f for f in check(path, ENV).findings if f.rule == "MCORE-BUILD-LAYERS-PP"]


def test_critic_is_judged_from_its_own_section(tmp_path):
    """A gae critic with the actor's PP but not its uneven split: the critic's model cannot be built."""
    path = tmp_path / "run.sh"
    otc = "+actor_rollout_ref.actor.megatron.override_transformer_config"
    path.write_text(
        f"{V.replace('Qwen3-30B-A3B', 'Qwen3-235B-A22B')} trainer.nnodes=2 trainer.n_gpus_per_node=8 "
        "algorithm.adv_estimator=gae actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=16 "
        f"{otc}.num_layers_in_first_pipeline_stage=5 {otc}.num_layers_in_last_pipeline_stage=5 "
        "critic.megatron.pipeline_model_parallel_size=16\n"
    )
    roles = {f.role for f in check(path).findings if f.rule == "MCORE-BUILD-LAYERS-PP"}
    assert roles == {"critic"}
    path.write_text(path.read_text().replace("algorithm.adv_estimator=gae", "algorithm.adv_estimator=grpo"))
    assert not [f for f in check(path).findings if f.rule == "MCORE-BUILD-LAYERS-PP"]


def test_moe_capacity_in_an_engines_own_section(tmp_path):
    otc = "+actor_rollout_ref.ref.megatron.override_transformer_config"
    path = tmp_path / "run.sh"
    path.write_text(
        f"{V} actor_rollout_ref.actor.use_kl_loss=True algorithm.adv_estimator=grpo "
        f"{otc}.moe_expert_capacity_factor=1.0 {otc}.moe_router_load_balancing_type=sinkhorn\n"
    )
    (f,) = [f for f in check(path).findings if f.rule == "MCORE-TC-MOE-CAPACITY"]
    assert f.role == "ref" and "only works with aux_loss" in f.message
    path.write_text(path.read_text().replace("sinkhorn", "seq_aux_loss"))
    assert not [f for f in check(path).findings if f.rule == "MCORE-TC-MOE-CAPACITY"]
    path.write_text(
        f"{V} +actor_rollout_ref.actor.megatron.override_transformer_config.moe_pad_expert_input_to_capacity=True\n"
    )
    (f,) = [f for f in check(path).findings if f.rule == "MCORE-TC-MOE-CAPACITY"]
    assert "must be set to use moe_pad_expert_input_to_capacity" in f.message


def _teachers(tmp_path, words: str):
    path = tmp_path / "run.sh"
    path.write_text(f"{V} trainer.nnodes=1 trainer.n_gpus_per_node=8 distillation.enabled=True {words}\n")
    result = check(path)
    return {f.rule for f in result.findings if f.rule.startswith("VERL-SRV")}, result


def test_distillation_pool_and_teacher_replicas(tmp_path):
    assert _teachers(tmp_path, "")[0] == {"VERL-SRV-POOL"}  # distillation.nnodes defaults to 0
    t = "distillation.teacher_models.teacher_model.inference.tensor_model_parallel_size"
    assert _teachers(tmp_path, f"distillation.nnodes=1 distillation.n_gpus_per_node=6 {t}=4")[0] == {"VERL-SRV-REPLICA"}
    rules, result = _teachers(tmp_path, f"distillation.nnodes=1 distillation.n_gpus_per_node=8 {t}=4")
    assert rules == set()
    assert "teacher teacher_model" in render_text([result])
    extra = "++distillation.teacher_models.extra.inference.tensor_model_parallel_size=4"
    two = f"distillation.nnodes=1 distillation.n_gpus_per_node=8 {extra}"
    assert _teachers(tmp_path, f"{two} ++distillation.teacher_models.extra.num_replicas=1")[0] == {"VERL-SRV-REPLICA"}
    assert _teachers(tmp_path, f"{two} ++distillation.teacher_models.extra.num_replicas=2")[0] == set()


SLIME = (
    "ray job submit -- python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --rollout-num-gpus 8 "
    "--rollout-num-gpus-per-engine 8 --rollout-batch-size 32 --n-samples-per-prompt 8 --global-batch-size 256 "
    "--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --group-query-attention --num-query-groups 4 "
    "--seq-length 4096 --max-position-embeddings 40960 --tensor-model-parallel-size 2 "
)
ROLES = (
    "megatron:\n  - name: c\n    role: critic\n    overrides:\n      tensor_model_parallel_size: 4\n"
    "      pipeline_model_parallel_size: {pp}\n"
)


def _slime(tmp_path, flags: str, pp: int = 2):
    (tmp_path / "roles.yaml").write_text(ROLES.format(pp=pp))
    path = tmp_path / "run.sh"
    path.write_text(SLIME + flags + "\n")
    return check(path)


def test_slime_critic_takes_its_role_entry(tmp_path):
    result = _slime(tmp_path, "--advantage-estimator ppo --megatron-config-path roles.yaml")
    critic = result.job.layout("critic")
    assert (result.job.layout("actor").tp.value, critic.tp.value, critic.pp.value) == (2, 4, 2)
    assert "TP: actor 2, critic 4" in render_text([result])
    bad = _slime(tmp_path, "--advantage-estimator ppo --megatron-config-path roles.yaml", pp=3)
    assert {f.role for f in bad.findings if f.rule == "MCORE-PS-WORLD"} == {"critic"}


def test_slime_without_ppo_builds_no_critic(tmp_path):
    result = _slime(tmp_path, "--megatron-config-path roles.yaml", pp=3)
    assert result.job.layout("critic") is None and not [f for f in result.findings if f.rule == "MCORE-PS-WORLD"]


def test_slime_role_file_missing_is_unknown(tmp_path):
    result = _slime(tmp_path, "--advantage-estimator ppo --megatron-config-path elsewhere/roles.yaml")
    tp = result.job.layout("critic").tp
    assert not tp.known and "not a readable file" in tp.unknown and result.valid is None


def test_slime_heads_with_dp_attention_and_a_model_from_flags(tmp_path):
    """A model given by Megatron-LM flags has no HF model type: with DP attention, SGLang's attention TP
    (tp_size / dp_size) is what is judged, not the whole tp_size (slime's run-glm4.7-30B-A3B-delta.sh: 20 heads,
    tp 8, dp 8 got a false SGLANG-TP-HEADS); an attention TP that does not divide the heads stays an error."""
    # 18 heads: attention TP 1 (dp 8) divides them, 4 (dp 2) does not
    heads = SLIME.replace(
        "--num-attention-heads 32 --group-query-attention --num-query-groups 4", "--num-attention-heads 18"
    )
    path = tmp_path / "run.sh"
    path.write_text(heads + "--sglang-enable-dp-attention --sglang-dp-size 8\n")
    assert not [f for f in check(path).findings if f.rule == "SGLANG-TP-HEADS"]
    path.write_text(heads + "--sglang-enable-dp-attention --sglang-dp-size 2\n")
    found = [f for f in check(path).findings if f.rule == "SGLANG-TP-HEADS"]
    assert found and "split over 4 ranks" in found[0].message
