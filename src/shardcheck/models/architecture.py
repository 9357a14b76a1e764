"""A model's shape in Megatron-Core's terms, read from its HF config: what the parameter count needs.

The mapping from HF config keys to Megatron-Core ``TransformerConfig`` fields follows the bridges verl
uses (mbridge ``mbridge/models/*.py`` and Megatron-Bridge ``src/megatron/bridge/models/*/*_bridge.py``):
``intermediate_size`` → ffn_hidden_size, ``num_key_value_heads`` → num_query_groups, ``head_dim`` →
kv_channels, ``moe_intermediate_size`` → moe_ffn_hidden_size, ``shared_expert_intermediate_size`` (or
``n_shared_experts · moe_intermediate_size``) → moe_shared_expert_intermediate_size, Qwen3's q/k norms →
qk_layernorm, Qwen2's q/k/v biases → add_qkv_bias.

Qwen3-Next (``qwen3_next``) and Qwen3.5 (``qwen3_5_text``, ``qwen3_5_moe_text``; the ``text_config`` of a
``qwen3_5`` / ``qwen3_5_moe`` checkpoint) are hybrid: Megatron-Bridge's ``Qwen3NextBridge`` and
``_apply_qwen35_common_config`` (src/megatron/bridge/models/qwen/qwen3_next_bridge.py, qwen35_bridge.py, commit
067f987) set ``experimental_attention_variant="gated_delta_net"``, ``linear_attention_freq`` from
``layer_types`` or ``full_attention_interval`` (``full_attention_interval_from_hf``: layer ``i`` is full
attention when ``(i + 1) % interval == 0``), the ``linear_*`` head sizes, ``attention_output_gate=True``,
``qk_layernorm=True``, zero-centred RMSNorm (no extra parameter) and, with experts, a gated shared expert.
megatron-core builds the linear layers as ``GatedDeltaNet`` (megatron/core/ssm/gated_delta_net.py, 0.16.1).
The checkpoint's MTP depth (``num_nextn_predict_layers``; Qwen3.5's ``mtp_num_hidden_layers``) is recorded in
``mtp_layers``: whether a framework builds those layers is the framework's setting, not the model's.

gpt-oss (HF ``model_type`` gpt_oss; transformers ``models/gpt_oss/modeling_gpt_oss.py``: ``GptOssAttention``
has q/k/v/o biases (``attention_bias``) and one learned sink per head (``self.sinks``), ``GptOssExperts``
biases on gate_up and down projections, ``GptOssTopKRouter`` a bias; every layer MoE, ``num_local_experts``
experts of width ``intermediate_size``) is built by Megatron-Bridge's ``GPTOSSProvider``
(src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py: ``add_bias_linear=True``, ``softmax_type="learnable"``,
``gated_linear_unit=True``, ``moe_ffn_hidden_size`` = the expert width): every linear layer has its bias and
``DotProductAttention`` a ``softmax_offset`` of one value per local head (megatron-core 0.16.1,
megatron/core/transformer/dot_product_attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.errors import ShardcheckError
from shardcheck.job import ModelFacts
from shardcheck.models.flag_architecture import MARKER, NOT_COUNTED, FlagsNotModelled, architecture_values

# model_type → (qk_layernorm, add_qkv_bias) that the architecture implies when config.json does not say.
_IMPLIED = {
    "llama": (False, False),
    "mistral": (False, False),
    "qwen2": (False, True),
    "qwen2_moe": (False, True),
    "qwen3": (True, False),
    "qwen3_moe": (True, False),
    "mixtral": (False, False),
    "deepseek_v2": (False, False),
    "deepseek_v3": (False, False),
    "kimi_k2": (False, False),
    "glm4_moe": (False, True),
    "gpt_oss": (False, True),
    "qwen3_next": (True, False),
    "qwen3_5_text": (True, False),
    "qwen3_5_moe_text": (True, False),
    "mimo": (False, True),
}
# Families whose every linear layer has a bias (Megatron's add_bias_linear) and whose attention has one learned
# sink logit per head (softmax_type "learnable"); their experts' width is config.json's intermediate_size.
_BIASED_WITH_SINKS = {"gpt_oss"}
# Qwen2-MoE and Qwen3-Next gate their shared expert with a sigmoid of a (hidden → 1) linear layer.
_SHARED_GATE = {"qwen2_moe", "qwen3_next", "qwen3_5_moe_text"}
# Hybrid families: Gated DeltaNet linear attention with gated full attention every few layers.
_HYBRID = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}
# A multimodal checkpoint's top-level model_type → its text model's (facts keep text_config only).
_TEXT_OF = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}


@dataclass(frozen=True, slots=True)
class Mla:
    """Multi-latent attention sizes (DeepSeek-V2/V3, Kimi-K2): HF names."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class LinearAttention:
    """Gated DeltaNet sizes (HF ``linear_*`` names; megatron-core TransformerConfig has the same fields)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int

    @property
    def in_proj_rows(self) -> int:
        """q, k, v, the output gate z, beta and alpha (gated_delta_net.py ``in_proj_dim``)."""
        return 2 * self.key_heads * self.key_dim + 2 * self.value_heads * self.value_dim + 2 * self.value_heads

    @property
    def conv_channels(self) -> int:
        """The depthwise causal convolution runs over q, k and v (gated_delta_net.py ``conv_dim``)."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim


