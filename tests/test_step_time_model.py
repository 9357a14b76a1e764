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


# --- precision and the GEMM roofline (docs/step_time.md "Compute") ---------------------------------------------


def test_fp8_halves_the_linear_gemms_and_adds_their_casts(tmp_path):
    """--fp8-format runs the Transformer Engine GEMMs at the FP8 peak (twice bf16 on H100); the attention core,
    the output layer and the memory-bound passes stay, and the inputs' casts are added."""
    from shardcheck.estimate.speeds import speeds_for
    from shardcheck.estimate.step_time import Shards, architecture_of, layer_seconds

    bf16 = _step(tmp_path, "")
    fp8 = _step(tmp_path, "--fp8-format hybrid --fp8-recipe tensorwise")
    assert fp8.terms["compute"] < bf16.terms["compute"]
    assert fp8.train_flops == bf16.train_flops  # model FLOPs do not depend on the precision
    path = tmp_path / "arch.sh"
    path.write_text(LLAMA_70B.format(extra=""))
    arch = architecture_of(resolve_script(path).model)
    sp = speeds_for("H100-SXM-80GB")
    assert (sp.flops, sp.fp8_flops) == (989e12, 1979e12)  # the H100 SXM datasheet (FP8: half its sparse figure)
    g = Shards(tp=4, ep=1, etp=4, sequence_parallel=True)
    lin16, core16, mem16 = layer_seconds(arch, False, 4096.0, g, 4096.0, sp, False, False)
    lin8, core8, mem8 = layer_seconds(arch, False, 4096.0, g, 4096.0, sp, True, False)
    lin8c, _, mem8c = layer_seconds(arch, False, 4096.0, g, 4096.0, sp, True, True)
    assert lin8 == pytest.approx(lin16 * sp.flops / sp.fp8_flops)  # compute-bound GEMMs at the FP8 peak
    assert core8 == core16  # the attention core stays bf16
    assert mem16 < mem8 < mem8c  # the casts, and current scaling's amax read


def test_fp8_on_a_device_without_fp8_is_unknown(tmp_path):
    from shardcheck.origin import UnknownValue

    path = tmp_path / "a100.sh"
    path.write_text(LLAMA_70B.format(extra="--fp8-format e4m3"))
    job = replace(resolve_script(path), device_choice="A100-80GB-SXM")
    with pytest.raises(UnknownValue, match="no FP8 peak"):
        step_time(job, job_estimate(job))


def test_narrow_experts_with_few_tokens_are_memory_bound():
    """The roofline by GEMM shape: an expert 768 wide that gets a few tokens streams its weights (memory-bound);
    with thousands of tokens the same GEMM is compute-bound."""
    from shardcheck.estimate.speeds import speeds_for
    from shardcheck.estimate.step_time import HBM_EFFICIENCY, gemm_seconds

    sp = speeds_for("H100-SXM-80GB")
    few = gemm_seconds(16, 2048, 1536, sp, False, count=16)
    weights = 16 * 2048 * 1536 * 2
    assert few > 2 * 16 * 2048 * 1536 * 16 / sp.achieved_flops  # more than its FLOPs would take
    assert few >= weights / (sp.hbm * HBM_EFFICIENCY)
    many = gemm_seconds(8192, 2048, 1536, sp, False, count=16)
    assert many == pytest.approx(2 * 8192 * 2048 * 1536 * 16 / sp.achieved_flops)


