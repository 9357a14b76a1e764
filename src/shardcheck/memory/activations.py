"""Activation bytes a transformer layer keeps for its backward pass, per micro batch and device.

Two layers of formulas:

1. ``korthikanti_layer_bytes``: the per-layer formulas of Korthikanti et al. 2022, "Reducing Activation
   Recomputation in Large Transformer Models" (arXiv:2205.05198), §4 for a GPT layer with 16-bit
   activations and dropout: ``s·b·h·(34 + 5·a·s/h)`` bytes (eq. 1); tensor parallel without sequence
   parallel ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` (eq. 2); with sequence parallel ``s·b·h/t·(34 + 5·a·s/h)``
   (eq. 3); selective recomputation drops the ``5·a·s/h`` term (recomputes the attention core).
2. ``layer_bytes``: the same bookkeeping, term by term, for Megatron-Core layers: grouped-query or
   latent attention, gated (SwiGLU) or plain MLPs (``Architecture.gated``), MoE layers with top-k routing,
   CP splitting the sequence, and the kernels and dropout of ``Kernels``: flash/fused attention (no s²
   terms; an fp32 log-sum-exp per head and token) or the unfused core attention, hidden dropout (two 1-byte
   masks per layer) and attention dropout (unfused only). With dropout, MHA, a 4h GeLU MLP and unfused
   attention it reduces exactly to eq. 1-3 (tested).

Term by term (bytes per token, before dividing by TP/SP and CP), as the paper counts them:
attention: LN input 2h, QKV input 2h, Q and K 2·(a+kv)·d, V 2·kv·d, softmax output 2·a·s, dropout mask
a·s and output 2·a·s (not with flash), proj input 2·a·d (the attention output: every query head, also
under GQA), dropout mask h; MLP: LN input 2h, fc1 input 2h, activation input 2·f (gated: 2·2f),
activation output 2·f, dropout mask h.
Dropout (Korthikanti §4.1 counts it; Megatron-LM's defaults ``--hidden-dropout 0.1`` and ``--attention-dropout
0.1``, megatron/training/arguments.py; the bias-dropout-add of megatron/core/transformer/transformer_layer.py
after attention and after the MLP keeps a 1-byte mask each; core attention's dropout of the softmax output
keeps a 1-byte mask and its 2-byte output, megatron/core/transformer/dot_product_attention.py). HF models
bridged by verl train without dropout (mbridge / Megatron-Bridge set both to the config's 0.0).
MoE (shardcheck's extension, not in the paper): router input shares the LN output; each token is
dispatched to top-k experts, so a device holds ``k · tokens · ETP`` routed tokens on average (tokens
balanced over EP; ETP gathers its group's tokens): their permuted input 2h (the experts' fc1 input), fc1
output 2·2f/ETP (the activation's input) and activation output 2·f/ETP (fc2's input); shared experts as a dense
MLP of their size. The experts' output (the combine input, 2h per routed token) is kept only by megatron-core
< 0.12, whose token unpermutation multiplies it by the routing probabilities (``unpermute(..., probs=...)`` in
megatron/core/transformer/moe/token_dispatcher.py, core_v0.11); from core_v0.12 the experts' activation applies
the probabilities (``activation_func_with_probs`` in moe/experts.py) and the all-to-all, the chunk sort and the
unpermutation keep only indices (tested against megatron-core's MoELayer on CPU:
tests/test_activations_differential.py).
Q/K layer norm (``qk_layernorm``): the norms keep their inputs (the QKV projection's Q and K) beside the
normed, rotated Q and K the attention core keeps: 2·(a+kv)·d more (measured in the same test).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.frameworks.memory_settings import Kernels, Recompute
from shardcheck.models.architecture import Architecture


def korthikanti_layer_bytes(
    s: int, b: int, h: int, a: int, *, t: int = 1, sequence_parallel: bool = False, selective: bool = False
) -> float:
    """Korthikanti et al. 2022, eqs. 1-3 (and §5 selective recomputation): bytes per layer."""
    attention = 0 if selective else 5 * a * s / h
    if sequence_parallel or t == 1:
        return s * b * h / t * (34 + attention)
    return s * b * h * (10 + 24 / t + attention / t)


@dataclass(frozen=True, slots=True)
class Parallel:
    tp: int = 1
    sequence_parallel: bool = False
    cp: int = 1
    ep: int = 1
    etp: int = 1


def per_device(tokens_bytes: float, p: Parallel, *, sharded_by_tp: bool) -> float:
    """Bytes of a per-token tensor on one device: CP splits the sequence; TP splits hidden-sharded
    tensors, and sequence parallel splits the replicated ones (LN inputs, residual) too."""
    tp_div = p.tp if sharded_by_tp or p.sequence_parallel else 1
    return tokens_bytes / p.cp / tp_div


def attention_bytes(arch: Architecture, tokens: int, seq: int, p: Parallel, k: Kernels = Kernels()) -> float:
    """Attention block (with its input LN) of one layer for ``tokens`` tokens of sequences of ``seq``."""
    h, a = arch.hidden, arch.heads
    if arch.mla is not None:
        m = arch.mla
        q_dim = k_dim = a * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        v_dim = out_dim = a * m.v_head_dim
        latent = 2 * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim)  # down-projection outputs
    else:
        d = arch.head_dim
        q_dim, k_dim, v_dim, out_dim = a * d, arch.kv_heads * d, arch.kv_heads * d, a * d
        latent = 0
    replicated = 2 * h + 2 * h + (h if k.hidden_dropout else 0)  # LN input, QKV input (LN output), dropout mask
    sharded = 2 * q_dim + 2 * k_dim + 2 * v_dim + 2 * out_dim  # Q, K, V, proj input (attention output)
    if arch.attention_gate:  # attention_output_gate: the gate the core output is multiplied by (attention.py)
        sharded += 2 * q_dim
    if arch.qk_layernorm and arch.mla is None:  # the Q and K norms keep their inputs (megatron/core/transformer/
        sharded += 2 * q_dim + 2 * k_dim  # attention.py get_query_key_value_tensors: q_layernorm, k_layernorm)
    if k.flash:
        sharded += 4 * a  # fp32 softmax log-sum-exp per head
    else:
        sharded += (2 + (1 + 2 if k.attention_dropout else 0)) * a * seq  # softmax output (+ dropout mask, output)
    return tokens * (
        per_device(replicated + latent, p, sharded_by_tp=False) + per_device(sharded, p, sharded_by_tp=True)
    )


def linear_attention_bytes(arch: Architecture, tokens: int, p: Parallel, k: Kernels = Kernels()) -> float:
    """A Gated DeltaNet block (with its fused input norm) of one layer: the tensors the forward of
    megatron/core/ssm/gated_delta_net.py (megatron-core 0.16.1) keeps for backward, each counted once.

    Replicated: the norm's input 2h and output 2h (``in_proj``'s input), the dropout mask h. Split over TP:
    ``in_proj``'s output (q, k, v, z, beta, alpha; the convolution's input), the convolution's output q, k, v,
    q and k after their L2 norm repeated to the value heads, g in fp32 and beta, the delta rule's output, the
    gate z and the gated norm's output (``out_proj``'s input). There is no sequence-squared term: the chunked
    delta rule keeps no attention matrix (its per-chunk states are recomputed in backward)."""
    g = arch.linear
    assert g is not None
    v_dim = g.value_heads * g.value_dim
    replicated = 2 * arch.hidden + 2 * arch.hidden + (arch.hidden if k.hidden_dropout else 0)
    sharded = 2 * g.in_proj_rows + 2 * g.conv_channels + 2 * 2 * g.value_heads * g.key_dim
    sharded += 4 * g.value_heads + 2 * g.value_heads + 3 * 2 * v_dim
    return tokens * (per_device(replicated, p, sharded_by_tp=False) + per_device(sharded, p, sharded_by_tp=True))


def mlp_bytes(
    h: int,
    ffn: int,
    tokens: float,
    p: Parallel,
    *,
    gated: bool = True,
    dropout: bool = False,
    ffn_split: int | None = None,
    with_ln: bool = True,
) -> float:
    """A (dense or shared-expert) MLP with its pre-MLP LN: LN input, fc1 input, activation in/out."""
    replicated = (2 * h if with_ln else 0) + 2 * h + (h if dropout else 0)
    split = ffn_split or p.tp
    act_in = 2 * (2 * ffn if gated else ffn)
    inner = (act_in + 2 * ffn) * tokens / p.cp / split
    return tokens * per_device(replicated, p, sharded_by_tp=False) + inner


def moe_bytes(arch: Architecture, tokens: int, p: Parallel, k: Kernels = Kernels()) -> float:
    """MoE layer: pre-MLP LN, routed experts (top-k tokens), shared experts, the dropout mask after it."""
    h = arch.hidden
    local_tokens = tokens / p.cp / (p.tp if p.sequence_parallel else 1)
    routed = arch.topk * local_tokens * p.etp
    out = local_tokens * (2 * h + 2 * h + (h if k.hidden_dropout else 0))  # LN input, router input, dropout mask
    out += local_tokens * 4 * arch.experts  # fp32 router logits
    out += routed * (2 * h + (2 * h if k.moe_probs_at_combine else 0))  # permuted input (+ combine input, < 0.12)
    out += routed * (2 * (2 if arch.gated else 1) * arch.moe_ffn + 2 * arch.moe_ffn) / p.etp
    if arch.shared_ffn:
        out += mlp_bytes(h, arch.shared_ffn, tokens, p, gated=arch.gated, with_ln=False) - tokens * per_device(
            2 * h, p, sharded_by_tp=False
        )
    return out


def layer_bytes(
    arch: Architecture, index: int, tokens: int, seq: int, p: Parallel, recompute: Recompute, k: Kernels = Kernels()
) -> float:
    """Activation bytes layer ``index`` keeps for backward, for one micro batch of ``tokens`` tokens.

    Selective recompute (megatron/core/transformer/transformer_config.py ``recompute_modules``): ``core_attn``
    drops the unfused attention's s-wide tensors; ``mla_up_proj`` drops MLA's up-projected Q, K, V (recomputed
    from the kept latents); ``layernorm`` drops both norms' outputs; ``mlp`` / ``moe`` keep only the block's
    input; ``moe_act`` drops the experts' activation output."""
    hidden_in = tokens * per_device(2 * arch.hidden, p, sharded_by_tp=False)
    if recompute.granularity == "full":
        return hidden_in  # only the layer's input
    selective = recompute.modules if recompute.granularity == "selective" else frozenset()
    linear = arch.is_linear_layer(index)
    attention = linear_attention_bytes(arch, tokens, p, k) if linear else attention_bytes(arch, tokens, seq, p, k)
    if "core_attn" in selective and not k.flash and not linear:
        attention -= attention - attention_bytes(arch, tokens, seq, p, Kernels(True, k.hidden_dropout))
    if "mla_up_proj" in selective and arch.mla is not None:
        m = arch.mla
        qk = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        attention -= tokens * per_device(2 * qk + 2 * qk + 2 * arch.heads * m.v_head_dim, p, sharded_by_tp=True)
    if arch.is_moe_layer(index):
        mlp = moe_bytes(arch, tokens, p, k)
        if "moe" in selective:
            mlp = hidden_in
        elif "moe_act" in selective:
            local = tokens / p.cp / (p.tp if p.sequence_parallel else 1)
            mlp -= arch.topk * local * p.etp * 2 * arch.moe_ffn / p.etp
    else:
        mlp = mlp_bytes(arch.hidden, arch.ffn, tokens, p, gated=arch.gated, dropout=k.hidden_dropout)
        if "mlp" in selective:
            mlp = hidden_in
    if "layernorm" in selective:
        attention -= hidden_in  # the input norm's output is recomputed
        if not ({"mlp", "moe"} & selective):
            mlp -= hidden_in  # and the pre-MLP norm's
    if k.fp8_bytes is not None:
        return attention + mlp + fp8_layer_delta(arch, index, tokens, p, selective, k)
    return attention + mlp


