"""Differential test: shardcheck's start-up batch verdicts for FSDP jobs against verl's own ``validate_config``
and config dataclasses (FSDPActorConfig, FSDPCriticConfig), on random launches.

verl 0.9.1's ``verl.workers.config`` imports ray, transformers and tensordict, so this runs only where they
can be imported: set VERL_SRC to a verl source tree (the unpacked 0.9.1 wheel; skipped without it) and, when its
dependencies live outside the environment, VERL_DEPS to a folder of them. On a CPU machine with this
project's venv (torch, numpy, omegaconf, hydra present) that is::

    pip install --no-deps --target DIR ray protobuf transformers tokenizers safetensors huggingface_hub \
        tensordict pyvers cloudpickle codetiming orjson msgpack requests urllib3 idna certifi jsonschema \
        jsonschema-specifications referencing rpds-py attrs regex tqdm httpx2 httpcore2 truststore h11

Skipped otherwise. validate_config runs with use_critic=False (the critic's checks build its
HFModelConfig, which fetches the model's config); the critic dataclass is built without its model.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

VERL_SRC = Path(os.environ.get("VERL_SRC", ""))  # the verl 0.9.1 source; skipped when not given
for extra in (os.environ.get("VERL_DEPS"), os.environ.get("VERL_SRC")):
    if extra and Path(extra).is_dir() and extra not in sys.path:
        sys.path.append(extra)  # after the project: a dependency folder may hold a `tests` package
pytest.importorskip("verl.workers.config", reason="verl's config dataclasses cannot be imported here")
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass, validate_config

A, REF, RO = "actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.rollout"
GENERATED = VERL_SRC / "verl" / "trainer" / "config" / "_generated_ppo_trainer.yaml"
# The shardcheck rules that mirror what validate_config and the dataclasses it builds raise.
START_UP_RULES = ("VERL-ACT-MBS", "VERL-CFG-REAL-BSZ", "VERL-ACT-TBS-MINI", "VERL-CFG-LOGPROB-MBS")


def _case(rng: random.Random) -> dict[str, object]:
    nodes, gpus = rng.choice([1, 2]), rng.choice([1, 2, 4, 8])
    world = nodes * gpus
    mini = rng.choice([1, 2, 4, 8, 16])
    micro = rng.choice([None, 1, 2, 4])
    both = micro is not None and rng.random() < 0.15  # the deprecated key as well: verl refuses both
    return {
        "trainer.nnodes": nodes,
        "trainer.n_gpus_per_node": gpus,
        "data.train_batch_size": rng.choice([mini, 2 * mini, 3 * mini, max(1, mini // 2), world, 24]),
        f"{A}.ppo_mini_batch_size": mini,
        f"{A}.ppo_micro_batch_size_per_gpu": micro,
        f"{A}.ppo_micro_batch_size": micro if both else None,
        f"{A}.use_dynamic_bsz": rng.random() < 0.2,
        f"{A}.ulysses_sequence_parallel_size": rng.choice([1, 1, 2, 4]),
        f"{A}.fsdp_config.ulysses_sequence_parallel_size": rng.choice([1, 2]),
        f"{A}.use_kl_loss": rng.random() < 0.5,
        f"{RO}.n": rng.choice([1, 2, 3, 4]),
        f"{RO}.log_prob_micro_batch_size_per_gpu": rng.choice([None, 1, 2]),
        f"{REF}.log_prob_micro_batch_size_per_gpu": rng.choice([None, 1, 2]),
        "algorithm.adv_estimator": "grpo",
        "critic.enable": True,  # built, with a valid micro batch: its own batch rules are another family
        "critic.ppo_micro_batch_size_per_gpu": 1,
        "critic.ulysses_sequence_parallel_size": rng.choice([1, 2]),
        "critic.fsdp.ulysses_sequence_parallel_size": rng.choice([1, 4]),
    }


def _verl_verdict(values: dict[str, object]) -> tuple[bool, object, object]:
    """(validate_config passes, the actor dataclass or None, the critic dataclass or None)."""
    cfg = OmegaConf.load(GENERATED)
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    use_ref = bool(values[f"{A}.use_kl_loss"])
    try:
        # use_critic=False: its checks build the critic's HFModelConfig, which loads the model from the hub.
        validate_config(cfg, use_reference_policy=use_ref, use_critic=False)
        ok = True
    except Exception:  # noqa: BLE001 -- any exception stops verl at start-up
        ok = False
    try:
        actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    except Exception:  # noqa: BLE001
        actor = None
    critic_cfg = OmegaConf.masked_copy(cfg.critic, [k for k in cfg.critic if k != "model"])
    try:
        critic = omega_conf_to_dataclass(critic_cfg)
    except Exception:  # noqa: BLE001
        critic = None
    return ok, actor, critic


def _script(values: dict[str, object]) -> str:
    words = " ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())
    return (
        f"python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=/models/Qwen3-8B "
        f"{RO}.name=vllm {RO}.tensor_model_parallel_size=1 {words}\n"
    )


def test_start_up_batch_verdicts_and_sp_agree_with_verl(tmp_path):
    from shardcheck.api import check

    rng = random.Random(7)
    path = tmp_path / "run.sh"
    disagreements, outcomes, compared = [], set(), {"actor": 0, "critic": 0}
    for _ in range(150):
        values = _case(rng)
        ok, actor, critic = _verl_verdict(values)
        outcomes.add(ok)
        path.write_text(_script(values))
        result = check(path)
        ours = [f for f in result.findings if f.rule in START_UP_RULES and "deprecated" not in f.message]
        if ok == bool(ours):
            disagreements.append((values, ok, [(f.rule, f.message) for f in ours]))
        # The Ulysses size each engine gets after verl's dataclass __post_init__ (the role-level key's copy).
        for role, verl_config in (("actor", actor), ("critic", critic)):
            if verl_config is None:
                continue
            ours_sp, verl_sp = result.job.fsdp_layout(role).sp.value, verl_config.engine.ulysses_sequence_parallel_size
            compared[role] += 1
            if ours_sp != verl_sp:
                disagreements.append((values, f"{role} SP", ours_sp, verl_sp))
    assert outcomes == {True, False}, "the cases must include launches verl accepts and launches it refuses"
    assert all(compared.values()), compared
    assert not disagreements, disagreements[:5]
