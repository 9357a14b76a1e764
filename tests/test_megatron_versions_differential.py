"""Differential test: the layout verdict of every supported megatron-core minor vs that minor itself.

For each minor unpacked under ``$MEGATRON_CORE_VERSIONS_DIR/<minor>/`` (``tools/fetch_reference_wheels.py``;
CI fetches them), random layouts (worlds 8 … 128, TP/PP/CP/EP/ETP, megatron-core's default rank order) go
through ``tests/oracle/megatron_versions_oracle.py`` — the real ``initialize_model_parallel`` of that minor on
torch's fake process group, one subprocess per minor — and through shardcheck's ``build_grid(..., mcore=minor)``.
Verdicts and megatron-core's error text must be equal. ``MEGATRON_CORE_CASES`` sets the cases per minor
(default 500; 5000 were run by hand for 0.16 and 0.18, see the closing note of the session that added this).

What it cannot see: 0.17–0.19 ship cp312 wheels; their pure-Python ``parallel_state`` is imported on Python
3.11 and the local torch, not on the torch they pin. VPP and non-default orders are covered for 0.16 by
tests/test_megatron_differential.py only.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from shardcheck.frameworks.megatron.versions import MINORS
from shardcheck.mesh.grid import Grid, build_grid

ROOT = os.environ.get("MEGATRON_CORE_VERSIONS_DIR")
ORACLE = Path(__file__).parent / "oracle" / "megatron_versions_oracle.py"
CASES = int(os.environ.get("MEGATRON_CORE_CASES", "500"))


def _cases(minor: str, n: int) -> list[dict]:
    rng = random.Random(f"shardcheck-{minor}")
    out = []
    for _ in range(n):
        world = rng.choice([8, 16, 32, 64, 128])
        out.append(
            {
                "world": world,
                "tp": rng.choice([1, 1, 2, 2, 4, 8, 3]),
                "pp": rng.choice([1, 1, 2, 4, 8, 3]),
                "cp": rng.choice([1, 1, 2, 4]),
                "ep": rng.choice([1, 2, 4, 8, 16, 32]),
                "etp": rng.choice([1, 1, 2, 4]),
            }
        )
    return out


def _oracle(minor: str, cases: list[dict]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(Path(ROOT) / minor)}
    done = subprocess.run(
        [sys.executable, str(ORACLE)], input=json.dumps(cases), capture_output=True, text=True, env=env, timeout=1800
    )
    if done.returncode != 0:
        pytest.skip(f"megatron-core {minor} does not run here: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)["results"]


@pytest.mark.skipif(not ROOT, reason="MEGATRON_CORE_VERSIONS_DIR not set (tools/fetch_reference_wheels.py)")
@pytest.mark.parametrize("minor", MINORS)
def test_layout_verdicts_equal_megatron_core(minor):
    if not (Path(ROOT) / minor / "megatron").is_dir():
        pytest.skip(f"megatron-core {minor} not unpacked under {ROOT}")
    cases = _cases(minor, CASES)
    real = _oracle(minor, cases)
    mismatches = []
    for case, truth in zip(cases, real):
        mine = build_grid(
            world=case["world"],
            tp=case["tp"],
            pp=case["pp"],
            cp=case["cp"],
            ep=case["ep"],
            etp=case["etp"],
            mcore=minor,
        )
        ok = isinstance(mine, Grid)
        if ok != truth["ok"] or (not ok and mine.message != truth["error"]):
            mismatches.append((case, truth, None if ok else mine.message))
    assert not mismatches, f"{len(mismatches)}/{len(cases)} differ, first: {mismatches[:3]}"
    assert sum(not t["ok"] for t in real) > len(real) // 10 and sum(t["ok"] for t in real) > len(real) // 10
