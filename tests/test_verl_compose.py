"""Differential test: shardcheck's effective verl config against ``hydra.compose`` over verl's own tree.

shardcheck never composes verl's defaults lists: it starts from the generated snapshot
(``_generated_<name>.yaml`` of verl 0.9.1, bundled) and applies the command line's overrides with
Hydra's ``_apply_overrides_to_config``. Here the oracle is real composition: ``hydra.compose`` over
verl's non-generated ``ppo_trainer.yaml`` / ``ppo_megatron_trainer.yaml`` with their defaults
lists, ``${oc.select:...}`` interpolations and the same overrides. Every key of the composed config
is compared (resolved) with ``VerlConfig.get(key).value``, the two key sets are compared, and the
overrides compose rejects must be exactly those shardcheck records a Hydra-side issue for.
Each case is compared twice: on the whole tree (section pruning turned off) and on the tree as
shardcheck builds it (``needed_sections``: untouched, unreferenced sections left out), whose kept
keys must agree all the same.

Needs ``VERL_CONFIG_DIR`` = verl 0.9.1's ``verl/trainer/config`` directory (from the unpacked wheel);
the module is skipped without it.
"""

from __future__ import annotations

import math
import os
import shlex
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CONFIG_DIR = os.environ.get("VERL_CONFIG_DIR")
if not CONFIG_DIR:
    pytest.skip("VERL_CONFIG_DIR is not set (verl's verl/trainer/config directory)", allow_module_level=True)
if not (Path(CONFIG_DIR) / "ppo_trainer.yaml").is_file():
    pytest.skip(f"VERL_CONFIG_DIR={CONFIG_DIR} has no ppo_trainer.yaml", allow_module_level=True)

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from shardcheck.frameworks.verl import config_tree, resolve
from shardcheck.frameworks.verl.config_tree import apply_overrides, load_defaults
from shardcheck.inputs.bash import read_bash, read_bash_text
from shardcheck.inputs.hydra_overrides import parse_hydra_args
from shardcheck.inputs.launch import find_launches

CASES_DIR = Path(os.environ.get("SHARDCHECK_CASES_DIR", Path(__file__).with_name("data") / "cases"))
SCRIPT_ENV = {"WORK_DIR": "/data"}  # the scripts' only unset input; every value is then known
CONFIG_NAMES = ("ppo_trainer", "ppo_megatron_trainer")
HYDRA_KINDS = ("unknown_key", "hydra")  # issue kinds meaning "Hydra rejects this override"
M, F = "ppo_megatron_trainer", "ppo_trainer"
A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.ref"
RAISES = object()  # a key that cannot be read: unresolvable interpolation, or ``???`` (shardcheck: unknown)
# Keys compose has that verl's generated snapshot does not: ``model_engine`` is the defaults-list
# choice (model_engine/<x>.yaml is ``# @package _global_`` with ``model_engine: <x>``); verl's code
# never reads it. Left out of the per-case comparison and checked on its own in test_model_engine_key.
COMPOSE_ONLY_KEYS: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    words: str  # the override words as written in a bash script
    expect: dict = field(default_factory=dict)  # {config_name or "*": {key: value}}, checked on both sides
    rejects: dict = field(default_factory=dict)  # {config_name: (key, ...)}: the keys compose rejects


OTC_DEFAULT = {
    "recompute_granularity": None,
    "recompute_modules": ["core_attn"],
    "recompute_method": None,
    "recompute_num_layers": None,
    "attention_backend": "flash",
}
SIZES = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
)

