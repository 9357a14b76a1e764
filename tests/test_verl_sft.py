"""verl's SFT trainers (framework ``verl-sft``): entry points per version, their configs, layout and batch rules.

Differential (``VERL_CONFIGS_DIR``): the SFT trainer's config composed from the catalogue's files with the command
line's group choices (``engine=megatron optim=megatron``) equals ``hydra.compose`` over each release's own tree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.verl import custom_config
from shardcheck.frameworks.verl.versions import catalogue, entry_config, entry_files, versions_with_entry

SFT = "torchrun --nnodes=1 --nproc_per_node={gpus} -m {module} \\\n  {args}\n"


def _run(tmp_path: Path, module: str, args: str, *, gpus: int = 8, version: str | None = None, monkeypatch=None):
    script = tmp_path / "sft.sh"
    script.write_text(SFT.format(gpus=gpus, module=module, args=args))
    return check(script, verl_version=version)


def _rules(result) -> list[str]:
    return sorted(f.rule for f in result.findings)


def test_entry_points_per_version():
    assert versions_with_entry("verl.trainer.fsdp_sft_trainer") == (
        "0.4.0",
        "0.4.1",
        "0.5.0",
        "0.6.0",
        "0.6.1",
        "0.7.0",
    )
    assert "0.6.0" in versions_with_entry("verl.trainer.sft_trainer")
    assert entry_config("verl.trainer.sft_trainer", "0.9.1") == ("verl/trainer/config", "sft_trainer_engine")
    assert entry_config("verl.trainer.main_ppo", "0.9.1") == ("verl/trainer/config", "ppo_trainer")
    assert entry_config("verl.trainer.main_generation", "0.7.0") == ("verl/trainer/config", "generation")
    assert entry_config("verl.trainer.main_generation", "0.9.1") is None


def test_fsdp_sft_trainer_is_judged_on_the_torchrun_world(tmp_path):
    result = _run(
        tmp_path,
        "verl.trainer.fsdp_sft_trainer",
        "data.train_batch_size=64 data.micro_batch_size_per_gpu=4 model.partial_pretrain=/models/Qwen2.5-7B "
        "ulysses_sequence_parallel_size=2 use_remove_padding=true trainer.n_gpus_per_node=1",
        version="0.7.0",
    )
    job = result.job
    assert (job.framework, job.framework_version, job.config_name) == ("verl-sft", "0.7.0", "sft_trainer")
    assert job.cluster.world.value == 8  # torchrun's, not trainer.n_gpus_per_node
    assert job.trainer_dp("actor").value == 4
    assert result.valid, _rules(result)


def test_fsdp_sft_trainer_version_is_inferred(tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)
    result = _run(
        tmp_path, "verl.trainer.fsdp_sft_trainer", "data.train_batch_size=64 model.partial_pretrain=/models/Qwen2.5-7B"
    )
    assert (result.job.framework_version, result.job.version_source) == ("0.7.0", "inferred")
    assert "VERL-ENTRY-ABSENT" not in _rules(result)


def test_sft_trainer_floors_the_batch_with_a_warning(tmp_path):
    result = _run(
        tmp_path,
        "verl.trainer.sft_trainer",
        "data.train_batch_size=36 model.path=/models/Qwen2.5-7B engine=fsdp",
        version="0.9.1",
    )
    batch = [f for f in result.findings if f.rule == "VERL-SFT-BATCH-DP"]
    assert [f.severity for f in batch] == ["warning"]
    assert "a step trains on 32, not 36" in batch[0].message


def test_sft_trainer_megatron_engine_is_composed_with_its_group(tmp_path):
    result = _run(
        tmp_path,
        "verl.trainer.sft_trainer",
        "engine=megatron optim=megatron model.path=/models/Qwen2.5-7B data.train_batch_size=64 "
        "engine.tensor_model_parallel_size=8 engine.pipeline_model_parallel_size=1",
        version="0.9.1",
    )
    job = result.job
    assert job.strategy.value == "megatron" and "engine=megatron" in job.config_source
    assert job.layouts[0].tp.value == 8 and job.trainer_dp("actor").value == 1
    # Qwen2.5-7B has 28 attention heads: TP 8 does not divide them (megatron-core's own check)
    assert "MCORE-TC-HEADS-TP" in _rules(result)
    assert "VERL-CFG-UNKNOWN-KEY" not in _rules(result)  # engine.tensor_model_parallel_size is megatron's


def test_unknown_key_of_the_sft_config(tmp_path):
    result = _run(
        tmp_path,
        "verl.trainer.sft_trainer",
        "model.path=/models/Qwen2.5-7B data.train_batch_size=64 data.no_such_key=1",
        version="0.9.1",
    )
    assert "VERL-CFG-UNKNOWN-KEY" in _rules(result)


def test_entry_absent_from_the_given_version(tmp_path):
    result = _run(
        tmp_path,
        "verl.trainer.fsdp_sft_trainer",
        "data.train_batch_size=64 model.partial_pretrain=/models/Qwen2.5-7B",
        version="0.9.1",
    )
    absent = [f for f in result.findings if f.rule == "VERL-ENTRY-ABSENT"]
    assert len(absent) == 1 and "present in verl 0.4.0 … 0.7.0" in absent[0].message
    assert result.job.framework_version == "0.7.0"  # judged with the newest version that has it


CONFIGS_DIR = os.environ.get("VERL_CONFIGS_DIR")


@pytest.mark.skipif(not CONFIGS_DIR, reason="VERL_CONFIGS_DIR not set (tools/fetch_reference_wheels.py)")
@pytest.mark.parametrize(
    "version", [v for v in catalogue().releases if v in versions_with_entry("verl.trainer.sft_trainer")]
)
@pytest.mark.parametrize("choices", [[], ["engine=megatron", "optim=megatron"], ["engine=fsdp"]])
def test_sft_config_composition_equals_hydra_compose(version, choices):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    tree = Path(CONFIGS_DIR) / version / "verl" / "trainer" / "config"
    if not (tree / "sft_trainer_engine.yaml").is_file():
        pytest.skip(f"no verl {version} config tree in VERL_CONFIGS_DIR")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(tree), version_base=None):
            real = OmegaConf.to_container(compose(config_name="sft_trainer_engine", overrides=choices), resolve=False)
    finally:
        GlobalHydra.instance().clear()
    real.pop("hydra", None)
    mine = custom_config.compose_files(
        entry_files(version, "verl/trainer/config"), "sft_trainer_engine", choices, f"verl {version}"
    )
    assert mine == real


def test_experimental_trainer_config_is_composed(tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)
    script = tmp_path / "fa.sh"
    script.write_text(
        "python3 -m verl.experimental.fully_async_policy.fully_async_main "
        "--config-name=fully_async_ppo_megatron_trainer trainer.nnodes=1 async_training.staleness_threshold=0.5\n"
    )
    result = check(script)
    job = result.job
    assert job.framework == "verl" and job.config_name == "fully_async_ppo_megatron_trainer"
    assert job.strategy.value == "megatron"  # ppo_megatron_trainer under the experimental config
    assert job.cluster.nnodes.value == 1
    assert job.accepted_versions[0] == "0.8.0"  # the first version with fully_async_main
    assert "VERL-CONFIG-CUSTOM" not in _rules(result) and "VERL-CFG-UNKNOWN-KEY" not in _rules(result)


@pytest.mark.parametrize(("batch", "bad"), [(0, False), (16, True)])
def test_fully_async_takes_train_batch_size_zero(tmp_path, monkeypatch, batch, bad):
    """verl's fully async rollouter asserts data.train_batch_size == 0 (fully_async_rollouter.py): 0 is no bad
    range, and is not a batch the batch rules judge; any other value stops verl."""
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)
    script = tmp_path / "fa.sh"
    script.write_text(
        "python3 -m verl.experimental.fully_async_policy.fully_async_main "
        "--config-name=fully_async_ppo_megatron_trainer trainer.nnodes=1 "
        f"data.train_batch_size={batch} actor_rollout_ref.actor.ppo_mini_batch_size=32\n"
    )
    result = check(script)
    assert ("VALUE-BAD-RANGE" in _rules(result)) is bad
    assert "VERL-ACT-TBS-MINI" not in _rules(result)
    assert result.job.values["data.train_batch_size"].known is False


def test_a_recipe_module_with_argparse_options_is_no_trainer_launch(tmp_path):
    """``python3 -m recipe.r1.data_process --local_dir … --tasks all`` is a data script (argparse), not a Hydra
    trainer: skipped as no launch, not judged as main_ppo with unparsable overrides; a recipe's Hydra entry with
    Hydra's own options still is one."""
    data = tmp_path / "prep.sh"
    data.write_text("python3 -m recipe.r1.data_process --local_dir /data/r1 --tasks all\n")
    assert check(data).status == "skipped"
    train = tmp_path / "train.sh"
    train.write_text("python3 -m recipe.dapo.main_dapo --config-name=dapo_trainer trainer.nnodes=1\n")
    assert check(train).job.framework == "verl"
