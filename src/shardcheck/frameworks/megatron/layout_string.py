"""Megatron-Core's ``pipeline_model_parallel_layout`` strings (``"Et*3|(tt|)*6mL"``), read without evaluating.

megatron-core 0.16.1, megatron/core/transformer/pipeline_parallel_layer_layout.py
(``PipelineParallelLayerLayout.parse_str_to_list`` and ``__init__``): commas are cosmetic; ``(…)*n`` and then
``x*n`` are unrolled; ``|`` separates the PP·VPP stages; ``E`` embedding, ``t`` a decoder layer, ``m`` an MTP
layer, ``L`` the loss. Stage ``i`` of the flat list runs on pipeline rank ``i % PP`` as its virtual chunk
``i // PP``; decoder layers are numbered in the flat order (``get_layer_offset``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardcheck.errors import ShardcheckError

MAX_EXPANDED = 200_000  # characters of the unrolled string shardcheck accepts (hostile-input bound)
_KINDS = frozenset("EtmL")


class LayoutStringError(ShardcheckError, ValueError):
    """The layout string is not one Megatron-Core accepts (the message says why)."""


@dataclass(frozen=True, slots=True)
class RankLayout:
    """What one pipeline rank builds under a layout string."""

    chunk_layers: tuple[tuple[int, ...], ...]  # 0-based decoder layer indices of each virtual chunk
    chunk_mtp: tuple[int, ...]  # MTP layers of each virtual chunk
    embedding: bool
    loss: bool

    @property
    def decoder_layers(self) -> tuple[int, ...]:
        return tuple(i for chunk in self.chunk_layers for i in chunk)

    @property
    def mtp_layers(self) -> int:
        return sum(self.chunk_mtp)

    @property
    def chunks(self) -> int:
        return len(self.chunk_layers)


def _unroll(text: str) -> str:
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):

        def repeat(m: re.Match) -> str:
            n = int(m.group(2))
            if len(m.group(1)) * n > MAX_EXPANDED:
                raise LayoutStringError(f"the layout string unrolls to more than {MAX_EXPANDED} characters")
            return m.group(1) * n

        text = re.sub(pattern, repeat, text)
        if len(text) > MAX_EXPANDED:
            raise LayoutStringError(f"the layout string unrolls to more than {MAX_EXPANDED} characters")
    return text


def parse_layout(text: str, pp: int, num_layers: int) -> list[RankLayout]:
    """Each pipeline rank's part of ``text``; LayoutStringError when Megatron-Core would reject it."""
    if len(text) > MAX_EXPANDED:
        raise LayoutStringError("the layout string is too long")
    stages = _unroll(text.replace(",", "")).split("|")
    bad = sorted({c for s in stages for c in s} - _KINDS)
    if bad:
        raise LayoutStringError(f"invalid layer characters {''.join(bad)!r} (known: E, t, m, L)")
    if pp < 1 or len(stages) % pp:
        raise LayoutStringError(f"{len(stages)} stages are not divisible by the pipeline size {pp}")
    flat = "".join(stages)
    if flat.count("t") != num_layers:
        raise LayoutStringError(f"{flat.count('t')} decoder layers in the layout, the model has {num_layers}")
    if not flat.startswith("E") or flat.count("E") != 1 or not flat.endswith("L") or flat.count("L") != 1:
        raise LayoutStringError("the layout must start with the one embedding E and end with the one loss L")
    vpp = len(stages) // pp
    out = []
    for rank in range(pp):
        layers: list[tuple[int, ...]] = []
        mtp: list[int] = []
        for chunk in range(vpp):
            i = chunk * pp + rank
            start = sum(s.count("t") for s in stages[:i])
            layers.append(tuple(range(start, start + stages[i].count("t"))))
            mtp.append(stages[i].count("m"))
        mine = "".join(stages[c * pp + rank] for c in range(vpp))
        out.append(RankLayout(tuple(layers), tuple(mtp), "E" in mine, "L" in mine))
    return out