SYNTHETIC = [
    Case(
        "no_overrides",
        "",
        expect={
            M: {f"{R}.megatron.{s}": v for s, v in zip(SIZES, (1, 1, None, 1, 1, None))}
            | {
                f"{R}.megatron.override_transformer_config": OTC_DEFAULT,
                f"{A}.megatron.override_transformer_config": OTC_DEFAULT,
                "critic.forward_max_token_len_per_gpu": 32768,
            },
        },
        rejects={M: (), F: ()},
    ),
    Case(
        "actor_megatron_sizes_followed_by_ref",
        " ".join(
            [
                f"{A}.megatron.tensor_model_parallel_size=4",
                f"{A}.megatron.pipeline_model_parallel_size=8",
                f"{A}.megatron.virtual_pipeline_model_parallel_size=2",
                f"{A}.megatron.context_parallel_size=2",
                f"{A}.megatron.expert_model_parallel_size=16",
                f"{A}.megatron.expert_tensor_parallel_size=1",
                f"{A}.megatron.param_offload=True",
                f"{A}.megatron.seed=7",
                f"{A}.megatron.use_mbridge=True",
            ]
        ),
        expect={
            M: {f"{R}.megatron.{s}": v for s, v in zip(SIZES, (4, 8, 2, 2, 16, 1))}
            | {
                f"{R}.megatron.param_offload": True,
                f"{R}.megatron.seed": 7,
                f"{R}.megatron.use_mbridge": True,
                f"{R}.megatron.optimizer_offload": False,
            },
        },
        rejects={M: (), F: tuple(f"{A}.megatron.{k}" for k in (*SIZES, "param_offload", "seed", "use_mbridge"))},
    ),
    Case(
        "ref_sizes_explicit",
        " ".join(
            [
                f"{A}.megatron.tensor_model_parallel_size=4",
                f"{A}.megatron.pipeline_model_parallel_size=8",
                f"{A}.megatron.context_parallel_size=2",
                f"{R}.megatron.tensor_model_parallel_size=2",
                f"{R}.megatron.pipeline_model_parallel_size=1",
                f"{R}.megatron.expert_tensor_parallel_size=null",
            ]
        ),
        expect={
            M: {
                f"{R}.megatron.tensor_model_parallel_size": 2,
                f"{R}.megatron.pipeline_model_parallel_size": 1,
                f"{R}.megatron.context_parallel_size": 2,
                f"{R}.megatron.expert_tensor_parallel_size": None,
                f"{A}.megatron.tensor_model_parallel_size": 4,
            },
        },
        rejects={M: ()},
    ),
    Case(
        "interpolation_as_value",
        " ".join(
            [
                f"'{R}.megatron.tensor_model_parallel_size=${{{A}.megatron.pipeline_model_parallel_size}}'",
                f"{A}.megatron.pipeline_model_parallel_size=8",
                "'+trainer.rel_nnodes=${.nnodes}'",
                "trainer.nnodes=3",
                "'trainer.n_gpus_per_node=${oc.select:trainer.no_such_key,6}'",
            ]
        ),
        expect={
            M: {f"{R}.megatron.tensor_model_parallel_size": 8},
            "*": {"trainer.rel_nnodes": 3, "trainer.n_gpus_per_node": 6},
        },
    ),
    # an override's value referring to a section nothing else touches (critic, data)
    Case(
        "interpolation_into_untouched_section",
        "'trainer.nnodes=${critic.ppo_epochs}' '+trainer.bsz=${data.train_batch_size}'",
        expect={"*": {"trainer.nnodes": 1, "trainer.bsz": 1024}},
    ),
    Case(
        "otc_add_read_back_under_actor_and_ref",
        " ".join(
            [
                f"+{A}.megatron.override_transformer_config.num_layers_in_first_pipeline_stage=5",
                f"{A}.megatron.override_transformer_config.recompute_method=uniform",
            ]
        ),
        expect={
            M: {
                f"{A}.megatron.override_transformer_config.num_layers_in_first_pipeline_stage": 5,
                f"{R}.megatron.override_transformer_config.num_layers_in_first_pipeline_stage": 5,
                f"{R}.megatron.override_transformer_config.recompute_method": "uniform",
            },
        },
        rejects={M: ()},
    ),
    Case(
        "force_add_existing_and_new",
        " ".join(
            [
                "++trainer.nnodes=4",
                "++trainer.brand_new=1",
                "++trainer.deep.new.path=x",
                f"++{A}.megatron.override_transformer_config.recompute_num_layers=2",
                f"++{A}.megatron.override_transformer_config.new_field=x",
            ]
        ),
        expect={
            "*": {"trainer.nnodes": 4, "trainer.brand_new": 1, "trainer.deep.new.path": "x"},
            M: {
                f"{R}.megatron.override_transformer_config.recompute_num_layers": 2,
                f"{R}.megatron.override_transformer_config.new_field": "x",
            },
        },
        rejects={M: ()},
    ),
    # `~key` words are quoted: unquoted, bash leaves them as they are (no user `trainer.x`), which
    # test_unquoted_tilde_deletion checks on its own.
    Case(
        "delete_existing",
        " ".join(
            [
                "'~trainer.val_before_train'",
                "~trainer.nnodes=1",
                f"'~{A}.megatron.tensor_model_parallel_size'",
                "'~critic.ppo_max_token_len_per_gpu'",
            ]
        ),
        expect={
            "*": {"critic.forward_max_token_len_per_gpu": RAISES},  # ${.ppo_max_token_len_per_gpu} is gone
            M: {f"{R}.megatron.tensor_model_parallel_size": 1},  # oc.select's default
        },
        rejects={M: (), F: (f"{A}.megatron.tensor_model_parallel_size",)},
    ),
    Case(
        "delete_rejected",
        "~trainer.nnodes=5 '~trainer.no_such_key' '~critic.no_such_key'",
        rejects={
            M: ("trainer.nnodes", "trainer.no_such_key", "critic.no_such_key"),
            F: ("trainer.nnodes", "trainer.no_such_key", "critic.no_such_key"),
        },
    ),
    Case(
        "delete_interpolated_nodes",
        " ".join(
            [
                f"'~{R}.megatron.override_transformer_config'",
                f"'~{R}.megatron.tensor_model_parallel_size'",
            ]
        ),
        rejects={M: ()},
    ),
    # Hydra: `~k` fails when k's value is null ("does not exist"); `+k=v` succeeds when it is null,
    # and `+k={...}` / `+k=[...]` always (merged).
    Case(
        "null_valued_keys_add_and_delete",
        " ".join(
            [
                "'~trainer.total_training_steps'",
                "+trainer.total_training_steps=5",
                f"+{A}.megatron.override_ddp_config={{}}",
                "'+trainer.logger=[console]'",
            ]
        ),
        expect={"*": {"trainer.total_training_steps": 5, "trainer.logger": ["console"]}},
        rejects={M: ("trainer.total_training_steps",), F: ("trainer.total_training_steps",)},
    ),
    Case(
        "add_under_interpolated_node",
        f"+{R}.megatron.override_transformer_config.foo=1",
        expect={
            M: {
                f"{R}.megatron.override_transformer_config": {"foo": 1},  # Hydra replaces the interpolation
                f"{A}.megatron.override_transformer_config": OTC_DEFAULT,
            },
        },
        rejects={M: ()},
    ),
    Case(
        "change_under_interpolated_node",
        " ".join(
            [
                f"{R}.megatron.override_transformer_config.recompute_method=uniform",
                f"{R}.megatron.override_transformer_config.foo=1",
            ]
        ),
    ),
    Case(
        "force_add_under_interpolated_node",
        f"++{R}.megatron.override_transformer_config.foo=1",
        expect={
            M: {f"{R}.megatron.override_transformer_config.foo": 1},
        },
        rejects={M: ()},
    ),
    Case(
        "add_existing_rejected",
        " ".join(
            [
                "+trainer.nnodes=3",
                f"+{R}.megatron.tensor_model_parallel_size=2",
                "+trainer.device=cpu",
            ]
        ),
        rejects={M: ("trainer.nnodes", f"{R}.megatron.tensor_model_parallel_size", "trainer.device")},
    ),
    Case(
        "unknown_keys_rejected",
        " ".join(
            [
                "trainer.nnode=2",
                f"{A}.megatron.grad_offload=True",
                "data.train_batch_sizee=8",
                "no_such_section.x=1",
            ]
        ),
        rejects={M: ("trainer.nnode", f"{A}.megatron.grad_offload", "data.train_batch_sizee", "no_such_section.x")},
    ),
    Case(
        "lists_and_dicts",
        " ".join(
            [
                "trainer.logger=['console','tensorboard']",
                "'data.train_files=[a.parquet,b.parquet]'",
                f"'{A}.megatron.override_transformer_config.recompute_modules=[mlp,core_attn]'",
                "'+trainer.new_dict={a:1,b:{c:2},d:[1,2]}'",
                "'+trainer.new_list=[1,[2,3],{x:y}]'",
                "'+actor_rollout_ref.model.override_config.foo={a:1}'",
                f"'{A}.megatron.override_ddp_config={{grad_reduce_in_fp32:true}}'",
                "'+trainer.empty_list=[]'",
                "'+trainer.empty_dict={}'",
            ]
        ),
        expect={
            "*": {
                "trainer.logger": ["console", "tensorboard"],
                "data.train_files": ["a.parquet", "b.parquet"],
                "trainer.new_dict": {"a": 1, "b": {"c": 2}, "d": [1, 2]},
                "trainer.new_list": [1, [2, 3], {"x": "y"}],
                "actor_rollout_ref.model.override_config.foo": {"a": 1},
                "trainer.empty_list": [],
                "trainer.empty_dict": {},
            },
            M: {f"{R}.megatron.override_transformer_config.recompute_modules": ["mlp", "core_attn"]},
        },
    ),
    Case(
        "dict_value_merged_into_existing",
        " ".join(
            [
                f"'{A}.megatron.override_transformer_config={{recompute_method:block}}'",
                f"'{A}.megatron.override_transformer_config={{num_layers_in_first_pipeline_stage:5}}'",
                "'trainer.nnodes={a:1}'",
                "'trainer.logger={a:1}'",
            ]
        ),
    ),
    Case(
        "quoted_strings",
        (
            "trainer.project_name='my project' trainer.experiment_name=\"exp-1\" "
            "'trainer.default_local_dir=\"/a b/c\"' "
            "\"data.prompt_key='1e-6'\" '+trainer.quoted_num=\"123\"' '+trainer.with_equals=\"a=b\"' "
            "+trainer.url=http://host:1/p '+trainer.quoted_null=\"null\"' '+trainer.spaced=a b'"
        ),
        expect={
            "*": {
                "trainer.project_name": "my project",
                "trainer.experiment_name": "exp-1",
                "trainer.default_local_dir": "/a b/c",
                "data.prompt_key": "1e-6",
                "trainer.quoted_num": "123",
                "trainer.with_equals": "a=b",
                "trainer.url": "http://host:1/p",
                "trainer.quoted_null": "null",
                "trainer.spaced": "a b",
            },
        },
    ),
    Case(
        "null_values",
        " ".join(
            [
                f"{A}.megatron.expert_tensor_parallel_size=null",
                f"{A}.megatron.virtual_pipeline_model_parallel_size=null",
                "trainer.total_training_steps=null",
                "+trainer.upper_null=NULL",
                "trainer.nnodes=null",
            ]
        ),
        expect={
            "*": {"trainer.total_training_steps": None, "trainer.upper_null": None, "trainer.nnodes": None},
            M: {f"{R}.megatron.expert_tensor_parallel_size": None},
        },
    ),
    Case(
        "numbers",
        " ".join(
            [
                f"{A}.optim.lr=1e-6",
                f"{A}.optim.weight_decay=0.1",
                "actor_rollout_ref.rollout.gpu_memory_utilization=.5",
                f"{A}.clip_ratio=2E-1",
                "+trainer.big=1e10",
                "+trainer.pinf=inf",
                "+trainer.ninf=-inf",
                "+trainer.nan=nan",
                "+trainer.neg=-3",
                "+trainer.plus=+3",
                "+trainer.underscored=1_000",
                "algorithm.kl_ctrl.kl_coef=1e-3",
                "+trainer.int_str=010",
                "+trainer.version=0.9.1",
            ]
        ),
        expect={
            "*": {
                f"{A}.optim.lr": 1e-6,
                "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
                f"{A}.clip_ratio": 0.2,
                "trainer.big": 1e10,
                "trainer.pinf": math.inf,
                "trainer.ninf": -math.inf,
                "trainer.nan": math.nan,
                "trainer.neg": -3,
                "trainer.plus": 3,
                "trainer.underscored": 1000,
                "algorithm.kl_ctrl.kl_coef": 1e-3,
                "trainer.version": "0.9.1",
            },
        },
    ),
    Case(
        "booleans",
        "trainer.val_before_train=false +trainer.yes=True '+trainer.str_true=\"true\"' +trainer.t=TRUE",
        expect={
            "*": {"trainer.val_before_train": False, "trainer.yes": True, "trainer.str_true": "true", "trainer.t": True}
        },
    ),
    Case(
        "relative_interpolation",
        " ".join(
            [
                "critic.ppo_max_token_len_per_gpu=12345",
                f"{A}.checkpoint.save_contents=[model]",
            ]
        ),
        expect={
            "*": {"critic.forward_max_token_len_per_gpu": 12345, f"{A}.checkpoint.load_contents": ["model"]},
        },
    ),
    Case(
        "relative_interpolation_overridden",
        "critic.forward_max_token_len_per_gpu=7 critic.ppo_max_token_len_per_gpu=9",
        expect={"*": {"critic.forward_max_token_len_per_gpu": 7}},
    ),
    Case(
        "repeated_keys",
        "trainer.nnodes=2 trainer.nnodes=3 +trainer.foo=1 +trainer.foo=2 +trainer.bar=1 trainer.bar=2",
        expect={"*": {"trainer.nnodes": 3, "trainer.foo": 1, "trainer.bar": 2}},
        rejects={M: ("trainer.foo",), F: ("trainer.foo",)},
    ),
    Case("section_replaced_by_scalar", "trainer.nnodes=3 trainer=x", expect={"*": {"trainer": "x"}}),
    # verl's documented way to pick the Megatron engine (ppo_megatron_trainer.yaml's header): a
    # defaults-list (config group) override, not a config key.
    Case(
        "model_engine_group_override",
        f"model_engine=megatron {A}.megatron.tensor_model_parallel_size=4",
        expect={
            "*": {
                f"{R}.megatron.tensor_model_parallel_size": 4,
                f"{A}.strategy": "megatron",
                "model_engine": "megatron",
            }
        },
        rejects={M: (), F: ()},
    ),
    Case(
        "model_engine_dp",
        "model_engine=dp trainer.nnodes=2",
        expect={"*": {f"{A}.strategy": "fsdp", "model_engine": "dp"}},
        rejects={M: (), F: ()},
    ),
    Case(
        "model_engine_veomni",
        "model_engine=veomni trainer.nnodes=2",
        expect={"*": {"model_engine": "veomni"}},
        rejects={M: (), F: ()},
    ),
    Case(
        "model_engine_torchtitan",
        "trainer.nnodes=2 model_engine=torchtitan",
        expect={"*": {"model_engine": "torchtitan"}},
        rejects={M: (), F: ()},
    ),
]

