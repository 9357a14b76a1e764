"""shardcheck's vLLM max-length and scheduler checks against vLLM 0.24.0's own functions, on random configs.

vLLM cannot be imported here (no CUDA build, and verl 0.9.1's pin pulls torch 2.11); its pure
functions are taken from the wheel instead: ``_get_and_verify_max_len`` (vllm/config/model.py),
``derive_max_model_len_and_key`` (vllm/transformers_utils/model_arch_config_convertor.py) and
``SchedulerConfig.verify_max_model_len`` (vllm/config/scheduler.py) are compiled from the wheel's
source with stand-ins for logging, envs and the platform. VLLM_WHEEL names the wheel
(`pip download --no-deps vllm==0.24.0`).
"""

from __future__ import annotations

import ast
import os
import random
import zipfile
from types import SimpleNamespace

import pytest
from launches import length_facts

from shardcheck.models.facts import _rope
from shardcheck.rules.vllm_engine import max_len_error

WHEEL = os.environ.get("VLLM_WHEEL")
pytestmark = pytest.mark.skipif(
    not WHEEL or not os.path.isfile(WHEEL), reason="vLLM 0.24.0 wheel not found (VLLM_WHEEL)"
)


def _function(path: str, name: str, cls: str | None = None, wheel: str | None = None):
    source = zipfile.ZipFile(wheel or WHEEL).read(path).decode()
    body = ast.parse(source).body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    namespace = {
        "Any": object,
        "PretrainedConfig": object,
        "ModelArchitectureConfig": object,
        "Self": object,
        "logger": SimpleNamespace(warning=lambda *a: None, warning_once=lambda *a: None, info=lambda *a: None),
        "envs": SimpleNamespace(VLLM_ALLOW_LONG_MAX_MODEL_LEN=False),
        "current_platform": SimpleNamespace(check_max_model_len=lambda n: n),
        "is_rope_parameters_nested": lambda rp: False,
        # vLLM 0.12.0: transformers < 5 (its pin), its layer-type names (transformers configuration_utils)
        "Version": __import__("packaging.version").version.Version,
        "version": lambda package: "4.57.1",
        "ALLOWED_LAYER_TYPES": ("full_attention", "sliding_attention", "chunked_attention", "linear_attention"),
    }
    exec(compile(ast.Module([node], []), path, "exec"), namespace)  # noqa: S102 - vLLM's own function text
    return namespace[name]


def _random_config(rng: random.Random) -> dict:
    config = {
        "model_type": rng.choice(["qwen3", "llama", "deepseek_v3"]),
        "max_position_embeddings": rng.choice([32768, 40960, 131072, 163840, 262144]),
    }
    rope = rng.choice([None, "yarn", "yarn-legacy", "llama3", "linear", "dynamic", "longrope"])
    if rope in ("yarn", "yarn-legacy"):
        config["rope_scaling"] = {
            "rope_type" if rope == "yarn" else "type": "yarn",
            "factor": rng.choice([2.0, 4.0, 8.0, 40]),
            "original_max_position_embeddings": rng.choice([4096, 32768, 65536]),
        }
    elif rope is not None:
        config["rope_scaling"] = {
            "rope_type": rope,
            "factor": rng.choice([2.0, 8.0]),
            "original_max_position_embeddings": 8192,
        }
    if rng.random() < 0.15:
        config["model_max_length"] = rng.choice([65536, 300000])
    return config


def _facts(config: dict, rope, *, full: bool = False):
    """The model facts shardcheck would read from ``config`` (``full``: with the whole config kept)."""
    more = {"config": config} if full else {}
    return length_facts(
        config["model_type"], config["max_position_embeddings"], rope, config.get("model_max_length"), **more
    )


def _same_verdict(ours: str | None, theirs: str | None, *context) -> None:
    """Both refuse or neither does, and vLLM's text starts with shardcheck's (vLLM appends how to override it)."""
    assert (ours is None) == (theirs is None), (*context, ours, theirs)
    if ours is not None:
        assert theirs.startswith(ours), (ours, theirs)


