"""Rules beyond their case files: unknown values, messages, roles, configs (each rule's bad and good case is in
src/shardcheck/rules/cases/<ID>.yml, run by tests/test_rule_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest  # noqa: F401

from shardcheck.api import check
from shardcheck.rules.examples import SMALL_MOE, megatron_lm_launch, rule_cases, slime_launch, verl_launch

M = "actor_rollout_ref.actor.megatron"
OTC = f"+{M}.override_transformer_config"
A = "actor_rollout_ref.actor"
RO = "actor_rollout_ref.rollout"
SGL = f"+{RO}.engine_kwargs.sglang"
RM = "reward.reward_model"
YARN = Path(__file__).parent / "data" / "yarn-short"  # YaRN factor 2 over 32768: vLLM derives 65536
FSDP = "--config-name=ppo_trainer"  # verl's default config: the actor, ref and critic run under FSDP
# Qwen3-30B-A3B spread so that its training state fits a 40 GiB device (on 4 nodes).
FITS = f"{M}.pipeline_model_parallel_size=4 {M}.expert_model_parallel_size=8 {M}.expert_tensor_parallel_size=1"

script = verl_launch  # a verl launch valid apart from what a test adds
megatron_lm = megatron_lm_launch
slime = slime_launch
assert SMALL_MOE


def direct(**sizes):
    from shardcheck.frameworks.megatron.direct import job_from_sizes

    return job_from_sizes(**sizes)


def _case_input(case):
    """A case as the tests here take it: the script text, or the Job of a sizes case."""
    return case.job() if case.launch == "sizes" else case.text(YARN if case.model_config is not None else None)


# rule id -> (bad, good): each rule's cases, from its case file.
DATA = Path(__file__).parent / "data"
CASES = {
    rid: (_case_input(bad), _case_input(good))
    for rid, (bad, good) in rule_cases().items()
    if bad.launch not in ("script", "missing")
}
# The memory rules' cases name their device (and host RAM), as `--device` / `--host-memory` would.
DEVICES = {rid: bad.device for rid, (bad, _) in rule_cases().items() if bad.device}
HOST_MEMORY = {rid: bad.host_memory for rid, (bad, _) in rule_cases().items() if bad.host_memory}


def rule_findings(tmp_path, text, rule_id: str, env=None):
    if not isinstance(text, str):  # a Job built from sizes
        from shardcheck.api import Result
        from shardcheck.rules.registry import run_rules

        findings, skipped = run_rules(text)
        return [f for f in findings if f.rule == rule_id], Result("<sizes>", text, findings, skipped)
    path = tmp_path / "run.sh"
    path.write_text(text)
    # the cases name model folders under tests/data, outside tmp_path: the read policy lets them be read only there
    result = check(
        path, env, device=DEVICES.get(rule_id), host_memory=HOST_MEMORY.get(rule_id), allow_source=(str(DATA),)
    )
    assert result.error is None, result.error
    return [f for f in result.findings if f.rule == rule_id], result


def test_unknown_value_names_the_variable_and_line(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN")
    assert "$TP is not set in the script" in found[0].message
    assert found[0].line == 2


def test_unknown_value_leaves_the_verdict_undecided(tmp_path):
    _, result = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN")
    assert result.valid is None and result.layout_valid is None and result.exit_code == 0


def test_env_supplies_an_unknown(tmp_path):
    found, result = rule_findings(tmp_path, CASES["VALUE-UNKNOWN"][0], "VALUE-UNKNOWN", env={"TP": "2"})
    assert not found and result.layout_summary()["tp"] == 2 and result.valid is True


def test_messages_list_valid_values(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["MCORE-TC-HEADS-TP"][0], "MCORE-TC-HEADS-TP")
    assert "TP must divide 32: 1, 2, 4, 8, 16, 32" in found[0].fix


def test_did_you_mean(tmp_path):
    found, _ = rule_findings(tmp_path, CASES["VERL-CFG-UNKNOWN-KEY"][0], "VERL-CFG-UNKNOWN-KEY")
    assert f"{M}.tensor_model_parallel_size" in found[0].fix


def test_model_rules_are_skipped_without_a_model(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(CASES["MODEL-NOT-FOUND"][0])
    result = check(path)
    assert "MCORE-TC-HEADS-TP" in result.skipped
    assert "MCORE-PS-WORLD" not in result.skipped


def test_ref_layout_is_judged_when_it_differs(tmp_path):
    text = script(
        f"actor_rollout_ref.actor.use_kl_loss=True {M}.tensor_model_parallel_size=2 "
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=3"
    )
    found, result = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert [f.role for f in found] == ["ref"]


def test_local_config_json_is_used(tmp_path):
    model = tmp_path / "mymodel"
    model.mkdir()
    (model / "config.json").write_text(
        '{"num_hidden_layers": 10, "num_attention_heads": 12, "num_key_value_heads": 12, "hidden_size": 768}'
    )
    text = script(f"{M}.pipeline_model_parallel_size=4").replace("/models/Qwen3-30B-A3B", str(model))
    found, result = rule_findings(tmp_path, text, "MCORE-BUILD-LAYERS-PP")
    assert found and result.job.model.source.startswith("config.json at")


def test_an_unknown_argument_leaves_the_verdict_undecided(tmp_path):
    found, result = rule_findings(tmp_path, script('"$(cat extra_overrides.txt)"'), "VALUE-UNKNOWN")
    assert found and "it may set any key" in found[0].message
    assert result.valid is None
    assert not [f for f in result.findings if f.rule == "HYDRA-OVERRIDE"]


def test_a_layout_behind_an_unknown_if_is_still_judged(tmp_path):
    text = script(
        '"${A[@]}"',
        before="A=(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3)\nif [ -f /x ]; then :; fi",
    )
    found, _ = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert found


def test_other_engines_configs_are_read(tmp_path):
    text = (
        "python3 -m verl.trainer.main_ppo model_engine=veomni actor_rollout_ref.actor.veomni.enable_full_shard=True\n"
    )
    found, result = rule_findings(tmp_path, text, "VERL-CFG-UNKNOWN-KEY")
    assert not found and result.job.config_name == "ppo_veomni_trainer"


def test_a_recipe_config_makes_defaults_unknown_not_assumed(tmp_path):
    text = (
        "python3 -m recipe.dapo.main_dapo --config-path=config --config-name=dapo_trainer "
        f"{M}.tensor_model_parallel_size=2 some.recipe.key=1\n"
    )
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = check(path)
    rules = {f.rule for f in result.findings}
    assert "VERL-CONFIG-CUSTOM" in rules and "VERL-CFG-UNKNOWN-KEY" not in rules
    assert result.valid is None  # nnodes etc. come from the recipe's config


def test_unmodelled_verl_entry_is_skipped(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("python3 -m verl.trainer.main_eval data.path=x\n")
    result = check(path)
    assert result.exit_code == 0 and result.status == "skipped"
    assert [(f.rule, f.line) for f in result.findings] == [("INPUT-NO-LAUNCH", 1)]
    message = result.findings[0].message
    assert "verl.trainer.main_eval (a Hydra app on verl's config evaluation, in verl 0.4.0 … " in message
    assert "is not modelled yet" in message
    path.write_text("python3 -m verl.model_merger merge --backend fsdp\n")
    message = check(path).findings[0].message
    assert "verl.model_merger is no Hydra app of any bundled verl (no config to read); not modelled" in message


def test_errors_an_unknown_argument_could_change_are_conditional(tmp_path):
    text = script(f'{M}.tensor_model_parallel_size=3 "$(cat more.txt)"')
    found, result = rule_findings(tmp_path, text, "MCORE-PS-WORLD")
    assert found and found[0].conditional and "could change this" in found[0].message
    # it will not start as read: false in every format, as the text says (issue 26)
    assert result.valid is False and result.exit_code == 1
    assert result.verdict.sentence.startswith("will not start as read")
    # an override Hydra rejects is certain whatever the unknown argument holds
    text = script(f'{M}.tensor_parallel_size=3 "$(cat more.txt)"')
    found, result = rule_findings(tmp_path, text, "VERL-CFG-UNKNOWN-KEY")
    assert found and not found[0].conditional and result.valid is False


def test_plus_on_a_dataclass_section_is_not_judged_from_its_yaml(tmp_path):
    """verl 0.9.1's RolloutConfig has moe_tensor_parallel_size though its YAML does not list it."""
    found, _ = rule_findings(tmp_path, script(f"+{RO}.moe_tensor_parallel_size=2"), "VERL-CFG-ADDED-KEY")
    assert not found


