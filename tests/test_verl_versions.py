"""Judging a launch against the verl and megatron-core versions it runs on (issue: versions).

The first part runs everywhere. The differential part needs verl's config trees of every release
(``VERL_CONFIGS_DIR``, from ``tools/fetch_reference_wheels.py``; CI fetches them): for each bundled release,
the catalogue's trees equal ``hydra.compose`` of that release's own config dir, and on random override sets
the catalogue's acceptance (``versions.rejected``, what the inference reads) equals whether ``hydra.compose``
accepts them, and shardcheck's effective config equals compose's.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from shardcheck.api import check, version_matrix
from shardcheck.cli import main
from shardcheck.errors import InputError
from shardcheck.frameworks.verl import versions
from shardcheck.frameworks.verl.config_tree import apply_overrides, bundled_defaults
from shardcheck.inputs.bash import read_bash_text
from shardcheck.inputs.hydra_overrides import parse_hydra_args
from shardcheck.inputs.launch import find_launches

CASES = Path(__file__).parent / "data" / "cases"
AFTER = CASES / "qwen3_235b_256k_after.sh"
RO = "actor_rollout_ref.rollout"


def errors(result):
    return [f for f in result.findings if f.severity == "error"]


@pytest.fixture(autouse=True)
def _no_pinned_version(monkeypatch):
    """This file tests the choice of version: no version given unless a test gives one."""
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)


def test_256k_inferred_version_accepts_grad_offload():
    r = check(AFTER)
    assert (r.job.framework_version, r.job.version_source) == ("0.9.0", "inferred")
    assert "0.9.1" not in r.job.accepted_versions and "0.9.0" in r.job.accepted_versions
    assert "the newest release that accepts every key" in r.job.version_reason
    assert r.layout_valid is True and not errors(r)


def test_256k_on_091_names_the_releases_that_have_the_key():
    r = check(AFTER, verl_version="0.9.1")
    assert r.job.version_source == "flag"
    (error,) = errors(r)
    assert (error.rule, error.line) == ("VERL-CFG-UNKNOWN-KEY", 61)
    assert "absent from verl 0.9.1" in error.message and "present in verl 0.4.0 … 0.9.0, main" in error.message
    assert "param_offload" not in error.fix  # the script sets it two lines above: never a did-you-mean to it


def test_megatron_core_09_has_no_moe_folding():
    r = check(AFTER, megatron_core_version="0.9")
    (fold,) = [f for f in errors(r) if f.rule == "MCORE-PS-EXPERT-FOLD"]
    assert 'megatron-core 0.9: "data_parallel_size (1) is not divisible by expert_model_parallel_size "' in fold.message
    assert r.layout_valid is False
    assert check(AFTER, megatron_core_version="0.10").layout_valid is True
    etp_unset = check(CASES / "qwen3_235b_256k_etp_unset.sh", verl_version="0.9.0", megatron_core_version="0.12")
    assert any(
        "decoder world_size (256) is not divisible by expert_tensor_model_pipeline_parallel size (512)" in f.message
        for f in errors(etp_unset)
    )


def test_version_matrix_shows_releases_and_the_megatron_core_floor():
    m = version_matrix(AFTER)
    verl = {r.versions[0]: r for r in m.rows if r.framework == "verl"}
    assert verl["0.9.0"].accepted and verl["0.9.0"].valid
    assert not verl["0.9.1"].accepted and verl["0.9.1"].first.rule == "VERL-CFG-UNKNOWN-KEY"
    mcore = [(r.versions, r.valid) for r in m.rows if r.framework == "megatron-core"]
    assert mcore[0] == (("0.9",), False) and mcore[1][1] is True and mcore[1][0][0] == "0.10"
    assert len(mcore) == 2


def test_versions_cli_text_and_json(capsys):
    assert main(["check", "--versions", str(AFTER)]) == 0
    out = capsys.readouterr().out
    assert "0.9.1     rejected   will not start   VERL-CFG-UNKNOWN-KEY" in out
    assert "0.10 … 0.19   layout valid" in out
    assert main(["check", "--versions", "--format", "json", str(AFTER)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["matrices"][0]["chosen_verl_version"] == "0.9.0"


def test_json_says_which_version_and_why(capsys):
    assert main(["check", "--format", "json", str(AFTER)]) == 0
    doc = json.loads(capsys.readouterr().out)["results"][0]
    assert (doc["framework_version"], doc["version_source"]) == ("0.9.0", "inferred")
    assert doc["accepted_versions"][-1] == "main" and "0.9.1" not in doc["accepted_versions"]


@pytest.mark.parametrize("flag", [["--verl-version", "0.3"], ["--megatron-core-version", "0.8"]])
def test_unknown_version_is_one_line_and_exit_2(flag, capsys):
    assert main(["check", *flag, str(AFTER)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("0.9.1" in err[0] or "0.19" in err[0])


def test_a_pin_near_the_script_counts_before_inference(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(AFTER.read_text())
    (tmp_path / "requirements.txt").write_text("torch\nverl==0.8.0\n")
    r = check(script)
    assert (r.job.framework_version, r.job.version_source) == ("0.8.0", "pinned")
    assert "requirements.txt:2" in r.job.version_reason


@pytest.mark.parametrize(
    "name, text, line",
    [
        (
            "uv.lock",
            'version = 1\n\n[[package]]\nname = "torch"\nversion = "2.7.1"\n\n[[package]]\nname = "verl"\n'
            'version = "0.7.1"\nsource = { registry = "https://pypi.org/simple" }\n',
            9,
        ),
        ("poetry.lock", '[[package]]\nname = "verl"\nversion = "0.7.1"\ndescription = "x"\n', 3),
        ("Pipfile.lock", '{\n "default": {\n  "verl": {\n   "hashes": [],\n   "version": "==0.7.1"\n  }\n }\n}\n', 5),
    ],
)
def test_a_lock_file_pins_the_version(tmp_path, name, text, line):
    script = tmp_path / "run.sh"
    script.write_text(AFTER.read_text())
    (tmp_path / name).write_text(text)
    r = check(script)
    assert (r.job.framework_version, r.job.version_source) == ("0.7.1", "pinned")
    assert f"{name}:{line}" in r.job.version_reason
    (tmp_path / name).write_text(text.replace("verl", "verl-extras"))  # another package: no pin
    assert check(script).job.version_source == "inferred"


def test_setting_verl_version(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(AFTER.read_text())
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nverl-version = "0.9.1"\n')
    r = check(script)
    assert (r.job.framework_version, r.job.version_source) == ("0.9.1", "config")


def _script(tmp_path, *words: str) -> Path:
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer "
        "actor_rollout_ref.model.path=Qwen/Qwen3-8B trainer.nnodes=1 trainer.n_gpus_per_node=8 "
        + " ".join(words)
        + "\n"
    )
    return script


def test_rollout_sync_mode_only_fails_where_it_was_removed(tmp_path):
    script = _script(tmp_path, f"{RO}.mode=sync")
    assert not [f for f in check(script, verl_version="0.6.1").findings if f.rule == "VERL-RO-MODE"]
    assert [f.severity for f in check(script, verl_version="0.7.0").findings if f.rule == "VERL-RO-MODE"] == ["error"]


def test_batched_tokens_verdict_depends_on_the_version(tmp_path):
    script = _script(
        tmp_path,
        f"{RO}.name=vllm",
        f"{RO}.enable_chunked_prefill=False",
        f"{RO}.max_num_batched_tokens=4096",
        f"{RO}.max_model_len=32768",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "critic.ppo_micro_batch_size_per_gpu=1",
        f"{RO}.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
    )

    def mnbt(**kw):
        return [f for f in check(script, **kw).findings if f.rule == "VERL-RO-MNBT"]

    assert [f.severity for f in mnbt(verl_version="0.9.1")] == ["warning"]
    (error,) = mnbt(verl_version="0.9.0")
    assert (
        error.severity == "error"
        and "max_num_batched_tokens (4096) is smaller than max_model_len (32768)" in error.message
    )
    inferred = check(script)  # 0.9.1 is judged: its warning stands; the older accepted versions fail there
    assert [f.severity for f in inferred.findings if f.rule == "VERL-RO-MNBT"] == ["warning"]
    assert not any(f.message.startswith("under verl ") for f in inferred.findings)
    (note,) = [f for f in inferred.findings if f.rule == "VERL-VERSIONS-DIFFER"]
    assert inferred.valid is True and note.severity == "info"
    assert note.message.startswith("on verl 0.4.0 … 0.9.0, main this does not start: VERL-RO-MNBT there")


ETP_UNSET = CASES / "qwen3_235b_256k_etp_unset.sh"


def _fold(result) -> list[str]:
    return [f.severity for f in result.findings if f.rule == "MCORE-PS-EXPERT-FOLD"]


def test_the_judged_version_decides_under_an_inferred_version():
    """verl 0.6.0 alone defaults expert_tensor_parallel_size to 1 (the others to null, i.e. ETP = TP): the
    inferred 0.9.0 fails, so the script fails, and one info note names 0.6.0 (issue 26)."""
    inferred = check(ETP_UNSET)
    assert inferred.job.version_source == "inferred" and inferred.job.framework_version == "0.9.0"
    assert _fold(inferred) == ["error"] and inferred.valid is False
    (note,) = [f for f in inferred.findings if f.rule == "VERL-VERSIONS-DIFFER"]
    assert note.severity == "info"
    assert note.message == (
        "on verl 0.6.0 this starts: ETP defaults to 1 there (judged: verl 0.9.0); `--versions` shows all"
    )
    assert not [f for f in inferred.findings if f.severity == "warning" and "verl 0.6.0" in f.message]


@pytest.mark.parametrize("version", ["0.6.1", "0.9.0", "main"])
def test_the_judged_version_decides_when_given(version):
    given = check(ETP_UNSET, verl_version=version)
    assert _fold(given) == ["error"] and given.valid is False
    assert not [f for f in given.findings if f.rule == "VERL-VERSIONS-DIFFER"]


def test_the_judged_version_decides_when_pinned(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(ETP_UNSET.read_text())
    (tmp_path / "requirements.txt").write_text("verl==0.7.0\n")
    pinned = check(script)
    assert pinned.job.version_source == "pinned" and pinned.job.framework_version == "0.7.0"
    assert _fold(pinned) == ["error"] and pinned.valid is False
    (tmp_path / "requirements.txt").write_text("verl==0.6.0\n")
    assert _fold(check(script)) == []  # ETP defaults to 1 on 0.6.0: it starts there


def test_the_version_given_in_the_settings_decides(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(ETP_UNSET.read_text())
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nverl-version = "0.8.0"\n')
    assert _fold(check(script)) == ["error"]


def test_no_versions_note_when_every_accepted_release_agrees():
    same = check(CASES / "qwen3_235b_256k_etp_unset.sh", verl_version="0.6.0")
    assert not [f for f in same.findings if f.rule == "VERL-VERSIONS-DIFFER"]


def test_at_least_and_span():
    assert versions.at_least("0.9.1", "0.7.0") and not versions.at_least("0.6.1", "0.7.0")
    assert versions.at_least("main", "0.9.1")
    assert versions.span(("0.6.0", "0.6.1", "0.7.0", "0.9.1")) == "0.6.0 … 0.7.0, 0.9.1"


def test_broken_catalogue_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "index.json.gz").write_bytes(b"not gzip")
    monkeypatch.setattr(versions, "_CATALOGUE", tmp_path)
    versions.catalogue.cache_clear()
    try:
        with pytest.raises(InputError, match="index.json.gz: shardcheck's verl catalogue cannot be read"):
            versions.catalogue()
        r = check(AFTER)
        assert r.error is not None and "catalogue cannot be read" in r.error and "\n" not in r.error
    finally:
        versions.catalogue.cache_clear()


# ---- differential: the catalogue against hydra.compose over each release's own config tree ----

CONFIGS_DIR = os.environ.get("VERL_CONFIGS_DIR")
needs_configs = pytest.mark.skipif(not CONFIGS_DIR, reason="VERL_CONFIGS_DIR not set (tools/fetch_reference_wheels.py)")
NAMES = ("ppo_trainer", "ppo_megatron_trainer")
SCRIPTS_PER_VERSION = 24


def _compose(version: str, name: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    config_dir = Path(CONFIGS_DIR) / version / "verl/trainer/config"
    if not config_dir.is_dir():
        pytest.skip(f"verl {version} not under {CONFIGS_DIR}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            return OmegaConf.to_container(compose(config_name=name, overrides=overrides), resolve=False)
    finally:
        GlobalHydra.instance().clear()


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in tree.items():
        out.extend(_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else [f"{prefix}{k}"])
    return out


def _random_overrides(rng: random.Random, name: str, version: str) -> list[str]:
    """Overrides drawn mostly from the leaves of ``version`` and sometimes from those of any release (which
    ``version`` may lack)."""
    cat = versions.catalogue()
    sections = ("actor_rollout_ref", "trainer", "critic", "data", "algorithm")
    everywhere: set[str] = set()
    for v in cat.releases:
        everywhere.update(_leaves(versions.version_doc(v)["configs"][name]))
    own = sorted(k for k in _leaves(versions.version_doc(version)["configs"][name]) if k.split(".")[0] in sections)
    other = sorted(k for k in everywhere if k.split(".")[0] in sections)
    out = []
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(own if rng.random() < 0.85 else other)
        kind = rng.random()
        if kind < 0.55:
            out.append(f"{key}={rng.choice(['7', 'abc', 'null', 'true'])}")
        elif kind < 0.75:
            out.append(f"+{key}={rng.choice(['3', 'x'])}")
        elif kind < 0.85:
            out.append(f"+{key.rpartition('.')[0]}.shardcheck_new_{rng.randint(0, 9)}=1")
        elif kind < 0.93:
            out.append(f"++{key}=5")
        else:
            out.append(f"~{key}")
    return out


def _items(words: list[str]):
    reading = read_bash_text(
        ("python3 -m verl.trainer.main_ppo " + " ".join(f"'{w}'" for w in words) + "\n").encode(), "t.sh"
    )
    (launch,) = find_launches(reading.commands)
    return parse_hydra_args(launch.args).overrides


@needs_configs
@pytest.mark.parametrize("version", versions.catalogue().releases)
@pytest.mark.parametrize("name", NAMES)
def test_catalogue_equals_compose(version, name):
    assert versions.version_doc(version)["configs"][name] == _compose(version, name, [])


@needs_configs
@pytest.mark.parametrize("version", versions.catalogue().releases)
def test_acceptance_and_effective_config_equal_compose(version):
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    rng = random.Random(f"verl-{version}")
    accepted = rejected = 0
    for _ in range(SCRIPTS_PER_VERSION):
        name = rng.choice(NAMES)
        words = _random_overrides(rng, name, version)
        items = _items(words)
        try:
            truth = _compose(version, name, words)
        except (HydraException, OmegaConfBaseException):
            truth = None
        mine = versions.rejected(name, items, version)
        assert (not mine) == (truth is not None), f"verl {version} {name} {words}: shardcheck rejects {mine}"
        if truth is None:
            rejected += 1
            continue
        accepted += 1
        config = apply_overrides(bundled_defaults(name, version), items, fast=False)
        assert not config.issues
        ours = OmegaConf.to_container(config.cfg, resolve=False)
        for section in ours:
            assert ours[section] == truth[section], f"verl {version} {name} {words}: section {section} differs"
    assert accepted >= 3 and rejected >= 3, (accepted, rejected)


def test_keys_a_release_lacks_take_that_release_s_meaning(tmp_path):
    """verl 0.5.0 has no critic.enable, trainer.use_v1, rollout DP/PP/EP or fsdp_config SP keys, and writes the
    ref's `expert_tensor_parallel_size: None` as a string: each takes what that release does, not "unknown"
    and not a bad size (the release's own examples were undecided or errors before)."""
    fsdp = tmp_path / "fsdp.sh"
    fsdp.write_text(
        " ".join(
            [
                "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo",
                "actor_rollout_ref.model.path=Qwen/Qwen3-8B trainer.nnodes=1 trainer.n_gpus_per_node=8",
                "data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.n=4",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
                "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
                "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
            ]
        )
        + "\n"
    )
    result = check(fsdp, verl_version="0.5.0")
    unknown = [f.message for f in result.findings if f.rule == "VALUE-UNKNOWN"]
    assert not unknown, unknown
    assert result.job.fsdp_layouts[0].sp_key == "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
    assert result.job.fsdp_layouts[0].sp.value == 2
    megatron = _script(tmp_path, "actor_rollout_ref.actor.use_kl_loss=True")
    findings = check(megatron, verl_version="0.5.0").findings
    assert not [f for f in findings if f.rule == "VALUE-BAD-SIZE"], [f.message for f in findings]
    # where the script itself writes the string, it is still a bad size
    bad = _script(tmp_path, "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=None")
    assert [f for f in check(bad, verl_version="0.5.0").findings if f.rule == "VALUE-BAD-SIZE"]


def test_deprecated_micro_batch_keys_are_converted_by_the_legacy_workers(tmp_path):
    """Only `log_prob_micro_batch_size` / `ppo_micro_batch_size` set: verl ≤ 0.7.1's legacy workers convert them
    (valid there); the engine workers of 0.8.0 on read only the per-GPU keys (an error)."""
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.model.path=Qwen/Qwen3-8B "
        "trainer.nnodes=1 trainer.n_gpus_per_node=8 data.train_batch_size=64 "
        "actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size=16 "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size=16 actor_rollout_ref.rollout.n=4\n"
    )
    rules = ("VERL-ACT-MBS", "VERL-CFG-LOGPROB-MBS")
    assert not [f.rule for f in check(script, verl_version="0.7.1").findings if f.rule in rules]
    assert {f.rule for f in check(script, verl_version="0.8.0").findings if f.rule in rules} == set(rules)