SCRIPTS = sorted(CASES_DIR.glob("*.sh")) if CASES_DIR.is_dir() else []
SCRIPT_REJECTS = {M: (f"{A}.megatron.grad_offload",)}  # verl 0.9.1's Megatron engine has no grad_offload


# -------------------------------------------------------------------------------------------- helpers

_PREFIX = b"python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer "


def _overrides_from_words(words: str):
    reading = read_bash_text(_PREFIX + words.encode() + b"\n", "t.sh")
    (launch,) = find_launches(reading.commands)
    return parse_hydra_args(launch.args)


def _overrides_from_script(path: Path):
    reading = read_bash(path, env=SCRIPT_ENV)
    launches = find_launches(reading.commands)
    assert len(launches) == 1, f"{path}: expected one launch, found {len(launches)}"
    return parse_hydra_args(launches[0].args)


@pytest.fixture(scope="module")
def hydra_ctx():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(CONFIG_DIR).resolve()), version_base=None):
        yield
    GlobalHydra.instance().clear()


_PARSER = None
_COMPOSED: dict = {}


def _key_of(override: str) -> str:
    global _PARSER
    if _PARSER is None:
        _PARSER = OverridesParser.create()
    (parsed,) = _PARSER.parse_overrides([override])
    return parsed.key_or_group