def fp8_layer_delta(arch: Architecture, index: int, tokens: float, p: Parallel, selective, k: Kernels) -> float:
    """What Transformer Engine's FP8 GEMMs change in the bytes ``layer_bytes`` counts for one layer (negative:
    saved).

    Transformer Engine 2.17.1 (NVIDIA/TransformerEngine@4329ff84, the pin of Megatron-LM d98e8a64dd's uv.lock),
    transformer_engine/pytorch/module/linear.py, layernorm_linear.py and grouped_linear.py: under FP8 a linear
    layer saves for its weight-gradient GEMM its *quantized* input, not the bf16 one — one usage only (the
    column-wise copy, or the row-wise one where FP8 column-wise data cannot be all-gathered: a column-parallel
    layer with sequence parallelism under delayed / per-tensor scaling), ``k.fp8_bytes`` per element. The
    bf16 tensor it came from is then kept only where another module saves it. Unless the module was told
    ``save_original_input`` (it then keeps the bf16 input): megatron-core (Megatron-LM d98e8a64dd) sets it for
    every recipe but delayed on ``linear_proj`` (transformer/attention.py, multi_latent_attention.py: the fused
    attention already saves that output) and on the shared experts' ``linear_fc1`` (moe/shared_experts.py: the
    router saves the pre-MLP norm's output), on the experts' ``linear_fc2`` with ``moe_act`` recompute and on
    their ``linear_fc1`` with ``expert_fc1`` offload (moe/experts.py), and on the layers after a recomputed norm
    (``set_for_recompute_input_layernorm`` / ``..._pre_mlp_layernorm``).

    Per token, before the TP / CP split, with ``d = fp8_bytes − 2``:
    - attention: the QKV LayerNormLinear's norm output ``d·h`` (Gated DeltaNet's ``in_proj`` alike); MLA's two
      down-projections (plain linear layers on the input norm's output) each keep their own FP8 copy, ``2·fp8·h``
      for the norm output's ``2h``; with delayed scaling ``linear_proj``'s input: ``d`` per element of the
      attention output with the unfused core attention (nothing else keeps it), ``+fp8`` with a fused kernel
      (which keeps its bf16 output); Gated DeltaNet's ``out_proj`` ``d·v`` (no ``save_original_input`` there);
    - dense MLP: fc1's norm output ``d·h``, fc2's input (the activation's output) ``d·ffn``;
    - MoE: each routed token's grouped fc1 input ``d·h`` and fc2 input ``d·ffn/ETP``; the shared experts' fc2
      input ``d·shared_ffn``, and with delayed scaling their fc1's FP8 copy ``+fp8·h``.
    The tensors the GEMMs do not save (the fc1 output the activation keeps, the attention core, the router, the
    output layer's input: megatron-core runs the output layer as a bf16 ColumnParallelLinear) do not change."""
    q = float(k.fp8_bytes or 0.0)
    d = q - 2
    h = arch.hidden
    norm_recomputed = "layernorm" in selective
    replicated = sharded = 0.0
    if arch.is_linear_layer(index):
        g = arch.linear
        assert g is not None
        replicated += 0 if norm_recomputed else d * h
        sharded += d * g.value_heads * g.value_dim
    else:
        out_dim = arch.heads * (arch.mla.v_head_dim if arch.mla is not None else arch.head_dim)
        if not norm_recomputed:
            replicated += (2 * q - 2) * h if arch.mla is not None else d * h
        if k.fp8_delayed:
            sharded += (q if k.flash else d) * out_dim
    out = tokens * (per_device(replicated, p, sharded_by_tp=False) + per_device(sharded, p, sharded_by_tp=True))
    if arch.is_moe_layer(index):
        if "moe" in selective:
            return out
        local = tokens / p.cp / (p.tp if p.sequence_parallel else 1)
        routed = arch.topk * local * p.etp
        if not k.fp8_fc1_offloaded:
            out += routed * d * h
        if "moe_act" not in selective:
            out += routed * d * arch.moe_ffn / p.etp
        if arch.shared_ffn:
            out += tokens * per_device(d * arch.shared_ffn, p, sharded_by_tp=True)
            if k.fp8_delayed:
                out += tokens * per_device(q * h, p, sharded_by_tp=False)
    elif "mlp" not in selective:
        out += tokens * (
            per_device(0 if norm_recomputed else d * h, p, sharded_by_tp=False)
            + per_device(d * (arch.ffn or 0), p, sharded_by_tp=True)
        )
    return out


