"""The rollout engines' versions (frameworks/verl/engine_versions.py): the one the chosen verl pins, or
``--vllm-version`` / ``--sglang-version``; the report says which and why; the VLLM-* rules whose text differs
between vLLM versions follow it."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from launches import length_facts

from shardcheck.api import check
from shardcheck.cli import main
from shardcheck.errors import UsageError
from shardcheck.frameworks.verl import engine_versions
from shardcheck.frameworks.verl.versions import catalogue

RO = "actor_rollout_ref.rollout"


def _script(tmp_path, *words: str) -> Path:
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B trainer.nnodes=1 "
        "trainer.n_gpus_per_node=6 data.train_batch_size=12 actor_rollout_ref.actor.ppo_mini_batch_size=6 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 actor_rollout_ref.rollout.name=vllm "
        + " ".join(words)
        + "\n"
    )
    return script


EPLB = (
    f"{RO}.tensor_model_parallel_size=2",
    f"{RO}.data_parallel_size=3",
    f"{RO}.expert_parallel_size=6",
    f"+{RO}.engine_kwargs.vllm.enable_eplb=True",
)


def test_every_bundled_verl_has_its_pins():
    for version in catalogue().versions:
        assert engine_versions.choose("vllm", None, version).source == "verl"
        assert engine_versions.choose("sglang", None, version).source == "verl"
    assert engine_versions.choose("vllm", None, "0.9.1").version == "0.24.0"
    assert engine_versions.choose("vllm", None, "0.6.1").version == "0.11.0"
    assert engine_versions.choose("sglang", None, "0.8.0").version == "0.5.8"
    assert engine_versions.choose("vllm", None, "9.9.9").version is None


def test_a_flag_overrides_the_pin_and_accepts_a_minor():
    chosen = engine_versions.choose("vllm", "0.11", "0.9.1")
    assert (chosen.version, chosen.source) == ("0.11.0", "flag")
    with pytest.raises(UsageError, match="known: 0.8.5, 0.9.1, 0.11.0, 0.12.0, 0.24.0"):
        engine_versions.normalize("vllm", "0.7")


def test_eplb_text_follows_the_vllm_version(tmp_path):
    script = _script(tmp_path, *EPLB)

    def eplb(**kwargs):
        (f,) = [f for f in check(script, **kwargs).findings if f.rule == "VLLM-EPLB"]
        return f.message

    assert eplb(verl_version="0.9.1").startswith(
        "EPLB currently only supports even distribution of experts across ranks. Got 128 experts and 6 EP ranks."
    )
    old = eplb(verl_version="0.9.1", vllm_version="0.11.0")
    assert old.startswith("AssertionError: EPLB currently only supports even distribution of experts across ranks.")
    assert "vLLM 0.11.0" in old and "Got 128" not in old
    assert eplb(verl_version="0.6.1").startswith("AssertionError")  # verl 0.6.1 pins vllm<=0.11.0
    # verl 0.6.0 pins vllm<=0.9.1, which has no EPLB: enable_eplb itself is refused (vllm/engine/arg_utils.py)
    assert eplb(verl_version="0.6.0").startswith("vLLM 0.9.1 has no expert load balancing")


def test_eplb_is_no_engine_argument_before_vllm_0_11_even_without_ep(tmp_path):
    script = _script(tmp_path, f"+{RO}.engine_kwargs.vllm.enable_eplb=True")
    (f,) = [f for f in check(script, verl_version="0.6.0").findings if f.rule == "VLLM-EPLB"]
    assert "unrecognized arguments: --enable-eplb" in f.message
    (f,) = [f for f in check(script, verl_version="0.9.1").findings if f.rule == "VLLM-EPLB"]
    assert f.message.startswith("enable_expert_parallel must be True to use EPLB.")


def test_text_and_json_say_which_engine_version_and_why(tmp_path, capsys):
    script = _script(tmp_path)
    assert main(["check", "--verl-version", "0.9.1", str(script)]) in (0, 1)
    out = capsys.readouterr().out
    assert "vllm      rules of vLLM 0.24.0, the one verl 0.9.1 pins (vllm==0.24.0)" in out
    main(["check", "--format", "json", "--verl-version", "0.7.0", "--sglang-version", "0.5.12", str(script)])
    (result,) = json.loads(capsys.readouterr().out)["results"]
    versions = result["rollout_engine_versions"]
    assert versions["vllm"]["version"] == "0.12.0" and "verl 0.7.0 pins" in versions["vllm"]["reason"]
    assert versions["sglang"] == {"version": "0.5.12", "reason": "SGLang 0.5.12 as given by --sglang-version"}


@pytest.mark.parametrize("flag", ["--vllm-version", "--sglang-version"])
def test_an_unknown_engine_version_is_one_line_and_exit_2(flag, tmp_path, capsys):
    assert main(["check", flag, "7.7.7", str(_script(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert "known:" in err and len(err.splitlines()) == 1


WHEELS = __import__("os").environ.get("VERL_WHEELS")


@pytest.mark.skipif(not WHEELS, reason="VERL_WHEELS not set (a folder of verl-<version>-*.whl)")
@pytest.mark.parametrize("version", catalogue().releases)
def test_the_pins_are_the_wheels_own(version):
    """Each release's wheel names the pin the table cites in its Requires-Dist (the vllm / sglang extras)."""
    found = sorted(Path(WHEELS).glob(f"verl-{version}-*.whl"))
    if not found:
        pytest.skip(f"no verl {version} wheel in VERL_WHEELS")
    with zipfile.ZipFile(found[0]) as wheel:
        meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(meta).decode()
    requires = [
        line.split(":", 1)[1].split(";")[0].replace(" ", "")
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    vllm_pin = engine_versions.VERL_VLLM[version][1].split(";")[0]
    sglang_pin = engine_versions.VERL_SGLANG[version][1]
    assert any(
        r == vllm_pin or sorted(r.removeprefix("vllm").split(",")) == sorted(vllm_pin.removeprefix("vllm").split(","))
        for r in requires
        if r.startswith("vllm")
    ), requires
    assert any(r.replace("[openai,srt]", "") == sglang_pin for r in requires if r.startswith("sglang")), requires


def test_vllm_0_12_0_words_eplb_as_0_11_0(tmp_path):
    """vLLM 0.12.0 (verl 0.7.0 … 0.8.0) still asserts the even split (fused_moe/layer.py FusedMoE.__init__)."""
    script = _script(tmp_path, *EPLB)
    (f,) = [f for f in check(script, verl_version="0.7.1").findings if f.rule == "VLLM-EPLB"]
    assert f.message.startswith("AssertionError: EPLB currently only supports even distribution of experts")
    assert "vLLM 0.12.0" in f.message and "Got 128" not in f.message
    (f,) = [f for f in check(script, verl_version="0.9.0").findings if f.rule == "VLLM-EPLB"]
    assert "Got 128 experts and 6 EP ranks" in f.message


def _facts(rope, config, mml_cap=65536):
    return length_facts("llama", 131072, rope, mml_cap, config=config)


@pytest.mark.parametrize(
    ("rope", "config", "shown"),
    [
        # llama3 RoPE adds no factor; 0.12.0 and 0.24.0 still multiply by 1.0 (a float), 0.11.0 does not
        ({"rope_type": "llama3", "factor": 8.0}, {"rope_theta": 5e5}, {"0.11.0": "65536", "0.12.0": "65536.0"}),
        # no rope_scaling: 0.12.0 makes {"rope_type": "default"} RoPE parameters from rope_theta and multiplies
        (None, {"rope_theta": 1e6}, {"0.11.0": "65536", "0.12.0": "65536.0", "0.24.0": "65536"}),
        (None, {}, {"0.11.0": "65536", "0.12.0": "65536", "0.24.0": "65536"}),
    ],
)
def test_the_derived_max_length_prints_as_each_vllm_does(rope, config, shown):
    """vllm 0.11.0 / 0.12.0 vllm/config/model.py _get_and_verify_max_len; 0.12.0 transformers_utils/config.py
    patch_rope_parameters. Same condition in all (131072 > model_max_length 65536), different print form."""
    from shardcheck.rules.vllm_engine import max_len_error

    for version, text in shown.items():
        message = max_len_error(_facts(rope, config), 131072, version)
        assert f"(model_max_length={text} or model_max_length=65536 in model's config.json)" in message, version
    assert max_len_error(_facts(rope, config), 65536, "0.12.0") is None


def test_the_kv_cache_error_is_quoted_as_each_vllm_spells_it(tmp_path):
    """vLLM up to 0.12.0 says "models's" (v1/core/kv_cache_utils.py check_enough_kv_cache_memory), 0.24.0 "model's"."""
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B trainer.nnodes=1 "
        "trainer.n_gpus_per_node=8 data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 "
        f"{RO}.name=vllm {RO}.tensor_model_parallel_size=1 {RO}.gpu_memory_utilization=0.3 "
        f"{RO}.max_model_len=40960 actor_rollout_ref.actor.fsdp_config.param_offload=True "
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True\n"
    )

    def kv(**kwargs):
        return [f.message for f in check(script, device="h100", **kwargs).findings if f.rule == "MEM-ROLLOUT-KV"]

    for version, whose in (("0.7.0", "models's"), ("0.6.1", "models's"), ("0.9.1", "model's")):
        (message,) = kv(verl_version=version)
        assert f"To serve at least one request with the {whose} max seq len" in message, version