@dataclass(frozen=True, slots=True)
class Architecture:
    """A decoder-only transformer as Megatron-Core's GPTModel builds it (HF models: RMSNorm, SwiGLU, no
    linear biases; Megatron-LM's flags can ask for LayerNorm, GeLU and biases)."""

    model_type: str
    num_layers: int
    hidden: int
    ffn: int  # dense MLP intermediate size
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool | None  # None: the model's source does not record tie_word_embeddings
    qk_layernorm: bool
    qkv_bias: bool
    mla: Mla | None = None
    experts: int = 0
    topk: int = 0
    moe_ffn: int = 0
    shared_ffn: int = 0
    shared_gate: bool = False
    moe_layers: frozenset[int] = frozenset()  # 0-based indices of the MoE layers
    gated: bool = True  # SwiGLU: fc1 holds two FFN-wide halves
    norm_bias: bool = False  # LayerNorm (weight and bias) instead of RMSNorm (weight)
    linear_bias: bool = False  # Megatron's add_bias_linear: biases on every linear layer but the router
    quantized: bool = False  # the checkpoint carries a quantization_config (e.g. DeepSeek-V3's fp8 weights)
    position_embeddings: int = 0  # rows of a learned absolute position embedding (Megatron-LM's default)
    attention_sinks: bool = False  # softmax_type "learnable": one parameter per attention head (gpt-oss)
    linear: LinearAttention | None = None  # Gated DeltaNet sizes of the hybrid families
    linear_layers: frozenset[int] = frozenset()  # 0-based indices of the Gated DeltaNet layers
    attention_gate: bool = False  # attention_output_gate: linear_qkv also projects a gate of heads·head_dim
    mtp_layers: int = 0  # MTP depths the checkpoint has (built only where the framework enables MTP)

    def is_moe_layer(self, index: int) -> bool:
        return index in self.moe_layers

    def is_linear_layer(self, index: int) -> bool:
        return index in self.linear_layers

    def layer_kind(self, index: int) -> tuple[bool, bool]:
        """(MoE, Gated DeltaNet): the per-layer counts and estimates depend on the index only through these."""
        return index in self.moe_layers, index in self.linear_layers


class NotModelled(ShardcheckError):
    """The model's layers are not ones shardcheck can count exactly (its reason is the message; ``origin``: where
    the value that stops the count was written, when it was)."""

    def __init__(self, message: str, origin=None) -> None:
        super().__init__(message)
        self.origin = origin


def _int(cfg: dict, key: str) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise NotModelled(f"config.json has no integer {key}")
    return value


