"""``shardcheck memory`` output: a table per pipeline stage class and phase, or JSON (version 1)."""

from __future__ import annotations

import json

from shardcheck.memory.devices import GIB
from shardcheck.report import escape

TRAIN_TERMS = (
    "weights",
    "grads",
    "optimizer",
    "gathered",
    "activations",
    "logits",
    "ref_weights",
    "critic_state",
    "actor_state",
    "workspace",
)
# What each term is and where its formula comes from (``--explain``).
EXPLAIN = {
    "params": "exact counts of megatron-core's GPTModel modules per device (shardcheck/memory/params.py; "
    "tested equal to GPTModel built on the meta device)",
    "weights": "parameters × megatron.dtype bytes (bf16: 2; --fp8-param-gather: 1), plus Transformer Engine's FP8 "
    "weight copies under FP8 compute (row-wise and column-wise, memory/estimate.py fp8_kernels)",
    "grads": "Megatron DDP main_grad buffer over all local parameters: fp32 (verl sets grad_reduce_in_fp32 unless the "
    "precision-aware optimizer uses 16-bit main_grads_dtype)",
    "optimizer": "Adam: fp32 master + exp_avg + exp_avg_sq; the distributed optimizer shards dense state over DP·CP "
    "and expert state over EDP; optimizer_cpu_offload moves the moments of optimizer_offload_fraction to the host, "
    "the fp32 master stays unless the precision-aware optimizer is on (HybridDeviceOptimizer, "
    "frameworks/memory_settings.py)",
    "activations": "per-layer bytes of Korthikanti et al. 2022 generalised to GQA/SwiGLU/MoE with flash attention "
    "(shardcheck/memory/activations.py) × micro batches in flight under 1F1B (PP − stage; interleaved: "
    "Megatron's warm-up count), + one recompute group with full recompute",
    "logits": "last stage, one micro batch: bf16 logits over vocab/TP + the fp32 copies the log-prob computation "
    "keeps (megatron-core's vocab-parallel cross-entropy: one; flash-attn's in-place kernel under FSDP: none) "
    "(+ two fp32 tensors for the entropy; one 4096-token chunk with use_fused_kernels)",
    "gathered": "FSDP only: the bf16 copy of the FSDP units gathered for compute (one decoder layer and the next "
    "with prefetch; the whole model when reshard_after_forward is off)",
    "ref_weights": "verl's reference model, colocated, unless ref.megatron.param_offload (verl keeps an FSDP ref "
    "on the host: CPUOffload / CPUOffloadPolicy)",
    "critic_state": "a colocated critic (verl: critic.enable, or adv_estimator gae) of the actor's model with a value "
    "head and the actor's sizes: its weights and grads unless critic param_offload, its optimizer "
    "state unless critic optimizer_offload",
    "actor_state": "the critic's update only: the actor's weights and grads (unless param_offload) and optimizer state "
    "(unless optimizer_offload) left on the device",
    "workspace": "transient tensors of the busiest layer that are not saved activations: cuBLAS workspaces (32 MiB "
    "per stream, taken from the caching allocator), the gradients flowing through one layer, its widest "
    "intermediate gradient (unfused attention: the s×s scores) (shardcheck/memory/overhead.py)",
    "allocated": "the sum of the terms above: what torch.cuda.max_memory_allocated reports at the step's peak",
    "total": "the device peak: allocated + the caching allocator's fragmentation (15 % of the reserved memory on "
    "the dynamic terms, GMLake, Guo et al. ASPLOS 2024) + 0.5 GiB outside the allocator (CUDA context, "
    "libraries, NCCL buffers); the MEM-TRAIN-OOM rule compares it with the device",
    "kv": "2 · layers · max(1, KV heads / TP) · head_dim · dtype bytes per token per device (MLA: the latent); vLLM "
    "replicates KV heads when TP exceeds them",
    "kv_budget": "gpu_memory_utilization × device − rollout weights − vLLM's profiling reserve (activations of "
    "max_num_batched_tokens, sampler logits of max_num_seqs, 1 GiB for CUDA graphs)",
}


