"""A checkpoint's ``quantization_config`` read into facts: method, bits, group size, FP8 weight block size.

The keys are those the quantizers write into config.json (transformers' ``quantization_config`` classes):
``quant_method`` (fp8, awq, gptq, compressed-tensors, bitsandbytes, mxfp4, ...); ``bits`` (GPTQ / AWQ),
``w_bit`` (AutoAWQ's own), ``num_bits`` under ``config_groups.*.weights`` (compressed-tensors),
``load_in_4bit`` / ``load_in_8bit`` (bitsandbytes); ``group_size`` / ``q_group_size``; ``weight_block_size``
(DeepSeek-V3's block-wise FP8, e.g. [128, 128]). A value not written stays None: never a guess.
"""

from __future__ import annotations

from shardcheck.job import Quantization

# Methods whose name fixes the weight width (fp8 is 8 bits, mxfp4 4), when no bits key is written.
_WIDTH_OF_METHOD = {"fp8": 8, "fbgemm_fp8": 8, "mxfp4": 4}


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def read_quantization(config: dict) -> Quantization | None:
    """The quantization of a config.json (the top level, else its text part); None when it has none."""
    q = config.get("quantization_config")
    if not isinstance(q, dict) or not q:
        return None
    method = q.get("quant_method") if isinstance(q.get("quant_method"), str) else None
    bits = _whole(q.get("bits")) or _whole(q.get("w_bit"))
    group = q.get("group_size", q.get("q_group_size"))
    group_size = _whole(group)
    weights = [
        g.get("weights")
        for g in (q.get("config_groups") or {}).values()
        if isinstance(g, dict) and isinstance(g.get("weights"), dict)
    ]
    if weights:  # compressed-tensors: one scheme per group; the facts hold it when every group agrees
        widths = {w.get("num_bits") for w in weights}
        groups = {w.get("group_size") for w in weights}
        bits = bits or (_whole(widths.pop()) if len(widths) == 1 else None)
        group_size = group_size or (_whole(groups.pop()) if len(groups) == 1 else None)
    if bits is None and q.get("load_in_4bit") is True:
        bits = 4
    elif bits is None and q.get("load_in_8bit") is True:
        bits = 8
    if bits is None and method is not None:
        bits = _WIDTH_OF_METHOD.get(method.lower())
    block = q.get("weight_block_size")
    block_size = tuple(block) if isinstance(block, list) and block and all(_whole(b) for b in block) else None
    return Quantization(method, bits, group_size, block_size)
