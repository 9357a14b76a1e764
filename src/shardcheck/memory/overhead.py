"""What a training step holds beyond the tensors the estimate names, and the device peak around it.

Two figures per pipeline stage:

- ``allocated``: what ``torch.cuda.max_memory_allocated`` reports — the named terms (weights, grads,
  optimizer, activations, logits, …) plus ``workspace``: the transient tensors of the step's busiest moment
  that are not saved activations, all taken from the caching allocator:
  * cuBLAS workspaces: PyTorch allocates them from the caching allocator (aten/src/ATen/cuda/CublasHandlePool.cpp
    ``getChosenWorkspaceSize``: 4096 KiB × 8 = 32 MiB on Hopper and later, ``CUBLAS_WORKSPACE_CONFIG``
    otherwise), one per handle and stream; two streams are counted (compute and Megatron's communication
    overlap);
  * one layer's backward working set: the gradients flowing in and out of the layer (two ``[tokens, hidden]``
    16-bit tensors, split by sequence parallelism and CP), plus the widest intermediate gradient — the fc1
    output's (2·ffn or ffn, split over TP) for an MLP, ``top-k`` routed tokens' for an MoE layer, and with
    the unfused core attention the ``[heads/TP, s, s]`` scores and their gradient (2 bytes each).
- ``total``: the device peak: ``allocated`` plus what the caching allocator holds but has not handed out,
  plus memory outside it:
  * fragmentation: the allocator's cached but unusable blocks. GMLake (Guo et al., ASPLOS 2024,
    arXiv:2401.08156) measured on eight LLM trainings on A100-80GB that fragmentation is 15 % of the reserved
    memory on average (up to 33 %) with PyTorch's default allocator. It comes from the churn of activation
    and workspace allocations; the weights, gradient buffers and optimizer states are a few large blocks
    allocated once (Megatron's contiguous ``_ParamAndGradBuffer``, the optimizer's flat shards), so the
    estimate applies 15 % to the dynamic part only: reserved = static + dynamic / (1 − 0.15);
  * outside the allocator: the CUDA context, the loaded kernels of cuBLAS/cuDNN/NCCL/Transformer Engine and
    NCCL's channel buffers, which ``torch.cuda.memory_reserved`` does not include (PyTorch docs, "CUDA
    semantics — memory management"): an allowance of 0.5 GiB.
"""

from __future__ import annotations

from shardcheck.memory.activations import Parallel, _split
from shardcheck.memory.devices import GIB

CUBLAS_WORKSPACE = 32 * 2**20
CUBLAS_STREAMS = 2
FRAGMENTATION = 0.15  # GMLake: average share of reserved memory lost to fragmentation (default allocator)
OUTSIDE_ALLOCATOR = GIB // 2
STATIC_TERMS = ("weights", "grads", "optimizer", "ref_weights", "critic_state", "actor_state")


def transient_bytes(arch, tokens: int, p: Parallel, settings) -> int:
    """The step's working tensors beyond saved activations, at its busiest layer (see the module doc)."""
    h = arch.hidden
    flowing = 2 * tokens * _split(2 * h, p, sharded_by_tp=False)
    local = tokens / p.cp
    widest = local * 2 * (2 if arch.gated else 1) * (arch.ffn or 0) / p.tp
    if arch.experts:
        routed = arch.topk * local / (p.tp if p.sequence_parallel else 1) * p.etp
        widest = max(widest, routed * 2 * (2 if arch.gated else 1) * arch.moe_ffn / p.etp + routed * 2 * h)
    kernels = getattr(settings, "kernels", None)
    if kernels is not None and not kernels.flash:
        widest = max(widest, 2 * 2 * arch.heads / p.tp * local * settings.sequence_length / p.cp)
    return int(CUBLAS_WORKSPACE * CUBLAS_STREAMS + flowing + widest)


def device_total(terms: dict[str, int]) -> int:
    """The device peak from the allocated terms: fragmentation on the dynamic part, the outside allowance."""
    allocated = terms["allocated"]
    static = sum(terms.get(k, 0) for k in STATIC_TERMS)
    return int(static + (allocated - static) / (1 - FRAGMENTATION) + OUTSIDE_ALLOCATOR)
