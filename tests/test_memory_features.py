"""Issue 13's items: kernels and dropout from flags, MTP, layout strings, fine-grained offload, Megatron-FSDP,
fp8 parameters, dynamic batch size at given sample lengths, and the allocated / total figures."""

from __future__ import annotations

import random

import pytest
from test_memory_flags import MLM, est, stage, variant

from shardcheck.cli import main
from shardcheck.frameworks.megatron.layout_string import LayoutStringError, parse_layout
from shardcheck.memory.params import Sharding, mtp_params
from shardcheck.models.architecture import architecture

VPP = "--num-virtual-stages-per-pipeline-rank 2"


def last(e):
    return stage(e, max(r for s in e.train.stages for r in s.ranks))


# ---- kernels and dropout (items 3, 4) ----


def test_unfused_attention_and_local_impl_keep_the_softmax(tmp_path):
    base, _ = est(MLM)
    unfused, _ = est(variant(tmp_path, MLM, "--bf16", "--bf16 --attention-backend unfused"))
    local, _ = est(variant(tmp_path / "l", MLM, "--bf16", "--bf16 --transformer-impl local"))
    a, u, l_ = (stage(x, 0).bytes["activations"] for x in (base, unfused, local))
    assert u == l_ > 2 * a  # seq 8192: the s-wide softmax (and its dropout) dominate


def test_dropout_masks_follow_the_flags(tmp_path):
    base, _ = est(MLM)  # Megatron-LM's defaults: hidden and attention dropout 0.1
    none, _ = est(variant(tmp_path, MLM, "--bf16", "--bf16 --hidden-dropout 0 --attention-dropout 0.0"))
    assert stage(none, 0).bytes["activations"] < stage(base, 0).bytes["activations"]
    # flash attention: only the hidden dropout's two 1-byte masks per layer and token (SP over TP 2)
    e = stage(base, 0)
    tokens, layers = 8192, 12  # 48 layers over PP 4; stage 0 holds its micro batches in flight
    per_layer = (stage(base, 0).bytes["activations"] - stage(none, 0).bytes["activations"]) / e.micro_batches_in_flight
    assert per_layer == pytest.approx(layers / 2 * 2 * 2048 * tokens / 2, rel=0.02)  # per chunk of VPP 2


# ---- MTP (item 6) ----


def test_mtp_adds_a_layer_its_norms_projection_and_logits_to_the_last_stage(tmp_path):
    base, _ = est(MLM)
    mtp, _ = est(variant(tmp_path, MLM, "--bf16", "--bf16 --mtp-num-layers 1"))
    first_b, first_m = stage(base, 0), stage(mtp, 0)
    assert first_b.params == first_m.params and first_b.bytes == first_m.bytes
    b, m = last(base), last(mtp)
    _, result = est(variant(tmp_path / "a", MLM, "--bf16", "--bf16 --mtp-num-layers 1"))
    arch = architecture(result.job.model)
    dense, expert = mtp_params(arch, Sharding(2, 4, 1, 4, 128))
    # the MTP depth's layer and projection, and the embedding it needs on the last stage
    assert m.params.total - b.params.total == dense + expert + m.params.embedding
    # vocab 50257 padded to 128·TP and split over TP 2, and the learned position table (32768 rows)
    assert m.params.embedding == (50432 // 2 + 32768) * 2048
    assert m.bytes["activations"] > b.bytes["activations"] and m.bytes["logits"] > b.bytes["logits"]


# ---- layout strings (item 6) ----


def test_layout_string_splits_like_megatron_core():
    """Differential: every rank's decoder layers equal PipelineParallelLayerLayout.get_layer_id_list."""
    layout_mod = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    from megatron.core import parallel_state
    from megatron.core.transformer.enums import LayerType

    rng = random.Random(13)
    for _ in range(60):
        pp, vpp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3])
        counts = [rng.randint(0, 3) for _ in range(pp * vpp)]
        stages = ["t" * n for n in counts]
        stages[0] = "E" + stages[0]
        stages[-1] = stages[-1] + "L"
        text = "|".join(stages)
        ours = parse_layout(text, pp, sum(counts))
        theirs = layout_mod.PipelineParallelLayerLayout(text, pp)
        parallel_state.set_virtual_pipeline_model_parallel_world_size(vpp if vpp > 1 else None)
        for rank in range(pp):
            for chunk in range(vpp):
                expected = theirs.get_layer_id_list(LayerType.decoder, vp_stage=chunk, pp_rank=rank)
                assert list(ours[rank].chunk_layers[chunk]) == expected, (text, rank, chunk)
    parallel_state.set_virtual_pipeline_model_parallel_world_size(None)


