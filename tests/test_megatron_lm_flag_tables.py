"""Megatron-LM's flag tables, generated per megatron-core minor by tools/megatron_lm_flags.py (issue 12, item 4).

Three checks: (1) flags checked by hand against megatron/training/arguments.py and the dataclasses at the
tags (line numbers in the comments); (2) a differential test of the dataclass-generated flags against the
installed megatron-core's own ``TransformerConfig`` fields (its ``dataclasses.fields`` and typing objects, not
the ast the tool reads); (3) with ``MEGATRON_LM_GIT`` set to a Megatron-LM git dir, the shipped tables equal
what the tool generates now. And the reader: a flag the chosen minor lacks is MLM-FLAG-UNKNOWN, one it has is
silent, and the value checks (VALUE-BAD-*, not a number) still run.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import os
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from shardcheck.api import check
from shardcheck.frameworks.megatron import versions
from shardcheck.frameworks.megatron_lm.flags import DATA, DEFAULT_MINOR, megatron_lm_flags

ROOT = Path(__file__).resolve().parents[1]


def test_one_table_per_supported_minor_and_the_same_default():
    assert DEFAULT_MINOR == versions.DEFAULT
    assert sorted(p.name for p in DATA.glob("flags-*.json")) == sorted(f"flags-{m}.json" for m in versions.MINORS)
    for minor in versions.MINORS:
        data = json.loads((DATA / f"flags-{minor}.json").read_text())
        assert data["source"].startswith(f"NVIDIA/Megatron-LM core_v{minor}.")
        assert len(data["flags"]) > 300  # Megatron-LM has hundreds of flags in every supported minor


# (minor, flag) -> (kind, default, choices or None): read by hand at the tag named in the comment.
BY_HAND = {
    # core_v0.16.1 megatron/training/arguments.py
    ("0.16", "--encoder-seq-length"): ("int", None, None),  # l.2484
    ("0.16", "--seq-length"): ("int", None, None),  # l.2482
    ("0.16", "--make-vocab-size-divisible-by"): ("int", 128, None),  # l.1678
    ("0.16", "--weight-decay"): ("float", 0.01, None),  # l.1821
    ("0.16", "--clip-grad"): ("float", 1.0, None),  # l.1825
    ("0.16", "--lr"): ("float", None, None),  # l.2130
    ("0.16", "--no-overlap-p2p-communication"): ("false", True, None),  # l.2232, dest overlap_p2p_comm
    ("0.16", "--use-distributed-optimizer"): ("true", False, None),  # l.2283
    ("0.16", "--split"): ("str", None, None),  # l.2443
    ("0.16", "--moe-layer-freq"): ("str", 1, None),  # l.2693, type=moe_freq_type
    ("0.16", "--kv-lora-rank"): ("int", 32, None),  # l.2727
    ("0.16", "--qk-head-dim"): ("int", 128, None),  # l.2729
    ("0.16", "--data-parallel-sharding-strategy"): (
        "str",
        "no_shard",
        ("no_shard", "optim", "optim_grads", "optim_grads_params"),
    ),  # l.2307
    ("0.16", "--moe-router-load-balancing-type"): (
        "list",
        "aux_loss",
        ("aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none"),
    ),  # l.2705: nargs='+', default a string
    # core_v0.16.1 megatron/core/transformer/transformer_config.py (ArgumentGroupFactory(TransformerConfig))
    ("0.16", "--num-layers"): ("int", None, None),  # l.45: default 0, argparse_meta default None
    ("0.16", "--num-query-groups"): ("int", 1, None),  # l.124: argparse_meta default 1
    ("0.16", "--attention-backend"): ("str", "auto", ("flash", "fused", "unfused", "local", "auto")),  # l.110
    ("0.16", "--hidden-dropout"): ("float", 0.1, None),  # l.137
    ("0.16", "--disable-bias-linear"): ("false", True, None),  # l.161: arg_names ["--disable-bias-linear"]
    ("0.16", "--normalization"): ("str", "LayerNorm", ("LayerNorm", "RMSNorm")),  # l.205: Literal
    ("0.16", "--qk-layernorm"): ("true", False, None),  # l.208
    ("0.16", "--recompute-granularity"): ("str", None, ("full", "selective")),  # l.383: Optional[Literal]
    ("0.16", "--moe-router-topk"): ("int", 2, None),  # l.578
    ("0.16", "--moe-token-dispatcher-type"): ("str", "allgather", ("allgather", "alltoall", "flex")),  # l.675
    # core_v0.16.1 megatron/core/model_parallel_config.py (TransformerConfig's base)
    ("0.16", "--tensor-model-parallel-size"): ("int", 1, None),  # l.20
    ("0.16", "--pipeline-model-parallel-size"): ("int", 1, None),  # l.28
    ("0.16", "--sequence-parallel"): ("true", False, None),  # l.39
    # core_v0.16.1 megatron/training/training_config.py (TrainingConfig, ValidationConfig)
    ("0.16", "--micro-batch-size"): ("int", None, None),  # l.10
    ("0.16", "--global-batch-size"): ("int", None, None),  # l.14
    ("0.16", "--train-iters"): ("int", None, None),  # l.46
    ("0.16", "--exit-signal"): ("str", "SIGTERM", None),  # l.64: signal.Signals, its member's name
    ("0.16", "--eval-iters"): ("int", 100, None),  # l.94
    # core_v0.19.0 megatron/training/arguments.py
    ("0.19", "--data-parallel-sharding-strategy"): (
        "str",
        "optim_grads_params",
        ("no_shard", "optim", "optim_grads", "optim_grads_params"),
    ),  # l.3023
    ("0.19", "--encoder-seq-length"): ("int", None, None),
}
# Flags a minor does not have (checked by grep at the tag): given, they are unknown.
ABSENT = {
    ("0.9", "--expert-tensor-parallel-size"),  # added with MoE parallel folding, core_v0.10
    ("0.9", "--use-megatron-fsdp"),
    ("0.16", "--megatron-fsdp-main-params-dtype"),  # core_v0.19.0 has it
    ("0.16", "--hf-checkpoint"),  # slime's, never Megatron-LM's
}


@pytest.mark.parametrize("key", sorted(BY_HAND), ids=lambda k: f"{k[0]}{k[1]}")
def test_flags_checked_by_hand(key):
    minor, name = key
    flag = megatron_lm_flags(minor)[name]
    kind, default, choices = BY_HAND[key]
    assert flag.absent is None
    assert (flag.kind, flag.default, flag.choices) == (kind, default, choices)


def test_flags_a_minor_does_not_have():
    for minor, name in ABSENT:
        flag = megatron_lm_flags(minor).get(name)
        assert flag is None or flag.absent is not None, (minor, name)
    assert megatron_lm_flags("0.19")["--megatron-fsdp-main-params-dtype"].absent is None


# -- differential: the dataclass-generated flags against megatron-core's own TransformerConfig ----------------


def _factory_kwargs(f: dataclasses.Field) -> tuple[list[str], str, object, tuple | None] | None:
    """What megatron/training/argument_utils.py (core_v0.16.1) ArgumentGroupFactory builds for ``f``, computed
    from the live dataclass field and its typing objects: (names, kind, default, choices); None where it would
    raise (those fields are excluded by arguments.py or carry argparse_meta)."""
    tp = f.type
    choices = None
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not type(None):
            return None
        tp = args[0]
    kind = None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        kind, choices = "str", tuple(tp.__members__)
    elif typing.get_origin(tp) is list:
        kind = "list"
    elif typing.get_origin(tp) is typing.Literal:
        choices = typing.get_args(tp)
        kind = {str: "str", int: "int", float: "float", bool: "bool"}[type(choices[0])]
    elif tp in (int, float, str, bool):
        kind = tp.__name__
    if kind is None:
        return None
    if f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    else:
        default = None
    if isinstance(default, enum.Enum):
        default = default.name
    names = ["--" + f.name.replace("_", "-")]
    if kind == "bool":
        kind = "true" if default is False else "false"
        if kind == "false":
            names = ["--no-" + f.name.replace("_", "-"), "--disable-" + f.name.replace("_", "-")]
    meta = f.metadata.get("argparse_meta", {})
    names = meta.get("arg_names", names)
    default = meta.get("default", default)
    return names, kind, default, choices


@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="megatron-core not installed")
def test_dataclass_flags_against_the_installed_transformer_config():
    from importlib.metadata import version

    minor = ".".join(version("megatron-core").split(".")[:2])
    if minor not in versions.MINORS:
        pytest.skip(f"megatron-core {minor} has no table")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.transformer.transformer_config import TransformerConfig

    table = megatron_lm_flags(minor)
    compared = 0
    for f in dataclasses.fields(TransformerConfig):
        if not f.init:
            continue
        built = _factory_kwargs(f)
        if built is None:
            continue
        names, kind, default, choices = built
        flag = table.get(names[0])
        if flag is None or flag.dest != f.name or flag.absent is not None:
            continue  # excluded in arguments.py, or the name is an explicit flag of another dest
        assert [n for n in flag.aliases if flag.dest == f.name] == names or set(names) <= set(flag.aliases), f.name
        assert flag.kind == kind, (f.name, flag.kind, kind)
        if isinstance(default, list | tuple):
            default = list(default)
        assert flag.default == default, (f.name, flag.default, default)
        if choices is not None:
            assert flag.choices == tuple(choices), f.name
        compared += 1
    # ~240 init fields; the rest are excluded by arguments.py (callables, dtypes, flags it declares itself)
    assert compared >= 150, compared


@pytest.mark.skipif(not os.environ.get("MEGATRON_LM_GIT"), reason="MEGATRON_LM_GIT (a Megatron-LM git dir) not set")
def test_shipped_tables_are_what_the_tool_generates(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import megatron_lm_flags as tool
    finally:
        sys.path.remove(str(ROOT / "tools"))
    git_dir = os.environ["MEGATRON_LM_GIT"]
    for minor in versions.MINORS:
        tag = tool.newest_tag(git_dir, minor)
        src = tool.Source(git_dir, tag)
        text = tool.render(tag, tool.table(src, []), tool.extra_tables(src, []))
        assert text == (DATA / f"flags-{minor}.json").read_text(), minor
    run = subprocess.run(["git", "--git-dir", git_dir, "tag"], capture_output=True, text=True, check=True)
    assert "core_v0.16.1" in run.stdout.split()


# -- the reader ----------------------------------------------------------------------------------------------

BASE = (
    "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 "
    "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 "
    "--vocab-size 32000 --bf16 --lr 1e-4 --train-iters 10"
)


def _findings(tmp_path, extra: str, minor: str, rule: str | None = "MLM-FLAG-UNKNOWN") -> list[str]:
    script = tmp_path / "run.sh"
    script.write_text(BASE + " " + extra + "\n")
    result = check(script, megatron_core_version=minor)
    assert result.error is None, result.error
    return [f.message for f in result.findings if rule is None or f.rule == rule]


def test_a_flag_of_the_version_is_silent(tmp_path):
    assert _findings(tmp_path, "--encoder-seq-length 1024 --eval-iters 0 --exit-signal SIGINT", "0.16") == []
    assert _findings(tmp_path, "--expert-tensor-parallel-size 1 --use-megatron-fsdp", "0.16") == []


def test_a_flag_the_version_lacks_fires(tmp_path):
    said = _findings(tmp_path, "--expert-tensor-parallel-size 1", "0.9")
    assert said == [
        "--expert-tensor-parallel-size is not a flag of Megatron-LM core_v0.9 (its megatron/training/arguments.py "
        "has no such option; argparse stops with `unrecognized arguments`)"
    ]
    said = _findings(tmp_path, "--megatron-fsdp-main-params-dtype fp32", "0.16")
    assert len(said) == 1 and "--megatron-fsdp-main-params-dtype is not a flag of Megatron-LM core_v0.16" in said[0]
    assert _findings(tmp_path, "--megatron-fsdp-main-params-dtype fp32", "0.19") == []
    said = _findings(tmp_path, "--tensor-model-paralel-size 2", "0.16")
    assert said == [
        "--tensor-model-paralel-size is not a flag of Megatron-LM core_v0.16; it is close to "
        "--tensor-model-parallel-size"
    ]


def test_value_checks_still_run_on_generated_flags(tmp_path):
    bad = _findings(tmp_path, "--tensor-model-parallel-size 0", "0.16", rule=None)
    assert any("--tensor-model-parallel-size 0" in m for m in bad)
    bad = _findings(tmp_path, "--eval-iters abc", "0.16", rule=None)
    assert any("--eval-iters" in m and "abc" in m for m in bad)
    assert not [m for m in _findings(tmp_path, "--eval-iters 0 --seed 0", "0.16", rule=None) if "iters" in m]


def test_store_false_aliases_share_their_dest(tmp_path):
    from shardcheck.api import resolve_script

    script = tmp_path / "run.sh"
    script.write_text(BASE + " --no-rope-fusion\n")
    job = resolve_script(script, megatron_core_version="0.16")
    assert job.value("--no-rope-fusion").value is False  # dest apply_rope_fusion
    assert job.framework_version == "core_v0.16.1"
