"""What verl sets on the Megatron-Core TransformerConfig it builds, before the user's overrides.

verl/workers/engine/megatron/transformer_impl.py ``_build_tf_config`` (verl 0.9.1) sets
``moe_token_dispatcher_type="alltoall"`` and ``variable_seq_lengths=True``; an entry of
``override_transformer_config`` wins over these. DeepEP stays off unless overridden.
"""

from __future__ import annotations

PROVIDER_DEFAULTS: dict[str, object] = {
    "moe_token_dispatcher_type": "alltoall",
    "variable_seq_lengths": True,
    "moe_enable_deepep": False,
}