def test_the_critic_engine_creates_the_process_groups(tmp_path):
    """verl's default estimator (gae) uses a Megatron critic, built first: its sizes must follow the actor's."""
    found, _ = rule_findings(tmp_path, script(f"{M}.tensor_model_parallel_size=2"), "VERL-MC-ONE-INIT")
    assert found and "critic" in found[0].message and "critic.megatron.tensor_model_parallel_size=2" in found[0].fix
    quiet, _ = rule_findings(
        tmp_path, script(f"{M}.tensor_model_parallel_size=2 algorithm.adv_estimator=grpo"), "VERL-MC-ONE-INIT"
    )
    assert not quiet  # no critic: the actor's sizes create the groups


def test_did_you_mean_stays_in_the_section():
    """A key with a generic last part is not matched to a setting of another section (trainer.npu_profile's
    ``level`` is not the critic profiler's); within its section the same last part still leads to the key."""
    from shardcheck.frameworks.verl.config_tree import bundled_defaults, did_you_mean

    defaults = bundled_defaults("ppo_trainer", "0.9.1")
    assert did_you_mean("trainer.npu_profile.options.level", defaults) is None
    moved = did_you_mean("actor_rollout_ref.actor.megatron_cfg.param_offload", defaults)
    assert moved is not None and moved.startswith("actor_rollout_ref.") and moved.endswith(".param_offload")
