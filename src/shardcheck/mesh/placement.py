"""Where groups sit on nodes, and the rollout engine's replicas.

Megatron assumes node = rank // devices_per_node (torchrun's layout; verl sorts its Ray placement
groups by node and fills nodes in turn). Nothing checks
locality; a TP or EP group that spans nodes simply runs over the slower network.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.mesh.grid import Grid

# Groups whose traffic is latency-bound and should stay inside a node.
LOCAL_GROUPS = ("tp", "ep", "etp", "tp-cp")


@dataclass(frozen=True, slots=True)
class Crossing:
    """A group kind some of whose groups span more than one node."""

    name: str
    size: int
    groups_crossing: int
    groups_total: int
    example: tuple[int, ...]
    keeps_local: str  # what node size (or layout) would keep it inside a node


def nodes(world: int, devices_per_node: int) -> list[list[int]]:
    return [list(range(start, min(start + devices_per_node, world))) for start in range(0, world, devices_per_node)]


def crossings(grid: Grid, devices_per_node: int) -> list[Crossing]:
    """The latency-bound group kinds that cross node boundaries."""
    out: list[Crossing] = []
    for name in LOCAL_GROUPS:
        groups = grid.groups(name)
        size = len(groups[0]) if groups else 1
        if size <= 1:
            continue
        crossing = [g for g in groups if g[0] // devices_per_node != g[-1] // devices_per_node]
        if not crossing:
            continue
        span = crossing[0][-1] - crossing[0][0] + 1
        out.append(Crossing(
            name, size, len(crossing), len(groups), tuple(crossing[0]),
            f"nodes of a multiple of {span} devices keep each {name.upper()} group inside one node"
            if span > devices_per_node else
            f"{name.upper()} {size} does not divide {devices_per_node} devices per node; choose a divisor of it",
        ))
    return out


@dataclass(frozen=True, slots=True)
class RolloutReplicas:
    """verl's hybrid-engine rollout replicas: consecutive slices of TP·DP·PP trainer ranks.

    verl/workers/engine_workers.py (ActorRolloutRefWorker.init_model) requires world % (TP·DP·PP)
    == 0 and makes world / (TP·DP·PP) replicas; inside a vLLM replica ranks are laid out DP×PP×TP
    with TP fastest (constraints.md §1.2).
    """

    engine: str
    tp: int
    dp: int
    pp: int
    replicas: tuple[tuple[int, ...], ...]

    def tp_groups(self, replica: tuple[int, ...]) -> list[list[int]]:
        return [list(replica[i : i + self.tp]) for i in range(0, len(replica), self.tp)]


def rollout_replicas(world: int, engine: str, tp: int, dp: int, pp: int) -> RolloutReplicas | str:
    size = tp * dp * pp
    if size <= 0 or world % size:
        return f"rollout world_size: {world} is not divisible by infer_world_size: {size} (TP {tp} · DP {dp} · PP {pp})"
    replicas = tuple(tuple(range(k * size, (k + 1) * size)) for k in range(world // size))
    return RolloutReplicas(engine, tp, dp, pp, replicas)