def test_rollout_pp_is_refused_from_0_6_only(tmp_path):
    """verl 0.4.0 … 0.5.0 have no rollout pipeline size: one added with ``+`` is ignored, never handed to vLLM."""
    from shardcheck.rules.examples import verl_launch

    path = tmp_path / "run.sh"
    path.write_text(verl_launch("+actor_rollout_ref.rollout.pipeline_model_parallel_size=2"))
    assert [f.rule for f in check(path, verl_version="0.5.0").findings if f.rule == "VERL-RO-PP"] == []
    path.write_text(verl_launch("actor_rollout_ref.rollout.pipeline_model_parallel_size=2"))
    assert [f.rule for f in check(path, verl_version="0.6.0").findings if f.rule == "VERL-RO-PP"] == ["VERL-RO-PP"]
    trt = verl_launch("actor_rollout_ref.rollout.pipeline_model_parallel_size=2 actor_rollout_ref.rollout.name=trtllm")
    path.write_text(trt)
    assert [f.rule for f in check(path, verl_version="0.9.1").findings if f.rule == "VERL-RO-PP"] == ["VERL-RO-PP"]


@pytest.mark.parametrize(
    ("version", "overrides", "expected"),
    [
        ("0.4.0", "", "MTP is not supported"),  # no bridge in 0.4.x: the converter always
        ("0.6.1", "", "MTP is not supported"),  # use_mbridge defaults to False
        ("0.6.1", "actor_rollout_ref.actor.megatron.use_mbridge=True", None),
        ("0.7.1", "actor_rollout_ref.actor.megatron.use_mbridge=False", "quantization is not supported"),  # MTP zeroed
        ("0.7.1", "", None),  # use_mbridge defaults to True from 0.7.0
        ("0.9.1", "actor_rollout_ref.actor.megatron.use_mbridge=False", None),  # VERL-MBRIDGE-REQUIRED instead
    ],
)
def test_verls_own_converter_refuses_deepseek_v3s_released_config(tmp_path, version, overrides, expected):
    from shardcheck.rules.examples import verl_launch

    path = tmp_path / "run.sh"
    path.write_text(verl_launch(overrides, model="DeepSeek-V3"))
    found = [f.message for f in check(path, verl_version=version).findings if f.rule == "VERL-MCORE-CONVERTER-DSV3"]
    assert [expected in m for m in found] == ([True] if expected else [])