def test_ep_all_to_all_reaches_deepeps_measured_share_of_nvlink():
    """The EP all-to-all inside a node moves at the share of the scale-up link DeepEP measured (H800: 153 / 158 GB/s
    of 200; B200: 726 / 740 of 900: device_speeds.json, docs/step_time.md); the share for other nodes at the NIC;
    a device without a measurement at its link figure."""
    from shardcheck.estimate.speeds import speeds_for
    from shardcheck.estimate.step_time import COLLECTIVE_LATENCY, all_to_all_time

    h100, b200, mi300x = speeds_for("H100-SXM-80GB"), speeds_for("B200-HGX"), speeds_for("MI300X")
    assert h100.a2a_intra_efficiency == pytest.approx((153 + 158) / 2 / 200, abs=0.005)
    assert b200.a2a_intra_efficiency == pytest.approx((726 + 740) / 2 / 900, abs=0.005)
    assert mi300x.a2a_intra_efficiency == 1.0
    sent = 128e6
    for sp in (h100, b200, mi300x):
        intra = all_to_all_time(sent, 8, 8, sp)
        link = sp.intra_node * sp.a2a_intra_efficiency
        assert intra == pytest.approx(sent * 7 / 8 / link + COLLECTIVE_LATENCY["intra"])
    assert all_to_all_time(sent, 8, 8, h100) > sent * 7 / 8 / h100.intra_node  # slower than the datasheet's link
    # EP 16 over two nodes: 8 of the 15 peers are across the NIC, which DeepEP's internode runs reach in full
    away, near = sent * 15 / 16 * 8 / 15, sent * 15 / 16 * 7 / 15
    expected = away / h100.inter_node + near / (h100.intra_node * 0.78) + COLLECTIVE_LATENCY["inter"]
    assert all_to_all_time(sent, 16, 16, h100) == pytest.approx(expected)


QWEN3_30B = (
    "#!/bin/bash\n"
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\\n"
    "    --num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 --num-query-groups 4 \\\n"
    "    --vocab-size 151936 --qk-layernorm --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 \\\n"
    "    --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear \\\n"
    "    --untie-embeddings-and-output-weights --group-query-attention --kv-channels 128 \\\n"
    "    --seq-length 4096 --max-position-embeddings 4096 \\\n"
    "    --pipeline-model-parallel-size 2 {vpp} --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 \\\n"
    "    --micro-batch-size 1 --global-batch-size 512 --use-distributed-optimizer --bf16 {extra}\n"
)


def _moe_step(tmp: Path, vpp: str, extra: str):
    path = tmp / f"moe{abs(hash((vpp, extra)))}.sh"
    path.write_text(QWEN3_30B.format(vpp=vpp, extra=extra))
    job = replace(resolve_script(path), device_choice="H100-SXM-80GB")
    return step_time(job, job_estimate(job))


def test_ep_all_to_all_overlap_only_where_megatron_core_accepts_it(tmp_path):
    """--overlap-moe-expert-parallel-comm hides the EP all-to-all under another micro batch's compute; with PP > 1
    megatron-core asserts a virtual pipeline (transformer_config.py), so without one nothing is hidden."""
    flag = "--overlap-moe-expert-parallel-comm --delay-wgrad-compute"
    vpp = "--num-virtual-stages-per-pipeline-rank 12"
    plain = _moe_step(tmp_path, vpp, "")
    hidden = _moe_step(tmp_path, vpp, flag)
    assert plain.terms["ep"] > 0 and hidden.terms["ep"] < plain.terms["ep"]
    assert hidden.terms["compute"] == plain.terms["compute"]
    no_vpp = _moe_step(tmp_path, "", "")
    refused = _moe_step(tmp_path, "", flag)
    assert refused.terms["ep"] == no_vpp.terms["ep"] > 0


def test_a2a_overlap_rule_reads_verl_overrides(tmp_path):
    """MCORE-TC-MOE-A2A-OVERLAP on a verl launch: the actor's override_transformer_config; verl's provider sets
    the alltoall dispatcher, so EP decides (its Megatron-LM side is the rule's case file)."""
    from shardcheck.rules.examples import verl_launch
    from shardcheck.rules.registry import run_rules

    otc = "+actor_rollout_ref.actor.megatron.override_transformer_config.overlap_moe_expert_parallel_comm=True"
    ep = "actor_rollout_ref.actor.megatron.expert_model_parallel_size"
    fired = {}
    for size in (1, 8):
        path = tmp_path / f"verl{size}.sh"
        path.write_text(verl_launch(f"{otc} {ep}={size}"))
        fired[size] = [f.message for f in run_rules(resolve_script(path))[0] if f.rule == "MCORE-TC-MOE-A2A-OVERLAP"]
    assert len(fired[1]) == 1 and "only supported with expert model parallelism" in fired[1][0]
    assert fired[8] == []
