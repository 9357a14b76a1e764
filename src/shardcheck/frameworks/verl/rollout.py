"""verl's rollout servers: how verl 0.9.1 starts SGLang for a replica.

verl/workers/rollout/sglang_rollout/async_sglang_server.py ``SGLangHttpServer.launch_server``
starts one SGLang engine per replica with ``tp_size = rollout TP · DP`` (the whole replica),
``dp_size = rollout DP``, ``ep_size = rollout EP``, ``mem_fraction_static =
gpu_memory_utilization`` and ``engine_kwargs.sglang.*`` applied last.
"""

from __future__ import annotations

from shardcheck.frameworks.sglang import SglangServer
from shardcheck.job import Job
from shardcheck.origin import need

RO = "actor_rollout_ref.rollout"
SGL = f"{RO}.engine_kwargs.sglang"


def sglang_server(job: Job) -> SglangServer | None:
    """The SGLang server of each replica; None when the rollout is not SGLang."""
    if job.rollout is None or need(job.value(f"{RO}.name"), f"{RO}.name") != "sglang":
        return None
    tp = need(job.rollout.tp, f"{RO}.tensor_model_parallel_size")
    dp = need(job.rollout.dp, f"{RO}.data_parallel_size")
    ep_t = job.value(f"{RO}.expert_parallel_size")
    ep = need(ep_t, f"{RO}.expert_parallel_size")
    attn_t = job.value(f"{SGL}.enable_dp_attention")
    return SglangServer(
        tp_size=tp * dp,
        dp=dp,
        ep=ep,
        dp_attention=bool(need(attn_t, f"{SGL}.enable_dp_attention")),
        sizes=(job.rollout.tp, job.rollout.dp),
        ep_setting=ep_t,
        dp_attention_setting=attn_t,
        tp_said=f"rollout TP {tp} · DP {dp} = {tp * dp}",
        dp_attention_key=f"{SGL}.enable_dp_attention=True",
        attention_tp_said=f"rollout TP {tp}",
        ep_said="a rollout EP (= TP · DP)",
    )