# Fine-grained activation offload (megatron/core/transformer/transformer_config.py ``offload_modules``;
# megatron/core/pipeline_parallel/fine_grained_activation_offload.py): each listed module runs inside
# ``saved_tensors_hooks`` (megatron/core/transformer/attention.py wraps core attention in its manager), so every
# tensor the module saves for backward leaves the device — for core_attn also the unfused s-wide softmax.
OFFLOADABLE = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act")


def offloaded_bytes(
    arch: Architecture,
    index: int,
    tokens: int,
    seq: int,
    p: Parallel,
    modules: frozenset[str],
    k: Kernels = Kernels(),
    recompute: Recompute = Recompute(),
) -> float:
    """Bytes of layer ``index``'s saved tensors that fine-grained activation offload moves to the host (not
    those selective recompute already drops: norm outputs with ``layernorm``, MLA's Q/K/V with ``mla_up_proj``)."""
    if not modules:
        return 0.0
    selective = recompute.modules if recompute.granularity == "selective" else frozenset()
    h, a = arch.hidden, arch.heads
    if arch.mla is not None:
        m = arch.mla
        qkv = 2 * (2 * a * (m.qk_nope_head_dim + m.qk_rope_head_dim) + a * m.v_head_dim)
        out_dim = a * m.v_head_dim
    else:
        qkv = 2 * (a + 2 * arch.kv_heads) * arch.head_dim
        out_dim = a * arch.head_dim
    if "mla_up_proj" in selective and arch.mla is not None:
        qkv = 0
    # under FP8 GEMMs the linear layers' saved inputs are what fp8_layer_delta says: the QKV layer's FP8 norm
    # output (MLA: each down-projection's FP8 copy), linear_proj's FP8 copy with delayed scaling (else its bf16 input)
    fp8 = k.fp8_bytes
    qkv_in = 2 * h if fp8 is None else (2 * fp8 * h if arch.mla is not None else fp8 * h)
    proj_in = 2 * out_dim if fp8 is None or not k.fp8_delayed else fp8 * out_dim
    replicated = {"attn_norm": 2 * h, "qkv_linear": 0 if "layernorm" in selective else qkv_in, "mlp_norm": 2 * h}
    core = 4 * a if k.flash else (2 + (3 if k.attention_dropout else 0)) * a * seq  # as attention_bytes
    sharded = {"core_attn": qkv + core, "attn_proj": proj_in}
    if arch.is_linear_layer(index):  # the offload hooks sit in attention.py and the layer's norms, not in GDN
        replicated = {"mlp_norm": 2 * h}
        sharded = {}
    out = tokens * (
        per_device(sum(v for k, v in replicated.items() if k in modules), p, sharded_by_tp=False)
        + per_device(sum(v for k, v in sharded.items() if k in modules), p, sharded_by_tp=True)
    )
    if arch.is_moe_layer(index):
        routed = arch.topk * tokens / p.cp / (p.tp if p.sequence_parallel else 1) * p.etp
        if "expert_fc1" in modules:
            out += routed * 2 * h
        if "moe_act" in modules:
            out += routed * 2 * (2 if arch.gated else 1) * arch.moe_ffn / p.etp
    return out


def mtp_bytes(arch: Architecture, tokens: int, seq: int, p: Parallel, recompute: Recompute, k: Kernels) -> float:
    """One MTP depth (megatron/core/transformer/multi_token_prediction.py): the enorm and hnorm inputs, the
    2h-wide concatenation eh_proj reads, one transformer layer of the last decoder layer's kind, the final
    norm's input."""
    h = arch.hidden
    # eh_proj (a Transformer Engine column-parallel linear, run in the FP8 context: multi_token_prediction.py)
    # keeps its 2h-wide input as FP8 under FP8 GEMMs (fp8_layer_delta)
    concat = 2 * h * (2 if k.fp8_bytes is None else k.fp8_bytes)
    own = tokens * per_device(2 * h + 2 * h + concat + 2 * h, p, sharded_by_tp=False)
    return own + layer_bytes(arch, arch.num_layers - 1, tokens, seq, p, recompute, k)
