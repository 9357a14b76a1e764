"""Activation bytes a transformer layer keeps for its backward pass, per micro batch and device.

Two layers of formulas:

1. ``korthikanti_layer_bytes``: the per-layer formulas of Korthikanti et al. 2022, "Reducing Activation
   Recomputation in Large Transformer Models" (arXiv:2205.05198), §4 for a GPT layer with 16-bit
   activations and dropout: ``s·b·h·(34 + 5·a·s/h)`` bytes (eq. 1); tensor parallel without sequence
   parallel ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` (eq. 2); with sequence parallel ``s·b·h/t·(34 + 5·a·s/h)``
   (eq. 3); selective recomputation drops the ``5·a·s/h`` term (recomputes the attention core).
2. ``layer_bytes``: the same bookkeeping, term by term, for the layers verl trains: grouped-query or
   latent attention, gated (SwiGLU) MLPs, MoE layers with top-k routing, no dropout, flash attention
   (no s² terms; an fp32 log-sum-exp per head and token), CP splitting the sequence. With ``dropout``,
   MHA, a 4h GeLU MLP and no flash attention it reduces exactly to eq. 1-3 (tested).

Term by term (bytes per token, before dividing by TP/SP and CP), as the paper counts them:
attention: LN input 2h, QKV input 2h, Q and K 2·(a+kv)·d, V 2·kv·d, softmax output 2·a·s, dropout mask
a·s and output 2·a·s (not with flash), proj input 2·a·d, dropout mask h; MLP: LN input 2h, fc1 input 2h,
activation input 2·f (gated: 2·2f), activation output 2·f, dropout mask h.
MoE (shardcheck's extension, not in the paper): router input shares the LN output; each token is
dispatched to top-k experts, so a device holds ``k · tokens · ETP`` routed tokens on average (tokens
balanced over EP; ETP gathers its group's tokens): their permuted input 2h and combine input 2h, fc1
output 2·2f/ETP and activation output 2·f/ETP; shared experts as a dense MLP of their size.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.frameworks.memory_settings import Recompute
from shardcheck.models.architecture import Architecture


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, *, t: int = 1, sequence_parallel: bool = False,
                            selective: bool = False) -> float:
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


def _split(tokens_bytes: float, p: Parallel, *, sharded_by_tp: bool) -> float:
    """Bytes of a per-token tensor on one device: CP splits the sequence; TP splits hidden-sharded
    tensors, and sequence parallel splits the replicated ones (LN inputs, residual) too."""
    tp_div = p.tp if sharded_by_tp or p.sequence_parallel else 1
    return tokens_bytes / p.cp / tp_div


def attention_bytes(arch: Architecture, tokens: int, seq: int, p: Parallel, *, flash: bool = True,
                    dropout: bool = False) -> float:
    """Attention block (with its input LN) of one layer for ``tokens`` tokens of sequences of ``seq``."""
    h, a = arch.hidden, arch.heads
    if arch.mla is not None:
        m = arch.mla
        q_dim = k_dim = a * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        v_dim = a * m.v_head_dim
        latent = 2 * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim)  # down-projection outputs
    else:
        d = arch.head_dim
        q_dim, k_dim, v_dim = a * d, arch.kv_heads * d, arch.kv_heads * d
        latent = 0
    replicated = 2 * h + 2 * h + (h if dropout else 0)  # LN input, QKV input (LN output), dropout mask
    sharded = 2 * q_dim + 2 * k_dim + 2 * v_dim + 2 * v_dim  # Q, K, V, proj input (attention output)
    if flash:
        sharded += 4 * a  # fp32 softmax log-sum-exp per head
    else:
        sharded += (2 + (1 + 2 if dropout else 0)) * a * seq  # softmax output (+ dropout mask, output)
    return tokens * (_split(replicated + latent, p, sharded_by_tp=False) + _split(sharded, p, sharded_by_tp=True))


def mlp_bytes(h: int, ffn: int, tokens: float, p: Parallel, *, gated: bool = True, dropout: bool = False,
              ffn_split: int | None = None, with_ln: bool = True) -> float:
    """A (dense or shared-expert) MLP with its pre-MLP LN: LN input, fc1 input, activation in/out."""
    replicated = (2 * h if with_ln else 0) + 2 * h + (h if dropout else 0)
    split = ffn_split or p.tp
    act_in = 2 * (2 * ffn if gated else ffn)
    inner = (act_in + 2 * ffn) * tokens / p.cp / split
    return tokens * _split(replicated, p, sharded_by_tp=False) + inner


def moe_bytes(arch: Architecture, tokens: int, p: Parallel) -> float:
    """MoE layer: pre-MLP LN, routed experts (top-k tokens), shared experts."""
    h = arch.hidden
    local_tokens = tokens / p.cp / (p.tp if p.sequence_parallel else 1)
    routed = arch.topk * local_tokens * p.etp
    out = local_tokens * (2 * h + 2 * h)  # LN input, router/dispatch input
    out += local_tokens * 4 * arch.experts  # fp32 router logits
    out += routed * (2 * h + 2 * h)  # permuted input, combine input
    out += routed * (2 * 2 * arch.moe_ffn + 2 * arch.moe_ffn) / p.etp
    if arch.shared_ffn:
        out += mlp_bytes(h, arch.shared_ffn, tokens, p, with_ln=False) - tokens * _split(2 * h, p, sharded_by_tp=False)
    return out


def layer_bytes(arch: Architecture, index: int, tokens: int, seq: int, p: Parallel, recompute: Recompute) -> float:
    """Activation bytes layer ``index`` keeps for backward, for one micro batch of ``tokens`` tokens."""
    if recompute.granularity == "full":
        return tokens * _split(2 * arch.hidden, p, sharded_by_tp=False)  # only the layer's input
    attention = attention_bytes(arch, tokens, seq, p)
    if arch.is_moe_layer(index):
        mlp = moe_bytes(arch, tokens, p)
        if recompute.granularity == "selective" and "moe" in recompute.modules:
            mlp = tokens * _split(2 * arch.hidden, p, sharded_by_tp=False)
        elif recompute.granularity == "selective" and "moe_act" in recompute.modules:
            local = tokens / p.cp / (p.tp if p.sequence_parallel else 1)
            mlp -= arch.topk * local * p.etp * 2 * arch.moe_ffn / p.etp
    else:
        mlp = mlp_bytes(arch.hidden, arch.ffn, tokens, p)
        if recompute.granularity == "selective" and "mlp" in recompute.modules:
            mlp = tokens * _split(2 * arch.hidden, p, sharded_by_tp=False)
    if recompute.granularity == "selective" and "layernorm" in recompute.modules:
        attention -= tokens * _split(2 * arch.hidden, p, sharded_by_tp=False)  # LN outputs are recomputed
    return attention + mlp
