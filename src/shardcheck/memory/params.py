"""Exact parameter counts per device of one pipeline stage, as Megatron-Core's GPTModel allocates them.

Module by module (megatron-core 0.16.1, megatron/core/models/gpt/gpt_model.py and the layer spec):
- ``VocabParallelEmbedding`` (first stage): vocab / TP rows of ``hidden``; with learned absolute
  positions (Megatron-LM's default) also ``max_position_embeddings`` rows, replicated over TP.
- per layer: ``input_layernorm`` and ``pre_mlp_layernorm`` (RMSNorm weight, ``hidden``, replicated over TP);
  ``SelfAttention``: ``linear_qkv`` ColumnParallel ((heads + 2·kv_heads)·head_dim / TP rows, bias when
  add_qkv_bias), ``q_layernorm``/``k_layernorm`` (``head_dim`` each), ``linear_proj`` RowParallel
  (hidden × heads·head_dim / TP), the learned softmax offset (heads / TP) with ``softmax_type="learnable"``
  (gpt-oss's attention sinks; megatron/core/transformer/dot_product_attention.py);
  ``MLASelfAttention``: down projections (replicated with Transformer Engine's
  ``TELinear(parallel_mode="duplicated")``, column-parallel in the local spec), up projections and
  ``linear_proj`` split over TP, the q/kv latent norms;
  dense ``MLP``: fc1 2·ffn/TP × hidden (gated), fc2 hidden × ffn/TP; ``MoELayer``: ``router.weight``
  experts × hidden (replicated; a bias of ``experts`` with add_bias_linear), experts/EP local experts each
  2·moe_ffn/ETP × hidden + hidden × moe_ffn/ETP,
  ``shared_experts`` split over TP (plus the gate, hidden, when the shared expert is gated);
  with ``attention_output_gate`` ``linear_qkv`` also projects a gate of heads·head_dim rows (attention.py
  ``linear_qkv_out_dim``); a Gated DeltaNet layer (megatron/core/ssm/gated_delta_net.py) instead of attention:
  ``in_proj`` column-parallel (q, k, v, z, beta, alpha rows / TP, with the fused input norm), ``conv1d``
  depthwise over q, k, v (channels / TP × kernel, no bias), ``dt_bias`` and ``A_log`` (value heads / TP each),
  ``out_norm`` (value head dim, replicated), ``out_proj`` row-parallel (hidden × value dims / TP); no biases.
- last stage: ``final_layernorm`` (hidden) and ``output_layer`` (vocab / TP × hidden) unless the output
  shares the first stage's embedding in the same module (tied weights and one pipeline stage).

Vocab padding: Megatron-LM pads to a multiple of ``make_vocab_size_divisible_by · TP``
(megatron/training/tokenizer/tokenizer.py ``_vocab_size_with_padding``, default 128); verl through
mbridge (``make_vocab_size_divisible_by=None``) or Megatron-Bridge (``should_pad_vocab=False``) does not pad.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from shardcheck.models.architecture import Architecture
from shardcheck.origin import UnknownValue


@dataclass(frozen=True, slots=True)
class StageParams:
    """Parameters one device of a pipeline stage holds, by kind."""

    embedding: int
    dense: int  # attention, norms, router, shared experts, dense MLPs
    expert: int  # routed experts
    output: int

    @property
    def total(self) -> int:
        return self.embedding + self.dense + self.expert + self.output

    def as_dict(self) -> dict[str, int]:
        return {
            "embedding": self.embedding,
            "dense": self.dense,
            "expert": self.expert,
            "output": self.output,
            "total": self.total,
        }


@dataclass(frozen=True, slots=True)
class Sharding:
    tp: int
    ep: int
    etp: int
    pp: int
    vocab_divisible_by: int | None = None  # None: no padding (verl); 128: Megatron-LM's default
    transformer_engine: bool = True  # only MLA's down projections differ between the two specs


def padded_vocab(vocab: int, sharding: Sharding) -> int:
    if not sharding.vocab_divisible_by:
        return vocab
    multiple = sharding.vocab_divisible_by * sharding.tp
    return -(-vocab // multiple) * multiple


def _norm(arch: Architecture, width: int) -> int:
    return width * (2 if arch.norm_bias else 1)


def linear_attention_params(arch: Architecture, s: Sharding) -> int:
    """One Gated DeltaNet block on one device (without the input norm, counted with the layer)."""
    g, h, tp = arch.linear, arch.hidden, s.tp
    assert g is not None
    v_dim = g.value_heads * g.value_dim
    n = g.in_proj_rows // tp * h + g.conv_channels // tp * g.conv_kernel + 2 * (g.value_heads // tp)
    return n + _norm(arch, g.value_dim) + h * (v_dim // tp)


def attention_params(arch: Architecture, s: Sharding) -> int:
    h, tp = arch.hidden, s.tp
    if arch.mla is not None:
        m = arch.mla
        local = arch.heads // tp

        def latent_norm(width: int) -> int:  # the up projections' fused norms exist only with qk_layernorm
            return _norm(arch, width) if arch.qk_layernorm else 0

        down = 0
        if m.q_lora_rank:
            down += m.q_lora_rank * h
            up = local * (m.qk_nope_head_dim + m.qk_rope_head_dim) * m.q_lora_rank + latent_norm(m.q_lora_rank)
        else:
            up = local * (m.qk_nope_head_dim + m.qk_rope_head_dim) * h
        down += (m.kv_lora_rank + m.qk_rope_head_dim) * h
        if not s.transformer_engine:
            down //= tp
        up += local * (m.qk_nope_head_dim + m.v_head_dim) * m.kv_lora_rank + latent_norm(m.kv_lora_rank)
        return down + up + h * local * m.v_head_dim + (h if arch.linear_bias else 0)
    qkv_rows = (arch.heads * (2 if arch.attention_gate else 1) + 2 * arch.kv_heads) * arch.head_dim // tp
    n = qkv_rows * h + (qkv_rows if arch.qkv_bias or arch.linear_bias else 0)
    n += 2 * _norm(arch, arch.head_dim) if arch.qk_layernorm else 0
    n += arch.heads // tp if arch.attention_sinks else 0  # DotProductAttention.softmax_offset, per local head
    return n + h * arch.heads * arch.head_dim // tp + (h if arch.linear_bias else 0)  # proj bias: replicated


def mlp_params(arch: Architecture, ffn: int, split: int) -> int:
    """fc1 (ColumnParallel, 2·ffn rows when gated) and fc2 (RowParallel) of an MLP split ``split`` ways."""
    rows = (2 if arch.gated else 1) * ffn // split
    n = rows * arch.hidden + arch.hidden * (ffn // split)
    return n + (rows + arch.hidden if arch.linear_bias else 0)  # fc1 bias split, fc2 bias replicated


def dense_mlp_params(arch: Architecture, s: Sharding) -> int:
    return mlp_params(arch, arch.ffn, s.tp)


def layer_params(arch: Architecture, index: int, s: Sharding) -> tuple[int, int]:
    """(dense, routed expert) parameters of layer ``index`` on one device."""
    h = arch.hidden
    mixer = linear_attention_params(arch, s) if arch.is_linear_layer(index) else attention_params(arch, s)
    dense = 2 * _norm(arch, h) + mixer  # input_layernorm + pre_mlp_layernorm + attention (or Gated DeltaNet)
    if not arch.is_moe_layer(index):
        return dense + dense_mlp_params(arch, s), 0
    dense += arch.experts * (h + (1 if arch.linear_bias else 0))  # router weight (and bias with add_bias_linear)
    if arch.shared_ffn:
        dense += mlp_params(arch, arch.shared_ffn, s.tp) + (h if arch.shared_gate else 0)
    expert = arch.experts // s.ep * mlp_params(arch, arch.moe_ffn, s.etp)
    return dense, expert


def mtp_params(arch: Architecture, s: Sharding) -> tuple[int, int]:
    """(dense, routed expert) parameters of one MTP depth on one device (megatron/core/transformer/
    multi_token_prediction.py ``MultiTokenPredictionLayer``): enorm and hnorm, ``eh_proj`` (column-parallel,
    2·hidden → hidden, no bias), a transformer layer of the last decoder layer's kind, a final norm."""
    dense, expert = layer_params(arch, arch.num_layers - 1, s)
    return dense + 3 * _norm(arch, arch.hidden) + 2 * arch.hidden * arch.hidden // s.tp, expert


