"""slime's rollout servers: how slime starts SGLang for an engine.

slime/backends/sglang_utils/sglang_engine.py ``_compute_server_args`` (THUDM/slime, main of
2026-08-21): ``tp_size = --rollout-num-gpus-per-engine // --sglang-pp-size``, ``dp_size =
--sglang-dp-size``, ``ep_size = --sglang-ep-size``; ``--sglang-enable-dp-attention`` is passed on
as ``enable_dp_attention``.
"""

from __future__ import annotations

from shardcheck.frameworks.sglang import SglangServer
from shardcheck.job import Job
from shardcheck.origin import need


def sglang_server(job: Job) -> SglangServer | None:
    """The SGLang server of each rollout engine (slime's rollout is always SGLang)."""
    if job.rollout is None:
        return None
    per_engine = need(job.rollout.tp, "--rollout-num-gpus-per-engine")
    pp = need(job.rollout.pp, "--sglang-pp-size")
    dp = need(job.rollout.dp, "--sglang-dp-size")
    ep_t = job.rollout.ep if job.rollout.ep is not None else job.value("--sglang-ep-size")
    attn_t = (
        job.rollout.dp_attention if job.rollout.dp_attention is not None else job.value("--sglang-enable-dp-attention")
    )
    if not pp or per_engine % pp:
        return None  # SLIME-SGL-PP reports it
    tp_size = per_engine // pp
    said = f"--rollout-num-gpus-per-engine {per_engine}" + (f" / --sglang-pp-size {pp}" if pp > 1 else "")
    return SglangServer(
        tp_size=tp_size,
        dp=dp,
        ep=need(ep_t, "--sglang-ep-size"),
        dp_attention=bool(need(attn_t, "--sglang-enable-dp-attention")),
        sizes=(job.rollout.tp, job.rollout.pp),
        ep_setting=ep_t,
        dp_attention_setting=attn_t,
        tp_said=said,
        dp_attention_key="--sglang-enable-dp-attention",
        attention_tp_said=f"tp_size {tp_size} / --sglang-dp-size {dp}",
        ep_said="an --sglang-ep-size",
    )