def _fails(config_name: str, overrides: list[str]) -> bool:
    try:
        compose(config_name, overrides=overrides)
    except ConfigCompositionException:
        return True
    return False


def _hydra_outcome(config_name: str, overrides: list[str]):
    """compose's result for ``overrides`` with the ones Hydra rejects dropped, and those (index: error).

    Hydra applies overrides in order and stops at the first it cannot apply, so the rejected ones are
    found greedily: the one compose's error names (when that is unambiguous), else the shortest
    failing prefix by bisection.
    """
    cached = _COMPOSED.get((config_name, tuple(overrides)))
    if cached is not None:
        return cached
    keys = [_key_of(o) for o in overrides]
    accepted: list[int] = []
    rejected: dict[int, str] = {}
    remaining = list(range(len(overrides)))
    while True:
        try:
            composed = compose(config_name, overrides=[overrides[i] for i in accepted + remaining])
        except ConfigCompositionException as exc:
            message = str(exc)
            named = [i for i in remaining if f"'{keys[i]}'" in message or overrides[i] in message]
            if len(named) == 1:
                pos = remaining.index(named[0])
            else:  # bisect for the shortest failing prefix of ``remaining``
                lo, hi = 0, len(remaining)  # prefix lo composes, prefix hi fails
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if _fails(config_name, [overrides[i] for i in accepted + remaining[:mid]]):
                        hi = mid
                    else:
                        lo = mid
                pos = hi - 1
            rejected[remaining[pos]] = " ".join(message.split())
            accepted += remaining[:pos]
            remaining = remaining[pos + 1 :]
            continue
        result = (composed, rejected)
        _COMPOSED[(config_name, tuple(overrides))] = result
        return result


