"""Differential test: shardcheck's FSDP mesh verdicts (VERL-FSDP-SP-WORLD, VERL-FSDP-SIZE) against verl's own
``create_device_mesh`` and the Ulysses mesh of ``FSDPEngine._init_device_mesh``, built with torch's fake
process group on the last rank (the first one a mesh that does not tile the world leaves out).

Needs torch (the ``verify`` extra) and verl's source (VERL_SRC, default the unpacked 0.9.1 wheel); only
verl/workers/engine/fsdp/utils.py and verl/utils/device.py are imported, without verl's package
``__init__`` files (they pull in ray).
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
VERL_SRC = Path(os.environ.get("VERL_SRC", ""))  # the verl 0.9.1 source
if not os.environ.get("VERL_SRC") or not (VERL_SRC / "verl" / "workers" / "engine" / "fsdp" / "utils.py").is_file():
    pytest.skip(f"verl's source is not at {VERL_SRC} (set VERL_SRC)", allow_module_level=True)

A = "actor_rollout_ref.actor"


def _verl_create_device_mesh():
    """verl's create_device_mesh, imported without running verl's package __init__ files."""
    saved = {k: v for k, v in sys.modules.items() if k == "verl" or k.startswith("verl.")}
    for name in ("verl", "verl.utils", "verl.workers", "verl.workers.engine", "verl.workers.engine.fsdp"):
        module = types.ModuleType(name)
        module.__path__ = [str(VERL_SRC / name.replace(".", "/"))]
        sys.modules[name] = module
    try:
        return importlib.import_module("verl.workers.engine.fsdp.utils").create_device_mesh
    finally:
        for k in [k for k in sys.modules if k == "verl" or k.startswith("verl.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _engine_builds(create_device_mesh, world: int, fsdp_size: int, sp: int) -> bool:
    """Whether the FSDP engine's meshes build on the last rank: verl's create_device_mesh, then (SP > 1)
    the (world // sp, sp) dp×sp mesh and its sp group, as FSDPEngine._init_device_mesh does (verl 0.9.1)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=world - 1, world_size=world)
    try:
        mesh = create_device_mesh(world_size=world, fsdp_size=fsdp_size)
        mesh["fsdp"].get_group()  # FSDP shards over this dimension
        if sp > 1:
            ulysses = init_device_mesh("cpu", mesh_shape=(world // sp, sp), mesh_dim_names=["dp", "sp"])
            ulysses["sp"].get_group()
        return True
    except Exception:  # noqa: BLE001 -- any exception on this rank stops the job
        return False
    finally:
        dist.destroy_process_group()


def test_mesh_verdicts_agree_with_verl(tmp_path):
    from test_rules import FSDP, script

    from shardcheck.api import check

    create_device_mesh = _verl_create_device_mesh()
    rng = random.Random(20261202)
    cases = [(8, -1, 3), (8, 0, 1), (16, 8, 4), (12, 8, 1), (6, 4, 2)]
    while len(cases) < 120:
        gpus, nodes = rng.choice([1, 2, 4, 6, 8]), rng.choice([1, 2, 3, 4])
        world = gpus * nodes
        cases.append(
            (
                world,
                rng.choice([-1, 0, world, world + 1, rng.randint(1, world)]),
                rng.choice([1, 2, 3, 4, 8, rng.randint(1, world)]),
            )
        )
    disagreements = []
    outcomes = set()
    path = tmp_path / "run.sh"
    for world, fsdp_size, sp in cases:
        verl_ok = _engine_builds(create_device_mesh, world, fsdp_size, sp)
        outcomes.add(verl_ok)
        path.write_text(
            script(
                f"{A}.fsdp_config.fsdp_size={fsdp_size} {A}.ulysses_sequence_parallel_size={sp} "
                "algorithm.adv_estimator=grpo",
                nodes=1,
                gpus=world,
                config=FSDP,
            )
        )
        result = check(path)
        ours = [f for f in result.findings if f.rule in ("VERL-FSDP-SP-WORLD", "VERL-FSDP-SIZE")]
        if verl_ok == bool(ours):
            disagreements.append((world, fsdp_size, sp, verl_ok, [f.message for f in ours]))
    assert outcomes == {True, False}, "the cases must include meshes verl builds and meshes it cannot"
    assert not disagreements, disagreements
