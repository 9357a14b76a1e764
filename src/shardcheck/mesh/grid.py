"""Megatron-Core's rank grid: which global ranks form each parallel group (megatron-core 0.16.1).

``initialize_model_parallel`` builds two ``RankGenerator``s over the same order string: the dense
one with sizes tp=TP, cp=CP, ep=1, dp=DP, pp=PP and the expert one with tp=ETP, ep=EP, dp=EDP,
pp=PP, cp=1 (megatron/core/parallel_state.py). In an order the first token varies fastest; a
size-1 token missing from the order is appended. The group of a token set holds the ranks that
agree on every other coordinate; groups are numbered by those other coordinates (first fastest)
and list their ranks in ascending order (``generate_masked_orthogonal_rank_groups``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from shardcheck.errors import ShardcheckError
from shardcheck.frameworks.megatron.versions import DEFAULT as MCORE_DEFAULT
from shardcheck.frameworks.megatron.versions import FOLDING_SINCE, as_tuple
from shardcheck.frameworks.megatron.versions import expert_error as _expert_error
from shardcheck.problems import Kind

TOKENS = ("tp", "pp", "dp", "ep", "cp")  # RankGenerator.__init__ checks them in this order
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
# Past this many ranks no list of every group or node is built: counts, sizes and single groups come
# from the strides (shardcheck never enumerates a world a hostile size could make arbitrarily large).
LIST_LIMIT = 1 << 16
# Groups shardcheck reports: name -> (generator, tokens). "etp"/"edp" are the expert generator's tp/dp.
GROUPS = {
    "tp": ("dense", "tp"),
    "cp": ("dense", "cp"),
    "dp": ("dense", "dp"),
    "pp": ("dense", "pp"),
    "tp-cp": ("dense", "tp-cp"),
    "dp-cp": ("dense", "cp-dp"),
    "tp-pp": ("dense", "tp-pp"),
    "ep": ("expert", "ep"),
    "etp": ("expert", "tp"),
    "edp": ("expert", "dp"),
    "tp-ep": ("expert", "tp-ep"),
}


class OrderError(ShardcheckError, ValueError):
    """The order string Megatron-Core rejects, with its error text."""


@dataclass(frozen=True, slots=True)
class Generator:
    """One RankGenerator: sizes per token, in order."""

    order: tuple[str, ...]
    sizes: tuple[int, ...]

    @classmethod
    def build(cls, order: str, sizes: dict[str, int]) -> Generator:
        """Megatron's RankGenerator.__init__: every token of size > 1 must be named in the order."""
        lowered = order.lower()
        tokens = lowered.split("-")
        for name in TOKENS:
            if name not in lowered and sizes[name] != 1:
                raise OrderError(
                    f"The size of ({name}) is ({sizes[name]}), but you haven'tspecified the order ({order})."
                )
            if name not in lowered:
                tokens.append(name)
        for token in tokens:
            if token not in sizes:
                raise OrderError(f"KeyError: '{token}' (not a parallel dimension of the order string {order!r})")
        if len(set(tokens)) != len(tokens):
            raise OrderError(f"order {order!r} names a dimension twice")
        return cls(tuple(tokens), tuple(sizes[t] for t in tokens))

    @property
    def world(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    @property
    def strides(self) -> list[int]:
        """d_i = product of the sizes of the tokens before i (the first token varies fastest)."""
        out, stride = [], 1
        for size in self.sizes:
            out.append(stride)
            stride *= size
        return out

    def coordinates(self, rank: int) -> tuple[int, ...]:
        out = []
        for size in self.sizes:
            out.append(rank % size)
            rank //= size
        return tuple(out)

    def _split(self, token: str) -> tuple[list[int], list[int]]:
        masked = set(token.split("-"))
        inside = [i for i, t in enumerate(self.order) if t in masked]
        outside = [i for i, t in enumerate(self.order) if t not in masked]
        return inside, outside

    def group_count(self, token: str) -> int:
        """How many groups of ``token`` there are (the product of the other dimensions' sizes)."""
        n = 1
        for i in self._split(token)[1]:
            n *= self.sizes[i]
        return n

    def group_size(self, token: str) -> int:
        n = 1
        for i in self._split(token)[0]:
            n *= self.sizes[i]
        return n

    def group_span(self, token: str) -> int:
        """Highest minus lowest rank of every group of ``token`` (the same for all of them)."""
        strides = self.strides
        return sum((self.sizes[i] - 1) * strides[i] for i in self._split(token)[0])

    def group_base(self, token: str, g: int) -> int:
        """The lowest rank of group number ``g``."""
        strides = self.strides
        base = 0
        for i in self._split(token)[1]:
            base += (g % self.sizes[i]) * strides[i]
            g //= self.sizes[i]
        return base

    def nth_group(self, token: str, g: int) -> list[int]:
        """Group number ``g`` of ``token``, its ranks ascending (O(group size), nothing else built)."""
        inside, _ = self._split(token)
        strides = self.strides
        ranks = [self.group_base(token, g)]
        for i in inside:
            ranks = [r + k * strides[i] for k in range(self.sizes[i]) for r in ranks]
        return sorted(ranks)

    def groups(self, token: str) -> list[list[int]]:
        """All groups of ``token`` (e.g. "tp", "cp-dp"), numbered and ordered as Megatron does.
        Enumerates the world: callers keep to worlds up to LIST_LIMIT."""
        return [self.nth_group(token, g) for g in range(self.group_count(token))]

    def crossing_count(self, token: str, devices_per_node: int) -> int:
        """How many groups of ``token`` hold ranks of more than one node (node = rank // devices_per_node),
        counted from the strides: a group crosses when its lowest rank's offset in its node plus the
        group's span reaches the next node. The offsets of the lowest ranks are counted per residue
        modulo the node size, one dimension at a time (O(node size²) at most, never O(world))."""
        n = devices_per_node
        span = self.group_span(token)
        strides = self.strides
        counts = {0: 1}
        for i in self._split(token)[1]:
            size, stride = self.sizes[i], strides[i] % n
            period = n // math.gcd(stride, n) if stride else 1
            full, rest = divmod(size, period)
            steps: dict[int, int] = {}
            for k in range(min(size, period)):
                steps[(k * stride) % n] = steps.get((k * stride) % n, 0) + full + (1 if k < rest else 0)
            merged: dict[int, int] = {}
            for a, ca in counts.items():
                for b, cb in steps.items():
                    merged[(a + b) % n] = merged.get((a + b) % n, 0) + ca * cb
            counts = merged
        return sum(c for offset, c in counts.items() if offset + span >= n)

    def group_of(self, token: str, rank: int) -> list[int]:
        """The one group of ``token`` that holds ``rank``."""
        masked = set(token.split("-"))
        coords = self.coordinates(rank)
        strides = self.strides
        base = sum(c * strides[i] for i, c in enumerate(coords) if self.order[i] not in masked)
        ranks = [base]
        for i, t in enumerate(self.order):
            if t in masked:
                ranks = [r + k * strides[i] for k in range(self.sizes[i]) for r in ranks]
        return sorted(ranks)


@dataclass(frozen=True)
class Grid:
    """The dense and expert generators of a valid layout."""

    world: int
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    order: str
    dense: Generator
    expert: Generator

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp * self.cp)

    @property
    def edp(self) -> int:
        return self.world // (self.etp * self.ep * self.pp)

    def _generator(self, name: str) -> tuple[Generator, str]:
        which, token = GROUPS[name]
        return (self.dense if which == "dense" else self.expert), token

    def groups(self, name: str) -> list[list[int]]:
        gen, token = self._generator(name)
        return gen.groups(token)

    def group_count(self, name: str) -> int:
        gen, token = self._generator(name)
        return gen.group_count(token)

    def group_size(self, name: str) -> int:
        gen, token = self._generator(name)
        return gen.group_size(token)

    def nth_group(self, name: str, g: int) -> list[int]:
        gen, token = self._generator(name)
        return gen.nth_group(token, g)

    @property
    def listable(self) -> bool:
        """Whether every group and node may be listed (the world is at most LIST_LIMIT ranks)."""
        return self.world <= LIST_LIMIT

    def group_of(self, name: str, rank: int) -> list[int]:
        gen, token = self._generator(name)
        return gen.group_of(token, rank)

    @cached_property
    def pp_groups_agree(self) -> bool:
        """The dense and expert PP groups are the same partition exactly when PP's stride is the same in
        both generators (ranks agreeing on the coordinates before PP form rank mod stride, those after it
        rank // (stride·PP)); compared by stride, never by listing the groups."""
        if self.pp == 1:
            return True
        k = self.dense.order.index("pp")
        return self.dense.strides[k] == self.expert.strides[self.expert.order.index("pp")]


