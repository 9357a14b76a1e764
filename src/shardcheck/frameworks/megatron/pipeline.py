"""How Megatron-Core splits the decoder layers over pipeline stages, and the checks on that split.

Mirrors megatron-core 0.16.1: ``TransformerConfig.__post_init__`` (the uneven-PP and
account-for-embedding/loss checks, megatron/core/transformer/transformer_config.py) followed by
``get_num_layers_to_build`` (megatron/core/transformer/transformer_block.py), in that order, with
their error texts verbatim (including Megatron's missing spaces).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.problems import Kind


@dataclass(frozen=True, slots=True)
class SplitError:
    """Why Megatron-Core rejects a split: the check's kind (the rules map it to an id) and Megatron's text."""

    kind: Kind
    message: str  # megatron-core's own text


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
) -> Split | SplitError:
    """The layers each pipeline stage builds, or the first check Megatron-Core fails."""
    if (first is not None or last is not None) and (account_for_embedding or account_for_loss):
        # TransformerConfig.__post_init__ checks this before the uneven split itself.
        return SplitError(
            Kind.SPLIT_UNEVEN_ACCOUNT,
            "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot beset at the same "
            "time with account_for_embedding_in_pipeline_splitand account_for_loss_in_pipeline_split",
        )
    if first is not None or last is not None:
        error = _check_uneven(num_layers, pp, first, last, vpp)
        if error:
            return error
        middle_layers = num_layers - (first or 0) - (last or 0)
        middle_stages = pp - (first is not None) - (last is not None)
        if middle_stages > 0 and middle_layers % middle_stages != 0:
            return SplitError(
                Kind.SPLIT_UNEVEN_MIDDLE,
                "With uneven pipelineing the left over layers must be divisible by left over stages",
            )
        per_middle = middle_layers // middle_stages if middle_stages > 0 else 0
        stages = [per_middle] * pp
        if first is not None:
            stages[0] = first
        if last is not None:
            stages[-1] = last
        if pp == 1 and first is not None and last is not None:
            stages = [last]
    else:
        total = num_layers + int(account_for_embedding) + int(account_for_loss)
        if account_for_embedding or account_for_loss:
            error = _check_account(total, pp, vpp)
            if error:
                return error
        if total % pp != 0:
            return SplitError(Kind.SPLIT_LAYERS_PP, "num_layers should be divisible by pipeline_model_parallel_size")
        stages = [total // pp] * pp
        if account_for_embedding:
            stages[0] -= 1
        if account_for_loss:
            stages[-1] -= 1
    per_chunk = None
    if vpp is not None and pp > 1:
        raw = list(stages)
        if account_for_embedding and first is None and last is None:
            raw[0] += 1
        if account_for_loss and first is None and last is None:
            raw[-1] += 1
        for n in raw:
            if n % vpp != 0:
                return SplitError(
                    Kind.SPLIT_VPP,
                    f"num_layers_per_pipeline_rank {n} should be divisible by vp_size {vpp}",
                )
        per_chunk = tuple(n // vpp for n in raw)
    if any(n < 0 for n in stages):
        # megatron-core accepts this (the middle stages get a negative layer count and build
        # nothing); shardcheck's own check, with no Megatron text to quote.
        return SplitError(
            Kind.SPLIT_NEGATIVE_STAGE,
            f"first and last stage layers leave {', '.join(map(str, stages))} layers per stage",
        )
    return Split(tuple(stages), per_chunk)


def _check_uneven(num_layers: int, pp: int, first: int | None, last: int | None, vpp: int | None) -> SplitError | None:
    """TransformerConfig.__post_init__, "Uneven PP" branch, in its order."""
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
    if bool(layers_left) != bool(stages_left):
        return SplitError(
            Kind.SPLIT_UNEVEN_MIDDLE,
            f"Mismatch: {layers_left} middle layers remaining but {stages_left} middle PP stages available.",
        )
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


def _check_account(total: int, pp: int, vpp: int | None) -> SplitError | None:
    """TransformerConfig.__post_init__, account_for_embedding/loss_in_pipeline_split branch."""
    if vpp is None:
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
