"""The layer-split and query-group rules judge with the job's megatron-core minor (0.9 … 0.19), in its words.

Each case here is one tests/test_megatron_split_versions_differential.py checks against the real wheel (the
oracle's answer noted); these run without the wheels, through ``check`` on a verl launch of Qwen3-30B-A3B
(48 layers, 32 attention heads, 4 KV heads).
"""

from __future__ import annotations

import pytest

from shardcheck.api import check
from shardcheck.frameworks.megatron.pipeline import Split, SplitError, split_layers
from shardcheck.rules.examples import verl_launch

MEGATRON = "actor_rollout_ref.actor.megatron"
OVERRIDE = f"+{MEGATRON}.override_transformer_config"


def _findings(tmp_path, overrides: str, minor: str, rule_prefix: str = "MCORE-"):
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(overrides))
    result = check(path, megatron_core_version=minor)
    return [(f.rule, f.severity, f.message) for f in result.findings if f.rule.startswith(rule_prefix)]


PP5 = f"{MEGATRON}.pipeline_model_parallel_size=5"


def test_layers_not_dividing_pp_start_on_0_10_with_fewer_layers(tmp_path):
    # megatron-core 0.10.0: get_num_layers_to_build floors 48 // 5 = 9 on every rank, no assert
    found = _findings(tmp_path, PP5, "0.10", "MCORE-BUILD-LAYERS-PP")
    assert found == [
        (
            "MCORE-BUILD-LAYERS-PP",
            "warning",
            "[actor] 48 layers, PP 5: the 5 stages build 9, 9, 9, 9, 9 layers: 45 of 48; megatron-core 0.10 does not "
            "check this: the job starts with another model than configured",
        )
    ]


@pytest.mark.parametrize(
    "minor, text",
    [
        ("0.16", "num_layers should be divisible by pipeline_model_parallel_size"),
        ("0.11", "num_layers should be divisible by pipeline_model_parallel_size"),
        ("0.17", "num_layers=48 should be divisible by config.pipeline_model_parallel_size=5"),
        ("0.19", "num_layers=48 should be divisible by config.pipeline_model_parallel_size=5"),
    ],
)
def test_layers_not_dividing_pp_is_an_error_from_0_11_in_each_minors_words(tmp_path, minor, text):
    [(rule, severity, message)] = _findings(tmp_path, PP5, minor, "MCORE-BUILD-LAYERS-PP")
    assert (rule, severity) == ("MCORE-BUILD-LAYERS-PP", "error")
    assert message.endswith(f'"{text}"')


PP2_BOTH = f"{MEGATRON}.pipeline_model_parallel_size=2 {OVERRIDE}.num_layers_in_first_pipeline_stage=20 " + (
    f"{OVERRIDE}.num_layers_in_last_pipeline_stage=20"
)


@pytest.mark.parametrize(
    "minor, expected",
    [
        # 0.11 / 0.12: the middle check divides by 0 middle stages
        (
            "0.11",
            (
                "MCORE-TC-UNEVEN-MIDDLE",
                "error",
                'megatron-core 0.11 raises ZeroDivisionError: "integer modulo by zero"',
            ),
        ),
        ("0.12", ("MCORE-TC-UNEVEN-MIDDLE", "error", 'raises ZeroDivisionError: "integer modulo by zero"')),
        # 0.13 - 0.15: no middle stage is fine; the job builds 40 of the 48 layers
        ("0.13", ("MCORE-BUILD-NEGATIVE-STAGE", "warning", "the 2 stages build 20, 20 layers: 40 of 48")),
        ("0.15", ("MCORE-BUILD-NEGATIVE-STAGE", "warning", "the 2 stages build 20, 20 layers: 40 of 48")),
        ("0.16", ("MCORE-TC-UNEVEN-MIDDLE", "error", '"Mismatch: 8 middle layers remaining but 0 middle PP stages')),
        # 0.10: each stage returns its own count unchecked
        ("0.10", ("MCORE-BUILD-NEGATIVE-STAGE", "warning", "the 2 stages build 20, 20 layers: 40 of 48")),
    ],
)
def test_first_and_last_with_no_middle_stage_per_minor(tmp_path, minor, expected):
    [(rule, severity, message)] = _findings(tmp_path, PP2_BOTH, minor, "MCORE-")
    assert (rule, severity) == expected[:2]
    assert expected[2] in message


