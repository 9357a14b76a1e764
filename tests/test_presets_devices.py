"""Model presets by exact name or declared alias (never a prefix); device presets, fragments, --device-memory."""

from __future__ import annotations

import pytest

from shardcheck.cli import main
from shardcheck.errors import UsageError
from shardcheck.memory import devices
from shardcheck.memory.devices import find_device
from shardcheck.models.facts import load_model, match_preset

CASE = "tests/data/cases/qwen3_235b_256k_after.sh"


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("Qwen3-8B", "Qwen3-8B"),
        ("qwen3-8b", "Qwen3-8B"),
        ("Meta-Llama-3.1-8B", "Llama-3.1-8B"),
        ("Qwen3-235B-A22B-Instruct-2507", "Qwen3-235B-A22B-Instruct-2507"),
    ],
)
def test_preset_by_name_or_alias(name, preset):
    assert match_preset(name) == preset


@pytest.mark.parametrize("name", ["Qwen2.5-7B-Instruct", "Qwen3-8B-Base", "Llama-3.1-8B-Instruct"])
def test_preset_never_by_prefix(name):
    """An Instruct or Base model is not its family's preset: their configs differ (e.g. max_position_embeddings)."""
    assert match_preset(name) is None
    model, problem = load_model(f"/models/{name}", True)
    if model is not None:  # the bundled catalogue has its own entry, never the family's preset
        assert model.name.endswith(f"/{name}") and model.source.startswith(f"catalogue: {model.name}, from ")
        return
    assert "different model" in problem


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("h200", "H200-SXM-141GB"),
        ("h20", "H20-96GB"),
        ("a100-80", "A100-80GB-SXM"),
        ("910c", "Ascend-910C"),
        ("l40s", "L40S-48GB"),
        ("mi355x", "MI355X"),
        ("gb200", "GB200"),
        ("4090", "RTX-4090-24GB"),
    ],
)
def test_device_presets(text, name):
    assert find_device(text).name == name


def test_device_fragment_inside_a_number_names_nothing(monkeypatch):
    """Without an H20 preset, ``h20`` must not silently become the H200."""
    table = {k: v for k, v in devices._table().items() if not k.startswith("H20-")}
    monkeypatch.setattr(devices, "_table", lambda: table)
    with pytest.raises(UsageError, match="not a known device"):
        find_device("h20")


@pytest.mark.parametrize("text", ["ascend", "80", "a100"])
def test_ambiguous_device_fragment(text):
    with pytest.raises(UsageError, match="ambiguous"):
        find_device(text)


def test_device_memory(capsys):
    assert main(["memory", CASE, "--env", "WORK_DIR=/data", "--device-memory", "96GiB"]) in (0, 1)
    assert "96 GiB device (96.0 GiB)" in capsys.readouterr().out
    assert main(["memory", CASE, "--device", "h200", "--device-memory", "96GiB"]) == 2


def _oom(tmp_path, model: str):
    from shardcheck.api import check

    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer "
        f"actor_rollout_ref.model.path=/models/{model} trainer.nnodes=1 trainer.n_gpus_per_node=8 "
        "data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 algorithm.adv_estimator=grpo\n"
    )
    return [f for f in check(path).findings if f.rule == "MEM-TRAIN-OOM"]


def test_overflow_beyond_every_preset_is_an_error_on_an_assumed_device(tmp_path):
    """trainer.device=cuda names no variant; when the certain terms exceed even the largest cuda preset,
    no variant can hold them: an error, not a warning."""
    found = _oom(tmp_path, "Qwen3-235B-A22B")
    assert found and {f.severity for f in found} == {"error"} and "even the largest cuda preset" in found[0].message


def test_overflow_a_larger_variant_could_hold_stays_a_warning(tmp_path):
    found = _oom(tmp_path, "Qwen3-32B")  # certain on an H100, not on a B300
    assert found and all(f.severity == "warning" and "even the largest" not in f.message for f in found)
