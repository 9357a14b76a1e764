"""A model's Megatron-Core shape from Megatron-LM's flags (``--num-layers 94 --swiglu ...``).

Megatron-LM main, megatron/training/arguments.py (flag defaults and ``validate_args``) and
megatron/core/transformer/transformer_config.py (the fields the flags fill):
- ``--normalization`` defaults to LayerNorm (weight and bias); RMSNorm has a weight only;
- ``--disable-bias-linear`` turns off ``add_bias_linear`` (default on: biases on every linear layer);
  validate_args sets ``add_qkv_bias`` when ``add_bias_linear`` is on;
- ``--swiglu`` is ``gated_linear_unit``; ``--ffn-hidden-size`` defaults to 4·hidden, or with
  ``--swiglu`` to ``int(4·hidden·2/3 / 64)·64`` (validate_args);
- ``--kv-channels`` defaults to hidden / heads; ``--num-query-groups`` counts only with
  ``--group-query-attention`` (core_transformer_config_from_args), else every head has its own K/V;
- ``--moe-ffn-hidden-size`` defaults to the FFN size; ``--moe-layer-freq`` N makes layer i MoE when
  ``i % N == 0``, or a pattern list (megatron/core/models/gpt/gpt_layer_specs.py);
- ``--untie-embeddings-and-output-weights`` unties them (default tied);
- ``--position-embedding-type`` defaults to learned_absolute: a replicated ``max_position_embeddings ×
  hidden`` table on the first stage (megatron/core/models/common/embeddings/language_model_embedding.py);
- MLA: ``--multi-latent-attention`` with ``--q-lora-rank`` (None: no q down projection),
  ``--kv-lora-rank`` (32), ``--qk-head-dim`` (128), ``--qk-pos-emb-head-dim`` (64), ``--v-head-dim``
  (128); the latent norms exist only with ``--qk-layernorm`` (gpt_layer_specs: layer-norm linear up
  projections ``if qk_layernorm``).
The vocab is ``--vocab-size`` (the null tokenizer's size), else the size of the ``--hf-checkpoint``
preset's tokenizer; Megatron-LM pads it (``TrainSettings.vocab_divisible_by``).
"""

from __future__ import annotations

import ast

from shardcheck.errors import ShardcheckError
from shardcheck.origin import Traced

MARKER = "megatron_lm_flags"  # ModelFacts.config key holding the flags' Traced values
NOT_COUNTED = "megatron_lm_not_counted"  # why the flags' layers are not a stack shardcheck counts


class FlagsNotModelled(ShardcheckError):
    """The flags' model cannot be counted exactly (the message says why; ``origin``: the flag's, when known)."""

    def __init__(self, message: str, origin=None) -> None:
        super().__init__(message)
        self.origin = origin