@pytest.mark.parametrize(
    ("version", "overrides", "fires"),
    [
        ("0.9.1", "", True),  # Megatron-Bridge by default (vanilla_mbridge=False)
        ("0.9.1", "actor_rollout_ref.actor.megatron.vanilla_mbridge=True", False),
        ("0.8.0", "", False),  # vanilla mbridge by default there
        ("0.8.0", "actor_rollout_ref.actor.megatron.vanilla_mbridge=False", True),
        (
            "0.9.1",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 "
            "actor_rollout_ref.actor.megatron.context_parallel_size=2",
            True,
        ),  # CP refused
    ],
)
def test_megatron_bridge_mimo_v2_flash_provider(tmp_path, version, overrides, fires):
    from shardcheck.rules.examples import verl_launch

    folder = tmp_path / "mimo-v2-flash-toy"
    folder.mkdir()
    config = {
        "_name_or_path": "mimo-v2-flash-toy",
        "architectures": ["MiMoV2FlashForCausalLM"],
        "model_type": "mimo_v2_flash",
        "num_hidden_layers": 4,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "swa_num_key_value_heads": 8,
        "hidden_size": 1024,
        "intermediate_size": 2048,
        "vocab_size": 32000,
    }
    (folder / "config.json").write_text(json.dumps(config))
    path = tmp_path / "run.sh"
    mc = "actor_rollout_ref.actor.megatron"
    sizes = f"{mc}.tensor_model_parallel_size=8 {mc}.expert_model_parallel_size=1"
    path.write_text(verl_launch(f"{sizes} {overrides}", model=str(folder)))
    found = [f for f in check(path, verl_version=version).findings if f.rule == "VERL-BRIDGE-MIMO-V2"]
    assert bool(found) == fires


