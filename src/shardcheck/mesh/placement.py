"""Where groups sit on nodes, and the rollout engine's replicas.

Megatron assumes node = rank // devices_per_node (torchrun's layout; verl sorts its Ray placement
groups by node and fills nodes in turn). Nothing checks
locality; a TP or EP group that spans nodes simply runs over the slower network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardcheck.mesh.grid import LIST_LIMIT, Grid

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
    """Every node's ranks: for worlds up to LIST_LIMIT (callers check ``node_count`` first)."""
    return [list(range(start, min(start + devices_per_node, world))) for start in range(0, world, devices_per_node)]


def node_count(world: int, devices_per_node: int) -> int:
    return -(-world // devices_per_node)


# Node sizes up to this are judged from the strides for any world; larger ones only when the world is listable.
NODE_LIMIT = 1024


def crossing_count(grid: Grid, name: str, devices_per_node: int) -> int | None:
    """How many groups of kind ``name`` span nodes: listed for small worlds, from the strides otherwise
    (None for a node larger than NODE_LIMIT in a world past LIST_LIMIT)."""
    n = devices_per_node
    if grid.listable:
        return sum(1 for g in grid.groups(name) if g[0] // n != g[-1] // n)
    if not 0 < n <= NODE_LIMIT:
        return None
    gen, token = grid._generator(name)
    return gen.crossing_count(token, n)


def blocks_crossing(world: int, size: int, devices_per_node: int) -> int:
    """How many of the consecutive blocks [k·size, (k+1)·size) of ``world`` ranks span nodes (from the period
    lcm(size, node)/size of their offsets, never one block at a time)."""
    n = devices_per_node
    if size <= 0 or n <= 0:
        return 0
    blocks = world // size
    period = n // math.gcd(size, n)
    per_period = sum(1 for k in range(period) if (k * size) % n + size > n)
    rest = sum(1 for k in range(blocks % period) if (k * size) % n + size > n)
    return (blocks // period) * per_period + rest


def _listed_crossings(grid: Grid, name: str, n: int) -> int:
    return sum(1 for g in grid.groups(name) if g[0] // n != g[-1] // n)


def crossings(grid: Grid, devices_per_node: int) -> list[Crossing]:
    """The latency-bound group kinds that cross node boundaries, counted from the strides (never by listing
    the groups of a world past LIST_LIMIT; a node larger than NODE_LIMIT in such a world is not judged)."""
    out: list[Crossing] = []
    n = devices_per_node
    if n <= 0 or (n > NODE_LIMIT and not grid.listable):
        return out
    for name in LOCAL_GROUPS:
        gen, token = grid._generator(name)
        size = gen.group_size(token)
        if size <= 1:
            continue
        # counted from the strides at any world (tests/test_hostile.py: equal to listing the groups)
        crossing_count = gen.crossing_count(token, n) if n <= NODE_LIMIT else _listed_crossings(grid, name, n)
        if not crossing_count:
            continue
        span = gen.group_span(token) + 1
        example: tuple[int, ...] = ()
        for g in range(min(gen.group_count(token), LIST_LIMIT)):
            base = gen.group_base(token, g)
            if base // n != (base + span - 1) // n:
                example = tuple(gen.nth_group(token, g)) if size <= LIST_LIMIT else (base, base + span - 1)
                break
        out.append(
            Crossing(
                name,
                size,
                crossing_count,
                gen.group_count(token),
                example,
                f"nodes of a multiple of {span} devices keep each {name.upper()} group inside one node"
                if span > n
                else f"{name.upper()} {size} does not divide {n} devices per node; choose a divisor of it",
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class RolloutReplicas:
    """verl's hybrid-engine rollout replicas: consecutive slices of TP·DP·PP trainer ranks.

    verl/workers/engine_workers.py (ActorRolloutRefWorker.init_model) requires world % (TP·DP·PP)
    == 0 and makes world / (TP·DP·PP) replicas; inside a vLLM replica ranks are laid out DP×PP×TP
    with TP fastest (constraints.md §1.2). Replicas are computed one at a time, never all at once.
    """

    engine: str
    tp: int
    dp: int
    pp: int
    world: int

    @property
    def size(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def count(self) -> int:
        return self.world // self.size

    def replica(self, k: int) -> tuple[int, ...]:
        return tuple(range(k * self.size, (k + 1) * self.size))

    def shown(self, rank: int | None = None, limit: int = 4) -> list[tuple[int, ...]]:
        """The first ``limit`` replicas, or the one holding ``rank`` (replicas larger than LIST_LIMIT: none)."""
        if self.size > LIST_LIMIT:
            return []
        if rank is not None:
            return [self.replica(rank // self.size)] if 0 <= rank < self.world else []
        return [self.replica(k) for k in range(min(self.count, limit))]

    def tp_groups(self, replica: tuple[int, ...]) -> list[list[int]]:
        return [list(replica[i : i + self.tp]) for i in range(0, len(replica), self.tp)]


def rollout_replicas(world: int, engine: str, tp: int, dp: int, pp: int) -> RolloutReplicas | str:
    size = tp * dp * pp
    if size <= 0 or world % size:
        return f"rollout world_size: {world} is not divisible by infer_world_size: {size} (TP {tp} · DP {dp} · PP {pp})"
    return RolloutReplicas(engine, tp, dp, pp, world)
