"""How Megatron-Core splits the decoder layers over pipeline stages, and the checks on that split, per minor.

Mirrors, for each minor 0.9 … 0.19 (``frameworks/megatron/versions.py`` ``MINORS``), that minor's
``TransformerConfig.__init__`` / ``__post_init__`` (the uneven-PP and account-for-embedding/loss checks,
megatron/core/transformer/transformer_config.py) followed by ``get_num_layers_to_build``
(megatron/core/transformer/transformer_block.py) on every pipeline rank and virtual stage, in that order, with
their error texts verbatim (Megatron's missing spaces and line-continuation blanks included). Read from the
released wheels megatron-core 0.9.0, 0.10.0, 0.11.0, 0.12.3, 0.13.x, 0.14.x, 0.15.x, 0.16.1, 0.17.1, 0.18.2,
0.19.0 (tests/test_megatron_split_versions_differential.py runs each). What moves between minors:

- ≤ 0.10: the fields are ``first_pipeline_num_layers`` / ``last_pipeline_num_layers``; ``TransformerConfig``
  checks nothing about the split and has no ``account_for_*`` field (a TypeError); ``get_num_layers_to_build``
  floors ``num_layers // pp`` and ``// vpp`` without an assert, returns the first / last stage's own count
  unchecked, and forbids uneven stages with VPP;
- 0.11: ``account_for_*`` arrive; with them and no VPP, ``num_layers % (pp - e - l)`` (ZeroDivisionError when
  nothing is left); the uneven middle check divides by the middle stages even when there are none
  (ZeroDivisionError with PP 2 and both stages set, 0.11 and 0.12);
- 0.12: ``(num_layers + e + l) % pp``; the VPP assert names the counts;
- 0.13: no middle stage left is accepted (the middle checks run only when there is one);
- 0.16: "Mismatch: M middle layers remaining but S middle PP stages available.";
- 0.17: the even-split assert reads ``num_layers=30 should be divisible by
  config.pipeline_model_parallel_size=4``.

Where a minor raises nothing but builds another model than the one asked for (fewer or more layers than the
model has, a stage with a negative count that builds none), the result is a ``SplitError`` with ``starts``
set: the job starts, the rules warn.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.frameworks.megatron.versions import DEFAULT, as_tuple
from shardcheck.problems import Kind

_ZERO = "integer modulo by zero"  # Python's ZeroDivisionError text for ``n % 0``


@dataclass(frozen=True, slots=True)
class SplitError:
    """Why Megatron-Core rejects a split (or, with ``starts``, builds another model than asked for): the check's
    kind (the rules map it to an id) and Megatron's text (shardcheck's own words when ``starts``)."""

    kind: Kind
    message: str  # megatron-core's own text
    starts: bool = False  # megatron-core raises nothing: the job starts with another layer count
    raised: str = "ValueError"  # the exception megatron-core raises (AssertionError, ZeroDivisionError, TypeError)
    at_init: bool = False  # raised by TransformerConfig.__init__ itself, before any __post_init__ check
    built: tuple[int, ...] | None = None  # with ``starts``: the layers each stage builds


@dataclass(frozen=True, slots=True)
class Split:
    """Decoder layers per pipeline stage (summed over a stage's virtual chunks)."""

    stages: tuple[int, ...]
    per_chunk: tuple[int, ...] | None  # layers per virtual chunk on each stage, with VPP


def split_layers(
    num_layers: int,
    pp: int,
    *,
    first: int | None = None,
    last: int | None = None,
    vpp: int | None = None,
    account_for_embedding: bool = False,
    account_for_loss: bool = False,
    version: str = DEFAULT,
) -> Split | SplitError:
    """The layers each pipeline stage builds, or the first check megatron-core ``version`` fails.

    VPP with PP 1 is judged as no VPP (Megatron-LM and verl build no virtual chunks then)."""
    v = as_tuple(version)
    emb, loss = bool(account_for_embedding), bool(account_for_loss)
    if vpp is not None and pp <= 1:
        vpp = None
    error = _config_checks(v, num_layers, pp, first, last, vpp, emb, loss)
    if error:
        return error
    # get_num_layers_to_build depends only on whether a rank is the first, a middle or the last one, and a
    # virtual stage the first, a middle or the last: one of each, in the order the ranks build them.
    k = vpp or 1
    built: dict[tuple[int, int], int] = {}
    for r in sorted({0, min(1, pp - 1), pp - 1}):
        for c in sorted({0, min(1, k - 1), k - 1}):
            n = _layers_to_build(v, num_layers, pp, first, last, vpp, emb, loss, r, c)
            if isinstance(n, SplitError):
                return n
            built[r, c] = n

    def count(r: int, c: int) -> int:
        return built[r if r in (0, pp - 1) else 1, c if c in (0, k - 1) else 1]

    stages = tuple(_over_chunks(lambda c, r=r: count(r, c), k) for r in range(pp))
    total = sum(_over_chunks(lambda c, r=r: max(count(r, c), 0), k) for r in range(pp))
    if total != num_layers or any(n < 0 for n in built.values()):
        return _other_model(v, num_layers, pp, first, last, vpp, stages, total)
    per_chunk = None
    if vpp is not None:
        per_chunk = tuple(count(r, 0) + int(emb and r == 0) + int(loss and r == pp - 1 and k == 1) for r in range(pp))
    return Split(stages, per_chunk)


def _over_chunks(count, k: int) -> int:
    """The sum of ``count(c)`` over the virtual stages 0 … k-1 (the middle ones are all alike)."""
    if k <= 2:
        return sum(count(c) for c in range(k))
    return count(0) + (k - 2) * count(1) + count(k - 1)


def _other_model(v, num_layers, pp, first, last, vpp, stages, total) -> SplitError:
    """A split megatron-core minor ``v`` accepts though it builds another model than ``num_layers`` layers."""
    shown = ", ".join(map(str, stages)) if pp <= 16 else f"{', '.join(map(str, stages[:8]))}, …"
    text = f"the {pp} stages build {shown} layers" if pp > 1 else f"the one stage builds {shown} layers"
    text += f": {total} of {num_layers}"
    if any(n < 0 for n in stages):
        text += " (a negative count builds none)"
    if v < (0, 11) and first is None and last is None:
        kind = Kind.SPLIT_LAYERS_PP if num_layers % pp else Kind.SPLIT_VPP
        return SplitError(kind, text, starts=True, built=stages)
    return SplitError(Kind.SPLIT_NEGATIVE_STAGE, text, starts=True, built=stages)


def _config_checks(v, num_layers, pp, first, last, vpp, emb, loss) -> SplitError | None:
    """TransformerConfig.__init__ / __post_init__ of minor ``v``: the split checks, in its order."""
    uneven = first is not None or last is not None
    if v < (0, 11):
        if emb or loss:  # no such field before 0.11: the dataclass constructor refuses it
            name = "account_for_embedding_in_pipeline_split" if emb else "account_for_loss_in_pipeline_split"
            return SplitError(
                Kind.SPLIT_ACCOUNT,
                f"TransformerConfig.__init__() got an unexpected keyword argument '{name}'",
                raised="TypeError",
                at_init=True,
            )
        return None  # ≤ 0.10 checks nothing about the split here
    if uneven and (emb or loss):
        return SplitError(
            Kind.SPLIT_UNEVEN_ACCOUNT,
            "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot beset at the same "
            "time with account_for_embedding_in_pipeline_splitand account_for_loss_in_pipeline_split",
        )
    if uneven:
        return _check_uneven(v, num_layers, pp, first, last, vpp)
    if emb or loss:
        return _check_account(v, num_layers, pp, vpp, emb, loss)
    return None


def _layers_to_build(v, num_layers, pp, first, last, vpp, emb, loss, r, c) -> int | SplitError:
    """get_num_layers_to_build of minor ``v`` on pipeline rank ``r``, virtual stage ``c``."""
    uneven = first is not None or last is not None
    if v < (0, 11):
        if not uneven:
            per = num_layers // pp
            return per // vpp if vpp is not None else per
        if vpp is not None:
            return SplitError(
                Kind.SPLIT_UNEVEN_VPP,
                "Uneven number of layer not compatible with interleaved pipeline schedule",
                raised="AssertionError",
            )
        left, stages_left = num_layers, pp
        if first is not None:
            left, stages_left = left - first, stages_left - 1
            if r == 0:
                return first
        if last is not None:
            left, stages_left = left - last, stages_left - 1
            if r == pp - 1:
                return last
        if stages_left == 0:
            return SplitError(Kind.SPLIT_UNEVEN_MIDDLE, _ZERO, raised="ZeroDivisionError")
        if left % stages_left:
            return SplitError(Kind.SPLIT_UNEVEN_MIDDLE, _MIDDLE_ASSERT, raised="AssertionError")
        return left // stages_left
    if uneven:
        left = num_layers - (first or 0) - (last or 0)
        stages_left = pp - (first is not None) - (last is not None)
        if v >= (0, 13) and stages_left <= 0:
            per = 0
        elif stages_left == 0:
            return SplitError(Kind.SPLIT_UNEVEN_MIDDLE, _ZERO, raised="ZeroDivisionError")
        elif left % stages_left:
            return SplitError(Kind.SPLIT_UNEVEN_MIDDLE, _MIDDLE_ASSERT, raised="AssertionError")
        else:
            per = left // stages_left
        if r == 0 and first is not None:
            per = first
        if r == pp - 1 and last is not None:
            per = last
    else:
        total = num_layers + int(emb) + int(loss)
        if total % pp:
            text = (
                f"num_layers={total} should be divisible by config.pipeline_model_parallel_size={pp}"
                if v >= (0, 17)
                else "num_layers should be divisible by pipeline_model_parallel_size"
            )
            return SplitError(Kind.SPLIT_LAYERS_PP, text, raised="AssertionError")
        per = total // pp
    n = per
    if vpp is not None:
        if per % vpp:
            text = (
                # a backslash-newline inside the f-string: the next line's indent is part of the text
                f"num_layers_per_pipeline_rank {per}             should be divisible by vp_size {vpp}"
                if v >= (0, 12)
                else "num_layers_per_pipeline_rank should be divisible by vp_size"
            )
            return SplitError(Kind.SPLIT_VPP, text, raised="AssertionError")
        n = per // vpp
    if emb and r == 0 and c == 0:
        n -= 1
        if n < 0:
            return SplitError(
                Kind.SPLIT_ACCOUNT, "Not enough layers in the first virtual pipeline stage", raised="AssertionError"
            )
    if loss and r == pp - 1 and c == (vpp or 1) - 1:
        n -= 1
        if n < 0:
            return SplitError(
                Kind.SPLIT_ACCOUNT, "Not enough layers in the last virtual pipeline stage", raised="AssertionError"
            )
    return n


_MIDDLE_ASSERT = "With uneven pipelineing the left over layers must be divisible by left over stages"


def _check_uneven(v, num_layers: int, pp: int, first: int | None, last: int | None, vpp: int | None):
    """TransformerConfig.__post_init__ of minor ``v`` (≥ 0.11), "Uneven PP" branch, in its order."""
    stages_left = pp
    layers_left = num_layers
    if first is not None:
        if first <= 0:
            return SplitError(Kind.SPLIT_UNEVEN_POS, "num_layers_in_first_pipeline_stage must be larger than 0")
        if vpp is not None and first % vpp != 0:
            return SplitError(
                Kind.SPLIT_UNEVEN_VPP,
                f"number of layers at first stage: {first}must be divisible by virtual pipelineparallel degree {vpp}",
            )
        layers_left -= first
        stages_left -= 1
    if last is not None:
        if last <= 0:
            return SplitError(Kind.SPLIT_UNEVEN_POS, "num_layers_in_last_pipeline_stage must be larger than 0")
        if vpp is not None and last % vpp != 0:
            return SplitError(
                Kind.SPLIT_UNEVEN_VPP,
                f"number of layers at last stage: {last}must be divisible by virtual pipelineparallel degree {vpp}",
            )
        layers_left -= last
        stages_left -= 1
    if v >= (0, 16) and bool(layers_left) != bool(stages_left):
        return SplitError(
            Kind.SPLIT_UNEVEN_MIDDLE,
            f"Mismatch: {layers_left} middle layers remaining but {stages_left} middle PP stages available.",
        )
    if v < (0, 13) and stages_left == 0:  # 0.11 / 0.12 divide by the middle stages even when there are none
        return SplitError(Kind.SPLIT_UNEVEN_MIDDLE, _ZERO, raised="ZeroDivisionError")
    if stages_left and layers_left % stages_left != 0:
        return SplitError(
            Kind.SPLIT_UNEVEN_MIDDLE,
            f"number of layers at middle stage: {layers_left} must be divisible bythe middle pipeline "
            f"model parallel size {stages_left}",
        )
    if stages_left and vpp is not None:
        per_rank = layers_left // stages_left
        if per_rank % vpp != 0:
            return SplitError(
                Kind.SPLIT_UNEVEN_VPP,
                f"number of layers on each middle pipeline rank:{per_rank} must be divisible by virtualpipeline "
                f"parallel degree {vpp}",
            )
    return None


def _check_account(v, num_layers: int, pp: int, vpp: int | None, emb: bool, loss: bool) -> SplitError | None:
    """TransformerConfig.__post_init__ of minor ``v`` (≥ 0.11), account_for_embedding/loss_in_pipeline_split."""
    total = num_layers + int(emb) + int(loss)
    if vpp is None:
        if v < (0, 12):  # 0.11: the layers over the stages left after the embedding / loss stage
            middle = pp - int(emb) - int(loss)
            if middle == 0:
                return SplitError(Kind.SPLIT_ACCOUNT, _ZERO, raised="ZeroDivisionError")
            if num_layers % middle:
                return SplitError(
                    Kind.SPLIT_ACCOUNT,
                    f"number of middle layers: {num_layers} must be divisible by middle "
                    f"pipeline_model_parallel_size {middle}",
                )
            return None
        if total % pp != 0:
            return SplitError(
                Kind.SPLIT_ACCOUNT,
                f"number of middle layers: {total} must be divisible by middle pipeline_model_parallel_size {pp}",
            )
        return None
    if total % pp != 0:
        return SplitError(
            Kind.SPLIT_ACCOUNT,
            f"num_layers: {total} after enableaccount_for_embedding_in_pipeline_split or "
            f"account_for_loss_in_pipeline_split must be divisibleby pipeline_model_parallel_size {pp}",
        )
    per_rank = total // pp
    if per_rank % vpp != 0:
        return SplitError(
            Kind.SPLIT_ACCOUNT,
            f"number of layers on each pipeline rank: {per_rank}(after enable account_for_embedding_in_pipeline_split "
            f"or account_for_loss_in_pipeline_split) must be divisible byvirtual_pipeline_model_parallel_size{vpp}",
        )
    return None


def stage_layer_indices(
    split: Split,
    num_layers: int,
    *,
    vpp: int | None = None,
    account_for_embedding: bool = False,
    account_for_loss: bool = False,
) -> tuple[tuple[int, ...], ...]:
    """The 0-based global indices of the decoder layers each pipeline stage builds (over its chunks)."""
    chunks = stage_chunk_layer_indices(
        split, num_layers, vpp=vpp, account_for_embedding=account_for_embedding, account_for_loss=account_for_loss
    )
    return tuple(tuple(i for chunk in stage for i in chunk) for stage in chunks)


def stage_chunk_layer_indices(
    split: Split,
    num_layers: int,
    *,
    vpp: int | None = None,
    account_for_embedding: bool = False,
    account_for_loss: bool = False,
) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """The 0-based global indices of the decoder layers of each virtual chunk of each pipeline stage.

    Megatron-Core numbers layers chunk-major: virtual chunk 0 of every stage in stage order, then chunk 1,
    and so on (transformer_layer.py ``get_transformer_layer_offset``); the virtual embedding / loss slots
    of ``account_for_*`` sit in chunk 0 of the first stage and the last chunk of the last stage.
    """
    pp = len(split.stages)
    chunks = vpp if split.per_chunk is not None and vpp else 1
    raw = split.per_chunk if split.per_chunk is not None else split.stages
    out: list[list[tuple[int, ...]]] = [[] for _ in range(pp)]
    nxt = 0
    for c in range(chunks):
        for s in range(pp):
            real = raw[s]
            if split.per_chunk is not None:
                real -= int(
                    account_for_embedding and s == 0 and c == 0 and _even(split, split.stages[0], raw[0], chunks)
                )
                real -= int(
                    account_for_loss
                    and s == pp - 1
                    and c == chunks - 1
                    and _even(split, split.stages[-1], raw[-1], chunks)
                )
            out[s].append(tuple(range(nxt, nxt + real)))
            nxt += real
    if nxt != num_layers:
        raise ValueError(f"layer split {split.stages} does not cover {num_layers} layers")
    return tuple(tuple(x) for x in out)


def _even(split: Split, built: int, per_chunk: int, chunks: int) -> bool:
    """Whether a stage's chunks include a virtual (embedding or loss) slot: built layers < chunk sum."""
    return built < per_chunk * chunks