@contextmanager
def _whole_tree():
    """apply_overrides with section pruning off: every section of the snapshot is built."""
    saved = config_tree.needed_sections
    config_tree.needed_sections = lambda tree, overrides, read=None: list(tree)
    try:
        yield
    finally:
        config_tree.needed_sections = saved


def _shardcheck(config_name: str, hydra):
    """What resolve_verl builds: a ``model_engine=<x>`` group choice picks the snapshot (resolve.py)."""
    overrides, engine, unread = resolve.split_group_choices(hydra.overrides)
    assert unread is None, f"{unread.text}: a group option shardcheck treats as a custom config; not a case here"
    defaults = load_defaults(resolve.MODEL_ENGINES[engine] if engine else config_name)
    with _whole_tree():
        whole = apply_overrides(defaults, overrides, fast=False)
    pruned = apply_overrides(defaults, overrides, fast=False)
    plain = apply_overrides(defaults, overrides)  # the plain tree where it decides, OmegaConf otherwise
    return whole, pruned, overrides, plain


def _keys(node, prefix: str = "") -> list[str]:
    """Every leaf key: scalars, lists, empty dicts, and interpolations (compared whole, resolved)."""
    out: list[str] = []
    for k in node:
        full = f"{prefix}{k}"
        if OmegaConf.is_interpolation(node, k):
            out.append(full)
            continue
        child = node._get_node(k)
        if OmegaConf.is_dict(child) and not child._is_none() and len(child) > 0:
            out.extend(_keys(child, full + "."))
        else:
            out.append(full)
    return out