def test_max_model_len_agrees_with_vllm():
    verify = _function("vllm/config/model.py", "_get_and_verify_max_len")
    derive = _function(
        "vllm/transformers_utils/model_arch_config_convertor.py",
        "derive_max_model_len_and_key",
        cls="ModelArchConfigConvertorBase",
    )
    rng = random.Random(11)
    raised = 0
    for _ in range(3000):
        config = _random_config(rng)
        rope = _rope(config)  # transformers patches the legacy "type" key into rope_type, as shardcheck does
        hf = SimpleNamespace(
            model_type=config["model_type"],
            max_position_embeddings=config["max_position_embeddings"],
            model_max_length=config.get("model_max_length"),
            rope_parameters=rope,
        )
        arch = SimpleNamespace(derived_max_model_len_and_key=derive(SimpleNamespace(hf_text_config=hf)))
        # verl passes max_model_len <= max_position_embeddings (its own check), None -> max_position_embeddings
        mml = rng.choice([None, 4096, 32768, 65536, 131072, 262144])
        mml = min(mml or hf.max_position_embeddings, hf.max_position_embeddings)
        try:
            verify(hf, arch, None, mml, False, None)
            theirs = None
        except ValueError as exc:
            theirs = str(exc)
            raised += 1
        _same_verdict(max_len_error(_facts(config, rope), mml), theirs, config, mml)
    assert 100 < raised < 2900


@pytest.mark.parametrize("version", ["0.24.0", "0.12.0"])
def test_scheduler_token_budget_agrees_with_vllm(version):
    """VLLM-MNS-MNBT's condition and text against ``SchedulerConfig.verify_max_model_len`` of vLLM 0.24.0
    (VLLM_WHEEL) and 0.12.0 (verl 0.7.0 … 0.8.0; VLLM_OLD_WHEELS)."""
    wheel = None if version == "0.24.0" else _old_wheel(version)
    verify = _function("vllm/config/scheduler.py", "verify_max_model_len", cls="SchedulerConfig", wheel=wheel)
    rng = random.Random(13 if version == "0.24.0" else 23)
    fired = 0
    for _ in range(2000):
        cfg = SimpleNamespace(
            max_num_batched_tokens=rng.choice([64, 128, 256, 2048, 8192]),
            max_num_seqs=rng.choice([1, 64, 256, 1024]),
            enable_chunked_prefill=True,
            max_num_partial_prefills=1,
            max_long_partial_prefills=1,
            long_prefill_token_threshold=0,
        )
        try:
            verify(cfg, rng.choice([4096, 32768]))
            theirs = None
        except ValueError as exc:
            theirs = str(exc)
        ours = cfg.max_num_batched_tokens < cfg.max_num_seqs  # VLLM-MNS-MNBT's condition (chunked prefill on)
        fired += ours
        assert ours == (theirs is not None), (cfg, theirs)
        if ours:
            assert theirs == (
                f"max_num_batched_tokens ({cfg.max_num_batched_tokens}) must be greater than or equal "
                f"to max_num_seqs ({cfg.max_num_seqs})."
            )
    assert fired > 100


def test_startup_free_memory_check_agrees_with_vllm():
    """VLLM-MEM-STARTUP's condition and text against vLLM's ``request_memory`` (vllm/v1/worker/utils.py)."""
    import math

    from shardcheck.rules.vllm_engine import startup_memory_error

    source = zipfile.ZipFile(WHEEL).read("vllm/v1/worker/utils.py").decode()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "request_memory")
    gib = 1 << 30
    namespace = {
        "math": math,
        "MemorySnapshot": object,
        "CacheConfig": object,
        "format_gib": lambda b: f"{round(b / gib, 2)}",  # vllm/utils/mem_utils.py format_gib
    }
    exec(compile(ast.Module([node], []), "utils.py", "exec"), namespace)  # noqa: S102 - vLLM's own function text
    request_memory = namespace["request_memory"]
    rng = random.Random(17)
    raised = 0
    for _ in range(3000):
        total = rng.choice([24, 40, 80, 94, 141, 192]) * gib - rng.randrange(0, gib)
        free = rng.randrange(0, total + 1)
        util = rng.choice([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95])
        snapshot = SimpleNamespace(total_memory=total, free_memory=free, device_="")
        try:
            request_memory(snapshot, SimpleNamespace(gpu_memory_utilization=util))
            theirs = None
        except ValueError as exc:
            theirs = str(exc).replace("device  (", "device (")  # no device name in shardcheck's text
            raised += 1
        ours = startup_memory_error(total, free, util)
        assert (ours is None) == (theirs is None), (total, free, util, ours, theirs)
        if ours is not None:
            assert theirs.startswith(ours), (ours, theirs)  # vLLM adds what to do
    assert 300 < raised < 2700


