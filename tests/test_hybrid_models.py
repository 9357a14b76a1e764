"""Architectures read from their HF config since issue 12: Qwen3-Next and Qwen3.5 (Gated DeltaNet linear
attention with gated full attention), and the MTP layers of DeepSeek-V3 / MiMo / Qwen3.5 where verl builds them.

Parameter counts are compared with megatron-core's own GPTModel built on the meta device (tests/oracle)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_memory import arch_of
from test_rules import M, script

from shardcheck.api import memory
from shardcheck.frameworks.megatron.pipeline import split_layers, stage_layer_indices
from shardcheck.frameworks.memory_settings import Recompute
from shardcheck.job import ModelFacts
from shardcheck.memory.activations import Parallel, layer_bytes
from shardcheck.memory.estimate import kv_bytes_per_token, state_bytes_per_request
from shardcheck.memory.params import Sharding, mtp_params, stage_params
from shardcheck.models.architecture import NotModelled, architecture
from shardcheck.models.facts import facts_from_config
from shardcheck.origin import Origin

# The toy configs of Megatron-Bridge's conversion tests (NVIDIA-NeMo/Megatron-Bridge, commit 067f987,
# tests/functional_tests/test_groups/models/qwen/test_qwen35_conversion.py HF_QWEN35_TOY_MODEL_CONFIG and
# HF_QWEN35_MOE_TOY_MODEL_CONFIG), the fields shardcheck reads; ``mtp_num_hidden_layers`` added for the MTP cases.
QWEN35_TOY = {
    "model_type": "qwen3_5_text",
    "attention_bias": False,
    "full_attention_interval": 4,
    "head_dim": 64,
    "hidden_size": 256,
    "intermediate_size": 512,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 32,
    "linear_num_key_heads": 4,
    "linear_num_value_heads": 4,
    "linear_value_head_dim": 32,
    "max_position_embeddings": 32768,
    "num_attention_heads": 12,
    "num_hidden_layers": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": False,
    "vocab_size": 248320,
}
QWEN35_MOE_TOY = {
    **QWEN35_TOY,
    "model_type": "qwen3_5_moe_text",
    "hidden_size": 128,
    "moe_intermediate_size": 256,
    "num_attention_heads": 16,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "shared_expert_intermediate_size": 512,
}


def facts(config: dict, name: str = "toy") -> ModelFacts:
    return facts_from_config(config, name, "test", Origin(kind="model", text=name))


def first_layers(arch, layers: int):
    """The first ``layers`` layers of ``arch`` (a meta-device build of a whole 80B model is slow)."""
    return dataclasses.replace(
        arch,
        num_layers=layers,
        moe_layers=frozenset(i for i in arch.moe_layers if i < layers),
        linear_layers=frozenset(i for i in arch.linear_layers if i < layers),
    )


def mine(arch, *, tp, pp, ep, etp, stage, mtp=0):
    split = split_layers(arch.num_layers, pp)
    layers = stage_layer_indices(split, arch.num_layers)[stage]
    on_last = mtp if stage == pp - 1 else 0
    # the oracle builds the local spec: MLA's down projections split over TP there (memory/params.py)
    return stage_params(arch, layers, stage, Sharding(tp, ep, etp, pp, transformer_engine=False), mtp=on_last).as_dict()


# ---- reading the config ----


def test_qwen3_next_preset_reads_its_hybrid_layers():
    arch = arch_of("Qwen3-Next-80B-A3B")
    assert sorted(set(range(48)) - arch.linear_layers) == list(range(3, 48, 4))  # full attention every 4th
    assert arch.linear.key_heads == 16 and arch.linear.value_heads == 32 and arch.linear.conv_kernel == 4
    assert arch.attention_gate and arch.qk_layernorm and arch.shared_gate and len(arch.moe_layers) == 48


def test_layer_types_win_over_the_interval():
    config = {**QWEN35_TOY, "layer_types": ["full_attention", "linear_attention", "full_attention", "linear_attention"]}
    assert architecture(facts(config)).linear_layers == {1, 3}
    no_types = {k: v for k, v in QWEN35_TOY.items() if k != "layer_types"} | {"full_attention_interval": 2}
    assert architecture(facts(no_types)).linear_layers == {0, 2}


def test_a_multimodal_checkpoint_is_not_counted_without_its_vision_encoder():
    config = {"model_type": "qwen3_5_moe", "vision_config": {"depth": 27}, "text_config": QWEN35_MOE_TOY}
    with pytest.raises(NotModelled, match="vision encoder"):
        architecture(facts(config))


def test_odd_layer_types_are_not_guessed():
    with pytest.raises(NotModelled, match="layer_types"):
        architecture(facts({**QWEN35_TOY, "layer_types": ["linear_attention", "sliding_attention"] * 2}))


def test_checkpoint_mtp_depths():
    assert arch_of("DeepSeek-V3").mtp_layers == 1
    assert architecture(facts({**QWEN35_TOY, "mtp_num_hidden_layers": 1})).mtp_layers == 1
    assert arch_of("Qwen3-8B").mtp_layers == 0


# ---- exact counts against megatron-core's GPTModel (test extra) ----

HYBRID_LAYOUTS = [  # (model, tp, pp, ep, etp, mtp)
    ("next", 1, 1, 8, 1, 0),
    ("next", 2, 2, 8, 1, 1),
    ("next", 4, 2, 16, 1, 1),
    ("next", 2, 2, 4, 2, 0),
    ("dense", 1, 1, 1, 1, 1),
    ("dense", 2, 2, 1, 2, 1),
    ("dense", 4, 1, 1, 4, 0),
    ("moe", 2, 2, 4, 1, 1),
    ("moe", 1, 2, 8, 1, 0),
    ("moe", 2, 1, 2, 2, 1),
]


def _hybrid(name: str):
    if name == "next":
        return first_layers(arch_of("Qwen3-Next-80B-A3B"), 8)
    return architecture(facts(QWEN35_TOY if name == "dense" else QWEN35_MOE_TOY))


@pytest.mark.parametrize("case", HYBRID_LAYOUTS, ids=lambda c: "-".join(map(str, c)))
def test_hybrid_counts_equal_megatron(case):
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    name, tp, pp, ep, etp, mtp = case
    arch = _hybrid(name)
    for stage in sorted({0, pp - 1}):
        sizes = dict(tp=tp, pp=pp, ep=ep, etp=etp, stage=stage)
        assert mine(arch, mtp=mtp, **sizes) == megatron_stage_params(arch, mtp=mtp, **sizes), (case, stage)


def test_deepseek_v3_mtp_equals_megatron():
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    arch = first_layers(arch_of("DeepSeek-V3"), 6)
    for stage in (0, 1):
        sizes = dict(tp=4, pp=2, ep=32, etp=1, stage=stage)
        assert mine(arch, mtp=1, **sizes) == megatron_stage_params(arch, mtp=1, **sizes), stage


MIMO_TOY = {  # MiMo's shape (Qwen2 layers with q/k/v biases, one MTP depth); sizes small, not a release's
    "model_type": "mimo",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "num_nextn_predict_layers": 1,
}


def test_mimo_mtp_equals_megatron():
    pytest.importorskip("megatron.core")
    from oracle.gpt_params import megatron_stage_params

    arch = architecture(facts(MIMO_TOY))
    assert arch.qkv_bias and arch.mtp_layers == 1
    for tp, pp in ((1, 1), (2, 2), (4, 2)):
        for stage in sorted({0, pp - 1}):
            sizes = dict(tp=tp, pp=pp, ep=1, etp=tp, stage=stage)
            assert mine(arch, mtp=1, **sizes) == megatron_stage_params(arch, mtp=1, **sizes), (tp, pp, stage)


def test_whole_model_totals():
    """Qwen3-Next-80B-A3B: 79.67 B in its decoder, the "80 billion parameters" Qwen publishes (Alibaba Cloud blog
    "Qwen3-Next: Towards Ultimate Training & Inference Efficiency"); 81.32 B with its MTP layer, which shares the
    embedding and output layer. DeepSeek-V3: 671.03 B without MTP (the published 671 B); its MTP depth adds
    11.6 B here, the published 14 B counting the embedding and head its checkpoint repeats."""
    one = Sharding(1, 1, 1, 1)
    nxt = arch_of("Qwen3-Next-80B-A3B")
    assert stage_params(nxt, tuple(range(48)), 0, one).total == 79_674_391_296
    assert stage_params(nxt, tuple(range(48)), 0, one, mtp=1).total == 81_324_862_720
    ds = arch_of("DeepSeek-V3")
    assert stage_params(ds, tuple(range(61)), 0, one).total == 671_026_404_352
    assert sum(mtp_params(ds, one)) == 11_610_067_968


# ---- activations and KV cache ----


def test_linear_layers_keep_no_sequence_squared_term_and_no_kv_cache():
    arch = arch_of("Qwen3-Next-80B-A3B")
    p, rc = Parallel(tp=2, cp=1, sequence_parallel=True), Recompute()
    linear_short = layer_bytes(arch, 0, 4096, 4096, p, rc)
    linear_long = layer_bytes(arch, 0, 4096, 65536, p, rc)
    assert linear_short == linear_long  # the chunked delta rule keeps no attention matrix
    full = layer_bytes(arch, 3, 4096, 4096, p, rc)
    assert full != linear_short
    per_token, _ = kv_bytes_per_token(arch, 2)
    assert per_token == 2 * 12 * 1 * 256 * 2  # K and V of the 12 full-attention layers, 2 KV heads over TP 2


def test_rollout_state_per_request_of_the_linear_layers(tmp_path):
    arch = arch_of("Qwen3-Next-80B-A3B")
    # per Gated DeltaNet layer on TP 4: conv state (2·16·128 + 32·128) / 4 channels × 3, delta state 8 × 128 × 128
    assert state_bytes_per_request(arch, 4) == 36 * (8192 // 4 * 3 + 8 * 128 * 128) * 2
    assert state_bytes_per_request(arch_of("Qwen3-8B"), 4) == 0
    path = tmp_path / "run.sh"
    sizes = f"{M}.pipeline_model_parallel_size=4 {M}.expert_model_parallel_size=8 {M}.expert_tensor_parallel_size=1"
    path.write_text(
        script(f"{sizes} actor_rollout_ref.rollout.tensor_model_parallel_size=4", model="Qwen3-Next-80B-A3B")
    )
    ro = memory(str(path)).estimate.rollout
    assert ro.state_bytes_per_request == state_bytes_per_request(arch, 4)
    assert ro.max_concurrent_full_requests == ro.kv_budget_bytes // ro.request_bytes


# ---- verl builds MTP only when asked ----


def _last_stage_params(tmp_path, extra: str, model: str = "DeepSeek-V3"):
    tmp_path.mkdir()
    path = tmp_path / "run.sh"
    sizes = (
        f"{M}.pipeline_model_parallel_size=2 {M}.expert_model_parallel_size=32 {M}.tensor_model_parallel_size=4 "
        f"{M}.expert_tensor_parallel_size=1 +{M}.override_transformer_config.num_layers_in_first_pipeline_stage=31"
    )
    path.write_text(script(f"{sizes} {extra}", model=model, nodes=8))
    result = memory(str(path))
    est = result.estimate
    assert est.train is not None, est.problems
    return est.train.stages[-1].params


@pytest.mark.parametrize(
    ("version", "extra", "built"),
    [
        ("0.7.0", "", True),  # mbridge (use_mbridge defaults to True) builds the checkpoint's depth
        ("0.7.0", f"{M}.use_mbridge=False", False),
        ("0.7.1", "", False),  # from 0.7.1 only with model.mtp.enable
        ("0.7.1", "actor_rollout_ref.model.mtp.enable=True", True),
        ("0.9.1", "actor_rollout_ref.model.mtp.enable=True", True),
    ],
)
def test_which_verl_builds_the_checkpoints_mtp(tmp_path, monkeypatch, version, extra, built):
    monkeypatch.setenv("SHARDCHECK_VERL_VERSION", version)
    folder = tmp_path / "mimo-toy"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**MIMO_TOY, "_name_or_path": "mimo-toy"}))
    path = tmp_path / "run.sh"
    path.write_text(
        script(f"{M}.pipeline_model_parallel_size=2 {M}.expert_model_parallel_size=1 {extra}", model=str(folder))
    )
    from shardcheck.api import check

    assert check(str(path)).job.framework_version == version
    last = memory(str(path)).estimate.train.stages[-1].params
    assert (last.embedding > 0) == built  # the MTP depth brings the embedding to the last stage


def test_verl_builds_mtp_only_with_model_mtp_enable(tmp_path):
    off = _last_stage_params(tmp_path / "off", "")
    on = _last_stage_params(tmp_path / "on", "actor_rollout_ref.model.mtp.enable=True")
    arch = arch_of("DeepSeek-V3")
    dense, expert = mtp_params(arch, Sharding(4, 32, 1, 2))
    assert on.dense - off.dense == dense and on.expert - off.expert == expert
    assert on.embedding > 0 == off.embedding  # the MTP depth needs the embedding on the last stage


# ---- MCORE-TC-GDN-TP across megatron-core minors ----


def _gdn_findings(tmp_path, overrides: str, version: str):
    from shardcheck.api import check

    folder = tmp_path / "qwen35-moe-toy"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**QWEN35_MOE_TOY, "_name_or_path": "qwen35-moe-toy"}))
    path = tmp_path / "run.sh"
    path.write_text(script(overrides, model=str(folder)))
    result = check(str(path), megatron_core_version=version)
    return [(f.message, f.fix) for f in result.findings if f.rule == "MCORE-TC-GDN-TP"]


def test_gdn_heads_split_over_tp_and_cp_from_megatron_core_0_18(tmp_path):
    sizes = f"{M}.tensor_model_parallel_size=2 {M}.context_parallel_size=4 {M}.expert_model_parallel_size=1"
    [(message, fix)] = _gdn_findings(tmp_path / "a", sizes, "0.18")
    assert message.endswith(
        '(megatron-core 0.18: "self.linear_num_key_heads=4 must be a multiple of '
        '(self.tensor_model_parallel_size=2 * self.context_parallel_size=4).")'
    )
    assert fix == "TP · CP must divide 4: 1, 2, 4"
    # 0.16 splits over TP only, and refuses CP outright
    [(message, fix)] = _gdn_findings(tmp_path / "b", sizes, "0.16")
    assert "does not support context parallel for now, but got self.context_parallel_size=4." in message
    assert _gdn_findings(tmp_path / "c", sizes.replace("=4 ", "=2 "), "0.18") == []
    assert _gdn_findings(tmp_path / "d", sizes, "0.15") == []  # no Gated DeltaNet before 0.16