def _select(cfg, key: str):
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException:
        return RAISES
    return value


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _shown(value) -> str:
    return "<cannot be read>" if value is RAISES else repr(value)


def _value_problems(wants: dict, config, keys, label: str) -> list[str]:
    problems = []
    for key in keys:
        want = wants[key]
        traced = config.get(key)
        got = RAISES if traced.unknown else traced.value
        if want is RAISES and got is RAISES:
            continue
        if want is RAISES or got is RAISES or not _same(want, got):
            problems.append(
                f"{label}key {key}: compose {_shown(want)}, shardcheck {_shown(got)}"
                + (f" (unknown: {traced.unknown})" if traced.unknown else "")
            )
    return problems


def _compare(
    case_id: str, config_name: str, hydra, compose_overrides: list[str], expect: dict, rejects: tuple | None
) -> None:
    assert not hydra.errors, [e.message for e in hydra.errors]
    assert [o.hydra_override().input_line for o in hydra.overrides] == compose_overrides
    composed, rejected = _hydra_outcome(config_name, compose_overrides)
    whole, pruned, applied, plain = _shardcheck(config_name, hydra)
    problems: list[str] = []

    # 0. the case's own expectations pin the oracle (and, below, shardcheck)
    if rejects is not None:
        got = tuple(hydra.overrides[i].key for i in sorted(rejected))
        assert sorted(got) == sorted(rejects), f"oracle: compose rejected {got}, the case says {rejects}"
    for key, value in expect.items():
        want = _select(composed, key)
        assert want is value or (want is not RAISES and value is not RAISES and _same(want, value)), (
            f"oracle: compose gives {key} = {_shown(want)}, the case expects {_shown(value)}"
        )

    # 1. the overrides compose rejects are the ones shardcheck records a Hydra-side issue for
    for label, config in (("", whole), ("[pruned tree] ", pruned), ("[plain tree] ", plain)):
        index = {id(item): i for i, item in enumerate(hydra.overrides)}
        flagged: dict[int, list] = {}
        for issue in config.issues:
            assert id(issue.override) in index, f"issue for an override not on the command line: {issue}"
            flagged.setdefault(index[id(issue.override)], []).append(issue)
        for i, text in enumerate(compose_overrides):
            hydra_side = [x for x in flagged.get(i, []) if x.kind in HYDRA_KINDS]
            others = [(x.kind, x.message) for x in flagged.get(i, [])]
            if i in rejected and not hydra_side:
                problems.append(
                    f"{label}override {text!r}: compose rejects it ({rejected[i]}) but shardcheck "
                    f"records no unknown_key/hydra issue ({others})"
                )
            if i not in rejected and hydra_side:
                problems.append(
                    f"{label}override {text!r}: compose accepts it but shardcheck records "
                    f"{[(x.kind, x.message) for x in hydra_side]}"
                )

    # 2. the whole tree: the same keys, and the same resolved value at every key compose has
    composed_keys = [k for k in _keys(composed) if k not in COMPOSE_ONLY_KEYS]
    ours = set(_keys(whole.cfg))
    for key in sorted(set(composed_keys) - ours):
        problems.append(f"key {key}: in compose's config ({_shown(_select(composed, key))}), not in shardcheck's")
    for key in sorted(ours - set(composed_keys)):
        problems.append(f"key {key}: in shardcheck's config ({_shown(_select(whole.cfg, key))}), not in compose's")
    extra = [k for k in expect if k not in composed_keys and k not in COMPOSE_ONLY_KEYS]
    wants = {key: _select(composed, key) for key in composed_keys + extra}
    problems += _value_problems(wants, whole, composed_keys + extra, "")

    # 3. the tree as shardcheck builds it: the sections it must keep are there, and agree
    kept = {k.split(".")[0] for k in pruned.cfg}
    must = {o.key.split(".")[0] for o in applied} | set(config_tree.READ_SECTIONS)
    for section in sorted((must & set(whole.cfg.keys())) - kept):
        problems.append(f"[pruned tree] section {section} is needed (read or overridden) but left out")
    kept_keys = [k for k in composed_keys + extra if k.split(".")[0] in kept]
    problems += _value_problems(wants, pruned, kept_keys, "[pruned tree] ")
    # 4. the plain tree (what a plain script is read with): every value compose has
    problems += _value_problems(wants, plain, composed_keys + extra, "[plain tree] ")

    assert not problems, f"{case_id} [{config_name}]: {len(problems)} disagreement(s):\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("config_name", CONFIG_NAMES)