def _moe_layers(cfg: dict, layers: int, experts: int) -> frozenset[int]:
    """Which layers are MoE, by the rule of each family's HF modelling code."""
    if not experts:
        return frozenset()
    first_dense = cfg.get("first_k_dense_replace")
    if (
        isinstance(first_dense, int)
        and first_dense > 0
        or cfg.get("model_type") in ("deepseek_v2", "deepseek_v3", "kimi_k2", "glm4_moe")
    ):
        # transformers DeepseekV3DecoderLayer: MoE when layer_idx >= first_k_dense_replace
        # (and layer_idx % moe_layer_freq == 0, moe_layer_freq 1 in every released config).
        k = first_dense or 0
        freq = cfg.get("moe_layer_freq") if isinstance(cfg.get("moe_layer_freq"), int) else 1
        return frozenset(i for i in range(layers) if i >= k and i % freq == 0)
    # transformers Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: MoE when layer_idx not in
    # mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0. Mixtral: every layer.
    step = cfg.get("decoder_sparse_step") if isinstance(cfg.get("decoder_sparse_step"), int) else 1
    dense = set(cfg.get("mlp_only_layers") or ())
    return frozenset(i for i in range(layers) if i not in dense and (i + 1) % max(step, 1) == 0)


_RECENT: dict[int, tuple[ModelFacts, Architecture]] = {}  # by the identity of the (frozen) facts: the planner
# asks for the architecture of one model thousands of times


def architecture(model: ModelFacts) -> Architecture:
    """The Megatron-Core shape of ``model``; NotModelled when its layers cannot be counted exactly."""
    hit = _RECENT.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    arch = _architecture(model)
    if len(_RECENT) >= 16:
        _RECENT.clear()
    _RECENT[id(model)] = (model, arch)
    return arch


def _architecture(model: ModelFacts) -> Architecture:
    cfg = model.config
    if MARKER in cfg:
        return _from_flags(cfg)
    kind = cfg.get("model_type") or model.model_type or "?"
    kind = _TEXT_OF.get(kind, kind)
    if kind in _HYBRID and model.vision_model_type:
        raise NotModelled(
            f"{model.vision_model_type} is multimodal: shardcheck counts its text model ({kind}) but not the "
            "vision encoder the bridge builds with it"
        )
    if kind not in _IMPLIED:
        raise NotModelled(
            f"model_type {kind!r} is not one whose Megatron-Core layers shardcheck counts "
            f"(it counts {', '.join(sorted(_IMPLIED))})"
        )
    layers, hidden = _int(cfg, "num_hidden_layers"), _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    qk_norm_implied, bias_implied = _IMPLIED[kind]
    qk_norm = bool(cfg.get("qk_norm", cfg.get("use_qk_norm", qk_norm_implied)))
    bias = bool(cfg["attention_bias"]) if cfg.get("attention_bias") is not None else bias_implied
    mla_cfg = cfg.get("mla") if isinstance(cfg.get("mla"), dict) else cfg
    mla = None
    if mla_cfg.get("kv_lora_rank"):
        mla = Mla(
            q_lora_rank=mla_cfg.get("q_lora_rank") or None,
            kv_lora_rank=_int(mla_cfg, "kv_lora_rank"),
            qk_nope_head_dim=_int(mla_cfg, "qk_nope_head_dim"),
            qk_rope_head_dim=_int(mla_cfg, "qk_rope_head_dim"),
            v_head_dim=_int(mla_cfg, "v_head_dim"),
        )
        # Megatron-Bridge's DeepSeek providers build MLA with qk_layernorm=True (the q_a / kv_a norms).
        qk_norm = True
    experts = model.num_experts or 0
    moe_ffn = shared = 0
    if experts:
        moe_ffn = _int(cfg, "intermediate_size" if kind in _BIASED_WITH_SINKS else "moe_intermediate_size")
        shared = cfg.get("shared_expert_intermediate_size") or (cfg.get("n_shared_experts") or 0) * moe_ffn
    linear, linear_layers = _linear_attention(cfg, layers) if kind in _HYBRID else (None, frozenset())
    return Architecture(
        model_type=kind,
        num_layers=layers,
        hidden=hidden,
        ffn=cfg.get("intermediate_size") or 0,
        heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        vocab=_int(cfg, "vocab_size"),
        tied=None
        if "tie_word_embeddings" in model.unknown and "tie_word_embeddings" not in cfg
        else bool(cfg.get("tie_word_embeddings", False)),
        qk_layernorm=qk_norm,
        qkv_bias=bias,
        mla=mla,
        experts=experts,
        topk=model.num_experts_per_tok or 0,
        moe_ffn=moe_ffn,
        shared_ffn=shared,
        shared_gate=bool(experts and shared and kind in _SHARED_GATE),
        moe_layers=_moe_layers(cfg, layers, experts),
        quantized=model.quantization is not None or bool(cfg.get("quantization_config")),
        linear_bias=kind in _BIASED_WITH_SINKS,
        attention_sinks=kind in _BIASED_WITH_SINKS,
        linear=linear,
        linear_layers=linear_layers,
        attention_gate=kind in _HYBRID,
        mtp_layers=checkpoint_mtp_layers(cfg),
    )


