"""The time of one training step: RL (rollout, old log-prob, ref, update) or pre-training (update only).

Every formula is written out, with its source, in docs/step_time.md; the short form:

- FLOPs per token and layer (forward): 2 × the layer's multiply-accumulate parameters that the token
  uses (attention projections, a dense MLP, or the router + top-k experts + shared experts), plus the
  attention core ``2·heads·(d_qk + d_v)·c`` over a context of ``c`` keys (causal training: ``c = s/2``,
  flash attention skips the masked half); the output layer ``2·h·V``. Backward is twice the forward;
  full recompute adds the forward of the recomputed layers once more, selective recompute the attention
  core. With dense MHA, a 4h MLP, no causal halving and full recompute this is exactly eq. 3 of
  Narayanan et al. 2021 (``96·B·s·l·h²·(1 + s/6h + V/16lh)``; tested).
- Compute time: each GEMM a layer runs on a device, by its shape, as a roofline ``max(FLOPs / (peak ·
  gemm_efficiency), bytes / (HBM · HBM_EFFICIENCY))`` (narrow experts with few tokens are memory-bound), at the
  FP8 peak for Transformer Engine's linear layers when the launch asks for FP8 (with their input casts); the
  attention core at the bf16 peak; the norms, residual adds, activation and MoE permutation as memory-bound
  passes.
- Communication (exposed, not overlapped unless stated): TP with sequence parallel all-gathers and
  reduce-scatters ``tokens·h`` bf16 twice per layer each way; CP passes K and V round a ring, hidden
  behind the attention core where it is shorter; EP dispatches and combines ``tokens·top-k·h`` bf16 by
  all-to-all (hidden under the compute with overlap_moe_expert_parallel_comm); DP reduce-scatters the
  gradients and all-gathers the parameters (distributed optimizer) or all-reduces the gradients; PP sends one
  activation per micro batch per stage boundary. A group whose ranks lie in one node uses the scale-up link,
  else the NIC.
- Pipeline: ``T = m·t_max + (Σ t_s − t_max)/v`` for ``m`` micro batches, stage times ``t_s``, ``v``
  virtual chunks (uniform stages: ``(m + (p−1)/v)·t``, the 1F1B and interleaved bubble of Narayanan et al.).
- Decode: a roofline per generated token of every running sequence: ``max(bytes/HBM, FLOPs/peak)`` where
  bytes = the weights a step reads (dense weights, and the experts the batch's tokens reach) + the KV
  cache of the batch; the batch is what the KV budget allows at full length (memory estimate), capped by
  ``max_num_seqs`` and by the requests each engine gets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from shardcheck.estimate.speeds import Speeds, speeds_for
from shardcheck.frameworks.megatron.pipeline import Split, split_layers, stage_layer_indices
from shardcheck.frameworks.memory_settings import Recompute, TrainSettings, known
from shardcheck.job import Job, MegatronLayout
from shardcheck.memory.estimate import MemoryEstimate, RolloutMemory, adapter_for, rollout_params
from shardcheck.memory.params import Sharding, attention_params, lora_params, mlp_params, stage_params
from shardcheck.models.architecture import Architecture, NotModelled, architecture
from shardcheck.origin import UnknownValue

HBM_EFFICIENCY = 0.8  # share of the HBM bandwidth a decode step's streaming reads reach (assumption)
COLLECTIVE_LATENCY = {"intra": 10e-6, "inter": 25e-6}  # seconds per small collective (assumption)
BF16_BYTES, FP8_BYTES = 2, 1
ADAM_BYTES_PER_PARAM = 32  # read bf16 weight, fp32 grad, master, two moments; write master, moments, weight


@dataclass
class StepTime:
    """Seconds of one step by phase, and the figures behind them."""

    total: float
    phases: dict[str, float]  # rollout, sync, old_log_prob, ref_log_prob, update, offload
    train_flops: float  # model FLOPs of the update (forward + backward, no recompute), whole job
    devices: int
    device: str
    terms: dict[str, float] = field(default_factory=dict)  # update: compute, tp, cp, ep, pp, dp, optimizer, bubble
    notes: list[str] = field(default_factory=list)

    @property
    def rollout(self) -> float:
        return self.phases.get("rollout", 0.0)

    @property
    def train(self) -> float:
        return self.total - self.rollout

    @property
    def tflops_per_device(self) -> float:
        """Model TFLOP/s per device of the update phase (the figure training reports publish)."""
        update = self.phases.get("update", 0.0)
        return self.train_flops / update / self.devices / 1e12 if update else 0.0


# --- FLOPs -------------------------------------------------------------------------------------------


def _mla_dims(arch: Architecture) -> tuple[int, int]:
    if arch.mla is not None:
        return arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim, arch.mla.v_head_dim
    return arch.head_dim, arch.head_dim


def layer_flops(arch: Architecture, index: int, context: float) -> tuple[float, float]:
    """(matmul FLOPs, attention-core FLOPs) of one token's forward through layer ``index``, ``context`` keys."""
    return layer_flops_kind(arch, arch.is_moe_layer(index), context)


@lru_cache(maxsize=4096)
def layer_flops_kind(arch: Architecture, moe: bool, context: float) -> tuple[float, float]:
    """``layer_flops`` of a dense (``moe`` False) or MoE layer: the two kinds a model's layers come in."""
    one = Sharding(1, 1, 1, 1)
    params = attention_params(arch, one)
    if moe:
        params += arch.experts * arch.hidden + arch.topk * mlp_params(arch, arch.moe_ffn, 1)
        if arch.shared_ffn:
            params += mlp_params(arch, arch.shared_ffn, 1)
    else:
        params += mlp_params(arch, arch.ffn, 1)
    d_qk, d_v = _mla_dims(arch)
    return 2.0 * params, 2.0 * arch.heads * (d_qk + d_v) * context