OLD_WHEELS = os.environ.get("VLLM_OLD_WHEELS")  # a folder with vllm-0.8.5/0.9.1/0.12.0-*.whl (verl 0.4-0.8's)


@pytest.mark.parametrize("version", ["0.8.5", "0.9.1"])
def test_max_model_len_agrees_with_older_vllm(version):
    """The same check against the module-level ``_get_and_verify_max_len`` of vllm/config.py in the vLLM versions
    verl 0.4.0 … 0.6.0 pin (0.8.5, 0.9.1): same condition, same text (vLLM appends how to override it)."""
    source = zipfile.ZipFile(_old_wheel(version)).read("vllm/config.py").decode()
    node = next(
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_get_and_verify_max_len"
    )
    namespace = {
        "Optional": object,
        "Union": object,
        "Any": object,
        "PretrainedConfig": object,
        "logger": SimpleNamespace(warning=lambda *a: None),
        "envs": SimpleNamespace(VLLM_ALLOW_LONG_MAX_MODEL_LEN=False),
    }
    exec(compile(ast.Module([node], []), "vllm/config.py", "exec"), namespace)  # noqa: S102 - vLLM's own text
    verify = namespace["_get_and_verify_max_len"]
    rng = random.Random(17)
    raised = 0
    for _ in range(3000):
        config = _random_config(rng)
        rope = _rope(config)
        hf = SimpleNamespace(
            model_type=config["model_type"],
            max_position_embeddings=config["max_position_embeddings"],
            model_max_length=config.get("model_max_length"),
            rope_scaling=rope,
        )
        mml = rng.choice([None, 4096, 32768, 65536, 131072, 262144])
        mml = min(mml or hf.max_position_embeddings, hf.max_position_embeddings)
        try:
            verify(hf, mml, False, None)
            theirs = None
        except ValueError as exc:
            theirs = str(exc)
            raised += 1
        _same_verdict(max_len_error(_facts(config, rope), mml, version), theirs, config, mml)
    assert 100 < raised < 2900


def _old_wheel(version: str) -> str:
    import glob

    found = sorted(glob.glob(os.path.join(OLD_WHEELS or "", f"vllm-{version}-*.whl"))) if OLD_WHEELS else []
    if not found:
        pytest.skip(f"no vllm {version} wheel in VLLM_OLD_WHEELS")
    return found[0]


def test_max_model_len_agrees_with_vllm_0_12_0():
    """The same check against vLLM 0.12.0 (verl 0.7.0 … 0.8.0): vllm/config/model.py ``_get_and_verify_max_len``
    on the config as ``patch_rope_parameters`` (vllm/transformers_utils/config.py) leaves it: rope_scaling, or
    ``{"rope_type": "default"}`` when there is only rope_theta, becomes rope_parameters and any RoPE parameters
    make the derived length a float."""
    wheel = _old_wheel("0.12.0")
    verify = _function("vllm/config/model.py", "_get_and_verify_max_len", wheel=wheel)
    patch = _function("vllm/transformers_utils/config.py", "patch_rope_parameters", wheel=wheel)
    patch.__globals__["patch_rope_parameters_dict"] = _function(
        "vllm/transformers_utils/config.py", "patch_rope_parameters_dict", wheel=wheel
    )
    rng = random.Random(19)
    raised = 0
    for _ in range(3000):
        config = _random_config(rng)
        if rng.random() < 0.7:
            config["rope_theta"] = rng.choice([10000.0, 1000000.0])
        hf = SimpleNamespace(
            model_type=config["model_type"],
            max_position_embeddings=config["max_position_embeddings"],
            model_max_length=config.get("model_max_length"),
            rope_scaling=dict(config["rope_scaling"]) if "rope_scaling" in config else None,
        )
        if "rope_theta" in config:
            hf.rope_theta = config["rope_theta"]
        patch(hf)  # vLLM's get_config does this to every config it loads
        mml = rng.choice([None, 4096, 32768, 65536, 131072, 262144])
        mml = min(mml or hf.max_position_embeddings, hf.max_position_embeddings)
        try:
            verify(hf, None, mml, False, None)
            theirs = None
        except ValueError as exc:
            theirs = str(exc)
            raised += 1
        _same_verdict(max_len_error(_facts(config, _rope(config), full=True), mml, "0.12.0"), theirs, config, mml)
    assert 100 < raised < 2900
