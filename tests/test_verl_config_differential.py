"""shardcheck's critic and rollout config rules against verl 0.9.1's own dataclasses, on random configs.

Each random launch is resolved by shardcheck; its resolved values are handed to verl's
``CriticConfig`` (``__post_init__`` and ``validate``) and ``RolloutConfig`` (``__post_init__``), run
in a subprocess (tests/verl_config_worker.py). verl raising must coincide with shardcheck's error.
Needs the verl 0.9.1 source (the folder in VERL_SOURCE); skipped without it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from test_rules import rule_findings, script

SOURCE = Path(os.environ.get("VERL_SOURCE", ""))
pytestmark = pytest.mark.skipif(
    not os.environ.get("VERL_SOURCE") or not (SOURCE / "verl" / "workers" / "config" / "critic.py").is_file(),
    reason="verl 0.9.1 source not found (set VERL_SOURCE)",
)
RO = "actor_rollout_ref.rollout"


def _verl_verdicts(cases: list[dict]) -> list[str | None]:
    worker = Path(__file__).with_name("verl_config_worker.py")
    run = subprocess.run(
        [sys.executable, str(worker), str(SOURCE)],
        input=json.dumps(cases),
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        cwd="/tmp",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def _none(word):
    return "null" if word is None else word


def test_critic_config_rules_agree_with_verl(tmp_path):
    rng = random.Random(3)
    cases, ours = [], []
    for _ in range(60):
        mini, tbs, n = rng.choice([1, 2, 3, 4, 8, 16]), rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 2])
        per_gpu, legacy, dyn = rng.choice([None, 1, 2]), rng.choice([None, None, 1, 2, 4]), rng.random() < 0.25
        words = (
            f"algorithm.adv_estimator=gae data.train_batch_size={tbs} "
            f"actor_rollout_ref.actor.ppo_mini_batch_size={tbs} "
            f"{RO}.n={n} critic.ppo_mini_batch_size={mini} critic.ppo_micro_batch_size_per_gpu={_none(per_gpu)} "
            f"critic.ppo_micro_batch_size={_none(legacy)} critic.use_dynamic_bsz={dyn}"
        )
        found = []
        for rule_id in ("VERL-ACT-MBS", "VERL-ACT-TBS-MINI"):
            hits, result = rule_findings(tmp_path, script(words), rule_id)
            found += [f.message for f in hits if f.role == "critic"]
        v = result.job.values
        cases.append(
            {
                "kind": "critic",
                "validate": {"n_gpus": 8, "train_batch_size": tbs},
                "fields": {
                    "ppo_mini_batch_size": v["critic.ppo_mini_batch_size"].value,
                    "ppo_micro_batch_size": v["critic.ppo_micro_batch_size"].value,
                    "ppo_micro_batch_size_per_gpu": v["critic.ppo_micro_batch_size_per_gpu"].value,
                    "use_dynamic_bsz": v["critic.use_dynamic_bsz"].value,
                    "rollout_n": n,
                },
            }
        )
        ours.append((words, found))
    theirs = _verl_verdicts(cases)
    wrong = [(w, f, t) for (w, f), t in zip(ours, theirs) if bool(f) != bool(t)]
    assert not wrong, wrong[:5]
    assert any(theirs) and not all(theirs)  # both verdicts occur


def test_rollout_config_rules_agree_with_verl(tmp_path):
    rng = random.Random(5)
    cases, ours = [], []
    for _ in range(60):
        name, mode = rng.choice(["vllm", "sglang", "trtllm"]), rng.choice(["async", "async", "sync"])
        tp, dp, pp, ep = rng.choice([1, 2, 4]), rng.choice([1, 2]), rng.choice([1, 1, 2]), rng.choice([1, 2, 4, 8])
        words = (
            f"{RO}.name={name} {RO}.mode={mode} {RO}.tensor_model_parallel_size={tp} {RO}.data_parallel_size={dp} "
            f"{RO}.pipeline_model_parallel_size={pp} {RO}.expert_parallel_size={ep}"
        )
        found = []
        for rule_id in ("VERL-RO-EP", "VERL-RO-PP", "VERL-RO-MODE"):
            hits, _ = rule_findings(tmp_path, script(words, gpus=16), rule_id)
            found += [f.message for f in hits]
        cases.append(
            {
                "kind": "rollout",
                "fields": {
                    "name": name,
                    "mode": mode,
                    "tensor_model_parallel_size": tp,
                    "data_parallel_size": dp,
                    "pipeline_model_parallel_size": pp,
                    "expert_parallel_size": ep,
                },
            }
        )
        ours.append((words, found))
    theirs = _verl_verdicts(cases)
    wrong = [(w, f, t) for (w, f), t in zip(ours, theirs) if bool(f) != bool(t)]
    assert not wrong, wrong[:5]
    assert any(theirs) and not all(theirs)
