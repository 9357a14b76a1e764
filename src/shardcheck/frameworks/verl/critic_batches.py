"""How verl's critic cuts its batches into micro-batches, by version: by tokens (a budget per pass) or by samples.
Read by the batch rules (rules/verl_batch.py) and the critic's memory estimate (verl/memory_settings.py)."""

from __future__ import annotations

from shardcheck.frameworks.verl.versions import ENGINE_WORKERS_ONLY, at_least
from shardcheck.job import Job
from shardcheck.origin import need

CRITIC = "critic"


def critic_packing(job: Job, static: bool) -> tuple[bool, tuple[str, ...]]:
    """Whether a Megatron critic packs its micro-batches by tokens, and the budget of each pass (update, values),
    in the judged verl version:

    - before 0.8.0 the legacy ``megatron_workers.CriticWorker`` (0.7.x builds it for a Megatron critic whatever
      ``use_legacy_worker_impl`` says) packs only with ``critic.use_dynamic_bsz``: the update by
      ``ppo_max_token_len_per_gpu``, ``compute_values`` by ``forward_max_token_len_per_gpu`` (megatron_workers.py,
      workers/critic/megatron_critic.py, verl 0.4.0 … 0.7.1);
    - from 0.8.0 the engine worker always packs (EngineConfig.use_dynamic_bsz = True, never set from the critic's
      key): the classic trainer gives the update ``ppo_max_token_len_per_gpu`` and the values
      ``ppo_infer_max_token_len_per_gpu`` (ppo/ray_trainer.py ``init_workers``, verl 0.8.0 … 0.9.1);
    - the v1 trainer (``trainer.use_v1``, 0.9.0 on, the default) gives both ``ppo_infer_max_token_len_per_gpu``
      (ppo/v1/trainer_base.py ``init_workers``, verl 0.9.0, 0.9.1).
    """
    if not at_least(job.framework_version, ENGINE_WORKERS_ONLY):
        return not static, (f"{CRITIC}.ppo_max_token_len_per_gpu", f"{CRITIC}.forward_max_token_len_per_gpu")
    if need(job.value("trainer.use_v1"), "trainer.use_v1"):
        return True, (f"{CRITIC}.ppo_infer_max_token_len_per_gpu",)
    return True, (f"{CRITIC}.ppo_max_token_len_per_gpu", f"{CRITIC}.ppo_infer_max_token_len_per_gpu")
