"""Differential test: the TransformerConfig / layer-split verdicts of every megatron-core minor vs that minor.

For each minor unpacked under ``$MEGATRON_CORE_VERSIONS_DIR/<minor>/`` (tools/fetch_reference_wheels.py), random
and edge layouts (layers, attention heads, query groups, TP, PP, VPP, first / last stage sizes, account for
embedding / loss) go through tests/oracle/megatron_split_oracle.py — that minor's real ``TransformerConfig`` and
``get_num_layers_to_build`` on every pipeline rank and virtual stage, one subprocess per minor — and through
shardcheck's ``heads_error`` / ``query_groups_error`` / ``split_layers(..., version=minor)``, taken in
megatron-core's order (``TransformerConfig.__init__``, the head checks of ``__post_init__``, its split checks,
then the build). Verdicts, error texts and the layers every virtual stage of every rank builds must be equal; a
split megatron-core accepts though it builds another model (shardcheck's warning) must build the same stages.

``MEGATRON_CORE_SPLIT_CASES`` sets the random layouts per minor (default 500, CI's count; the edge layouts,
about 300, always run). VPP is drawn only with PP > 1 (shardcheck judges VPP on PP 1 as no VPP).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from shardcheck.frameworks.megatron.attention_split import heads_error, query_groups_error
from shardcheck.frameworks.megatron.pipeline import Split, split_layers
from shardcheck.frameworks.megatron.versions import MINORS

ROOT = os.environ.get("MEGATRON_CORE_VERSIONS_DIR")
ORACLE = Path(__file__).parent / "oracle" / "megatron_split_oracle.py"
CASES = int(os.environ.get("MEGATRON_CORE_SPLIT_CASES", "500"))


def _case(layers, heads, groups, tp, pp, vpp=None, first=None, last=None, emb=False, loss=False) -> dict:
    return {
        "layers": layers,
        "heads": heads,
        "groups": groups,
        "tp": tp,
        "pp": pp,
        "vpp": vpp if pp > 1 else None,
        "first": first,
        "last": last,
        "emb": emb,
        "loss": loss,
    }


def _edges() -> list[dict]:
    """The layouts where the minors part: PP not dividing the layers, first + last with no middle stage left
    or more than the model has, an empty or negative middle stage, uneven stages with VPP, the account_*
    splits on PP 1 / 2, query groups dividing TP."""
    out = [
        _case(30, 16, 4, 1, 4),
        _case(30, 16, 4, 1, 4, vpp=2),
        _case(32, 16, 4, 1, 4, vpp=3),
        _case(30, 16, 4, 1, 2, first=14, last=14),
        _case(30, 16, 4, 1, 2, first=15, last=15),
        _case(30, 16, 4, 1, 3, first=15, last=15),
        _case(30, 16, 4, 1, 4, first=16, last=16),
        _case(8, 16, 2, 8, 1),
        _case(8, 16, 2, 8, 2),
        _case(8, 12, 3, 4, 1),
        _case(31, 16, 4, 1, 2, emb=True),
        _case(30, 16, 4, 1, 2, emb=True, loss=True),
        _case(31, 16, 4, 1, 1, loss=True),
        _case(1, 16, 4, 1, 2, emb=True, loss=True, vpp=2),
    ]
    for layers, pp, first, last in itertools.product((4, 6, 7, 8, 12), (1, 2, 3, 4), (None, 0, 1, 2, 4), (None, 2, 3)):
        out.append(_case(layers, 8, 8, 1, pp, first=first, last=last))
    for layers, pp, vpp in itertools.product((6, 8, 12, 16), (2, 3, 4), (None, 2, 3)):
        out.append(_case(layers, 8, 8, 2, pp, vpp=vpp, first=2 if vpp != 3 else 3))
        out.append(_case(layers, 8, 8, 2, pp, vpp=vpp, emb=True))
        out.append(_case(layers, 8, 8, 2, pp, vpp=vpp, loss=True))
    return out


def _random(minor: str, n: int) -> list[dict]:
    rng = random.Random(f"shardcheck-split-{minor}")
    out = []
    for _ in range(n):
        heads = rng.choice([8, 12, 16, 24, 32, 40, 64])
        pp = rng.choice([1, 1, 2, 2, 3, 4, 4, 6, 8])
        layers = rng.choice([2, 4, 7, 12, 16, 24, 27, 28, 30, 32, 36, 40, 48, 61, 62, 64])
        uneven = rng.random() < 0.35
        account = not uneven and rng.random() < 0.2
        out.append(
            _case(
                layers,
                heads,
                rng.choice([heads, heads, 1, 2, 4, 8]),
                rng.choice([1, 1, 2, 4, 8, 3]),
                pp,
                vpp=rng.choice([None, None, 1, 2, 3, 4]),
                first=rng.choice([None, 0, 1, 2, 3, 4, 6, 8, layers // 2]) if uneven else None,
                last=rng.choice([None, 1, 2, 3, 4, 6, layers // 2]) if uneven else None,
                emb=account and rng.random() < 0.6,
                loss=account and rng.random() < 0.6,
            )
        )
    return out


def shardcheck_verdict(case: dict, minor: str) -> dict:
    """shardcheck's answer in the oracle's shape: the first error in megatron-core's order, else the counts."""
    split = split_layers(
        case["layers"],
        case["pp"],
        first=case["first"],
        last=case["last"],
        vpp=case["vpp"],
        account_for_embedding=case["emb"],
        account_for_loss=case["loss"],
        version=minor,
    )
    if not isinstance(split, Split) and split.at_init:
        return {"ok": False, "error": split.message}
    for text in (
        heads_error(case["heads"], case["tp"]),
        query_groups_error(case["groups"], case["tp"], minor),
    ):
        if text:
            return {"ok": False, "error": text}
    if isinstance(split, Split):
        return {"ok": True, "stages": list(split.stages), "counts": _chunk_counts(split, case)}
    if split.starts:
        return {"ok": True, "stages": list(split.built), "warning": split.message}
    return {"ok": False, "error": split.message}