# Each derived rename below was checked by hand in verl's history: ray_init -> ray_kwargs (#3049, v0.6.0), the nsys
# options -> global_profiler.global_tool_config.nsys (#2894, v0.6.0), reward_manager -> reward.reward_manager (#5255,
# v0.7.1), critic.model.fsdp_config -> critic.fsdp (critic/dp_critic.yaml `../engine@fsdp`, v0.8.0).
def _sections(table):
    out = set()
    for old, (new, at) in table.items():
        common = 0
        while old.split(".")[-1 - common :] == new.split(".")[-1 - common :] and common < len(old.split(".")):
            common += 1
        out.add((at, ".".join(old.split(".")[: -common or None]), ".".join(new.split(".")[: -common or None])))
    return out


def test_renames_derived_from_the_catalogue_are_the_real_ones():
    assert _sections(versions.renames("ppo_trainer")) == {
        ("0.6.0", "", "ray_kwargs"),  # ray_init.num_cpus -> ray_kwargs.ray_init.num_cpus
        ("0.6.0", "ray_init", "ray_kwargs"),  # ray_init.timeline_json_file -> ray_kwargs.timeline_json_file
        ("0.6.0", "trainer", "global_profiler.global_tool_config.nsys"),
        ("0.7.1", "", "reward"),
        ("0.8.0", "critic.model.fsdp_config", "critic.fsdp"),
    }
    table = versions.renames("ppo_trainer")
    assert len(table) == 38 and table["critic.model.fsdp_config.param_offload"] == (
        "critic.fsdp.param_offload",
        "0.8.0",
    )
    # not renames: a changed default (0.6.1 rollout_is false -> rollout_correction.rollout_is null), a key of a
    # section that vanished (0.7.1 reward_model.megatron.dtype vs reward.reward_model.rollout.dtype), a key that
    # comes back (grad_offload, absent from 0.9.1 only)
    assert "algorithm.rollout_is" not in table
    assert "reward_model.megatron.dtype" not in versions.renames("ppo_megatron_trainer")
    assert not any("grad_offload" in k for k in versions.renames("ppo_megatron_trainer"))


