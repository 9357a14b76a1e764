"""``--model-config`` takes the model's folder as well as its config.json (issue 12, item 4)."""

from __future__ import annotations

import json

import pytest

from shardcheck.api import check, memory
from shardcheck.cli import main

LAUNCH = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=/nowhere/model "
    "trainer.n_gpus_per_node=8 trainer.nnodes=1\n"
)
CONFIG = {
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
}


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "run.sh"
    p.write_text(LAUNCH)
    return p


def test_a_folder_reads_its_config_json(tmp_path, script):
    folder = tmp_path / "Some-Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    by_folder = check(script, model_config=str(folder))
    by_file = check(script, model_config=str(folder / "config.json"))
    assert by_folder.error is None and by_folder.job.model is not None
    assert by_folder.job.model.num_hidden_layers == 28 and by_folder.job.model.hidden_size == 3584
    assert by_folder.job.model.source == by_file.job.model.source
    assert [f.message for f in by_folder.findings] == [f.message for f in by_file.findings]
    assert memory(script, model_config=str(folder)).error is None


@pytest.mark.parametrize("inside", [None, "dir"])
def test_a_folder_without_a_config_json_is_one_line(tmp_path, script, inside, capsys):
    folder = tmp_path / "Empty-Model"
    folder.mkdir()
    if inside == "dir":
        (folder / "config.json").mkdir()
    for run in (check, memory):
        result = run(script, model_config=str(folder))
        assert result.error and "\n" not in result.error
        assert "Empty-Model" in result.error
        assert ("has no config.json" if inside is None else "not a regular file") in result.error
    assert main(["check", str(script), "--model-config", str(folder)]) == 2
    err = capsys.readouterr()
    assert "has no config.json" in err.out + err.err or inside == "dir"