def _chunk_counts(split: Split, case: dict) -> list[list[int]]:
    """The layers each virtual stage of each rank builds, from ``split.per_chunk`` (the embedding / loss slot
    taken from the first stage's first chunk / the last stage's last chunk)."""
    if split.per_chunk is None:
        return [[n] for n in split.stages]
    pp, vpp = case["pp"], case["vpp"]
    return [
        [
            split.per_chunk[r]
            - int(case["emb"] and r == 0 and c == 0)
            - int(case["loss"] and r == pp - 1 and c == vpp - 1)
            for c in range(vpp)
        ]
        for r in range(pp)
    ]


def _oracle(minor: str, cases: list[dict]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(Path(ROOT) / minor), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(ORACLE)], input=json.dumps(cases), capture_output=True, text=True, env=env, timeout=900
    )
    if done.returncode != 0:
        pytest.skip(f"megatron-core {minor} does not run here: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)["results"]


def disagreements(minor: str, cases: list[dict], real: list[dict]) -> list[tuple]:
    out = []
    for case, truth in zip(cases, real):
        mine = shardcheck_verdict(case, minor)
        if truth["ok"]:
            stages = [sum(row) for row in truth["counts"]]
            same = mine["ok"] and mine["stages"] == stages and mine.get("counts", truth["counts"]) == truth["counts"]
        else:
            same = not mine["ok"] and mine["error"] == truth["error"]
        if not same:
            out.append((case, truth, mine))
    return out


@pytest.mark.skipif(not ROOT, reason="MEGATRON_CORE_VERSIONS_DIR not set (tools/fetch_reference_wheels.py)")
@pytest.mark.parametrize("minor", MINORS)
def test_split_verdicts_equal_megatron_core(minor):
    if not (Path(ROOT) / minor / "megatron").is_dir():
        pytest.skip(f"megatron-core {minor} not unpacked under {ROOT}")
    cases = _edges() + _random(minor, CASES)
    real = _oracle(minor, cases)
    bad = disagreements(minor, cases, real)
    assert not bad, f"{len(bad)}/{len(cases)} differ, first: {bad[:3]}"
    assert sum(not t["ok"] for t in real) > len(real) // 10 and sum(t["ok"] for t in real) > len(real) // 10