def _unknown(result):
    return [f for f in result.findings if f.rule == "VERL-CFG-UNKNOWN-KEY"]


def _fsdp_script(tmp_path, *words: str) -> Path:
    script = _script(tmp_path, *words)
    script.write_text(script.read_text().replace(" --config-name=ppo_megatron_trainer", ""))
    return script


def test_unknown_key_names_its_new_name(tmp_path):
    old = _fsdp_script(tmp_path, "critic.model.fsdp_config.param_offload=True")
    (error,) = _unknown(check(old, verl_version="0.9.1"))
    assert "renamed to critic.fsdp.param_offload in verl 0.8.0; present in verl 0.4.0 … 0.7.1" in error.message
    assert error.fix.startswith("use `critic.fsdp.param_offload` (its name since verl 0.8.0)")
    new = _script(tmp_path, "ray_kwargs.ray_init.num_cpus=8")
    (error,) = _unknown(check(new, verl_version="0.5.0"))
    assert "named ray_init.num_cpus before verl 0.6.0" in error.message
    assert error.fix.startswith("use `ray_init.num_cpus` (its name before verl 0.6.0)")


def test_a_removed_key_gets_no_rename(tmp_path):
    script = _script(tmp_path, "algorithm.rollout_is=True")  # 0.6.0 only; 0.6.1's rollout_correction.rollout_is
    (error,) = _unknown(check(script, verl_version="0.9.1"))  # takes a string, default null: another setting
    assert "absent from verl 0.9.1; present in verl 0.6.0" in error.message
    assert "renamed" not in error.message and "its name" not in error.fix


