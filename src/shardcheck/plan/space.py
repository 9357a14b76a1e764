"""The layouts the planner searches, and the cheap necessary conditions that prune them.

A :class:`Space` names the values each knob may take; ``train_layouts`` / ``rollout_layouts`` yield the
members that pass the divisibility conditions below. Each condition is implied by a start-up rule that
``check`` runs (tests/test_plan.py proves it: a brute-force enumeration of the whole space, judged by
``check``, keeps exactly the planner's set), so pruning never drops a valid layout:

- TP·PP·CP divides the world (MCORE-PS-WORLD); ETP·EP·PP divides the world (MCORE-PS-EXPERT-FOLD);
- TP divides the attention heads (MCORE-TC-HEADS-TP) and the query groups (MCORE-TC-QG-TP);
- EP divides the experts (MCORE-BUILD-EXPERTS-EP); EP > 1 needs experts (MCORE-TC-MOE-EP-NOEXP);
- the layer split (PP, VPP, first and last stage sizes) is one Megatron-Core builds: shardcheck's
  ``split_layers``, the function the MCORE-BUILD-* and MCORE-TC-UNEVEN-* rules call;
- rollout: TP · DP divides the world (VERL-RO-WORLD), TP divides the heads (VLLM-TP-HEADS), and
  rollout EP is 1 or TP · DP (VERL-RO-EP).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from shardcheck.frameworks.megatron.pipeline import Split, split_layers

RECOMPUTE_NONE = ("none", None, None, None)


@dataclass(frozen=True, slots=True)
class TrainLayout:
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int | None  # None: follow TP (Megatron-Core's default)
    vpp: int | None
    first: int | None
    last: int | None
    order: str


@dataclass(frozen=True, slots=True)
class Memory:
    """Recompute and optimizer choices: (name, granularity, method, num_layers), distributed optimizer, offload."""

    recompute: tuple[str, str | None, str | None, int | None]
    distributed_optimizer: bool
    offload: bool | None  # verl's param + optimizer offload between phases; None: not a knob here


@dataclass(frozen=True, slots=True)
class Rollout:
    tp: int
    dp: int
    ep: int


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class Space:
    """The values each knob may take (None for a knob: every integer from 1 to the world)."""

    world: int
    layers: int
    heads: int
    kv_heads: int
    experts: int
    orders: tuple[str, ...]
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    etp: tuple[int | None, ...] | None = None
    vpp: tuple[int | None, ...] | None = None
    uneven: bool = True  # search first / last stage sizes
    end_spread: int | None = None  # first / last sizes from ceil(layers/PP) − spread to ceil(layers/PP); None: from 1
    recompute: tuple[tuple, ...] = field(default_factory=lambda: ("auto",))
    distributed_optimizer: tuple[bool, ...] = (True, False)
    offload: tuple[bool | None, ...] = (False, True)
    rollout_tp: tuple[int, ...] | None = None
    rollout_dp: tuple[int, ...] | None = None
    rollout: bool = True
    # the script's account_for_embedding / account_for_loss_in_pipeline_split, held on every candidate (no plan
    # key switches them; Megatron-Core refuses first / last stage sizes with them: MCORE-TC-UNEVEN-ACCOUNT)
    account: tuple[bool, bool] = (False, False)

    def values(self, name: str, limit: int) -> list:
        given = getattr(self, name)
        return list(given) if given is not None else list(range(1, limit + 1))


def _fits(world: int, *sizes: int) -> bool:
    product = 1
    for s in sizes:
        product *= s
    return world % product == 0


def stage_options(space: Space, pp: int) -> Iterator[tuple[int | None, int | None, int | None]]:
    """(vpp, first, last) that Megatron-Core splits ``space.layers`` over ``pp`` stages with (split_layers).

    VPP needs PP > 1 (MCORE-PS-VPP-PP) and divides every stage's layer count (MCORE-BUILD-VPP,
    MCORE-TC-UNEVEN-VPP): only those are tried, each confirmed by ``split_layers``.
    """
    L = space.layers
    vpps = [v for v in (space.vpp if space.vpp is not None else [None] + list(range(2, L + 1))) if v is not None]
    ends: list[int | None] = [None]
    emb, loss = space.account
    if emb or loss:
        # the embedding and the loss count as layers: no first / last sizes, split_layers decides the rest
        split = split_layers(L, pp, account_for_embedding=emb, account_for_loss=loss)
        if not isinstance(split, Split):
            return
        if space.vpp is None or None in space.vpp:
            yield None, None, None
        if pp > 1:
            for vpp in vpps:
                if isinstance(split_layers(L, pp, vpp=vpp, account_for_embedding=emb, account_for_loss=loss), Split):
                    yield vpp, None, None
        return
    if space.uneven and pp > 1:
        top = -(-L // pp)
        ends += list(range(1 if space.end_spread is None else max(1, top - space.end_spread), top + 1))
    with_none = space.vpp is None or None in space.vpp
    for first in ends:
        for last in ends:
            middle = pp - (first is not None) - (last is not None)
            rest = L - (first or 0) - (last or 0)
            if (first is not None or last is not None) and middle > 0 and rest % middle:
                continue  # MCORE-TC-UNEVEN-MIDDLE (split_layers says so too)
            split = split_layers(L, pp, first=first, last=last)
            if not isinstance(split, Split):
                continue
            if with_none:
                yield None, first, last
            if pp == 1:
                continue
            for vpp in vpps:
                if all(n % vpp == 0 for n in split.stages) and isinstance(
                    split_layers(L, pp, first=first, last=last, vpp=vpp), Split
                ):
                    yield vpp, first, last


def train_layouts(space: Space) -> Iterator[TrainLayout]:
    W = space.world
    moe = space.experts > 0
    for tp in space.values("tp", W):
        if not _fits(W, tp) or space.heads % tp or space.kv_heads % tp:
            continue
        for pp in space.values("pp", W):
            if not _fits(W, tp, pp) or pp > space.layers:
                continue
            stages = list(stage_options(space, pp))
            if not stages:
                continue
            for cp in space.values("cp", W):
                if not _fits(W, tp, pp, cp):
                    continue
                for ep in space.values("ep", W):
                    if ep > 1 and (not moe or space.experts % ep):
                        continue
                    etps = (
                        space.etp if space.etp is not None else ((None,) + tuple(range(1, W + 1)) if moe else (None,))
                    )
                    for etp in etps:
                        if not _fits(W, etp if etp is not None else tp, ep, pp):
                            continue
                        for order in space.orders:
                            for vpp, first, last in stages:
                                yield TrainLayout(tp, pp, cp, ep, etp, vpp, first, last, order)


def memory_options(space: Space, layers_per_chunk: int) -> list[Memory]:
    """Recompute × distributed optimizer × offload; "auto" recompute: none, selective, full uniform 1, and
    full block over a quarter, half and three quarters of a chunk's layers."""
    return [
        Memory(r, d, o)
        for r in recompute_options(space, layers_per_chunk)
        for d in space.distributed_optimizer
        for o in space.offload
    ]


def recompute_options(space: Space, layers_per_chunk: int) -> list[tuple]:
    """ "auto": none, selective (the attention core), full uniform over 1 layer, and full block over half
    a chunk's layers."""
    recomputes: list[tuple] = []
    for r in space.recompute:
        if r != "auto":
            recomputes.append(r)
            continue
        recomputes += [RECOMPUTE_NONE, ("selective", "selective", None, None), ("full-uniform-1", "full", "uniform", 1)]
        n = layers_per_chunk // 2
        if 1 <= n < layers_per_chunk:
            recomputes.append((f"full-block-{n}", "full", "block", n))
    return recomputes


def rollout_layouts(space: Space) -> Iterator[Rollout]:
    W = space.world
    for tp in space.values("rollout_tp", W):
        if not _fits(W, tp) or space.heads % tp:
            continue
        for dp in space.values("rollout_dp", W):
            if not _fits(W, tp, dp):
                continue
            for ep in (1, tp * dp) if space.experts and tp * dp > 1 else (1,):
                yield Rollout(tp, dp, ep)