def gated_deltanet(model: ModelFacts) -> LinearAttention | None:
    """The Gated DeltaNet sizes of a hybrid model (also of a multimodal one, whose vision encoder is not counted);
    None for other families. NotModelled when a hybrid config lacks them."""
    kind = model.config.get("model_type") or model.model_type or "?"
    if _TEXT_OF.get(kind, kind) not in _HYBRID:
        return None
    return _linear_sizes(model.config)


MTP_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")


def checkpoint_mtp_layers(cfg: dict, keys: tuple[str, ...] = MTP_KEYS) -> int:
    """MTP depths a checkpoint carries: DeepSeek-V3's and MiMo's ``num_nextn_predict_layers``, Qwen3.5's
    ``mtp_num_hidden_layers`` (the keys verl's ``_get_mtp_num_layers`` and mbridge read, verl 0.9.1
    verl/utils/megatron_utils.py; mbridge mbridge/models/qwen3_5/base_bridge.py); ``keys``: those a reader reads."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _linear_attention(cfg: dict, layers: int) -> tuple[LinearAttention, frozenset[int]]:
    """The Gated DeltaNet sizes and layers of a hybrid config (presets nest the sizes under ``linear_attention``).

    The layer pattern as Megatron-Bridge's ``full_attention_interval_from_hf`` reads it: ``layer_types`` when
    given, else ``full_attention_interval`` (layer ``i`` full attention when ``(i + 1) % interval == 0``;
    megatron-core ``get_linear_attention_pattern``), else 4 (both bridges' and transformers' default)."""
    linear = _linear_sizes(cfg)
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) != layers or not set(types) <= {"linear_attention", "full_attention"}:
            raise NotModelled(
                f"layer_types lists {len(types)} layers of kinds {sorted(set(map(str, types)))}; "
                f"expected {layers} of linear_attention / full_attention"
            )
        return linear, frozenset(i for i, t in enumerate(types) if t == "linear_attention")
    interval = cfg.get("full_attention_interval")
    interval = interval if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0 else 4
    return linear, frozenset(i for i in range(layers) if (i + 1) % interval != 0)


def _from_flags(cfg: dict) -> Architecture:
    """A model given as Megatron-LM flags (models/flag_architecture.py)."""
    if cfg.get(NOT_COUNTED):
        raise NotModelled(cfg[NOT_COUNTED])
    try:
        values = architecture_values(cfg[MARKER], cfg.get("vocab_size"), cfg.get("vocab_source", "no --vocab-size"))
    except FlagsNotModelled as exc:
        raise NotModelled(str(exc), exc.origin) from None
    if values["mla"] is not None:
        values["mla"] = Mla(**values["mla"])
    return Architecture(**values)


def _linear_sizes(cfg: dict) -> LinearAttention:
    """The Gated DeltaNet head counts and sizes of a hybrid config (presets nest them under ``linear_attention``)."""
    sizes = cfg.get("linear_attention") if isinstance(cfg.get("linear_attention"), dict) else cfg
    linear = LinearAttention(
        key_heads=_int(sizes, "linear_num_key_heads"),
        value_heads=_int(sizes, "linear_num_value_heads"),
        key_dim=_int(sizes, "linear_key_head_dim"),
        value_dim=_int(sizes, "linear_value_head_dim"),
        conv_kernel=sizes.get("linear_conv_kernel_dim") or cfg.get("linear_conv_kernel_dim") or 4,
    )
    if not linear.key_heads or not linear.value_heads:
        raise NotModelled("config.json has no Gated DeltaNet heads (linear_num_key_heads, linear_num_value_heads)")
    return linear