def test_no_rename_to_a_key_the_script_sets(tmp_path):
    script = _fsdp_script(tmp_path, "critic.fsdp.param_offload=True", "critic.model.fsdp_config.param_offload=True")
    (error,) = _unknown(check(script, verl_version="0.9.1"))
    assert "renamed" not in error.message and "critic.fsdp.param_offload" not in error.fix


def _budgets(script, version):
    return sorted(
        f.message.split()[0]
        for f in check(script, verl_version=version).findings
        if f.rule == "VERL-ENG-DYN-TOKENS" and f.role == "critic"
    )


@pytest.mark.parametrize(
    "version, critic_static, expected",
    [
        # legacy CriticWorker (megatron_workers.py): update and value passes, only with critic.use_dynamic_bsz
        ("0.7.1", False, ["critic.forward_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu"]),
        ("0.7.1", True, []),
        # engine worker, classic trainer (ray_trainer.py): always packs, two budgets
        ("0.8.0", True, ["critic.ppo_infer_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu"]),
        # v1 trainer (trainer_base.py): one budget for both passes
        ("0.9.1", True, ["critic.ppo_infer_max_token_len_per_gpu"]),
    ],
)
def test_critic_token_budget_by_version(tmp_path, version, critic_static, expected):
    words = [
        "algorithm.adv_estimator=gae",
        "critic.model.path=Qwen/Qwen3-8B",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "data.max_prompt_length=1024",
        "data.max_response_length=32768",
        *(
            f"actor_rollout_ref.{k}_max_token_len_per_gpu=33792"
            for k in ("actor.ppo", "rollout.log_prob", "ref.log_prob")
        ),
    ]
    if critic_static:
        words.append("critic.use_dynamic_bsz=False")
    assert _budgets(_script(tmp_path, *words), version) == expected


def test_critic_token_budget_of_the_classic_trainer_on_0_9(tmp_path):
    words = ["algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen3-8B", "data.max_response_length=40000"]
    script = _script(tmp_path, *words, "trainer.use_v1=False")
    assert _budgets(script, "0.9.1") == ["critic.ppo_infer_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu"]


@pytest.mark.parametrize(
    "version, words, fires",
    [
        ("0.9.1", (), True),  # Megatron-Bridge by default (vanilla_mbridge=False)
        ("0.8.0", (), False),  # mbridge by default: ETP from the process groups
        ("0.8.0", ("actor_rollout_ref.actor.megatron.vanilla_mbridge=False",), True),
        ("0.6.1", (), False),  # no Megatron-Bridge path at all
    ],
)
def test_etp_null_matters_only_through_megatron_bridge(tmp_path, version, words, fires):
    script = _script(
        tmp_path,
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        "actor_rollout_ref.actor.megatron.expert_model_parallel_size=2",
        *words,
    )
    found = [f for f in check(script, verl_version=version).findings if f.rule == "VERL-MC-ETP-MISMATCH"]
    assert bool(found) is fires


