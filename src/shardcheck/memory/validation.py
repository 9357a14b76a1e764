"""Replaying public peak-memory measurements: the prediction that compares with each (docs/validation.md).

Megatron-LM logs ``mem-max-allocated-bytes`` on the last rank (the tensorboard writer's), which is on the
last pipeline stage; the comparable prediction is that stage's ``allocated`` figure.
"""

from __future__ import annotations

from pathlib import Path


def predict(path: str | Path, device: str, env: dict[str, str] | None = None) -> int | None:
    """The predicted ``allocated`` bytes of the last pipeline stage of the launch at ``path`` (None: unknown)."""
    from shardcheck.api import resolve_script
    from shardcheck.memory.estimate import estimate

    est = estimate(resolve_script(path, env or {}), device)
    if est.train is None:
        return None
    last = max(r for s in est.train.stages for r in s.ranks)
    return next(s.bytes["allocated"] for s in est.train.stages if last in s.ranks)