def test_layout_string_unrolls_and_places_mtp():
    ranks = parse_layout("Et*3|(tt|)*6mL", 2, 15)
    assert [r.chunks for r in ranks] == [4, 4]
    assert ranks[0].decoder_layers == (0, 1, 2, 5, 6, 9, 10, 13, 14) and ranks[0].embedding and not ranks[0].loss
    assert ranks[1].mtp_layers == 1 and ranks[1].loss
    with pytest.raises(LayoutStringError):
        parse_layout("Et*3|tX|L", 3, 4)
    with pytest.raises(LayoutStringError):
        parse_layout("(t|)*99999999", 1, 1)  # bounded, never expanded


def test_layout_string_drives_the_estimate(tmp_path):
    path = variant(tmp_path, MLM, VPP, "--pipeline-model-parallel-layout 'Et*11|t*12|t*12|t*13L'")
    e, _ = est(path)
    assert [stage(e, i).layers for i in range(4)] == [11, 12, 12, 13]
    bad, _ = est(variant(tmp_path / "b", MLM, VPP, "--pipeline-model-parallel-layout 'Et*11|t*12|t*12|t*12L'"))
    assert bad.train is None and any("47 decoder layers" in p for p in bad.problems)


# ---- fine-grained activation offload (item 6) ----


def test_fine_grained_offload_moves_the_listed_modules_inputs(tmp_path):
    base, _ = est(MLM)
    off, _ = est(
        variant(
            tmp_path,
            MLM,
            "--bf16",
            "--bf16 --fine-grained-activation-offloading --offload-modules core_attn attn_proj expert_fc1",
        )
    )
    ignored, _ = est(variant(tmp_path / "i", MLM, "--bf16", "--bf16 --offload-modules core_attn"))
    assert stage(off, 0).bytes["activations"] < stage(base, 0).bytes["activations"]
    assert stage(ignored, 0).bytes["activations"] == stage(base, 0).bytes["activations"]  # the switch is off


# ---- Megatron-FSDP and fp8 parameters (item 6) ----


def test_megatron_fsdp_shards_weights_and_grads_over_dp(tmp_path):
    base, _ = est(MLM)
    # optim_grads_params is the default from core_v0.19 on (core_v0.16.1, the minor judged here: no_shard)
    fsdp, _ = est(
        variant(
            tmp_path, MLM, "--bf16", "--bf16 --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"
        )
    )
    grads_only, _ = est(
        variant(
            tmp_path / "g", MLM, "--bf16", "--bf16 --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads"
        )
    )
    b, f, g = stage(base, 1), stage(fsdp, 1), stage(grads_only, 1)
    dense = b.params.embedding + b.params.dense + b.params.output
    # DP·CP 2 for dense parameters, EDP 1 for the experts
    assert f.bytes["weights"] == int((dense / 2 + b.params.expert) * 2)
    assert f.bytes["grads"] == int((dense / 2 + b.params.expert) * 4) == g.bytes["grads"]
    assert g.bytes["weights"] == b.bytes["weights"] and f.bytes["gathered"] > 0 == g.bytes["gathered"]


def test_fp8_param_gather_keeps_one_byte_weights(tmp_path):
    path = variant(tmp_path, MLM, "--bf16", "--bf16 --fp8-format hybrid --fp8-param-gather")
    # Blackwell: FP8 GEMMs take any layout, so the 1-byte parameter is all (TE is_non_tn_fp8_gemm_supported)
    base, _ = est(MLM, "b200")
    fp8, _ = est(path, "b200")
    assert stage(fp8, 0).bytes["weights"] * 2 == stage(base, 0).bytes["weights"]
    assert stage(fp8, 0).bytes["optimizer"] == stage(base, 0).bytes["optimizer"]  # the fp32 main copy stays
    # Hopper: each linear weight also keeps its FP8 transpose (TE post_all_gather_processing), 1 byte more
    base, _ = est(MLM)
    fp8, _ = est(path)
    p = stage(base, 0).params
    assert stage(fp8, 0).bytes["weights"] == p.total + p.dense + p.expert


# ---- allocated and total (item 3 of the build list) ----


def test_total_is_allocated_plus_fragmentation_and_outside_memory():
    from shardcheck.memory.overhead import FRAGMENTATION, OUTSIDE_ALLOCATOR, device_total

    terms = {"weights": 10, "grads": 20, "optimizer": 30, "activations": 850, "allocated": 910}
    assert device_total(terms) == int(60 + 850 / (1 - FRAGMENTATION) + OUTSIDE_ALLOCATOR)
    small = {"weights": 10, "activations": 100, "allocated": 110}
    large = {"weights": 10, "activations": 1000, "allocated": 1010}
    assert device_total(large) - device_total(small) > 900  # scales with the job, no flat constant


