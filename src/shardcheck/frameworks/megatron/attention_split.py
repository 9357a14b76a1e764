"""The attention-head checks of ``TransformerConfig.__post_init__``, per megatron-core minor, in its words.

megatron/core/transformer/transformer_config.py at every minor 0.9 … 0.19: ``num_attention_heads % TP`` (the
same text throughout), then ``num_query_groups`` (the KV heads; the attention heads when unset): a multiple of
TP up to 0.15, a multiple or a divisor of TP from 0.16 (the KV heads replicated over the TP ranks).
"""

from __future__ import annotations

from shardcheck.frameworks.megatron.versions import as_tuple

QUERY_GROUPS_DIVISOR_SINCE = (0, 16)


def heads_error(heads: int, tp: int) -> str | None:
    if heads % tp == 0:
        return None
    return f"num_attention_heads ({heads}) must be a multiple of tensor_model_parallel_size ({tp})."


def query_groups_divisor_allowed(version: str) -> bool:
    return as_tuple(version) >= QUERY_GROUPS_DIVISOR_SINCE


def query_groups_error(groups: int, tp: int, version: str) -> str | None:
    if groups % tp == 0:
        return None
    if query_groups_divisor_allowed(version):
        if tp % groups == 0:
            return None
        return f"num_query_groups ({groups}) must be a multiple or divisor of tensor_model_parallel_size ({tp})."
    return f"num_query_groups ({groups}) must be a multiple of tensor_model_parallel_size ({tp})."
