"""`shardcheck mesh`: Megatron-Core's rank grid, nodes, rollout replicas, JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardcheck.cli import main
from shardcheck.mesh.grid import Grid, GridError, build_grid
from shardcheck.rules.registry import rule_id

CASES = Path(__file__).parent / "data" / "cases"


def test_example_of_the_catalogue():
    """constraints.md §1.1: W=16, TP2 CP2 PP2 EP4 ETP1, rank 13."""
    g = build_grid(world=16, tp=2, pp=2, cp=2, ep=4, etp=1)
    assert isinstance(g, Grid) and (g.dp, g.edp) == (2, 2)
    assert g.group_of("tp", 13) == [12, 13]
    assert g.group_of("cp", 13) == [13, 15]
    assert g.group_of("dp", 13) == [9, 13]
    assert g.group_of("pp", 13) == [5, 13]
    assert g.group_of("ep", 13) == [12, 13, 14, 15]
    assert g.group_of("tp-pp", 13) == [4, 5, 12, 13]


def test_every_rank_is_in_exactly_one_group_of_each_kind():
    g = build_grid(world=96, tp=2, pp=3, cp=2, ep=4, etp=1, order="tp-cp-ep-pp-dp")
    for name in ("tp", "cp", "dp", "pp", "ep", "etp", "edp", "tp-cp", "dp-cp", "tp-pp"):
        flat = sorted(r for group in g.groups(name) for r in group)
        assert flat == list(range(96)), name
        assert all(g.group_of(name, r) in g.groups(name) for r in (0, 17, 95))


@pytest.mark.parametrize(
    "sizes, rule",
    [
        (dict(world=24, tp=5), "MCORE-PS-WORLD"),
        (dict(world=8, vpp=2), "MCORE-PS-VPP-PP"),
        (dict(world=16, tp=2, cp=2, order="tp-dp-pp"), "MCORE-PS-ORDER-TOKEN"),
        (dict(world=256, tp=2, pp=16, cp=8, ep=16, etp=None), "MCORE-PS-EXPERT-FOLD"),
        (dict(world=16, tp=2, pp=2, ep=4, etp=1, order="tp-cp-ep-pp-dp"), "MCORE-PS-ORDER-PPLAST"),
        (dict(world=8, tp=2, pp=2, ep=2, etp=1, order="tp-pp-cp-ep-dp"), "MCORE-PS-PP-GROUPS"),
    ],
)
def test_invalid_grids_name_the_rule(sizes, rule):
    base = dict(tp=1, pp=1, cp=1, ep=1, etp=None)
    result = build_grid(**{**base, **sizes})
    assert isinstance(result, GridError) and rule_id(result.kind) == rule


def test_mesh_json_for_a_script(capsys):
    assert main(["mesh", str(CASES / "qwen3_235b_256k_after.sh"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 1 and doc["valid"] is True and doc["errors"] == []
    assert (doc["dp"], doc["edp"]) == (1, 1)
    assert set(doc["groups"]) >= {"tp", "cp", "dp", "pp", "ep", "etp", "edp"}
    assert doc["groups"]["ep"][0] == list(range(16))
    assert len(doc["nodes"]) == 16 and doc["nodes"][1] == list(range(16, 32))
    assert len(doc["rollout"]["replicas"]) == 2 and doc["rollout"]["tp_groups"][0][0] == [0, 1, 2, 3]


def test_mesh_rank_narrows_groups(capsys):
    assert (
        main(
            [
                "mesh",
                "--world",
                "16",
                "--tp",
                "2",
                "--cp",
                "2",
                "--pp",
                "2",
                "--ep",
                "4",
                "--etp",
                "1",
                "--rank",
                "13",
                "--format",
                "json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"]["dp"] == [[9, 13]]


def test_mesh_invalid_layout_gives_check_errors_and_exit_1(capsys):
    assert main(["mesh", str(CASES / "qwen3_235b_256k_etp_unset.sh"), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False
    assert [e["rule"] for e in doc["errors"]] == ["MCORE-PS-EXPERT-FOLD"] and doc["errors"][0]["line"] == 26


def test_mesh_warns_about_groups_across_nodes(capsys):
    assert main(["mesh", "--world", "32", "--devices-per-node", "8", "--ep", "16", "--etp", "1"]) == 0
    out = capsys.readouterr().out
    assert "warning: 2 of 2 EP groups span nodes" in out and "multiple of 16" in out


def test_crossing_counts_from_the_strides_equal_listing_on_random_grids():
    """MCORE-PS-LOCALITY counts crossing groups from the strides at every world (mesh/placement.py): equal to
    listing the groups and looking at their first and last ranks, on random grids, orders and node sizes."""
    import random

    from shardcheck.mesh.grid import Grid as MeshGrid
    from shardcheck.mesh.grid import build_grid as build
    from shardcheck.mesh.placement import LOCAL_GROUPS, crossings
    from shardcheck.plan.space import divisors

    rng = random.Random(14)
    compared = 0
    for _ in range(600):
        world = rng.choice([8, 24, 48, 64, 96, 256])
        d = divisors(world)
        grid = build(
            world=world,
            tp=rng.choice(d),
            pp=rng.choice(d),
            cp=rng.choice(d),
            ep=rng.choice(d),
            etp=rng.choice([None, *d]),
            order=rng.choice(["tp-cp-ep-dp-pp", "tp-pp-dp", "tp-cp-ep-pp-dp"]),
        )
        if not isinstance(grid, MeshGrid):
            continue
        for n in (3, 4, 6, 8, 16):
            found = {c.name: c.groups_crossing for c in crossings(grid, n)}
            for name in LOCAL_GROUPS:
                listed = sum(1 for g in grid.groups(name) if g[0] // n != g[-1] // n)
                assert found.get(name, 0) == (listed if grid.group_size(name) > 1 else 0)
                compared += 1
    assert compared > 400