def forward_flops_per_token(arch: Architecture, context: float, layers=None) -> float:
    """One token's forward FLOPs through ``layers`` (default all) and the output layer."""
    layers = range(arch.num_layers) if layers is None else layers
    n_moe = sum(1 for i in layers if i in arch.moe_layers)
    moe, dense = layer_flops_kind(arch, True, context), layer_flops_kind(arch, False, context)
    return n_moe * sum(moe) + (len(layers) - n_moe) * sum(dense) + 2.0 * arch.hidden * arch.vocab


def update_flops_per_token(arch: Architecture, context: float, lora: bool = False) -> float:
    """One token's model FLOPs in the update: forward and backward (twice the forward). Under LoRA the frozen
    base's linear layers have no weight-gradient GEMM (forward + dgrad only); attention's own backward stays
    (the adapters' FLOPs, rank × (in + out) against in × out a module, are left out of this figure)."""
    forward = forward_flops_per_token(arch, context)
    if not lora:
        return 3 * forward
    n_moe = len(arch.moe_layers)
    moe_core, dense_core = layer_flops_kind(arch, True, context)[1], layer_flops_kind(arch, False, context)[1]
    core = n_moe * moe_core + (arch.num_layers - n_moe) * dense_core
    return 2 * (forward - core) + 3 * core


def narayanan_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
    Megatron-LM", arXiv:2104.04473), eq. 3: FLOPs of one iteration with full activation recompute."""
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


# --- communication -----------------------------------------------------------------------------------


def _span(order: str, sizes: dict[str, int], dim: str) -> int:
    """How many consecutive ranks one group of ``dim`` spans in Megatron-Core's rank order (first fastest)."""
    span = 1
    for name in order.split("-"):
        span *= sizes.get(name, 1)
        if name == dim:
            return span
    return span


def _bandwidth(span: int, sp: Speeds) -> tuple[float, str]:
    return (sp.intra_node, "intra") if span <= sp.devices_per_node else (sp.inter_node, "inter")


def ring_time(bytes_: float, size: int, span: int, sp: Speeds) -> float:
    """A reduce-scatter or all-gather of ``bytes_`` per device over ``size`` ranks (ring: (n−1)/n of it)."""
    if size <= 1:
        return 0.0
    bw, where = _bandwidth(span, sp)
    return bytes_ * (size - 1) / size / bw + COLLECTIVE_LATENCY[where]