def _g(n: float | None) -> str:
    return "-" if not n else f"{n / GIB:.2f}"


def _stage_table(t, device) -> list[str]:
    """One row per stage class: the terms that are not empty in any row, allocated, total, share of the device."""
    terms = [k for k in TRAIN_TERMS if any(s.bytes.get(k) for s in t.stages) or k in ("activations", "workspace")]
    head = ["stage", "layers", "params", *terms, "allocated", "total", "of device"]
    rows = [head]
    for s in t.stages:
        rows.append(
            [
                s.ranks_text(),
                str(s.layers),
                f"{s.params.total / 1e9:.3f} B",
                *(_g(s.bytes.get(k)) for k in terms),
                _g(s.bytes["allocated"]),
                _g(s.total),
                f"{100 * s.total / device.memory_bytes:.0f}%",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["    " + "  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]


def render_memory_text(results, *, explain: bool = False) -> str:
    out: list[str] = []
    for r in results:
        out.append(escape.file_name(r.path))
        if r.error is not None:
            out.append(f"  error: {r.error}")
            continue
        e = r.estimate
        if r.version:
            out.append(f"  version   {r.version}")
        out.append(f"  device    {e.device.name} ({e.device.memory_gib:.1f} GiB)")
        if e.device.note:
            out.append(f"            note: {e.device.note}")
        if e.train is not None:
            t = e.train
            bound = f"; sized at {t.batch_bound}" if t.batch_bound else ""
            out.append(
                f"  training (actor update peak per device, GiB; {t.tokens_per_micro_batch:,} tokens per micro batch, "
                f"sequences up to {t.sequence_length:,}{bound})"
            )
            out.extend(_stage_table(t, e.device))
            if e.train_at_budget is not None:
                top = max(e.train_at_budget.stages, key=lambda s: s.total)
                out.append(
                    f"    at the token budget instead (the bound without --sample-tokens): stage "
                    f"{top.ranks_text()} allocated {_g(top.bytes['allocated'])} GiB, total {_g(top.total)} GiB; "
                    f"the findings use --sample-tokens"
                )
            out.append(
                "    params by kind (stage: embedding / dense / expert / output): "
                + "; ".join(
                    f"{s.ranks_text()}: {s.params.embedding:,} / {s.params.dense:,} / {s.params.expert:,} / "
                    f"{s.params.output:,}"
                    for s in t.stages[:3]
                )
                + (" …" if len(t.stages) > 3 else "")
            )
        if e.critic_train is not None:
            c = e.critic_train
            out.append(f"  critic update (its own phase, GiB; {c.tokens_per_micro_batch:,} tokens per micro batch)")
            out.extend(_stage_table(c, e.device))
        if e.rollout is not None:
            ro = e.rollout
            reps = f", {ro.replicas} replicas" if ro.replicas is not None else ""
            out.append(f"  rollout ({ro.engine}: TP {ro.tp} · DP {ro.dp} · EP {ro.ep}{reps})")
            out.append(
                f"    weights {_g(ro.weights_bytes)} GiB per device; KV cache {ro.kv_bytes_per_token:,} bytes per "
                f"token per device{' (KV heads replicated over TP)' if ro.kv_replicated else ''}"
                + (
                    f"; recurrent state {ro.state_bytes_per_request:,} bytes per request"
                    if ro.state_bytes_per_request
                    else ""
                )
            )
            reserve = (
                f"after {_g(ro.reserve_bytes)} GiB profiling reserve"
                if ro.reserve_bytes
                else "the engine's activations live outside its memory fraction"
            )
            out.append(f"    KV budget {max(0, ro.kv_budget_bytes) / GIB:.2f} GiB per device ({reserve})")
            one = ro.request_bytes
            out.append(
                f"    one full request ({ro.request_tokens:,} tokens) {_g(one)} GiB per device: "
                f"{ro.max_concurrent_full_requests} at once per engine, {ro.concurrent_per_replica} per replica"
                + (f"; max_num_seqs {ro.max_num_seqs}" if ro.max_num_seqs else "")
                + (f"; each engine gets {ro.requests_per_engine} per step" if ro.requests_per_engine else "")
            )
            out.append(
                f"    training state left on the device during rollout: {ro.training_resident_bytes / GIB:.2f} GiB"
            )
        if r.step is not None:
            from shardcheck.estimate.step_time import describe

            out.append(f"  step time {describe(r.step)} — model, docs/step_time.md")
        if e.host is not None:
            h = e.host
            where = f", {_g(h.bytes_per_node)} GiB per node of {h.devices_per_node}" if h.bytes_per_node else ""
            out.append(
                f"  host      offloaded {_g(h.offloaded_bytes_per_device)} GiB per device{where}"
                + (f" ({'; '.join(h.terms)})" if h.terms else " (nothing offloaded)")
            )
        for p in e.problems:
            out.append(f"  unknown   {p}")
        for f in r.findings:
            where = f"{f.path}:{f.line}: " if f.line else ""
            out.append(f"  {where}{f.rule} {f.severity}: {f.message}")
            if f.fix:
                out.append(f"    fix: {f.fix}")
        if explain:
            out.append("  terms")
            for k, v in EXPLAIN.items():
                out.append(f"    {k}: {v}")
    return escape.text_lines(out)


def _train_json(t) -> dict | None:
    if t is None:
        return None
    return {
        "tokens_per_micro_batch": t.tokens_per_micro_batch,
        "sequence_length": t.sequence_length,
        "batch_bound": t.batch_bound,
        "stages": [
            {
                "stage": s.stage,
                "ranks": s.ranks,
                "layers": s.layers,
                "params": s.params.as_dict(),
                "bytes": {k: v for k, v in s.bytes.items() if k != "optimizer_host"},
                "micro_batches_in_flight": s.micro_batches_in_flight,
            }
            for s in t.stages
        ],
    }


def _rollout_json(ro) -> dict | None:
    if ro is None:
        return None
    return {
        "engine": ro.engine,
        "tp": ro.tp,
        "dp": ro.dp,
        "ep": ro.ep,
        "replicas": ro.replicas,
        "weights_bytes": ro.weights_bytes,
        "kv_bytes_per_token": ro.kv_bytes_per_token,
        "state_bytes_per_request": ro.state_bytes_per_request,
        "kv_budget_bytes": ro.kv_budget_bytes,
        "reserve_bytes": ro.reserve_bytes,
        "request_tokens": ro.request_tokens,
        "max_model_len": ro.max_model_len,
        "max_concurrent_full_requests": ro.max_concurrent_full_requests,
        "concurrent_full_requests_per_replica": ro.concurrent_per_replica,
        "max_num_seqs": ro.max_num_seqs,
        "requests_per_engine": ro.requests_per_engine,
        "training_resident_bytes": ro.training_resident_bytes,
        "kv_replicated": ro.kv_replicated,
    }


def render_memory_json(results) -> str:
    from shardcheck.estimate.step_time import seconds_json

    docs = []
    for r in results:
        if r.error is not None:
            docs.append({"path": r.path, "error": r.error})
            continue
        e = r.estimate
        h = e.host
        docs.append(
            {
                "path": r.path,
                "version": r.version,
                "device": {"name": e.device.name, "memory_bytes": e.device.memory_bytes, "note": e.device.note},
                "train": _train_json(e.train),
                "train_at_budget": _train_json(e.train_at_budget),
                "critic_train": _train_json(e.critic_train),
                "rollout": _rollout_json(e.rollout),
                "host": None
                if h is None
                else {
                    "offloaded_bytes_per_device": h.offloaded_bytes_per_device,
                    "devices_per_node": h.devices_per_node,
                    "bytes_per_node": h.bytes_per_node,
                    "terms": h.terms,
                },
                "problems": e.problems,
                "step_seconds": None if r.step is None else seconds_json(r.step),
                "findings": [
                    {"rule": f.rule, "severity": f.severity, "message": f.message, "line": f.line, "fix": f.fix}
                    for f in r.findings
                ],
            }
        )
    return json.dumps({"version": 1, "results": docs}, indent=2)
