"""The rank map (``shardcheck mesh``): a grid per node for small worlds, a summary for large ones."""

from __future__ import annotations

import json

from shardcheck.api import MeshResult
from shardcheck.mesh.grid import LIST_LIMIT
from shardcheck.mesh.placement import RolloutReplicas, crossings, node_count, nodes
from shardcheck.report import escape

JSON_VERSION = 1
SHOWN = ("tp", "cp", "dp", "pp", "ep", "etp", "edp", "tp-cp", "dp-cp", "tp-pp")
GRID_LIMIT = 64  # worlds up to this size get a line per rank


def _devices(m: MeshResult) -> int:
    g = m.job.cluster.devices_per_node
    return g.value if g.known and g.value else m.job.cluster.world.value


def mesh_to_dict(m: MeshResult, rank: int | None = None) -> dict:
    grid = m.grid
    doc: dict = {
        "path": m.path,
        "valid": grid is not None and not m.errors,
        "errors": [
            {"rule": f.rule, "message": f.message, "path": f.path, "line": f.line, "fix": f.fix} for f in m.errors
        ],
    }
    if grid is None:
        doc.update(dp=None, edp=None, groups=None, nodes=None)
        return doc
    doc.update(
        world=grid.world,
        order=grid.order,
        tp=grid.tp,
        pp=grid.pp,
        cp=grid.cp,
        ep=grid.ep,
        etp=grid.etp,
        dp=grid.dp,
        edp=grid.edp,
    )
    if rank is not None:
        doc["rank"] = rank
        doc["groups"] = {
            name: [grid.group_of(name, rank)] if grid.group_size(name) <= LIST_LIMIT else None for name in SHOWN
        }
    elif grid.listable:
        doc["groups"] = {name: grid.groups(name) for name in SHOWN}
    else:
        doc["groups"] = None
    doc["group_sizes"] = {name: {"groups": grid.group_count(name), "size": grid.group_size(name)} for name in SHOWN}
    if not grid.listable:
        doc["not_listed"] = (
            f"a world of {grid.world} ranks is past the {LIST_LIMIT} whose groups and nodes are "
            "listed; group_sizes gives their counts, --rank R the groups of one rank"
        )
    per_node = _devices(m)
    doc["devices_per_node"] = per_node
    doc["nodes"] = nodes(grid.world, per_node) if grid.listable else None
    doc["crossing_nodes"] = [
        {
            "group": c.name,
            "size": c.size,
            "groups_crossing": c.groups_crossing,
            "groups": c.groups_total,
            "fix": c.keeps_local,
        }
        for c in crossings(grid, per_node)
    ]
    if isinstance(m.rollout, RolloutReplicas):
        ro = m.rollout
        if rank is not None:
            replicas = ro.shown(rank)
        elif ro.world <= LIST_LIMIT:
            replicas = [ro.replica(k) for k in range(ro.count)]
        else:
            replicas = None
        doc["rollout"] = {
            "engine": ro.engine,
            "tp": ro.tp,
            "dp": ro.dp,
            "pp": ro.pp,
            "count": ro.count,
            "replicas": [list(r) for r in replicas] if replicas is not None else None,
            "tp_groups": [ro.tp_groups(r) for r in replicas] if replicas is not None else None,
        }
    elif m.rollout is not None:
        doc["rollout"] = {"error": m.rollout}
    return doc


def render_mesh_json(m: MeshResult, rank: int | None = None) -> str:
    return json.dumps({"version": JSON_VERSION, **mesh_to_dict(m, rank)}, separators=(",", ":"))


def _short(ranks: list[int]) -> str:
    if len(ranks) > 2:
        step = ranks[1] - ranks[0]
        if all(b - a == step for a, b in zip(ranks, ranks[1:])):
            return f"{ranks[0]}..{ranks[-1]}" + (f" step {step}" if step != 1 else "")
    if len(ranks) > 12:
        return ",".join(map(str, ranks[:8])) + f",… ({len(ranks)} ranks)"
    return ",".join(map(str, ranks))


