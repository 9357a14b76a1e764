"""The SGLang server of ``main_generation_server``'s replicas: main_ppo's (its rollout keys are main_ppo's, and
``get_rollout_replica_class`` starts the same server class; verl/trainer/main_generation_server.py, verl 0.9.1)."""

from __future__ import annotations

from shardcheck.frameworks.verl.rollout import sglang_server

__all__ = ["sglang_server"]