def test_the_engine_that_creates_the_groups_by_version(tmp_path):
    script = _script(
        tmp_path,
        "algorithm.adv_estimator=gae",
        "critic.model.path=Qwen/Qwen3-8B",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1",
    )

    def found(version):
        return [
            (f.role, f.message.split(";")[0])
            for f in check(script, verl_version=version).findings
            if f.rule == "VERL-MC-ONE-INIT"
        ]

    # engine workers: the critic is built first; its sizes create the groups and the ref's then do not matter
    assert found("0.9.1") == [("critic", "the critic engine is built first and its sizes create the process groups")]
    # legacy workers: the actor/rollout worker is built first; the critic's and the ref's sizes differ from it
    legacy = "verl 0.7.1's legacy workers build the actor first and its sizes create the process groups"
    assert found("0.7.1") == [("critic", legacy), ("ref", legacy)]


def _batch(tmp_path, *words):
    return _fsdp_script(
        tmp_path,
        "data.train_batch_size=24",
        f"{RO}.n=1",
        f"{RO}.log_prob_micro_batch_size_per_gpu=1",
        *words,
    )


def _rules(script, version, *ids):
    return [(f.rule, f.message) for f in check(script, verl_version=version).findings if f.rule in ids]


def test_legacy_workers_floor_divide_the_mini_batch(tmp_path):
    """mini · n = 12 over DP 8: the engine workers refuse it; the legacy FSDP worker (≤ 0.7.1) normalizes it to 1
    and then asserts that the micro batch divides it."""
    script = _batch(
        tmp_path,
        "actor_rollout_ref.actor.ppo_mini_batch_size=12",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    )
    legacy = _rules(script, "0.7.1", "VERL-ENG-MINI-DP", "VERL-ENG-MICRO-DIV")
    assert legacy == [
        (
            "VERL-ENG-MICRO-DIV",
            "normalized ppo_mini_batch_size 1 should be divisible by ppo_micro_batch_size_per_gpu 2 "
            "(verl 0.7.1's legacy FSDP worker)",
        )
    ]
    engine = [r for r, _ in _rules(script, "0.9.1", "VERL-ENG-MINI-DP", "VERL-ENG-MICRO-DIV")]
    assert "VERL-ENG-MINI-DP" in engine and "normalized" not in str(engine)
    switched = _batch(
        tmp_path,
        "actor_rollout_ref.actor.ppo_mini_batch_size=12",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "trainer.use_legacy_worker_impl=disable",
    )
    assert "VERL-ENG-MINI-DP" in [r for r, _ in _rules(switched, "0.7.1", "VERL-ENG-MINI-DP")]


def test_legacy_fsdp_worker_refuses_an_empty_normalized_mini_batch(tmp_path):
    script = _batch(
        tmp_path,
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    )
    ((rule, message),) = _rules(script, "0.6.1", "VERL-ENG-MINI-DP")
    assert message.startswith("ppo_mini_batch_size 0 should be larger than 0 after normalization")
    ((rule, message),) = _rules(script, "0.9.1", "VERL-ENG-MINI-DP")
    assert message.startswith("[actor] Got mini_batch_size=4")


def test_dynamic_bsz_agreement_is_asserted_by_the_engine_workers_only(tmp_path):
    script = _batch(
        tmp_path,
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"{RO}.log_prob_use_dynamic_bsz=False",
    )
    assert _rules(script, "0.7.1", "VERL-ENG-DYN-SAME") == []
    assert [r for r, _ in _rules(script, "0.8.0", "VERL-ENG-DYN-SAME")] == ["VERL-ENG-DYN-SAME"]