def all_to_all_time(bytes_: float, size: int, span: int, sp: Speeds) -> float:
    """An all-to-all of ``bytes_`` per device: the share bound for other nodes goes over the NIC, the rest over the
    scale-up link at the share of it an all-to-all is measured to reach (``Speeds.a2a_intra_efficiency``: DeepEP's
    dispatch / combine on Hopper and Blackwell NVLink, docs/step_time.md; 1 where no measurement is known). Across
    nodes DeepEP reaches the NIC's figure, so that share stays whole."""
    if size <= 1:
        return 0.0
    per_node = max(1, min(size, size * sp.devices_per_node // span)) if span > sp.devices_per_node else size
    away = (size - per_node) / (size - 1)
    sent = bytes_ * (size - 1) / size
    where = "inter" if away else "intra"
    intra = sp.intra_node * sp.a2a_intra_efficiency
    return sent * (1 - away) / intra + sent * away / sp.inter_node + COLLECTIVE_LATENCY[where]


# --- training ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    dp: int
    edp: int
    vpp: int
    order: str
    sequence_parallel: bool

    def span(self, dim: str) -> int:
        dense = {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}
        if dim in ("ep", "etp", "edp"):
            expert = {"tp": self.etp, "ep": self.ep, "dp": self.edp, "pp": self.pp}
            return _span(self.order.replace("-cp", ""), expert, {"etp": "tp", "edp": "dp"}.get(dim, dim))
        return _span(self.order.replace("-ep", ""), dense, dim)


def _tiling(traced, name: str) -> int:
    """A data-parallel size derived from the world: unknown when the layout does not tile the world."""
    value = known(traced, name)
    if not isinstance(value, int) or value < 1:
        raise UnknownValue(f"{name}: the layout does not tile the world")
    return value


def _grid(job: Job, layout: MegatronLayout) -> Grid:
    world = job.cluster.world
    return Grid(
        tp=known(layout.tp, "TP"),
        pp=known(layout.pp, "PP"),
        cp=known(layout.cp, "CP"),
        ep=known(layout.ep, "EP"),
        etp=known(layout.etp, "ETP"),
        dp=_tiling(layout.dp(world), "DP"),
        edp=_tiling(layout.edp(world), "EDP"),
        vpp=known(layout.vpp, "VPP") or 1,
        order=layout.order,
        sequence_parallel=bool(layout.sequence_parallel.value),
    )


def _recompute_share(rc: Recompute) -> tuple[float, float]:
    """(share of the layers' matmul forward recomputed, share of the attention core recomputed)."""
    if rc.granularity == "full":
        return 1.0, 1.0  # every recomputed layer's forward once more (block: only the first n; see below)
    if rc.granularity == "selective":
        return 0.0, 1.0 if "core_attn" in rc.modules else 0.0
    return 0.0, 0.0


def gemm_seconds(rows: float, k: float, n: float, sp: Speeds, fp8: bool, count: int = 1) -> float:
    """``count`` GEMMs ``[rows, k] · [k, n]`` (a grouped GEMM: one per local expert) on one device, as a roofline
    (Williams et al. 2009): ``max(FLOPs / (peak · gemm_efficiency), bytes / (HBM · HBM_EFFICIENCY))``. Bytes: the
    inputs and weights once (1 byte an element in FP8, else 2) and the bf16 output once."""
    if rows <= 0 or k <= 0 or n <= 0 or count <= 0:
        return 0.0
    flops = 2.0 * rows * k * n * count
    width = FP8_BYTES if fp8 else BF16_BYTES
    moved = count * ((rows * k + k * n) * width + rows * n * BF16_BYTES)
    peak = (sp.fp8_flops or sp.flops) if fp8 else sp.flops
    return max(flops / (peak * sp.gemm_efficiency), moved / (sp.hbm * HBM_EFFICIENCY))


@dataclass(frozen=True)
class Shards:
    """What splits one layer's work on a device (the cache key of ``layer_seconds``)."""

    tp: int
    ep: int
    etp: int
    sequence_parallel: bool


@lru_cache(maxsize=4096)
def layer_seconds(
    arch: Architecture,
    moe: bool,
    rows: float,
    g: Shards,
    context: float,
    sp: Speeds,
    fp8: bool,
    current: bool,
    bound: bool = False,
) -> tuple[float, float, float]:
    """(linear GEMMs, attention core, memory-bound passes): seconds of one layer's forward on one device for a
    micro batch of ``rows`` tokens on a CP rank (the dense GEMMs' rows after sequence parallel's all-gather).

    Each GEMM by its shape on the device (TP splits the projections' and MLP's columns or rows, EP the experts,
    ETP an expert's width; docs/step_time.md "Compute"); with ``fp8`` the Transformer Engine linear layers (the
    attention projections, MLPs and experts) run at the FP8 peak and cast their inputs first (read bf16, write
    FP8; ``current`` scaling reads the input once more for its amax), while the router, the attention core and
    the output layer stay bf16. Memory-bound passes: the two norms, the two residual adds, the gated
    activation, and for MoE the router scores, the token permutation and unpermutation (and, with EP, the
    reorder of the received tokens by local expert before the experts and back after), each moving its
    inputs and outputs once through HBM.

    ``bound``: a lower bound that does not depend on EP or ETP (the planner's compute bound is shared by every
    EP and ETP of a shape): the experts' GEMMs at their FLOPs alone, their inputs' casts at ETP 1, no EP
    reorder — each at most what any EP and ETP costs."""
    h, tp = arch.hidden, g.tp
    sp_rows = rows / tp if g.sequence_parallel else rows  # norms, residuals and the router see SP's shard
    cast = (5.0 if current else 3.0) if fp8 else 0.0  # bytes per element of an FP8 GEMM's input cast
    gemms = 0.0
    cast_elems = 0.0

    def linear(m: float, k: float, n: float, count: int = 1) -> None:
        nonlocal gemms, cast_elems
        gemms += gemm_seconds(m, k, n, sp, fp8, count)
        cast_elems += m * k * count

    if arch.mla is None:
        qkv = (arch.heads * (2 if arch.attention_gate else 1) + 2 * arch.kv_heads) * arch.head_dim / tp
        linear(rows, h, qkv)
        linear(rows, arch.heads * arch.head_dim / tp, h)
    else:  # MLA: its down and up projections as one GEMM of their parameters' shape [h, params / h]
        linear(rows, h, attention_params(arch, Sharding(tp, 1, 1, 1)) / h)
    width = 2 if arch.gated else 1
    moved = (2 * 2 * h + 2 * 3 * h) * sp_rows * BF16_BYTES  # 2 norms (read, write), 2 residual adds (2 reads, write)

    def mlp(m: float, ffn: float, count: int = 1) -> float:
        linear(m / count, h, width * ffn, count)
        linear(m / count, ffn, h, count)
        return m * (width + 1) * ffn * BF16_BYTES  # the activation: read fc1's output, write its half

    if moe:
        gemms += gemm_seconds(sp_rows, h, arch.experts, sp, False)  # the router (bf16, not a TE layer)
        routed = sp_rows * arch.topk  # routed copies this rank sends
        local = max(1, arch.experts // g.ep)
        moved += sp_rows * arch.experts * 4 * 2  # router scores, fp32, written and read by softmax / top-k
        moved += routed * h * BF16_BYTES * 2  # permute: read and write each routed copy
        moved += (routed + sp_rows) * h * BF16_BYTES  # unpermute: read each copy, write each token
        if g.ep > 1 and not bound:
            moved += 2 * routed * h * BF16_BYTES * 2  # sort the received chunks by local expert, and back
        if bound:
            peak = (sp.fp8_flops or sp.flops) if fp8 else sp.flops
            gemms += 2.0 * routed * h * (width + 1) * arch.moe_ffn / (peak * sp.gemm_efficiency)
            cast_elems += routed * (h + arch.moe_ffn)
            moved += routed * (width + 1) * arch.moe_ffn * BF16_BYTES
        else:
            moved += mlp(routed * g.etp, arch.moe_ffn / g.etp, local)
        if arch.shared_ffn:
            moved += mlp(rows, arch.shared_ffn / tp)
    else:
        moved += mlp(rows, arch.ffn / tp)
    moved += cast_elems * cast
    d_qk, d_v = _mla_dims(arch)
    core = rows * 2.0 * arch.heads * (d_qk + d_v) * context / tp / sp.achieved_flops
    return gemms, core, moved / (sp.hbm * HBM_EFFICIENCY)


@lru_cache(maxsize=4096)
def _layer_table(
    arch: Architecture, rows: float, g: Shards, context: float, sp: Speeds, fp8: bool, current: bool, bound: bool
) -> tuple[dict, dict]:
    """FLOPs (``layer_flops_kind``) and seconds (``layer_seconds``) of the dense and the MoE layer: one cache
    lookup per stage-time call (the planner makes thousands)."""
    kinds = {moe: layer_flops_kind(arch, moe, context) for moe in (False, True)}
    costs = {moe: layer_seconds(arch, moe, rows, g, context, sp, fp8, current, bound) for moe in (False, True)}
    return kinds, costs


def _a2a_overlapped(settings: TrainSettings, g: Grid) -> bool:
    """Megatron-Core's overlap_moe_expert_parallel_comm hides the EP all-to-all under another micro batch's
    compute (megatron/core/model_parallel_config.py); TransformerConfig accepts it only with EP > 1, a virtual
    pipeline when PP > 1, and no full recompute (transformer_config.py ``__post_init__``)."""
    return (
        settings.overlap_moe_a2a and g.ep > 1 and (g.pp == 1 or g.vpp > 1) and settings.recompute.granularity != "full"
    )


def _stage_times(
    arch: Architecture, g: Grid, indices, settings: TrainSettings, sp: Speeds, *, backward: bool, comm: bool = True
) -> tuple[list[float], dict[str, float]]:
    """Seconds one micro batch spends on each pipeline stage (forward, and backward when ``backward``)."""
    tokens, seq = settings.tokens_per_micro_batch, settings.sequence_length
    context = seq / 2  # causal attention: each query sees half the sequence on average
    fp8 = settings.fp8 is not None
    if fp8 and not sp.fp8_flops:
        raise UnknownValue(f"FP8 training on {sp.name}: the device has no FP8 peak in the hardware table")
    current = fp8 and str(settings.fp8_recipe or "").lower() == "tensorwise"
    per_device = g.tp * g.cp
    local = tokens / g.cp  # tokens of one micro batch on a CP rank
    act = local / (g.tp if g.sequence_parallel else 1) * arch.hidden * 2  # one bf16 activation, bytes
    passes = 3.0 if backward else 1.0  # forward, and backward at twice the forward (dgrad and wgrad GEMMs)
    # LoRA: the base weights are frozen (requires_grad False), so their GEMMs have no weight gradient; the
    # activations' gradient (dgrad) still flows through every layer to the adapters below
    lin_passes = passes - 1.0 if backward and settings.lora is not None else passes
    rc_full, rc_core = _recompute_share(settings.recompute) if backward else (0.0, 0.0)
    overlap_ep = _a2a_overlapped(settings, g)
    kv_bytes = (
        local * 2 * max(1, arch.kv_heads // g.tp) * arch.head_dim * 2
        if arch.mla is None
        else local * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * 2
    )
    terms = dict.fromkeys(("compute", "tp", "cp", "ep", "pp"), 0.0)
    times = []
    # without communication (the planner's compute bound) the bound that holds for every EP and ETP
    shards = Shards(g.tp, g.ep, g.etp, g.sequence_parallel)
    kinds, costs = _layer_table(arch, local, shards, context, sp, fp8, current, not comm)
    # each layer's seconds by (recomputed, MoE): compute, then TP, CP and EP communication (a stage sums them
    # over its layers' kinds; one evaluation per kind, not per layer)
    unit: dict[tuple[bool, bool], tuple] = {}
    for again_flag in (True, False):
        again = rc_full if again_flag else 0.0
        for moe in (True, False):
            _mm, core = kinds[moe]
            lin_s, core_s, mem_s = costs[moe]
            compute = lin_s * (lin_passes + again) + mem_s * (passes + again) + core_s * (passes + max(again, rc_core))
            tp_s = cp_s = a2a = 0.0
            a2a_passes = 2 * (2 if backward else 1) + (2 if again else 0)
            collectives = 4 * (2 if backward else 1) + (4 if again else 0)  # AG/RS pairs per layer
            if comm and g.tp > 1:
                tp_s = ring_time(act * g.tp, g.tp, g.span("tp"), sp)
            if comm and g.cp > 1:
                ring = (g.cp - 1) * kv_bytes / _bandwidth(g.span("cp"), sp)[0] * (3 if backward else 1)
                core_time = tokens * core * (passes + max(again, rc_core)) / per_device / sp.achieved_flops
                cp_s = max(0.0, ring - core_time)
            if comm and moe and g.ep > 1:
                routed = local / (g.tp if g.sequence_parallel else 1) * arch.topk * arch.hidden * 2
                a2a = all_to_all_time(routed, g.ep, g.span("ep"), sp)
            unit[(again_flag, moe)] = (compute, tp_s, cp_s, a2a, collectives, a2a_passes)
    block = settings.recompute.granularity == "full" and settings.recompute.method == "block"
    output = gemm_seconds(local, arch.hidden, arch.vocab / g.tp, sp, False) * lin_passes
    comm_pp = (ring_time(act, 2, g.span("pp"), sp) * 2 * (2 if backward else 1)) if g.pp > 1 and comm else 0.0
    last = len(indices) - 1
    seen: dict[tuple, float] = {}  # stages with the same layer kinds and position take the same time
    kinds_of = _stage_kinds(
        arch.moe_layers, tuple(indices), (settings.recompute.num_layers or 0) * g.vpp if block else None
    )
    for stage, (layers, same) in enumerate(zip(indices, kinds_of)):
        if same in seen:
            times.append(seen[same])
            continue
        counts = same[0]
        compute = comm_tp = comm_cp = comm_ep = 0.0
        for again_flag, (n_moe, n_dense) in zip((True, False), counts):
            for moe, count in ((True, n_moe), (False, n_dense)):
                if not count:
                    continue
                c, tp_s, cp_s, a2a, collectives, a2a_passes = unit[(again_flag, moe)]
                compute += count * c
                comm_tp += count * collectives / 2 * tp_s
                comm_cp += count * cp_s
                comm_ep += count * a2a_passes * a2a
        if stage == last:  # the output layer (bf16: Megatron-Core's own ColumnParallelLinear)
            compute += output
        if settings.lora is not None:  # the adapters: 2 FLOPs per parameter and token a pass, with wgrad
            adapters = _lora_stage(arch, tuple(layers), g, settings).total
            compute += 2 * local * adapters * passes / sp.achieved_flops
        if overlap_ep:
            comm_ep = max(0.0, comm_ep - compute)  # hidden under another micro batch's compute
        times.append(compute + comm_tp + comm_cp + comm_ep + comm_pp)
        seen[same] = times[-1]
        for name, value in (("compute", compute), ("tp", comm_tp), ("cp", comm_cp), ("ep", comm_ep), ("pp", comm_pp)):
            if value > terms[name]:
                terms[name] = value
    return times, terms


def _lora_stage(arch: Architecture, layers: tuple[int, ...], g: Grid, settings: TrainSettings):
    """The LoRA adapter parameters on one device of a stage (memory/params.py lora_params)."""
    lora = settings.lora
    return lora_params(arch, layers, Sharding(g.tp, g.ep, g.etp, g.pp), lora.rank, lora.modules, lora.fused)


@lru_cache(maxsize=4096)
def _stage_kinds(moe_layers: frozenset, indices: tuple, block: int | None) -> tuple[tuple, ...]:
    """Per stage: its (MoE, dense) counts among the recomputed layers (the first ``block`` with full block
    recompute, else all) and the rest (``_kind_counts``), and whether it is the last and the first stage — what
    its time depends on besides the grid."""
    last = len(indices) - 1
    return tuple(
        (
            _kind_counts(moe_layers, tuple(layers), len(layers) if block is None else min(len(layers), block)),
            stage == last,
            stage == 0,
        )
        for stage, layers in enumerate(indices)
    )


@lru_cache(maxsize=65536)
def _kind_counts(moe_layers: frozenset, layers: tuple, n_rc: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(MoE, dense) layer counts among a stage's first ``n_rc`` layers (recomputed) and the rest."""
    out = []
    for group in (layers[:n_rc], layers[n_rc:]):
        n_moe = sum(1 for i in group if i in moe_layers)
        out.append((n_moe, len(group) - n_moe))
    return out[0], out[1]


def pipeline_time(stage_times: list[float], micro_batches: int, vpp: int = 1) -> float:
    """1F1B: ``m·t_max + (Σ t_s − t_max)/v`` (uniform stages: ``(m + (p−1)/v)·t``, Narayanan et al. 2021 §2.2)."""
    t_max = max(stage_times)
    return micro_batches * t_max + (sum(stage_times) - t_max) / max(1, vpp)


def _layer_indices(arch: Architecture, layout: MegatronLayout) -> tuple[tuple[int, ...], ...]:
    vpp = known(layout.vpp, "VPP")
    emb, loss = bool(layout.account_for_embedding.value), bool(layout.account_for_loss.value)
    split = split_layers(
        arch.num_layers,
        known(layout.pp, "PP"),
        first=known(layout.first_stage_layers, "first"),
        last=known(layout.last_stage_layers, "last"),
        vpp=vpp,
        account_for_embedding=emb,
        account_for_loss=loss,
    )
    if not isinstance(split, Split):
        raise UnknownValue(f'the layer split fails (megatron-core: "{split.message}")')
    try:
        return stage_layer_indices(split, arch.num_layers, vpp=vpp, account_for_embedding=emb, account_for_loss=loss)
    except ValueError as exc:  # a split the layout rules reject (first- and last-stage layers with PP 1), as memory
        raise UnknownValue(f"{exc}; fix the layout first") from None


def optimizer_steps(job: Job) -> int:
    """Optimizer steps per step: verl's train_batch_size / ppo_mini_batch_size (× ppo_epochs); slime's
    --num-steps-per-rollout; Megatron-LM 1."""

    def v(key):
        t = job.value(key)
        return t.value if t.known else None

    if job.framework == "verl":
        tbs, mini = v("data.train_batch_size"), v("actor_rollout_ref.actor.ppo_mini_batch_size")
        epochs = v("actor_rollout_ref.actor.ppo_epochs") or 1
        return max(1, (tbs // mini if tbs and mini else 1) * epochs)
    if job.framework == "slime":
        return v("--num-steps-per-rollout") or 1
    return 1


def _update(
    job: Job, arch: Architecture, layout: MegatronLayout, adapter, sp: Speeds, estimate: MemoryEstimate, out: StepTime
) -> None:
    g = _grid(job, layout)
    settings = timed_batches(adapter.train_settings(job, layout, g.dp))
    indices = _layer_indices(arch, layout)
    m = settings.micro_batches
    steps = optimizer_steps(job)
    times, terms = _stage_times(arch, g, indices, settings, sp, backward=True)
    one = pipeline_time(times, m, g.vpp)
    terms["bubble"] = one - m * max(times)
    # DP: gradients reduce-scattered (or all-reduced) and, with the distributed optimizer, parameters
    # all-gathered, once per optimizer step, dense over DP·CP and experts over EDP (not overlapped).
    sharding = Sharding(g.tp, g.ep, g.etp, g.pp)
    if settings.lora is not None:  # only the adapters have gradients, optimizer state and updated weights
        stage = max((_lora_stage(arch, tuple(layers), g, settings) for layers in indices), key=lambda p: p.total)
    else:
        stage = max(
            (stage_params(arch, layers, s, sharding) for s, layers in enumerate(indices)), key=lambda p: p.total
        )
    dense, expert = stage.embedding + stage.dense + stage.output, stage.expert
    reduce_passes = 1 if settings.distributed_optimizer else 2
    grads_time = params_time = 0.0
    for params, size, span in ((dense, g.dp * g.cp, g.span("dp") * g.cp), (expert, g.edp, g.span("edp"))):
        if params and size > 1:
            grads_time += reduce_passes * ring_time(params * settings.grad_bytes, size, span, sp)
            if settings.distributed_optimizer:
                params_time += ring_time(params * settings.weight_bytes, size, span, sp)
    ftimes, _ = _stage_times(arch, g, indices, settings, sp, backward=False)
    # Megatron-Core DDP with overlap_grad_reduce reduces each gradient bucket as it is ready during the last
    # micro batch's backward (every other micro batch runs under no_sync: megatron/core/pipeline_parallel/
    # schedules.py no_sync_func, megatron/core/distributed/param_and_grad_buffer.py start_grad_sync), so only
    # what outlasts that backward stays exposed; with overlap_param_gather (distributed optimizer) the
    # parameter all-gather runs under the first micro batch's forward of the next step
    # (distributed_data_parallel.py, the forward pre-hooks). The windows are the slowest stage's.
    unhidden = grads_time + params_time
    if settings.overlap_grad_reduce:
        grads_time = max(0.0, grads_time - (max(times) - max(ftimes)))
    if settings.overlap_param_gather:
        params_time = max(0.0, params_time - max(ftimes))
    dp_time = grads_time + params_time
    terms["dp_hidden"] = unhidden - dp_time
    shards = (g.dp * g.cp) if settings.distributed_optimizer else 1
    opt_time = (
        (dense / shards + expert / (g.edp if settings.distributed_optimizer else 1)) * ADAM_BYTES_PER_PARAM / sp.hbm
    )
    terms["dp"], terms["optimizer"] = dp_time, opt_time
    out.phases["update"] = steps * (one + dp_time + opt_time)
    out.terms = terms
    tokens = steps * m * settings.tokens_per_micro_batch * g.dp
    out.train_flops = tokens * update_flops_per_token(arch, settings.sequence_length / 2, settings.lora is not None)
    if job.framework in ("verl", "slime"):
        forward = steps * (m * max(ftimes) + sum(ftimes) - max(ftimes))
        out.phases["old_log_prob"] = forward
        if job.layout("ref") is not None or (job.ref_used.known and job.ref_used.value):
            out.phases["ref_log_prob"] = forward
    if estimate.host is not None and estimate.host.offloaded_bytes_per_device:
        # verl's param/optimizer offload: the state leaves the device after the update and comes back
        out.phases["offload"] = 2 * estimate.host.offloaded_bytes_per_device / sp.host


# --- rollout ----------------------------------------------------------------------------------------


def architecture_of(model) -> Architecture:
    """``architecture(model)``, remembered for the last model (the planner asks for it once per candidate)."""
    cached = _ARCH.get(id(model))
    if cached is None or cached[0] is not model:
        _ARCH.clear()
        _ARCH[id(model)] = cached = (model, architecture(model))
    return cached[1]


_ARCH: dict[int, tuple] = {}  # a one-entry cache: id(model) -> (model, architecture)


def _prompt_response(job: Job, request_tokens: int) -> tuple[int, int]:
    keys = {
        "verl": ("data.max_prompt_length", "data.max_response_length"),
        "slime": ("--rollout-max-prompt-len", "--rollout-max-response-len"),
    }.get(job.framework)
    if keys:
        p, r = job.value(keys[0]), job.value(keys[1])
        if p.known and r.known and p.value and r.value:
            return p.value, r.value
    return 0, request_tokens


def experts_touched(arch: Architecture, batch: int, ep: int, tp: int, requests_per_replica: int | None) -> float:
    """The chance that a decode step reads a given routed expert: each of the step's tokens routes to top-k of
    E experts, so an expert is missed by all ``n`` with probability ``(1 − k/E)^n``. With EP the experts see
    the tokens of the whole EP group, one replica's TP · DP ranks: each DP rank's running ``batch``, but no
    more than the requests the replica gets (a DP rank without a request steps with an empty batch); without
    EP the engine's own batch. 1 for a dense model."""
    if not arch.experts:
        return 1.0
    tokens = batch * max(1, ep // tp)
    if ep > 1 and requests_per_replica:
        tokens = max(1, min(tokens, requests_per_replica))
    return 1 - (1 - arch.topk / arch.experts) ** tokens


def _rollout(job: Job, arch: Architecture, ro: RolloutMemory, sp: Speeds, out: StepTime) -> None:
    prompt, response = _prompt_response(job, ro.request_tokens)
    requests = ro.requests_per_engine or 1
    batch = min(requests, ro.max_num_seqs or requests, ro.max_concurrent_full_requests)
    if batch < 1:
        out.phases["rollout"] = math.inf
        out.notes.append("rollout: no full-length request fits the KV budget")
        return
    waves = -(-requests // batch)
    # prefill: compute-bound, the engine's TP devices share each prompt
    prefill = requests * prompt * forward_flops_per_token(arch, prompt / 2) / ro.tp / sp.achieved_flops
    # decode: weights read once per step (experts only where a token of the EP group's batch is routed),
    # the batch's KV cache at the mean context prompt + response/2
    params = rollout_params(arch, ro.engine, ro.tp, ro.ep)  # the busiest device (uneven vLLM experts)
    dtype = ro.weights_bytes / params.total if params.total else 2
    touched = experts_touched(arch, batch, ro.ep, ro.tp, ro.requests_per_replica)
    read = (params.total - params.expert) * dtype + params.expert * dtype * touched
    kv = batch * (prompt + response / 2) * ro.kv_bytes_per_token
    memory = (read + kv) / (sp.hbm * HBM_EFFICIENCY)
    compute = batch * forward_flops_per_token(arch, prompt + response / 2) / ro.tp / sp.achieved_flops
    latency = 0.0
    if ro.tp > 1:
        latency += 2 * arch.num_layers * COLLECTIVE_LATENCY["intra" if ro.tp <= sp.devices_per_node else "inter"]
    if arch.experts and ro.ep > 1:
        latency += 2 * len(arch.moe_layers) * COLLECTIVE_LATENCY["intra" if ro.ep <= sp.devices_per_node else "inter"]
    per_step = max(memory, compute) + latency
    out.phases["rollout"] = prefill + waves * response * per_step
    out.terms.update({"decode_batch": float(batch), "decode_step": per_step, "prefill": prefill})
    # verl's hybrid engine hands the new weights to the engine each step (one copy of its shard per device)
    out.phases["sync"] = ro.weights_bytes / sp.intra_node


def _architecture(job: Job) -> Architecture:
    if job.model is None:
        raise UnknownValue("no model facts")
    try:
        arch = architecture_of(job.model)
    except NotModelled as exc:
        raise UnknownValue(f"parameter counts unknown: {exc}") from None
    if arch.linear_layers:
        raise UnknownValue("the step time of Gated DeltaNet (linear attention) layers is not modelled")
    return arch


def _setup(job: Job) -> tuple[Architecture, MegatronLayout]:
    arch = _architecture(job)
    layout = job.layout("actor")
    if layout is None:
        raise UnknownValue("the step time is modelled for Megatron engines only")
    return arch, layout


def timed_batches(settings: TrainSettings) -> TrainSettings:
    """The micro batches the step runs: with dynamic batch size at a token budget the update's tokens are fixed
    (``step_tokens``: its samples × their length) and the budget only sizes the micro batches, ``m = ⌈tokens /
    budget⌉`` (at most one per sample), each of ``tokens / m``. The memory's bound (every sample a full micro batch
    at the budget) would make the time grow with the budget; verl packs samples up to it (verl/utils/
    seqlen_balancing.py ``rearrange_micro_batches``), slime likewise (``get_minimum_num_micro_batch_size``)."""
    total = settings.step_tokens
    if total is None:
        return settings
    m = max(1, min(settings.micro_batches, -(-total // max(1, settings.tokens_per_micro_batch))))
    return replace(settings, tokens_per_micro_batch=-(-total // m), micro_batches=m)


def compute_bound(
    arch: Architecture,
    g: Grid,
    indices,
    settings: TrainSettings,
    sp: Speeds,
    steps: int,
    forward_passes: int,
    *,
    comm: bool = False,
) -> float:
    """The compute-only seconds of the update and ``forward_passes`` log-prob passes (train_lower_bound), a
    bound for every EP, ETP and rank order of the grid's other sizes. With ``comm``: the same passes with the
    grid's own experts and its TP, CP, EP and PP communication, what ``step_time`` times them at; still a
    lower bound of its training seconds, which add the data-parallel reduce, the optimizer and offload."""
    settings = timed_batches(settings)
    m = settings.micro_batches
    times, _ = _stage_times(arch, g, indices, settings, sp, backward=True, comm=comm)
    total = steps * pipeline_time(times, m, g.vpp)
    if forward_passes:
        ftimes, _ = _stage_times(arch, g, indices, settings, sp, backward=False, comm=comm)
        total += forward_passes * steps * (m * max(ftimes) + sum(ftimes) - max(ftimes))
    return total


def pipeline_floor(
    arch: Architecture, g: Grid, settings: TrainSettings, sp: Speeds, steps: int, forward_passes: int, vpp: int
) -> float:
    """A lower bound of ``compute_bound`` for every layer split, recompute and virtual pipeline up to ``vpp`` of
    the grid's TP, CP and PP. With ``Σ`` the stages' sum (every layer and the output layer once, without
    recompute) and ``t_max ≥ Σ/PP``: ``pipeline_time = (m − 1/v)·t_max + Σ/v ≥ Σ·(m/PP + (1 − 1/PP)/v)``,
    smallest at the largest ``v``; a forward pass, ``(m − 1)·t_max + Σ ≥ Σ·((m − 1)/PP + 1)``."""
    plain = replace(timed_batches(settings), recompute=Recompute(modules=settings.recompute.modules))
    whole = (tuple(range(arch.num_layers)),)
    m, pp = plain.micro_batches, g.pp
    (total,), _ = _stage_times(arch, g, whole, plain, sp, backward=True, comm=False)
    out = steps * total * (m / pp + (1 - 1 / pp) / max(1, vpp))
    if forward_passes:
        (forward,), _ = _stage_times(arch, g, whole, plain, sp, backward=False, comm=False)
        out += forward_passes * steps * forward * ((m - 1) / pp + 1)
    return out


def forward_passes(job: Job) -> int:
    """Log-prob passes before the update: the old policy's, and the reference's when verl builds one."""
    if job.framework not in ("verl", "slime"):
        return 0
    return 1 + (job.layout("ref") is not None or (job.ref_used.known and bool(job.ref_used.value)))


def train_lower_bound(job: Job) -> float:
    """A lower bound of the training phases' seconds (update and log-probs): their compute in the pipeline
    schedule, without communication, optimizer or offload (each ≥ 0). The device is the job's choice."""
    from shardcheck.memory.devices import device_for

    arch, layout = _setup(job)
    kind = job.cluster.device.value if job.cluster.device.known else None
    sp = speeds_for(device_for(job.device_choice, kind).name)
    g = _grid(job, layout)
    settings = adapter_for(job).train_settings(job, layout, g.dp)
    return compute_bound(arch, g, _layer_indices(arch, layout), settings, sp, optimizer_steps(job), forward_passes(job))


def step_time(job: Job, estimate: MemoryEstimate) -> StepTime:
    """The predicted seconds of one step of ``job`` on the memory estimate's device; UnknownValue when not modelled."""
    arch, layout = _setup(job)
    sp = _speeds(estimate)
    out = StepTime(0.0, {}, 0.0, known(job.cluster.world, "world"), sp.name)
    _update(job, arch, layout, adapter_for(job), sp, estimate, out)
    _rollout_phases(job, arch, estimate, sp, out)
    out.total = sum(out.phases.values())
    return out


def rollout_time(job: Job, estimate: MemoryEstimate) -> StepTime:
    """The rollout and weight-sync phases of ``step_time`` alone: they read the rollout engine's sizes, not the
    training layout's, so a job whose own layer split fails still has its rollout timed (the planner's rollout
    screen, whose candidates each get a training layout of their own)."""
    arch = _architecture(job)
    sp = _speeds(estimate)
    out = StepTime(0.0, {}, 0.0, known(job.cluster.world, "world"), sp.name)
    _rollout_phases(job, arch, estimate, sp, out)
    out.total = sum(out.phases.values())
    return out


def _speeds(estimate: MemoryEstimate) -> Speeds:
    try:
        return speeds_for(estimate.device.name)
    except KeyError:
        raise UnknownValue(f"no speeds for {estimate.device.name}") from None


def _rollout_phases(job: Job, arch: Architecture, estimate: MemoryEstimate, sp: Speeds, out: StepTime) -> None:
    if estimate.rollout_problem is not None and job.rollout is not None:
        # a rollout engine whose time is unknown is not a free one: the step is unknown (never ranked)
        raise UnknownValue(f"rollout: {estimate.rollout_problem}")
    if estimate.rollout is not None:
        _rollout(job, arch, estimate.rollout, sp, out)


def predict(job: Job) -> tuple[StepTime | None, str | None]:
    """The step time of ``job`` on its device choice (the default for trainer.device otherwise), or why not.

    Only a job whose layout builds is timed: ``valid`` of its check should be true for the figure to mean
    anything; the caller shows it next to the verdict.
    """
    from shardcheck.memory.estimate import estimate

    try:
        est = estimate(job, job.device_choice)
        if est.train is None:
            return None, "; ".join(est.problems) or "no training estimate"
        return step_time(job, est), None
    except UnknownValue as exc:
        return None, str(exc)
    except (ZeroDivisionError, ValueError, KeyError, TypeError) as exc:  # a layout that does not build
        return None, f"the layout is not timed ({type(exc).__name__})"


def seconds_json(step: StepTime, digits: int | None = None) -> dict:
    """``total``, ``rollout``, ``train`` and each phase in seconds, for JSON: a phase that cannot run (math.inf, the
    rollout with no room for a request) is null, as JSON has no infinity."""

    def number(sec: float) -> float | None:
        if not math.isfinite(sec):
            return None
        return round(sec, digits) if digits is not None else sec

    return {
        "total": number(step.total),
        "rollout": number(step.rollout),
        "train": number(step.train),
        "phases": {name: number(sec) for name, sec in step.phases.items()},
    }


def describe(step: StepTime) -> str:
    """One line: the total and each phase, in seconds."""
    phases = ", ".join(f"{name.replace('_', ' ')} {sec:,.1f}" for name, sec in step.phases.items())
    if not math.isfinite(step.total):  # a phase that cannot run (the rollout with no room for one request)
        endless = ", ".join(name.replace("_", " ") for name, sec in step.phases.items() if not math.isfinite(sec))
        return f"no finite step: {endless} cannot run ({'; '.join(step.notes) or 'no room'})"
    return (
        f"{step.total:,.1f} s per step on {step.devices} × {step.device} ({phases}; update "
        f"{step.tflops_per_device:.0f} model TFLOP/s per device)"
    )