def _pattern(node: ast.AST) -> list[int]:
    """A literal pattern as Megatron-LM writes it: lists of ints, ``+`` and ``* int``, parentheses."""
    if isinstance(node, ast.List):
        out = []
        for item in node.elts:
            if not (isinstance(item, ast.Constant) and type(item.value) is int):
                raise ValueError("not an int")
            out.append(item.value)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pattern(node.left) + _pattern(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = node.left, node.right
        if isinstance(left, ast.Constant) and type(left.value) is int:
            left, right = right, left
        if isinstance(right, ast.Constant) and type(right.value) is int and 0 <= right.value <= 100_000:
            return _pattern(left) * right.value
    raise ValueError("not a literal pattern")


def moe_layer_pattern(text: str | int, layers: int) -> frozenset[int]:
    """The MoE layer indices of ``--moe-layer-freq`` (an int, its text, or a literal list expression),
    parsed without evaluating anything; ValueError when it is not one of those forms."""
    text = str(text).strip()
    if text.isascii() and text.isdigit():
        freq = int(text)
        if freq < 1:
            raise ValueError("--moe-layer-freq must be ≥ 1")
        return frozenset(i for i in range(layers) if i % freq == 0)
    if len(text) > 10_000:
        raise ValueError("pattern too long")
    pattern = _pattern(ast.parse(text, mode="eval").body)
    if len(pattern) != layers:
        raise ValueError(f"the pattern has {len(pattern)} entries for {layers} layers")
    return frozenset(i for i, v in enumerate(pattern) if v)


def _get(flags: dict[str, Traced], name: str):
    t = flags[name]
    if not t.known:
        raise FlagsNotModelled(f"{name} is unknown ({t.unknown})", t.origin)
    return t.value


def _positive(flags: dict[str, Traced], name: str, default=None):
    value = _get(flags, name)
    if value is None:
        return default
    if not isinstance(value, int) or value < 1:
        raise FlagsNotModelled(f"{name} {value!r} is not a positive integer", flags[name].origin)
    return value


def architecture_values(flags: dict[str, Traced], vocab: int | None, vocab_source: str) -> dict:
    """The Architecture fields the flags give (keyword arguments of ``Architecture``)."""
    layers, heads = _positive(flags, "--num-layers"), _positive(flags, "--num-attention-heads")
    hidden = _positive(flags, "--hidden-size")
    if hidden is None:
        raise FlagsNotModelled("--hidden-size is not given")
    norm = _get(flags, "--normalization")
    if norm not in ("LayerNorm", "RMSNorm"):
        raise FlagsNotModelled(f"--normalization {norm}: shardcheck counts LayerNorm and RMSNorm")
    bias = bool(_get(flags, "--disable-bias-linear"))  # the value is add_bias_linear
    gated = bool(_get(flags, "--swiglu"))
    ffn = _positive(flags, "--ffn-hidden-size")
    if ffn is None:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if gated else 4 * hidden
    kv_channels = _positive(flags, "--kv-channels")
    if kv_channels is None:
        if hidden % heads:
            raise FlagsNotModelled(f"--hidden-size {hidden} is not divisible by --num-attention-heads {heads}")
        kv_channels = hidden // heads
    groups = _positive(flags, "--num-query-groups") if _get(flags, "--group-query-attention") else None
    position = _get(flags, "--position-embedding-type")
    if position not in ("learned_absolute", "rope", "yarn", "none"):
        raise FlagsNotModelled(
            f"--position-embedding-type {position}: shardcheck counts learned_absolute, rope, yarn and none"
        )
    positions = 0
    if position == "learned_absolute":
        positions = _positive(flags, "--max-position-embeddings")
        if positions is None:
            raise FlagsNotModelled("--max-position-embeddings is not given (learned_absolute position embeddings)")
    if vocab is None:
        raise FlagsNotModelled(f"the vocab size is unknown ({vocab_source}); give --vocab-size")
    qk_norm = bool(_get(flags, "--qk-layernorm"))
    mla = None
    if _get(flags, "--multi-latent-attention"):
        mla = dict(
            q_lora_rank=_positive(flags, "--q-lora-rank"),
            kv_lora_rank=_positive(flags, "--kv-lora-rank"),
            qk_nope_head_dim=_positive(flags, "--qk-head-dim"),
            qk_rope_head_dim=_positive(flags, "--qk-pos-emb-head-dim"),
            v_head_dim=_positive(flags, "--v-head-dim"),
        )
    out = dict(
        model_type="megatron-lm flags",
        num_layers=layers,
        hidden=hidden,
        ffn=ffn,
        heads=heads,
        kv_heads=groups or heads,
        head_dim=kv_channels,
        vocab=vocab,
        tied=not _get(flags, "--untie-embeddings-and-output-weights"),
        qk_layernorm=qk_norm,
        # validate_args: add_bias_linear sets add_qkv_bias
        qkv_bias=bool(_get(flags, "--add-qkv-bias")) or bias,
        mla=mla,
        gated=gated,
        norm_bias=norm == "LayerNorm",
        linear_bias=bias,
        position_embeddings=positions,
    )
    experts = _positive(flags, "--num-experts")
    if experts:
        freq = _get(flags, "--moe-layer-freq")
        try:
            moe_layers = moe_layer_pattern(1 if freq is None else freq, layers)
        except (ValueError, SyntaxError, RecursionError) as exc:
            raise FlagsNotModelled(
                f"--moe-layer-freq {freq}: not an integer or a literal list pattern shardcheck "
                f"reads without evaluating it ({exc})"
            ) from None
        shared = _positive(flags, "--moe-shared-expert-intermediate-size") or 0
        out.update(
            experts=experts,
            topk=_positive(flags, "--moe-router-topk", 2),
            moe_ffn=_positive(flags, "--moe-ffn-hidden-size") or ffn,
            shared_ffn=shared,
            shared_gate=bool(shared and _get(flags, "--moe-shared-expert-gate")),
            moe_layers=moe_layers,
        )
    return out