def test_legacy_fsdp_workers_read_the_role_level_ulysses_size(tmp_path):
    """fsdp_workers.py (≤ 0.7.1, the default there) reads actor.ulysses_sequence_parallel_size for the actor and
    the ref; the engine workers read fsdp_config's (the actor's role-level key > 1 replaces it)."""
    script = _fsdp_script(
        tmp_path,
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=2",
    )

    def sp(version, *extra):
        if extra:
            script.write_text(script.read_text().rstrip("\n") + " " + " ".join(extra) + "\n")
        return {lay.role: (lay.sp.value, lay.sp_key) for lay in check(script, verl_version=version).job.fsdp_layouts}

    assert sp("0.7.1")["actor"] == (1, "actor_rollout_ref.actor.ulysses_sequence_parallel_size")
    assert sp("0.9.1")["actor"] == (2, "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size")
    switched = sp("0.7.1", "trainer.use_legacy_worker_impl=disable")
    assert switched["actor"] == (2, "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size")
    assert not [f for f in check(script, verl_version="0.6.1").findings if f.rule == "VERL-FSDP-REF-SP"]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "FROM verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2\n",
            {"verl": "0.5", "vllm": "0.10.0", "mcore": "0.13.0"},
        ),
        ("image: verlai/verl:app-verl0.6-transformers4.56.1-sglang0.5.2-mcore0.13.0-te2.2", None),
        ("docker run iseekyan/verl:megatron0.13_vllm0.11 bash", {"mcore": "0.13", "vllm": "0.11"}),
        ("# image verlai/verl:vllm024.dev2", {"vllm": "0.24"}),
        ("image: verlai/verl:sgl0512.latest", {"sglang": "0.5.12"}),
        ("trainer.logger=[console] data.path=a:b", {}),
    ],
)
def test_container_tag_parts(text, expected):
    found = versions.container_tag(text, "f")
    if expected is None:
        expected = {"verl": "0.6", "sglang": "0.5.2", "mcore": "0.13.0"}
    assert (found.versions if found else {}) == expected


def test_a_container_tag_near_the_script_pins_the_versions(tmp_path, monkeypatch):
    from shardcheck.frameworks.megatron import versions as mcore_versions

    monkeypatch.setattr(mcore_versions, "installed", lambda: None)
    script = tmp_path / "run.sh"
    script.write_text(AFTER.read_text())
    (tmp_path / "Dockerfile").write_text(
        "# app image\nFROM verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2\n"
    )
    job = check(script).job
    assert (job.framework_version, job.version_source) == ("0.5.0", "pinned")
    assert f"{tmp_path / 'Dockerfile'}:2" in job.version_reason and "newest bundled 0.5.x release" in job.version_reason
    assert (job.megatron_core_version, job.vllm_version) == ("0.13", "0.10.0")
    assert "container tag" in job.megatron_core_reason and "container tag" in job.vllm_reason
    (tmp_path / "requirements.txt").write_text("verl==0.7.1\n")  # an exact package pin comes first
    assert check(script).job.framework_version == "0.7.1"


def test_a_tag_in_the_script_itself(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        "# docker run verlai/verl:app-verl0.6-transformers4.56.1-sglang0.5.2-mcore0.13.0-te2.2\n" + AFTER.read_text()
    )
    job = check(script).job
    assert (job.framework_version, job.version_source, job.sglang_version) == ("0.6.1", "pinned", "0.5.2")
    assert f"{script}:1" in job.version_reason


def test_an_engine_only_tag_pins_no_verl(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(AFTER.read_text())
    (tmp_path / "compose.yaml").write_text("services:\n  train:\n    image: verlai/verl:vllm024.latest\n")
    job = check(script).job
    assert job.version_source == "inferred" and job.vllm_version == "0.24.0"


VERL_TREES = os.environ.get("VERL_CONFIGS_DIR")


@pytest.mark.skipif(not VERL_TREES, reason="VERL_CONFIGS_DIR not set (unpacked verl config trees per version)")
def test_versions_matrix_with_a_verl_path(capsys):
    tree = Path(VERL_TREES) / "0.9.0"
    matrix = version_matrix(AFTER, verl_path=str(tree))
    (row,) = [r for r in matrix.rows if r.framework == "verl-path"]
    assert (row.versions, row.accepted, row.valid, row.directory) == (("0.9.0",), True, True, str(tree))
    assert len([r for r in matrix.rows if r.framework == "verl"]) == len(versions.catalogue().versions)
    assert matrix.chosen == "0.9.0" and "--verl-path" in matrix.reason
    assert main(["check", "--versions", "--verl-path", str(tree), "--format", "json", str(AFTER)]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["matrices"]
    assert doc["rows"][len(versions.catalogue().versions)]["directory"] == str(tree)


def test_grad_offload_alone_moves_nothing(tmp_path):
    script = _script(
        tmp_path,
        "algorithm.adv_estimator=gae",
        "critic.model.path=Qwen/Qwen3-8B",
        "critic.megatron.grad_offload=True",
        "actor_rollout_ref.actor.megatron.grad_offload=True",
        "actor_rollout_ref.actor.megatron.param_offload=True",
    )
    found = [
        (f.role, f.severity) for f in check(script, verl_version="0.7.1").findings if f.rule == "VERL-MC-GRAD-OFFLOAD"
    ]
    assert found == [("critic", "warning")]  # the actor's param_offload moves its gradients too
    on_091 = check(script, verl_version="0.9.1").findings  # 0.9.1 has no grad_offload: the unknown key, not this
    assert not [f for f in on_091 if f.rule == "VERL-MC-GRAD-OFFLOAD"]
    assert [f for f in on_091 if f.rule == "VERL-CFG-UNKNOWN-KEY"]