@pytest.mark.parametrize("case", SYNTHETIC, ids=lambda c: c.name)
def test_synthetic_overrides_match_compose(hydra_ctx, case: Case, config_name: str) -> None:
    hydra = _overrides_from_words(case.words)
    words = shlex.split(case.words)  # bash's word splitting and quote removal, independently
    lines = [o.hydra_override().input_line for o in hydra.overrides]
    assert lines == words, "shardcheck's bash reading differs from shlex"
    expect = {**case.expect.get("*", {}), **case.expect.get(config_name, {})}
    _compare(case.name, config_name, hydra, words, expect, case.rejects.get(config_name))


@pytest.mark.skipif(not SCRIPTS, reason=f"no scripts in {CASES_DIR}")
@pytest.mark.parametrize("config_name", CONFIG_NAMES)
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_overrides_match_compose(hydra_ctx, script: Path, config_name: str) -> None:
    """The scripts' own override lists (under their ppo_megatron_trainer, and under ppo_trainer)."""
    hydra = _overrides_from_script(script)
    assert hydra.config_name is not None and hydra.config_name.text.removesuffix(".yaml") == M
    assert all(o.unknown is None for o in hydra.overrides), [o.text for o in hydra.overrides if o.unknown]
    overrides = [o.hydra_override().input_line for o in hydra.overrides]
    _compare(script.stem, config_name, hydra, overrides, {}, SCRIPT_REJECTS.get(config_name))


