"""A launch's own Hydra config (``--config-path`` / ``--config-name``) composed over verl's tree (custom_config.py).

Without verl's wheels: the config is found beside the script or the module's file, read as data, composed over
the catalogue's trees, and judged like verl's own (values from the YAML, unknown keys rejected); what cannot be
read stays one VERL-CONFIG-CUSTOM with the reason.

Differential (``VERL_CONFIGS_DIR`` from tools/fetch_reference_wheels.py): for several custom configs (defaults
lists over ``ppo_trainer`` / ``ppo_megatron_trainer``, ``_self_`` first, last and absent, groups and
``# @package`` headers of the script's own directory, interpolations into verl's keys, command-line overrides),
every bundled release's real ``hydra.compose`` over its own ``verl/trainer/config`` gives the same tree as
shardcheck's composition, and the same resolved value for every key shardcheck reads after the overrides.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.verl import custom_config
from shardcheck.frameworks.verl.config_tree import VerlDefaults, apply_overrides
from shardcheck.frameworks.verl.versions import catalogue
from shardcheck.inputs.hydra_overrides import parse_hydra_args

MAIN_DAPO = textwrap.dedent(
    """\
    import hydra


    @hydra.main(config_path="config", config_name="dapo_trainer", version_base=None)
    def main(config):
        pass
    """
)
# A recipe's config as verl's recipes write them (recipe/dapo/config/dapo_megatron_trainer.yaml, verl-recipe).
DAPO = textwrap.dedent(
    """\
    hydra:
      searchpath:
        - file://verl/trainer/config

    defaults:
      - ppo_megatron_trainer
      - _self_

    data:
      gen_batch_size: ${data.train_batch_size}

    algorithm:
      filter_groups:
        enable: False
        metric: null

    actor_rollout_ref:
      actor:
        megatron:
          tensor_model_parallel_size: 4
          pipeline_model_parallel_size: 2

    trainer:
      project_name: verl-dapo
    """
)
# The script's own groups and headers: a group option merged at a package, a `# @package _global_` file,
# `_self_` first (verl's values win over the file's own), an interpolation into verl's keys.
CONFIGS = {
    "dapo": {"dapo_megatron_trainer.yaml": DAPO},
    "self_first": {
        "mine.yaml": textwrap.dedent(
            """\
            hydra:
              searchpath: [pkg://verl.trainer.config]
            defaults:
              - _self_
              - ppo_trainer
            trainer:
              nnodes: 7
              project_name: mine
            my_extra: {a: 1}
            """
        )
    },
    "no_self": {
        "mine.yaml": textwrap.dedent(
            """\
            hydra:
              searchpath: [file://verl/trainer/config]
            defaults:
              - ppo_megatron_trainer
            actor_rollout_ref:
              rollout:
                tensor_model_parallel_size: 4
                max_model_len: ${data.max_prompt_length}
            """
        )
    },
    "groups": {
        "mine.yaml": textwrap.dedent(
            """\
            hydra:
              searchpath: [file://verl/trainer/config]
            defaults:
              - ppo_megatron_trainer
              - sizes@actor_rollout_ref.actor.megatron: tp2
              - extras
              - _self_
            data:
              train_batch_size: 128
            """
        ),
        "sizes/tp2.yaml": "tensor_model_parallel_size: 2\ncontext_parallel_size: 2\n",
        "sizes/tp8.yaml": "tensor_model_parallel_size: 8\n",
        "extras.yaml": "# @package _global_\ntrainer:\n  n_gpus_per_node: 4\n  nnodes: 2\n",
    },
}
SCRIPT = "python3 -m {module} \\\n  {args}\n"


def _write(tmp: Path, config: str, name: str, module: str = "verl.trainer.main_ppo", args: str = "") -> Path:
    root = tmp / "recipe" / "myrecipe"
    for rel, text in CONFIGS[config].items():
        target = root / "config" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "main.py").write_text(MAIN_DAPO.replace("dapo_trainer", name))
    script = root / "run.sh"
    # beside verl's main_ppo, a relative --config-path would be verl's own tree (Hydra resolves it from
    # verl/trainer/main_ppo.py): scripts give their own directory absolute
    config_args = f"--config-path={root}/config --config-name={name} " if module == "verl.trainer.main_ppo" else ""
    script.write_text(SCRIPT.format(module=module, args=config_args + args))
    return script


def _values(result, *keys):
    return {key: result.job.value(key).value for key in keys}


def test_recipe_config_is_composed_and_judged(tmp_path):
    script = _write(
        tmp_path,
        "dapo",
        "dapo_megatron_trainer",
        module="recipe.myrecipe.main",
        args="trainer.nnodes=1 trainer.n_gpus_per_node=8 data.train_batch_size=64",
    )
    (script.parent / "main.py").write_text(MAIN_DAPO.replace("dapo_trainer", "dapo_megatron_trainer"))
    result = check(script)
    assert not [f for f in result.findings if f.rule == "VERL-CONFIG-CUSTOM"]
    job = result.job
    assert job.config_name == "dapo_megatron_trainer"
    assert "composed by Hydra over verl" in job.config_source
    actor = job.layouts[0]
    assert (actor.tp.value, actor.pp.value) == (4, 2)  # from the recipe's YAML, not verl's defaults
    assert actor.tp.origin.text.startswith(str(script.parent / "config" / "dapo_megatron_trainer.yaml"))
    assert job.strategy.value == "megatron"  # from verl's ppo_megatron_trainer under it


def test_unknown_key_is_checked_against_the_composed_config(tmp_path):
    script = _write(
        tmp_path,
        "dapo",
        "dapo_megatron_trainer",
        args="algorithm.filter_groups.enable=True actor_rollout_ref.actor.no_such_key=1",
    )
    result = check(script)
    unknown = [f for f in result.findings if f.rule == "VERL-CFG-UNKNOWN-KEY"]
    assert [f.message.split(":")[0] for f in unknown] == ["actor_rollout_ref.actor.no_such_key=1"]
    assert not [f for f in result.findings if f.rule == "VERL-CONFIG-CUSTOM"]


def test_own_keys_do_not_narrow_the_inferred_version(tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)
    # algorithm.filter_groups.* is the recipe's own key: every release accepts the override through its config
    script = _write(tmp_path, "dapo", "dapo_megatron_trainer", args="algorithm.filter_groups.metric=acc")
    job = check(script).job
    assert job.version_source == "inferred"
    assert job.accepted_versions == catalogue().versions
    # verl's own keys still decide it: grad_offload, which 0.9.1 dropped, narrows it as on verl's own config
    script = _write(
        tmp_path, "dapo", "dapo_megatron_trainer", args="actor_rollout_ref.actor.megatron.grad_offload=True"
    )
    job = check(script).job
    assert "0.9.1" not in job.accepted_versions and "0.9.0" in job.accepted_versions
    assert (job.framework_version, job.version_source) == ("0.9.0", "inferred")


def test_group_of_verls_tree_not_held_is_reported_unread(tmp_path):
    CONFIGS["verl_group"] = {
        "mine.yaml": "hydra:\n  searchpath: [file://verl/trainer/config]\n"
        "defaults:\n  - ppo_trainer\n  - override actor@actor_rollout_ref.actor: megatron_actor\n  - _self_\n"
    }
    try:
        result = check(_write(tmp_path, "verl_group", "mine"))
    finally:
        del CONFIGS["verl_group"]
    custom = [f for f in result.findings if f.rule == "VERL-CONFIG-CUSTOM"]
    assert len(custom) == 1 and "cannot be read (Hydra cannot compose" in custom[0].message


def test_missing_config_dir_is_reported_unread(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(module="verl.trainer.main_ppo", args="--config-path=/nowhere --config-name=x"))
    custom = [f for f in check(script).findings if f.rule == "VERL-CONFIG-CUSTOM"]
    assert len(custom) == 1 and "x.yaml is not found in --config-path /nowhere near the script" in custom[0].message


def test_config_path_with_unknown_root_uses_the_known_tail(tmp_path):
    script = _write(tmp_path, "dapo", "dapo_megatron_trainer")
    script.write_text(
        SCRIPT.format(
            module="verl.trainer.main_ppo",
            args="--config-path=${ROOT}/recipe/myrecipe/config --config-name=dapo_megatron_trainer",
        )
    )
    result = check(script)
    assert "composed by Hydra over verl" in result.job.config_source


def test_decorator_pointing_at_verls_tree_is_verls_own_config(tmp_path):
    folder = tmp_path / "recipe" / "pr"
    folder.mkdir(parents=True)
    (folder / "main_ppo.py").write_text(
        MAIN_DAPO.replace('config_path="config"', 'config_path="../../verl/trainer/config"').replace(
            "dapo_trainer", "ppo_trainer"
        )
    )
    (folder / "run.sh").write_text(SCRIPT.format(module="recipe.pr.main_ppo", args="trainer.nnodes=1"))
    result = check(folder / "run.sh")
    assert not [f for f in result.findings if f.rule == "VERL-CONFIG-CUSTOM"]
    assert result.job.config_name == "ppo_trainer" and "composed by Hydra over" not in result.job.config_source


def test_yaml_is_read_as_data_with_the_size_cap(tmp_path, monkeypatch):
    from shardcheck.inputs import files

    script = _write(tmp_path, "dapo", "dapo_megatron_trainer")
    monkeypatch.setattr(files, "CONFIG_LIMIT", 64)
    custom = [f for f in check(script).findings if f.rule == "VERL-CONFIG-CUSTOM"]
    assert len(custom) == 1 and "dapo_megatron_trainer.yaml" in custom[0].message


# -- differential against hydra.compose over each release's own tree ------------------------------------------

CONFIGS_DIR = os.environ.get("VERL_CONFIGS_DIR")
needs_configs = pytest.mark.skipif(not CONFIGS_DIR, reason="VERL_CONFIGS_DIR not set (tools/fetch_reference_wheels.py)")
CASES = [
    ("dapo", "dapo_megatron_trainer", ["data.train_batch_size=32", "algorithm.filter_groups.enable=True"]),
    ("self_first", "mine", ["trainer.nnodes=3", "my_extra.a=5"]),
    ("no_self", "mine", ["data.max_prompt_length=1024", "actor_rollout_ref.rollout.name=vllm"]),
    ("groups", "mine", ["actor_rollout_ref.actor.megatron.context_parallel_size=4", "trainer.n_gpus_per_node=8"]),
]
READ = (
    "data.train_batch_size",
    "data.gen_batch_size",
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
    "trainer.project_name",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
    "actor_rollout_ref.actor.megatron.context_parallel_size",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.max_model_len",
    "actor_rollout_ref.rollout.name",
    "algorithm.filter_groups.enable",
    "my_extra.a",
)


def _real(tmp: Path, version: str, config: str, name: str, overrides: list[str]):
    """hydra.compose as verl's recipe runs it: cwd holding verl's tree at verl/trainer/config (pkg:// entries
    rewritten to that directory: the test imports nothing of verl either)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    tree = Path(CONFIGS_DIR) / version / "verl" / "trainer" / "config"
    config_dir = tmp / f"real-{config}"
    shutil.rmtree(config_dir, ignore_errors=True)
    for rel, text in CONFIGS[config].items():
        target = config_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("pkg://verl.trainer.config", f"file://{tree}"))
    cwd = os.getcwd()
    os.chdir(tree.parent.parent.parent)  # file://verl/trainer/config is relative to the working directory
    try:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            base = compose(config_name=name)
            cfg = compose(config_name=name, overrides=overrides)
    finally:
        os.chdir(cwd)
        GlobalHydra.instance().clear()
    base = OmegaConf.to_container(base, resolve=False)
    base.pop("hydra", None)
    return base, cfg


@needs_configs
@pytest.mark.parametrize("version", [v for v in catalogue().releases])
@pytest.mark.parametrize(("config", "name", "overrides"), CASES, ids=[c[0] for c in CASES])
def test_composition_equals_hydra_compose(tmp_path, version, config, name, overrides):
    from omegaconf import OmegaConf

    tree = Path(CONFIGS_DIR) / version / "verl" / "trainer" / "config"
    if not (tree / "ppo_trainer.yaml").is_file():
        pytest.skip(f"no verl {version} config tree in VERL_CONFIGS_DIR")
    script = _write(tmp_path, config, name)
    own = custom_config.from_dir(script.parent / "config", name, "test")
    mine = custom_config.compose(own, custom_config.catalogue_tree(version))
    real_base, real = _real(tmp_path, version, config, name, overrides)
    assert mine == real_base
    hydra = parse_hydra_args(tuple(_fields(overrides)))
    applied = apply_overrides(VerlDefaults(mine, version, "test", name), hydra.overrides)
    assert not applied.issues
    for key in READ:
        parent, _, last = key.rpartition(".")
        node = OmegaConf.select(real, parent) if parent else real
        if node is None or last not in list(node.keys()):  # `in` is False for a ??? value
            assert applied.is_missing(key), key
            continue
        got = applied.get(key)
        if OmegaConf.is_missing(node, last):  # ??? in verl's config: shardcheck says unknown
            assert not got.known, key
            continue
        try:
            expected = OmegaConf.select(real, key)
        except Exception:  # noqa: BLE001 — an interpolation compose cannot resolve either: unknown
            assert not got.known, key
            continue
        assert got.value == expected, (key, got)


def _fields(words: list[str]):
    from shardcheck.inputs.bash import read_bash_text
    from shardcheck.inputs.launch import find_launches

    reading = read_bash_text(("python3 -m verl.trainer.main_ppo " + " ".join(words) + "\n").encode(), "t.sh")
    return find_launches(reading.commands)[0].args
