"""Differential test: every engine verl builds, resolved by shardcheck, against ``hydra.compose``.

verl 0.9.1 builds each Megatron engine from its own section (actor: ``actor_rollout_ref.actor.megatron``,
ref: ``actor_rollout_ref.ref.megatron``, critic: ``critic.megatron``; ``override_transformer_config``
is read from that section: verl/workers/engine/megatron/transformer_impl.py _build_tf_config), and
the reward model and distillation teachers as rollout servers from ``reward.reward_model.rollout`` and
``distillation.teacher_models.<name>.inference``. Here random scripts set, add (``+``), force-add
(``++``) and delete (``~``) keys under the actor, ref, critic, reward and distillation sections; the
oracle composes verl's own (non-generated) config tree with ``hydra.compose`` — the overrides it
rejects dropped, as shardcheck drops them with an error — and reads each engine's section from the
composed config the way verl does (which engines exist: need_reference_policy, need_critic,
reward_model.enable, distillation.enabled; a key the section lacks takes the dataclass's default).
shardcheck reads the same script through its bash reader and resolver; every engine's resolved
values must equal the oracle's.

Needs ``VERL_CONFIG_DIR`` = verl 0.9.1's ``verl/trainer/config`` directory (CI unpacks it from the
wheel, see .ci/run); skipped without it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

CONFIG_DIR = os.environ.get("VERL_CONFIG_DIR")
if not CONFIG_DIR or not (Path(CONFIG_DIR) / "ppo_trainer.yaml").is_file():
    pytest.skip("VERL_CONFIG_DIR is not set to verl's verl/trainer/config directory", allow_module_level=True)

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from shardcheck.api import resolve_script

A, R, C = "actor_rollout_ref.actor.megatron", "actor_rollout_ref.ref.megatron", "critic.megatron"
RM, D = "reward.reward_model", "distillation"
OTC = "override_transformer_config"
SECTIONS = {"actor": "actor_rollout_ref.actor", "ref": "actor_rollout_ref.ref", "critic": "critic"}
SIZES = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
    "etp_setting": "expert_tensor_parallel_size",
    "vpp": "virtual_pipeline_model_parallel_size",
}
# verl/workers/config/engine.py McoreEngineConfig and verl/workers/config/rollout.py RolloutConfig field
# defaults (verl 0.9.1): what a key deleted from its section becomes when verl builds the dataclass.
MCORE_DEFAULTS = {
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1,
    "expert_model_parallel_size": 1,
    "expert_tensor_parallel_size": None,
    "virtual_pipeline_model_parallel_size": None,
    "sequence_parallel": True,
}
ROLLOUT_DEFAULTS = {
    "tensor_model_parallel_size": 2,
    "data_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "expert_parallel_size": 1,
}
N_SCRIPTS = 50
TRAINER = ["trainer.nnodes=2", "trainer.n_gpus_per_node=8"]


def _pool(rng: random.Random) -> list[str]:
    """The override words a random script draws from (each may be rejected by Hydra; that is part of the test)."""
    n = rng.choice
    return [
        # the actor: sizes and its own override_transformer_config
        f"{A}.tensor_model_parallel_size={n([1, 2, 4])}",
        f"{A}.pipeline_model_parallel_size={n([1, 2, 4])}",
        f"{A}.virtual_pipeline_model_parallel_size={n([2, 'null'])}",
        f"{A}.expert_model_parallel_size={n([1, 8])}",
        f"+{A}.{OTC}.num_layers_in_first_pipeline_stage={n([3, 5])}",
        f"+{A}.{OTC}.num_layers_in_last_pipeline_stage={n([3, 5])}",
        f"++{A}.{OTC}.recompute_granularity=full",
        f"~{A}.{OTC}.attention_backend",
        # which engines are built
        f"actor_rollout_ref.actor.use_kl_loss={n(['True', 'False'])}",
        f"algorithm.use_kl_in_reward={n(['True', 'False'])}",
        f"algorithm.adv_estimator={n(['gae', 'grpo'])}",
        f"critic.enable={n(['True', 'False', 'null'])}",
        # the ref: its sizes follow the actor's; its override_transformer_config is the actor's until replaced
        f"{R}.tensor_model_parallel_size={n([1, 2])}",
        f"{R}.pipeline_model_parallel_size={n([2, 4])}",
        f"++{R}.{OTC}.use_flash_attn=True",
        f"+{R}.{OTC}.num_layers_in_first_pipeline_stage={n([4, 5])}",
        f"++{R}.{OTC}.num_layers_in_last_pipeline_stage={n([4, 5])}",
        f"{R}.{OTC}.recompute_method=uniform",
        f"~{R}.{OTC}",
        f"~{R}.{OTC}.attention_backend",
        f"~{R}.virtual_pipeline_model_parallel_size",
        f"{R}.sequence_parallel={n(['True', 'False'])}",
        # the critic: its own sizes and its own override_transformer_config
        f"{C}.tensor_model_parallel_size={n([1, 2, 4])}",
        f"{C}.pipeline_model_parallel_size={n([1, 2])}",
        f"+{C}.{OTC}.num_layers_in_first_pipeline_stage={n([2, 3])}",
        f"++{C}.{OTC}.recompute_granularity=full",
        f"~{C}.{OTC}",
        f"~{C}.{OTC}.recompute_modules",
        f"~{C}.expert_tensor_parallel_size",
        f"+{C}.{OTC}.account_for_loss_in_pipeline_split=True",
        # the reward model's rollout server and its pool
        f"{RM}.enable={n(['True', 'False'])}",
        f"{RM}.enable_resource_pool={n(['True', 'False'])}",
        f"{RM}.nnodes={n([1, 2])}",
        f"{RM}.n_gpus_per_node={n([4, 8])}",
        f"{RM}.rollout.name=vllm",
        f"{RM}.rollout.tensor_model_parallel_size={n([1, 4])}",
        f"++{RM}.rollout.data_parallel_size={n([1, 2])}",
        f"~{RM}.rollout.pipeline_model_parallel_size",
        f"+{RM}.rollout.expert_parallel_size={n([2, 4])}",
        f"~{RM}.rollout.tensor_model_parallel_size",
        # distillation teachers
        f"{D}.enabled={n(['True', 'False'])}",
        f"{D}.nnodes={n([1, 2])}",
        f"{D}.n_gpus_per_node={n([4, 8])}",
        f"{D}.teacher_models.teacher_model.inference.tensor_model_parallel_size={n([1, 4])}",
        f"+{D}.teacher_models.teacher_model.inference.pipeline_model_parallel_size={n([1, 2])}",
        f"++{D}.teacher_models.extra.inference.tensor_model_parallel_size={n([2, 4])}",
        f"++{D}.teacher_models.extra.num_replicas={n([1, 2])}",
    ]


def _scripts() -> list[list[str]]:
    rng = random.Random(20261203)
    out = []
    for _ in range(N_SCRIPTS):
        pool = _pool(rng)
        # every script touches the ref, the critic and the reward model; the rest is drawn at random
        must = [rng.choice([w for w in pool if f"{sec}." in w]) for sec in (R, C, RM)]
        out.append(TRAINER + must + rng.sample(pool, rng.randint(3, 9)))
    return out


SCRIPTS = _scripts()


@pytest.fixture(scope="module")
def hydra_ctx():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(CONFIG_DIR).resolve()), version_base=None):
        yield
    GlobalHydra.instance().clear()


def _composed(words: list[str]):
    """compose's config with the overrides it rejects dropped: Hydra stops at the first it cannot apply and
    names its key; that one is dropped and the rest composed again (word by word when the name is ambiguous)."""
    words = list(words)
    for _ in range(len(words) + 1):
        try:
            return compose("ppo_megatron_trainer", overrides=words)
        except ConfigCompositionException as exc:
            message = str(exc)
        named = [w for w in words if f"'{w.lstrip('+~').split('=')[0]}'" in message]
        if len(named) == 1:
            words.remove(named[0])
            continue
        accepted: list[str] = []
        for word in words:
            try:
                compose("ppo_megatron_trainer", overrides=accepted + [word])
            except ConfigCompositionException:
                continue
            accepted.append(word)
        return compose("ppo_megatron_trainer", overrides=accepted)
    raise AssertionError("unreachable")


def _get(cfg, key: str, default=None):
    node = OmegaConf.select(cfg, key, throw_on_missing=False, default="__absent__")
    if isinstance(node, str) and node == "__absent__":
        return default
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def _oracle(cfg) -> dict:
    """Each engine verl 0.9.1 would build from the composed config, as plain values."""
    engines = {}
    kl = bool(_get(cfg, "actor_rollout_ref.actor.use_kl_loss")) or bool(_get(cfg, "algorithm.use_kl_in_reward"))
    enable = _get(cfg, "critic.enable")
    critic = bool(enable) if enable is not None else _get(cfg, "algorithm.adv_estimator") == "gae"
    for role, built in (("actor", True), ("ref", kl), ("critic", critic)):
        section = SECTIONS[role]
        if not built or _get(cfg, f"{section}.strategy") != "megatron":
            continue
        base = f"{section}.megatron"
        otc = _get(cfg, f"{base}.{OTC}", {}) or {}
        engine = {k: _get(cfg, f"{base}.{key}", MCORE_DEFAULTS[key]) for k, key in SIZES.items()}
        engine.update(
            first=otc.get("num_layers_in_first_pipeline_stage"),
            last=otc.get("num_layers_in_last_pipeline_stage"),
            emb=bool(otc.get("account_for_embedding_in_pipeline_split", False)),
            loss=bool(otc.get("account_for_loss_in_pipeline_split", False)),
            layout=otc.get("pipeline_model_parallel_layout"),
            sp=bool(_get(cfg, f"{base}.sequence_parallel", True)),
            otc=otc,
        )
        engines[role] = engine
    servers = {}
    if _get(cfg, f"{RM}.enable"):
        own = bool(_get(cfg, f"{RM}.enable_resource_pool"))
        servers["reward model"] = _server(cfg, f"{RM}.rollout", RM if own else "trainer")
    if _get(cfg, f"{D}.enabled"):
        names = list(_get(cfg, f"{D}.teacher_models", {}))
        if len(names) > 1:
            names.remove("teacher_model")
        for name in names:
            servers[f"teacher {name}"] = _server(cfg, f"{D}.teacher_models.{name}.inference", D)
    return {"engines": engines, "servers": servers}


def _server(cfg, section: str, pool: str) -> dict:
    sizes = {k: _get(cfg, f"{section}.{k}", v) for k, v in ROLLOUT_DEFAULTS.items()}
    return {**sizes, "pool": (_get(cfg, f"{pool}.nnodes"), _get(cfg, f"{pool}.n_gpus_per_node"))}


def _plain(t):
    assert t.known, t.unknown
    return t.value


def _shardcheck(tmp_path: Path, words: list[str]) -> dict:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer " + " ".join(words) + "\n")
    job = resolve_script(script)
    engines = {}
    for e in job.layouts:
        engine = {k: _plain(getattr(e, k)) for k in SIZES}
        engine.update(
            first=_plain(e.first_stage_layers),
            last=_plain(e.last_stage_layers),
            emb=_plain(e.account_for_embedding),
            loss=_plain(e.account_for_loss),
            layout=_plain(e.layout_string),
            sp=_plain(e.sequence_parallel),
            otc={k: _plain(t) for k, t in e.transformer_overrides.items()},
        )
        engines[e.role] = engine
    servers = {
        s.role: {
            "tensor_model_parallel_size": _plain(s.tp),
            "data_parallel_size": _plain(s.dp),
            "pipeline_model_parallel_size": _plain(s.pp),
            "expert_parallel_size": _plain(s.ep),
            "pool": (_plain(s.nnodes), _plain(s.devices_per_node)),
        }
        for s in job.servers
    }
    return {"engines": engines, "servers": servers}


def test_scripts_cover_every_section_and_kind():
    """The random scripts do what the test claims: ``+``, ``++`` and ``~`` under the ref, critic and reward."""
    words = [w for s in SCRIPTS for w in s]
    for section in (R, C, RM):
        for prefix in ("+", "++", "~"):
            assert any(
                w.startswith(prefix) and not w.startswith(prefix + "+") and w.lstrip("+~").startswith(section)
                for w in words
            ), (prefix, section)
    assert len(SCRIPTS) >= 50


@pytest.mark.parametrize("index", range(N_SCRIPTS))
def test_every_engine_matches_compose(hydra_ctx, tmp_path: Path, index: int) -> None:
    words = SCRIPTS[index]
    want = _oracle(_composed(words))
    got = _shardcheck(tmp_path, words)
    assert got == want, f"script {index}: {' '.join(words)}"


def test_ref_override_replaces_inherited_dict(hydra_ctx, tmp_path: Path) -> None:
    """The case of the issue: a ``++`` under the ref's override_transformer_config drops the actor's split."""
    words = [
        f"+{A}.{OTC}.num_layers_in_first_pipeline_stage=5",
        f"+{A}.{OTC}.num_layers_in_last_pipeline_stage=5",
        "actor_rollout_ref.actor.use_kl_loss=True",
        f"++{R}.{OTC}.use_flash_attn=True",
    ]
    cfg = _composed(words)
    assert _get(cfg, f"{R}.{OTC}") == {"use_flash_attn": True}
    got = _shardcheck(tmp_path, words)["engines"]
    assert (got["actor"]["first"], got["ref"]["first"], got["ref"]["otc"]) == (5, None, {"use_flash_attn": True})