def test_memory_json_has_allocated_beside_total(capsys):
    assert main(["memory", str(MLM), "--device", "h200", "--format", "json"]) in (0, 1)
    import json

    doc = json.loads(capsys.readouterr().out)
    for s in doc["results"][0]["train"]["stages"]:
        assert s["bytes"]["allocated"] < s["bytes"]["total"]
    assert main(["memory", str(MLM), "--device", "h200"]) in (0, 1)
    assert "allocated" in capsys.readouterr().out


# ---- dynamic batch size at given sample lengths ----


def test_sample_tokens_size_dynamic_batches_and_say_which_bound(tmp_path):
    from test_rules import FITS, A, script

    from shardcheck.api import memory

    path = tmp_path / "run.sh"
    # 64 samples per step over DP 8: 8 per rank, 24,000 tokens at a mean of 3,000 — one micro batch
    path.write_text(
        script(f"{FITS} {A}.use_dynamic_bsz=True {A}.ppo_max_token_len_per_gpu=65536", nodes=4).replace(
            f"{A}.ppo_mini_batch_size=1441440", f"{A}.ppo_mini_batch_size=64"
        )
    )
    bound = memory(path, device="h200").estimate
    given = memory(path, device="h200", sample_tokens=(3000, 12000)).estimate
    assert bound.train.batch_bound.startswith("the token budget") and bound.train_at_budget is None
    assert given.train.batch_bound == "--sample-tokens 3000,12000"
    assert given.train.tokens_per_micro_batch == 24_000 < bound.train.tokens_per_micro_batch
    assert max(s.bytes["activations"] for s in given.train.stages) < max(
        s.bytes["activations"] for s in bound.train.stages
    )
    # the bound stays in the report beside the figure the findings use
    assert [s.bytes for s in given.train_at_budget.stages] == [s.bytes for s in bound.train.stages]


def test_sample_tokens_option_rejects_bad_values(capsys):
    assert main(["memory", "--sample-tokens", "3000,100"]) == 2  # a usage error: one line, exit 2
    assert "MAX ≥ MEAN" in capsys.readouterr().err


# ---- the critic's own update phase (item 6) ----


def test_the_critic_update_holds_its_state_activations_and_the_actors_state(tmp_path):
    from test_rules import FITS, M, script

    from shardcheck.api import resolve_script
    from shardcheck.memory.estimate import estimate

    gae = (
        f"{FITS} algorithm.adv_estimator=gae critic.model.path=/models/Qwen3-30B-A3B "
        "critic.ppo_micro_batch_size_per_gpu=2"
    )
    path = tmp_path / "run.sh"
    path.write_text(script(gae, nodes=4))
    # verl 0.7.1's legacy critic worker cuts micro-batches by samples without use_dynamic_bsz (0.8.0 on, the engine
    # worker packs by tokens: tests/test_old_verl_estimates.py)
    legacy = ("0.7.1", "the test")
    e = estimate(resolve_script(path, verl_version=legacy), "h200")
    actor, critic = e.train.stages[0], e.critic_train.stages[0]
    a, c = actor.bytes, critic.bytes
    assert c["actor_state"] == a["weights"] + a["grads"] + a["optimizer"]
    assert c["weights"] == a["weights"] and "critic_state" not in c  # stage 0: no output layer, no head
    # two samples per critic micro batch against the actor's one: twice the activations
    assert c["activations"] == pytest.approx(2 * a["activations"], rel=1e-6)
    assert e.critic_train.tokens_per_micro_batch == 2 * e.train.tokens_per_micro_batch
    path.write_text(script(f"{gae} {M}.param_offload=True {M}.optimizer_offload=True", nodes=4))
    offloaded = estimate(resolve_script(path, verl_version=legacy), "h200").critic_train.stages[0].bytes
    assert offloaded["actor_state"] == 0 and offloaded["allocated"] < c["allocated"]
    # no critic, no phase
    path.write_text(script(f"{FITS} algorithm.adv_estimator=grpo", nodes=4))
    assert estimate(resolve_script(path), "h200").critic_train is None


def test_gpu_measurement_script_builds_its_launches_and_configs_without_a_gpu():
    """bench/gpu_memory_measure.py: every layout's launch is one shardcheck estimates, and its megatron-core
    TransformerConfig is valid (the GPU part runs only where a GPU is)."""
    pytest.importorskip("megatron.core")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "bench" / "gpu_memory_measure.py"
    spec = importlib.util.spec_from_file_location("gpu_memory_measure", path)
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    for layout in mod.LAYOUTS:
        assert mod.predict(layout) > 0
        config = mod._config(layout)
        assert config.num_layers == layout.layers and (config.num_moe_experts or 0) == layout.experts