@pytest.mark.skipif(not SCRIPTS, reason=f"no scripts in {CASES_DIR}")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_rejected_override_is_an_error(hydra_ctx, script: Path) -> None:
    """The override verl 0.9.1 rejects (grad_offload) fails compose on its own, and shardcheck says so."""
    hydra = _overrides_from_script(script)
    (bad,) = [o for o in hydra.overrides if o.key == f"{A}.megatron.grad_offload"]
    with pytest.raises(ConfigCompositionException, match="grad_offload"):
        compose(M, overrides=[o.hydra_override().input_line for o in hydra.overrides])
    compose(M, overrides=[o.hydra_override().input_line for o in hydra.overrides if o is not bad])
    config = apply_overrides(load_defaults(M), hydra.overrides)
    issues = [x for x in config.issues if x.override is bad]
    assert [x.kind for x in issues] == ["unknown_key"], issues
    assert [x for x in config.issues if x.override is not bad and x.kind in HYDRA_KINDS] == []


@pytest.mark.parametrize("config_name", CONFIG_NAMES)
def test_model_engine_key(hydra_ctx, config_name: str) -> None:
    """compose's config has a top-level ``model_engine`` (the group choice); shardcheck should read it too."""
    composed = compose(config_name)
    config = apply_overrides(load_defaults(config_name), ())
    traced = config.get("model_engine")
    assert (traced.unknown, traced.value) == (None, _select(composed, "model_engine"))


@pytest.mark.parametrize("word", ["~trainer.val_before_train", "~critic.ppo_max_token_len_per_gpu"])
def test_unquoted_tilde_deletion(word: str) -> None:
    """bash leaves ``~name.with.dots`` as it is when no such user exists; it is a Hydra deletion."""
    hydra = _overrides_from_words(word)
    assert not hydra.errors, [(e.text, e.message) for e in hydra.errors]
    assert [(o.kind, o.key, o.hydra_override().input_line) for o in hydra.overrides] == [("delete", word[1:], word)]


def test_hydra_parse_error(hydra_ctx) -> None:
    """A word Hydra's grammar rejects fails compose and is a parse error for shardcheck, not an override."""
    from hydra.errors import OverrideParseException

    word = "+trainer.with_equals=a=b"
    with pytest.raises(OverrideParseException):
        compose(M, overrides=[word])
    hydra = _overrides_from_words(word)
    assert hydra.overrides == () and [e.text for e in hydra.errors] == [word]


@pytest.mark.parametrize("config_name", CONFIG_NAMES)
def test_bundled_snapshot_is_the_generated_yaml(config_name: str) -> None:
    """The defaults shardcheck starts from are verl's own generated file in VERL_CONFIG_DIR."""
    import yaml

    generated = Path(CONFIG_DIR) / f"_generated_{config_name}.yaml"
    if not generated.is_file():
        pytest.skip(f"{generated} is absent")
    tree = dict(load_defaults(config_name).tree)
    # shardcheck adds the group choice the composed config holds and the generated file leaves out
    assert tree.pop("model_engine") == {"ppo_trainer": "dp", "ppo_megatron_trainer": "megatron"}[config_name]
    assert tree == yaml.safe_load(generated.read_text())