@dataclass(frozen=True, slots=True)
class GridError:
    """The check Megatron-Core fails first: its kind (the rules map it to an id) and Megatron's text."""

    kind: Kind
    message: str  # megatron-core's own text


def world_error(world: int, tp: int, pp: int, cp: int) -> str | None:
    """The dense grid must tile the world (initialize_model_parallel's first check)."""
    model = tp * pp * cp
    return None if model > 0 and world % model == 0 else f"world_size ({world}) is not divisible by {model}"


def vpp_error(vpp: int | None, pp: int) -> str | None:
    if vpp is not None and not pp > 1:
        return "pipeline-model-parallel size should be greater than 1 with interleaved schedule"
    return None


def expert_error(
    world: int, etp: int, ep: int, pp: int, dp: int | None = None, version: str = MCORE_DEFAULT
) -> str | None:
    """The expert grid ETP·EP·PP must divide the world (MoE parallel folding, core >= 0.10); before 0.10 EP
    must divide DP (frameworks/megatron/versions.py)."""
    return _expert_error(world, etp, ep, pp, world // (etp * pp) if dp is None else dp, version)


def _folding(mcore: str) -> bool:
    return as_tuple(mcore) >= FOLDING_SINCE


def build_grid(
    *,
    world: int,
    tp: int,
    pp: int,
    cp: int,
    ep: int,
    etp: int | None,
    vpp: int | None = None,
    order: str = DEFAULT_ORDER,
    mcore: str = MCORE_DEFAULT,
) -> Grid | GridError:
    """The grid ``initialize_model_parallel`` builds, or the first check it fails, in its order."""
    if message := world_error(world, tp, pp, cp):
        return GridError(Kind.GRID_WORLD, message)
    if message := vpp_error(vpp, pp):
        return GridError(Kind.GRID_VPP_PP, message)
    dp = world // (tp * pp * cp)
    try:
        dense = Generator.build(order, {"tp": tp, "ep": 1, "dp": dp, "pp": pp, "cp": cp})
    except OrderError as exc:
        return GridError(Kind.GRID_ORDER_TOKEN, str(exc))
    if not _folding(mcore):  # before 0.10: EP inside DP, expert tensor parallel = TP, no further checks
        if message := expert_error(world, tp, ep, pp, dp, mcore):
            return GridError(Kind.GRID_EXPERT_FOLD, message)
        try:
            expert = Generator.build(order, {"tp": tp, "ep": ep, "dp": dp // ep, "pp": pp, "cp": cp})
        except OrderError as exc:
            return GridError(Kind.GRID_ORDER_TOKEN, str(exc))
        return Grid(world, tp, pp, cp, ep, tp, order, dense, expert)
    etp_v = tp if etp is None else etp
    if message := expert_error(world, etp_v, ep, pp, dp, mcore):
        return GridError(Kind.GRID_EXPERT_FOLD, message)
    edp = world // (etp_v * ep * pp)
    try:
        expert = Generator.build(order, {"tp": etp_v, "ep": ep, "dp": edp, "pp": pp, "cp": 1})
    except OrderError as exc:
        return GridError(Kind.GRID_ORDER_TOKEN, str(exc))
    if not (order.endswith("pp") or pp == 1 or edp == dp):
        return GridError(
            Kind.GRID_ORDER_PPLAST,
            "When not using pp-last rank ordering, the data parallel size of "
            "the attention and moe layers must be the same",
        )
    result = Grid(world, tp, pp, cp, ep, etp_v, order, dense, expert)
    if not result.pp_groups_agree:
        return GridError(
            Kind.GRID_PP_GROUPS, "Pipeline parallel groups are expected to be the same for Non-Expert and Expert part"
        )
    return result