def test_negative_middle_stage_is_a_warning(tmp_path):
    over = f"{MEGATRON}.pipeline_model_parallel_size=4 {OVERRIDE}.num_layers_in_first_pipeline_stage=30 " + (
        f"{OVERRIDE}.num_layers_in_last_pipeline_stage=30"
    )
    for minor in ("0.16", "0.19"):
        [(rule, severity, _)] = _findings(tmp_path, over, minor)
        assert (rule, severity) == ("MCORE-BUILD-NEGATIVE-STAGE", "warning")
    path = tmp_path / "run.sh"
    assert check(path, megatron_core_version="0.19").valid  # the job starts


def test_uneven_stages_with_vpp_refused_only_before_0_11(tmp_path):
    over = (
        f"{MEGATRON}.pipeline_model_parallel_size=4 {MEGATRON}.virtual_pipeline_model_parallel_size=2 "
        f"{OVERRIDE}.num_layers_in_first_pipeline_stage=10 {OVERRIDE}.num_layers_in_last_pipeline_stage=10"
    )
    assert _findings(tmp_path, over, "0.10") == [
        (
            "MCORE-TC-UNEVEN-VPP",
            "error",
            "[actor] 48 layers, PP 4, first stage 10, last stage 10, VPP 2: megatron-core 0.10: "
            '"Uneven number of layer not compatible with interleaved pipeline schedule"',
        )
    ]
    assert _findings(tmp_path, over, "0.11") == []


def test_query_groups_dividing_tp_fail_up_to_0_15(tmp_path):
    over = f"{MEGATRON}.tensor_model_parallel_size=8"
    assert _findings(tmp_path, over, "0.16", "MCORE-TC-QG-TP") == []
    [(rule, severity, message)] = _findings(tmp_path, over, "0.15", "MCORE-TC-QG-TP")
    assert (rule, severity) == ("MCORE-TC-QG-TP", "error")
    assert message.endswith(
        'not a multiple of TP 8 (megatron-core 0.15: "num_query_groups (4) must be a multiple of '
        'tensor_model_parallel_size (8).")'
    )
    assert _findings(tmp_path, f"{MEGATRON}.tensor_model_parallel_size=4", "0.9", "MCORE-TC-QG-TP") == []


def test_account_split_has_no_field_before_0_11():
    error = split_layers(47, 4, account_for_embedding=True, version="0.10")
    assert isinstance(error, SplitError) and error.raised == "TypeError" and error.at_init
    assert error.message == (
        "TransformerConfig.__init__() got an unexpected keyword argument 'account_for_embedding_in_pipeline_split'"
    )
    assert split_layers(47, 4, account_for_embedding=True, version="0.12") == Split((11, 12, 12, 12), None)


def test_0_11_account_split_without_vpp_divides_by_the_stages_left():
    # 0.11: num_layers % (PP - e - l); 0.12+: (num_layers + e + l) % PP
    assert split_layers(48, 2, account_for_embedding=True, account_for_loss=True, version="0.11").message == (
        "integer modulo by zero"
    )
    # 48 % 1 passes 0.11's config check; its build then asserts (48 + 2) % 3
    assert split_layers(48, 3, account_for_embedding=True, account_for_loss=True, version="0.11").message == (
        "num_layers should be divisible by pipeline_model_parallel_size"
    )
    assert split_layers(50, 4, account_for_embedding=True, account_for_loss=True, version="0.11") == Split(
        (12, 13, 13, 12), None
    )
    assert split_layers(48, 3, account_for_embedding=True, account_for_loss=True, version="0.12").message == (
        "number of middle layers: 50 must be divisible by middle pipeline_model_parallel_size 3"
    )


def test_good_splits_agree_in_every_minor():
    from shardcheck.frameworks.megatron.versions import MINORS

    for minor in MINORS:
        assert split_layers(48, 4, version=minor) == Split((12, 12, 12, 12), None)
        assert split_layers(48, 4, vpp=2, version=minor) == Split((12, 12, 12, 12), (6, 6, 6, 6))
        assert split_layers(48, 4, first=10, last=14, version=minor) == Split((10, 12, 12, 14), None)