def _group_text(grid, name: str, g: int) -> str:
    """Group number ``g`` shortened; one too large to list as its lowest and highest rank."""
    if grid.group_size(name) <= LIST_LIMIT:
        return _short(grid.nth_group(name, g))
    gen, token = grid._generator(name)
    base = gen.group_base(token, g)
    return f"{base}..{base + gen.group_span(token)} ({grid.group_size(name)} ranks)"


def render_mesh_text(m: MeshResult, rank: int | None = None) -> str:
    out = [escape.file_name(m.path)]
    grid = m.grid
    for f in m.errors:
        loc = f"{f.path}:{f.line}" if f.path and f.line else m.path
        out.append(f"  {loc}: {f.rule} error: {f.message}")
        if f.fix:
            out.append(f"    fix: {f.fix}")
    if grid is None:
        if m.layout is None and m.job.fsdp_layouts:
            out.append(
                "  no Megatron-Core engine: this job trains under FSDP (its SP, DP and shard sizes are in "
                "`shardcheck check`); the rank map is Megatron-Core's"
            )
        elif not m.errors:
            out.append("  the layout is not known (see VALUE-UNKNOWN findings of `shardcheck check`)")
        return escape.text_lines(out)
    per_node = _devices(m)
    role = m.layout.role if m.layout else "actor"
    count = node_count(grid.world, per_node)
    out.append(
        f"  {grid.world} ranks on {count} node{'s' * (count != 1)} × {per_node}; order {grid.order} "
        f"(first fastest); groups of the {role} engine"
    )
    out.append(
        f"  TP {grid.tp} · CP {grid.cp} · DP {grid.dp} · PP {grid.pp} (dense)   "
        f"ETP {grid.etp} · EP {grid.ep} · EDP {grid.edp} · PP {grid.pp} (expert)"
    )
    if rank is not None:
        out.append(f"  rank {rank} (node {rank // per_node}):")
        for name in SHOWN:
            shown = grid.group_of(name, rank) if grid.group_size(name) <= LIST_LIMIT else "(too large to list)"
            out.append(f"    {name:<6} {shown}")
    elif grid.world <= GRID_LIMIT:
        names = [n for n in ("tp", "cp", "dp", "pp", "ep", "etp", "edp")]
        index = {n: {r: i for i, g in enumerate(grid.groups(n)) for r in g} for n in names}
        for k, node in enumerate(nodes(grid.world, per_node)):
            out.append(f"  node {k}:")
            out.append("    rank  " + "  ".join(f"{n:>4}" for n in names) + "   (group index of each kind)")
            for r in node:
                out.append(f"    {r:>4}  " + "  ".join(f"{index[n][r]:>4}" for n in names))
        for name in SHOWN:
            groups = grid.groups(name)
            out.append(
                f"  {name:<6} {len(groups)} × {len(groups[0])}: "
                + "  ".join(f"[{_short(g)}]" for g in groups[:8])
                + ("  …" if len(groups) > 8 else "")
            )
    else:
        for name in SHOWN:
            last = grid.group_count(name) - 1
            out.append(
                f"  {name:<6} {last + 1:>5} groups of {grid.group_size(name):>5}: "
                f"first [{_group_text(grid, name, 0)}], "
                f"last [{_group_text(grid, name, last)}]"
            )
    cross = crossings(grid, per_node)
    for c in cross:
        out.append(
            f"  warning: {c.groups_crossing} of {c.groups_total} {c.name.upper()} groups span nodes; {c.keeps_local}"
        )
    if not cross:
        out.append(f"  every TP, EP, ETP and TP·CP group stays inside one node of {per_node}")
    if isinstance(m.rollout, RolloutReplicas):
        ro = m.rollout
        reps = ro.shown(rank)
        out.append(f"  rollout ({ro.engine}): {ro.count} replicas of TP {ro.tp} · DP {ro.dp} · PP {ro.pp}")
        for r in reps:
            out.append(
                f"    replica {r[0] // len(r)}: ranks [{_short(list(r))}], TP groups "
                + " ".join(f"[{_short(g)}]" for g in ro.tp_groups(r)[:4])
                + (" …" if len(r) // ro.tp > 4 else "")
            )
        if rank is None and ro.count > len(reps):
            out.append(f"    … {ro.count - len(reps)} more")
    elif m.rollout is not None:
        out.append(f"  rollout: {m.rollout}")
    return escape.text_lines(out)
