"""Step-time terms that read launch settings: Megatron-Core DDP's overlap of the data-parallel communication,
and the account-for-embedding/loss pipeline split the planner holds from the script."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shardcheck.api import resolve_script
from shardcheck.estimate.step_time import step_time
from shardcheck.plan.search import adapter_for, plan_job, space_for
from shardcheck.plan.space import stage_options
from shardcheck.rules.memory import job_estimate

LLAMA_70B = (
    "#!/bin/bash\n"
    "torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py \\\n"
    "    --num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 --num-query-groups 8 \\\n"
    "    --vocab-size 128256 --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear \\\n"
    "    --untie-embeddings-and-output-weights --group-query-attention --kv-channels 128 \\\n"
    "    --seq-length 8192 --max-position-embeddings 8192 \\\n"
    "    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --context-parallel-size 2 \\\n"
    "    --sequence-parallel \\\n"
    "    --micro-batch-size 1 --global-batch-size 128 --use-distributed-optimizer --bf16 \\\n"
    "    --train-iters 1000 --lr 3e-4 {extra}\n"
)


def _step(tmp: Path, extra: str):
    path = tmp / f"run{abs(hash(extra))}.sh"
    path.write_text(LLAMA_70B.format(extra=extra))
    job = replace(resolve_script(path), device_choice="H100-SXM-80GB")
    return step_time(job, job_estimate(job))


def test_dp_overlap_hides_the_reduce_under_the_last_backward(tmp_path):
    plain = _step(tmp_path, "")
    assert plain.terms["dp_hidden"] == 0 and plain.terms["dp"] > 0
    grads = _step(tmp_path, "--overlap-grad-reduce")
    both = _step(tmp_path, "--overlap-grad-reduce --overlap-param-gather")
    # the same communication, part of it now under compute: exposed + hidden is what was charged before
    for s in (grads, both):
        assert s.terms["dp"] + s.terms["dp_hidden"] == pytest.approx(plain.terms["dp"])
    assert 0 < grads.terms["dp_hidden"] < both.terms["dp_hidden"]
    # what hides fits in one micro batch's time on the slowest stage (the last backward, the first forward)
    stage = plain.terms["compute"] + plain.terms["tp"] + plain.terms["cp"] + plain.terms["pp"]
    assert both.terms["dp_hidden"] <= stage * (1 + 1e-9)
    assert both.phases["update"] == pytest.approx(plain.phases["update"] - both.terms["dp_hidden"])
    # the compute and the pipeline do not change
    assert both.terms["compute"] == plain.terms["compute"] and both.terms["bubble"] == plain.terms["bubble"]


LLAMA_405B_SPLIT = LLAMA_70B.replace("--num-layers 80", "--num-layers 126").replace("--nnodes 8", "--nnodes 16")


def test_planner_holds_the_scripts_account_for_split(tmp_path):
    """126 layers over PP 8 split only when the embedding and the loss count as layers (Megatron-Bridge's
    Llama-3.1-405B recipe): the planner searches such splits and no first / last stage sizes with them."""
    path = tmp_path / "split.sh"
    path.write_text(
        LLAMA_405B_SPLIT.format(extra="--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split")
        .replace("--pipeline-model-parallel-size 4", "--pipeline-model-parallel-size 8")
        .replace("--context-parallel-size 2", "--context-parallel-size 1")
    )
    job = resolve_script(path)
    space = space_for(job, adapter_for(job))
    assert space.account == (True, True)
    options = list(stage_options(space, 8))
    assert (None, None, None) in options and (2, None, None) in options and (4, None, None) in options
    assert all(first is None and last is None for _, first, last in options)
    result = plan_job(job, device="H100-SXM-80GB", top=3)
    assert result.plans
    assert result.current is not None  # the script's own layout is in the space
    for plan in result.plans:
        lay = plan.job.layout("actor")
        assert lay.account_for_embedding.value and lay.account_for_loss.value
        assert plan.layout.first is None and plan.layout.last is None
