"""verl's generation entry points (framework ``verl-gen``, frameworks/verl/gen/resolve.py): the version chosen among
those that have the module, the rollout engine rules on ``main_generation_server``'s replicas, and, with
``VERL_CONFIGS_DIR``, a differential test of every value the resolver reads against ``hydra.compose`` over each
release's own config tree (``generation`` for ``main_generation``, ``ppo_trainer`` for the server)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.verl import versions
from shardcheck.frameworks.verl.gen.resolve import GENERATION, SERVER

CONFIGS_DIR = os.environ.get("VERL_CONFIGS_DIR")


@pytest.fixture(autouse=True)
def _no_version_given(monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)


def _script(tmp_path: Path, module: str, *words: str) -> Path:
    script = tmp_path / "gen.sh"
    script.write_text(f"python3 -m {module} " + " ".join(f"'{w}'" for w in words) + "\n")
    return script


def _rules(result, severity: str | None = None) -> list[str]:
    return sorted(f.rule for f in result.findings if severity is None or f.severity == severity)


def test_main_generation_is_judged_with_the_newest_version_that_has_it(tmp_path):
    script = _script(tmp_path, GENERATION, "trainer.n_gpus_per_node=8", "rollout.tensor_model_parallel_size=2")
    r = check(script)
    assert (r.job.framework, r.job.framework_version, r.job.version_source) == ("verl-gen", "0.7.0", "inferred")
    # 0.7.0's main_generation cannot generate: the version judged decides; the note names those that can
    assert r.job.config_name == "generation" and _rules(r, "error") == ["VERL-GEN-SYNC"]
    (note,) = [f for f in r.findings if f.rule == "VERL-VERSIONS-DIFFER"]
    assert note.message.startswith("on verl 0.4.0 … 0.6.1 this starts: no VERL-GEN-SYNC there")
    on_new = check(script, verl_version="0.9.1")
    assert "VERL-ENTRY-ABSENT" in _rules(on_new, "error") and on_new.job.framework_version == "0.9.1"


def test_main_generation_world_text_follows_the_version(tmp_path):
    words = ("trainer.n_gpus_per_node=8", "rollout.tensor_model_parallel_size=2", "rollout.data_parallel_size=3")
    script = _script(tmp_path, GENERATION, *words)
    (f,) = [f for f in check(script, verl_version="0.7.0").findings if f.rule == "VERL-GEN-WORLD"]
    assert f.message == "rollout world_size: 8 is not divisible by infer_world_size: 6"
    older = _script(tmp_path, GENERATION, "trainer.n_gpus_per_node=8", "rollout.tensor_model_parallel_size=3")
    (f,) = [f for f in check(older, verl_version="0.4.1").findings if f.rule == "VERL-GEN-WORLD"]
    assert f.message == "rollout world_size: 8 is not divisible by infer_tp: 3"


@pytest.mark.parametrize(
    "words, says",
    [
        (("rollout.name=vllm",), "vLLMAsyncRollout.generate_sequences raises NotImplementedError"),
        (("rollout.name=sglang",), "BaseRollout's raises NotImplementedError"),
        (("rollout.name=hf",), "Rollout hf with mode async not found"),
        (("rollout.name=vllm", "rollout.mode=sync"), "Rollout mode 'sync' has been removed"),
    ],
)
def test_main_generation_of_070_cannot_generate(words, says, tmp_path):
    script = _script(tmp_path, GENERATION, "trainer.n_gpus_per_node=8", *words)
    (f,) = [f for f in check(script, verl_version="0.7.0").findings if f.rule == "VERL-GEN-SYNC"]
    assert f.severity == "error" and says in f.message
    assert not [f for f in check(script, verl_version="0.6.1").findings if f.rule == "VERL-GEN-SYNC"]
    (inferred,) = [f for f in check(script).findings if f.rule == "VERL-GEN-SYNC"]
    assert inferred.severity == "error"  # the version judged decides, however it was chosen (issue 26)


def test_server_replicas_meet_the_rollout_engine_rules(tmp_path):
    base = ("trainer.n_gpus_per_node=8", "actor_rollout_ref.model.path=Qwen/Qwen3-8B", "+data.output_path=/o.parquet")
    vllm = check(
        _script(
            tmp_path,
            SERVER,
            *base,
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=16",
        )
    )
    assert _rules(vllm, "error") == ["VERL-GEN-REPLICAS"]  # TP 16 on 8 devices: no replica
    assert vllm.job.vllm_version == "0.24.0"
    three = check(
        _script(
            tmp_path,
            SERVER,
            *base,
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
        )
    )
    assert _rules(three, "error") == ["VLLM-TP-HEADS", "VLLM-TP-KV"] and _rules(three, "warning") == [
        "VERL-GEN-REPLICAS"
    ]
    sglang = check(
        _script(
            tmp_path,
            SERVER,
            *base,
            "actor_rollout_ref.rollout.name=sglang",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
        )
    )
    assert {"SGLANG-TP-HEADS", "SGLANG-TP-KV"} <= set(_rules(sglang, "error"))
    good = check(
        _script(
            tmp_path,
            SERVER,
            *base,
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
        )
    )
    assert not _rules(good, "error") and not _rules(good, "warning")


# -- differential: every value read equals hydra.compose's over the release's own tree -------------------------

needs_configs = pytest.mark.skipif(not CONFIGS_DIR, reason="VERL_CONFIGS_DIR not set (tools/fetch_reference_wheels.py)")
SCRIPTS = 20
DRAWS = {
    GENERATION: {
        "trainer.nnodes": ["1", "2", "4"],
        "trainer.n_gpus_per_node": ["2", "4", "8"],
        "rollout.tensor_model_parallel_size": ["1", "2", "4"],
        "rollout.data_parallel_size": ["1", "2"],
        "rollout.temperature": ["0", "0.7", "1.0"],
        "rollout.name": ["vllm", "sglang", "hf"],
        "data.n_samples": ["0", "1", "5"],
        "data.batch_size": ["16", "128"],
        "data.output_path": ["/tmp/x.parquet", "out.parquet"],
        "model.path": ["/models/a", "Qwen/Qwen3-8B"],
    },
    SERVER: {
        "trainer.nnodes": ["1", "2"],
        "trainer.n_gpus_per_node": ["4", "8"],
        "actor_rollout_ref.rollout.tensor_model_parallel_size": ["1", "2", "8"],
        "actor_rollout_ref.rollout.temperature": ["0", "0.6"],
        "actor_rollout_ref.rollout.n": ["1", "3"],
        "actor_rollout_ref.rollout.name": ["vllm", "sglang"],
        "actor_rollout_ref.rollout.max_num_seqs": ["64", "1024"],
        "actor_rollout_ref.rollout.gpu_memory_utilization": ["0.5", "0.8"],
        "actor_rollout_ref.model.path": ["/models/a", "/models/b"],
        "+data.output_path": ["/tmp/out.parquet"],
    },
}


def _compose(version: str, name: str, words: list[str]) -> dict:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    config_dir = Path(CONFIGS_DIR) / version / "verl/trainer/config"
    if not config_dir.is_dir():
        pytest.skip(f"verl {version} not under {CONFIGS_DIR}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            cfg = compose(config_name=name, overrides=words)
            return OmegaConf.to_container(cfg, resolve=True)
    finally:
        GlobalHydra.instance().clear()


def _select(tree: dict, key: str):
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return "<absent>"
        node = node[part]
    return node


@needs_configs
@pytest.mark.parametrize(
    "module, version",
    [
        (m, v)
        for m in (GENERATION, SERVER)
        for v in versions.catalogue().releases
        if v in versions.versions_with_entry(m)
    ],
)
def test_values_equal_hydra_compose(module, version, tmp_path):
    name = versions.entry_config(module, version)[1]
    rng = random.Random(f"{module}-{version}")
    for _ in range(SCRIPTS):
        keys = rng.sample(sorted(DRAWS[module]), rng.randint(2, 6))
        words = [f"{k}={rng.choice(DRAWS[module][k])}" for k in keys]
        words = [
            w
            for w in words
            if versions.catalogue().has(name, w.split("=")[0].lstrip("+"), version) or w.startswith("+")
        ]
        truth = _compose(version, name, words)
        job = check(_script(tmp_path, module, *words), verl_version=version).job
        assert job.framework == "verl-gen" and job.framework_version == version
        read = dict(job.values)
        read["trainer.nnodes"], read["trainer.n_gpus_per_node"] = job.cluster.nnodes, job.cluster.devices_per_node
        for key, traced in read.items():
            expected = _select(truth, key)
            if expected == "<absent>":
                assert not traced.known or traced.origin.kind == "default", (words, key)
                continue
            if expected == "???":  # mandatory and not given: verl fails reading it, shardcheck has no value
                assert not traced.known and "must be set" in traced.unknown, (words, key)
                continue
            assert traced.known, (version, words, key, traced.unknown)
            assert traced.value == expected, (version, words, key, traced.value, expected)


def test_generation_verdict_names_no_training_layout(tmp_path):
    """A generation job trains no model: its verdict says nothing of a Megatron-Core or FSDP layout."""
    from shardcheck.report.text import render_text

    script = _script(tmp_path, GENERATION, "trainer.n_gpus_per_node=8", "rollout.tensor_model_parallel_size=3")
    r = check(script, verl_version="0.6.1")
    assert r.valid is False
    text = render_text([r])
    assert "will not start" in text and "layout itself" not in text
