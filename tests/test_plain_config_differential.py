"""The plain config tree (frameworks/verl/plain_config.py) against Hydra's and OmegaConf's own code: random
override sets over verl 0.9.1's keys are applied both ways and every value shardcheck reads is compared —
value, origin, unknown reason — with the issues found. Where the plain tree cannot decide it hands over to
OmegaConf, so the two must agree everywhere.

`SHARDCHECK_CONFIG_CASES` sets the number of override sets (default 100).
"""

from __future__ import annotations

import os
import random

import pytest

from shardcheck.frameworks.verl.config_tree import apply_overrides, load_defaults
from shardcheck.frameworks.verl.resolve import FSDP_VALUE_KEYS, MEMORY_KEYS, VALUE_KEYS
from shardcheck.inputs.bash import read_bash_text
from shardcheck.inputs.hydra_overrides import parse_hydra_args
from shardcheck.inputs.launch import find_launches

CASES = int(os.environ.get("SHARDCHECK_CONFIG_CASES", "100"))
LAYOUT = [
    f"actor_rollout_ref.{role}.megatron.{size}"
    for role in ("actor", "ref")
    for size in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "override_transformer_config",
    )
] + [
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
    "trainer.device",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.actor.strategy",
]


def _leaves(tree: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out.extend(_leaves(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _dicts(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out.append(f"{prefix}{k}")
            out.extend(_dicts(v, f"{prefix}{k}."))
    return out


_VALUES = [
    "1",
    "2",
    "8",
    "0",
    "-1",
    "1e-6",
    "0.5",
    "true",
    "False",
    "null",
    "vllm",
    "megatron",
    "fsdp2",
    "cuda",
    "/models/Qwen3-8B",
    "x-y",
    "'quoted'",
    "[1,2]",
    "[console,wandb]",
    "['a','b']",
    "[]",
    "{a:1}",
    "${trainer.nnodes}",
    "???",
    "[[1]]",
    "'a\\\\b'",
]


def _overrides(rng: random.Random, leaves, dicts, interpolated) -> list[str]:
    words = []
    plain_only = rng.random() < 0.5  # half the sets only change and add (what most scripts do)
    for _ in range(rng.randint(1, 12)):
        roll = rng.random() * (0.8 if plain_only else 1.0)
        value = rng.choice(_VALUES[:21] if plain_only or rng.random() < 0.8 else _VALUES)
        if roll < 0.55:
            key = rng.choice(leaves)
        elif roll < 0.7:
            key = rng.choice(interpolated)  # an interpolated default replaced by a value
        elif roll < 0.8:
            words.append(f"+{rng.choice(dicts)}.new_{rng.randint(0, 3)}={value}")
            continue
        elif roll < 0.85:
            words.append(f"++{rng.choice(leaves)}={value}")
            continue
        elif roll < 0.9:
            key = rng.choice(leaves) + "_typo"  # an unknown key: Hydra's error
        elif roll < 0.95:
            key = rng.choice(dicts)  # a value over a section
        else:
            words.append(f"~{rng.choice(leaves)}")
            continue
        words.append(f"{key}={value}")
    return words


def _read(config, keys):
    return {key: config.get(key) for key in keys}


@pytest.mark.parametrize("config_name", ["ppo_megatron_trainer", "ppo_trainer"])
def test_plain_tree_agrees_with_omegaconf(config_name):
    defaults = load_defaults(config_name)
    tree = defaults.tree
    leaves = [k for k, _ in _leaves(tree)]  # lists included
    interpolated = [k for k, v in _leaves(tree) if isinstance(v, str) and "${" in v]
    dicts = _dicts(tree)
    rng = random.Random(hash(config_name) & 0xFFFF)
    plain_sets = 0
    for _ in range(CASES // 2):
        words = _overrides(rng, leaves, dicts, interpolated)
        model_engine = ["model_engine=megatron"] if config_name == "ppo_megatron_trainer" else []
        script = " ".join(["python3 -m verl.trainer.main_ppo", *model_engine, *words]) + "\n"
        (launch,) = find_launches(read_bash_text(script.encode(), "run.sh").commands)
        hydra = parse_hydra_args(launch.args)
        if hydra.errors:
            continue
        fast = apply_overrides(defaults, hydra.overrides)
        took_plain = fast.plain is not None
        slow = apply_overrides(defaults, hydra.overrides, fast=False)
        keys = sorted(
            set(
                VALUE_KEYS
                + MEMORY_KEYS
                + FSDP_VALUE_KEYS
                + tuple(LAYOUT)
                + tuple(o.key for o in hydra.overrides)
                + tuple(rng.sample(interpolated, 2))
            )
        )
        a, b = _read(fast, keys), _read(slow, keys)
        for key in keys:
            assert a[key] == b[key], (words, key, a[key], b[key])
        assert [(i.kind, i.message, i.suggestion) for i in fast.issues] == [
            (i.kind, i.message, i.suggestion) for i in slow.issues
        ], words
        assert fast.set_by.keys() == slow.set_by.keys() and fast.unknown == slow.unknown, words
        assert [i.source for i in fast.applied] == [i.source for i in slow.applied], words
        plain_sets += took_plain and fast.plain is not None  # answered every read without OmegaConf
    print(f"\n{config_name}: {CASES // 2} override sets, {plain_sets} read wholly by the plain tree, all agree")
    assert plain_sets >= CASES // 8
