"""Replaying public peak-memory measurements: the prediction that compares with each (docs/validation.md).

Megatron-LM logs ``mem-max-allocated-bytes`` on the last rank (the tensorboard writer's), which is on the
last pipeline stage; the comparable prediction is that stage's ``allocated`` figure.
"""

from __future__ import annotations

from shardcheck.job import Job
from shardcheck.memory.estimate import estimate


def predict(job: Job, device: str) -> int | None:
    """The predicted ``allocated`` bytes of the job's last pipeline stage on ``device`` (None: unknown)."""
    est = estimate(job, device)
    if est.train is None:
        return None
    last = max(r for s in est.train.stages for r in s.ranks)
    return next(s.bytes["allocated"] for s in est.train.stages if last in s.ranks)