@lru_cache(maxsize=16384)
def layer_kinds(moe: frozenset[int], linear: frozenset[int], layers: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(the first index, the count) of each layer kind (MoE, Gated DeltaNet) among ``layers``, in first-seen
    order: the planner sizes the same stages for thousands of candidates."""
    seen: dict[tuple[bool, bool], list[int]] = {}
    for index in layers:
        kind = (index in moe, index in linear)
        if kind in seen:
            seen[kind][1] += 1
        else:
            seen[kind] = [index, 1]
    return tuple((first, count) for first, count in seen.values())


def stage_params(
    arch: Architecture,
    layers: tuple[int, ...],
    stage: int,
    s: Sharding,
    *,
    embedding: bool | None = None,
    loss: bool | None = None,
    mtp: int = 0,
) -> StageParams:
    """Parameters on one device of pipeline stage ``stage`` that builds the decoder ``layers``
    (``embedding`` / ``loss``: whether it holds them, by default the first / last stage; ``mtp`` MTP depths)."""
    dense = expert = 0
    # layer_params reads the index only through layer_kind: one call per kind, times its count
    for index, count in layer_kinds(arch.moe_layers, arch.linear_layers, tuple(layers)):
        d, e = layer_params(arch, index, s)
        dense += d * count
        expert += e * count
    for _ in range(mtp):
        d, e = mtp_params(arch, s)
        dense += d
        expert += e
    vocab_rows = padded_vocab(arch.vocab, s) // s.tp
    first = stage == 0 if embedding is None else embedding
    last = stage == s.pp - 1 if loss is None else loss
    # learned absolute position embeddings: a torch.nn.Embedding replicated over TP (first stage); MTP
    # builds the embedding on its stage too (gpt_model.py: ``if self.pre_process or self.mtp_process``)
    embedding_rows = vocab_rows + arch.position_embeddings
    emb = embedding_rows * arch.hidden if first or (mtp and not first) else 0
    output = 0
    if last:
        dense += _norm(arch, arch.hidden)  # final_layernorm
        if arch.tied is None and first:
            raise UnknownValue(
                "whether the model ties its output layer to its embedding (tie_word_embeddings is not recorded "
                "by its catalogue source; give its config.json with --model-config)"
            )
        if not arch.tied or not first:
            output = vocab_rows * arch.hidden
    return StageParams(emb, dense, expert, output)


# LoRA adapters (A: rank × in, B: out × rank on each target linear layer), by module.
# Megatron: Megatron-Bridge's LoRA (src/megatron/bridge/peft/lora.py, main of 2026-08-22: target_modules default
# linear_qkv, linear_proj, linear_fc1, linear_fc2; one ParallelLinearAdapter per module; a grouped MoE expert
# linear gets one adapter shared by the rank's local experts — ``share_expert_adapters=True``, the only
# behaviour before May 2026 — split like the expert over ETP; the router only when targeted). On a
# tensor-parallel base the adapter's side along the split dimension is split too (B of a column-parallel
# layer, A of a row-parallel one), the other side whole on every rank (peft/utils.py ParallelLinearAdapter).
# FSDP: peft on HF's separate projections ("all-linear": every nn.Linear but the output layer). Whether peft
# adapts each routed expert depends on how the transformers version builds them (nn.Linear per expert in 4.x,
# fused 3-D parameters later), so LoRA on an FSDP MoE model is not sized.
LORA_MODULES = frozenset({"q", "k", "v", "o", "gate", "up", "down", "router"})


def lora_params(
    arch: Architecture, layers: tuple[int, ...], s: Sharding, rank: int, modules, fused: bool
) -> StageParams:
    """LoRA adapter parameters on one device for the decoder ``layers`` of a stage: (dense, routed expert)."""
    if arch.mla is not None:
        raise UnknownValue("LoRA adapters on MLA attention (its down/up projections) are not sized")
    if arch.linear_layers or arch.attention_gate:
        raise UnknownValue("LoRA adapters on Gated DeltaNet and gated attention layers are not sized")
    h, hd, tp = arch.hidden, arch.head_dim, s.tp

    def linear(n_in: int, n_out: int, column: bool, split: int) -> int:
        return rank * (n_in + n_out // split) if column else rank * (n_in // split + n_out)

    def attention() -> int:
        q, kv = arch.heads * hd, arch.kv_heads * hd
        n = 0
        if fused and modules & {"q", "k", "v"}:
            n += linear(h, q + 2 * kv, True, tp)
        elif not fused:
            n += sum(linear(h, w, True, tp) for name, w in (("q", q), ("k", kv), ("v", kv)) if name in modules)
        return n + (linear(q, h, False, tp) if "o" in modules else 0)

    def mlp(ffn: int, split: int) -> int:
        n = 0
        if fused and modules & {"gate", "up"}:
            n += linear(h, (2 if arch.gated else 1) * ffn, True, split)
        elif not fused:
            n += sum(linear(h, ffn, True, split) for name in ("gate", "up") if name in modules)
        return n + (linear(ffn, h, False, split) if "down" in modules else 0)

    dense = expert = 0
    for index in layers:
        dense += attention()
        if not arch.is_moe_layer(index):
            dense += mlp(arch.ffn, tp)
            continue
        if not fused:
            raise UnknownValue("LoRA on the routed experts of an FSDP (peft) model is not sized")
        dense += rank * (h + arch.experts) if "router" in modules else 0
        dense += mlp(arch.shared_ffn, tp) if arch.shared_ffn else 0
        expert += mlp(arch.moe_ffn, s.etp)  # one adapter shared by the local experts
    return StageParams(0, dense, expert, 0)
