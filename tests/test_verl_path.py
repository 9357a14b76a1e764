"""``--verl-path DIR`` (and the ``verl-path`` setting): a verl directory's config tree read as data, its version
recognised by content (frameworks/verl/verl_path.py).

Without anything outside the repository, checkout-shaped trees are written from the catalogue's composed configs
(a flat ``ppo_trainer.yaml`` composes to itself), as they are or with a key added or a default changed (a fork).
With ``VERL_CONFIGS_DIR`` (tools/fetch_reference_wheels.py: ``<version>/verl/...`` of every release's wheel), each
release's real tree, with its defaults lists and groups, is recognised as that release, a copy with one key added
as a fork of it, and judging a script against the directory gives the same values as against the catalogue.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from shardcheck.api import check
from shardcheck.cli import main
from shardcheck.frameworks.verl import verl_path
from shardcheck.frameworks.verl.versions import catalogue, version_doc

CASES = Path(__file__).parent / "data" / "cases"
AFTER = CASES / "qwen3_235b_256k_after.sh"
GRAD = "actor_rollout_ref.actor.megatron.grad_offload"
CONFIGS_DIR = os.environ.get("VERL_CONFIGS_DIR")


@pytest.fixture(autouse=True)
def _no_version_given(monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)


def _tree(root: Path, version: str, edit=None) -> Path:
    """A checkout-shaped tree (``root/verl/trainer/config``) holding verl ``version``'s composed PPO configs as flat
    files; ``edit(name, tree)`` changes them first (a fork)."""
    folder = root / "verl" / "trainer" / "config"
    folder.mkdir(parents=True)
    for name in verl_path.COMPARED:
        tree = json.loads(json.dumps(version_doc(version)["configs"][name]))
        if edit is not None:
            edit(name, tree)
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
    return root


def _errors(result):
    return [f for f in result.findings if f.severity == "error"]


def test_a_release_tree_is_recognised_by_its_content(tmp_path):
    root = _tree(tmp_path / "checkout", "0.9.0")
    found = verl_path.load(str(root))
    assert found.match.exact and found.match.version == "0.9.0" and found.label == "0.9.0"
    r = check(AFTER, verl_path=str(root))
    assert (r.job.framework_version, r.job.version_source) == ("0.9.0", "path")
    assert r.job.verl_path == (str(root), "0.9.0", True)
    assert "equals verl 0.9.0's" in r.job.version_reason
    assert r.layout_valid is True and not _errors(r)  # 0.9.0 has grad_offload


def test_a_fork_with_one_extra_key(tmp_path):
    def add_grad_offload(name, tree):
        if name == "ppo_megatron_trainer":
            tree["actor_rollout_ref"]["actor"]["megatron"]["grad_offload"] = False

    root = _tree(tmp_path / "fork", "0.9.1", add_grad_offload)
    found = verl_path.load(str(root))
    assert found.match.version == "0.9.1" and not found.match.exact
    assert found.match.added == (GRAD,) and not found.match.removed and not found.match.changed
    r = check(AFTER, verl_path=str(root))
    assert (r.job.framework_version, r.job.version_source, r.job.verl_path) == (
        "0.9.1",
        "path",
        (str(root), "0.9.1", False),
    )
    assert "a fork of (or a revision near) verl 0.9.1" in r.job.version_reason and GRAD in r.job.version_reason
    assert not [f for f in r.findings if f.rule == "VERL-CFG-UNKNOWN-KEY"]  # the fork has the key
    on_release = check(AFTER, verl_version="0.9.1")
    assert [f.rule for f in _errors(on_release)] == ["VERL-CFG-UNKNOWN-KEY"]  # the release lacks it


def test_a_fork_default_is_its_own(tmp_path):
    ro = "actor_rollout_ref.rollout"

    def fewer_seqs(name, tree):
        tree["actor_rollout_ref"]["rollout"]["max_num_seqs"] = 7

    root = _tree(tmp_path / "fork", "0.8.0", fewer_seqs)
    found = verl_path.load(str(root))
    assert found.match.version == "0.8.0" and found.match.changed == (f"{ro}.max_num_seqs",)
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=8\n")
    r = check(script, verl_path=str(root))
    seqs = r.job.value(f"{ro}.max_num_seqs")
    assert seqs.value == 7 and "0.8.0+fork" in seqs.origin.text
    assert check(script, verl_version="0.8.0").job.value(f"{ro}.max_num_seqs").value != 7


def test_the_package_folder_and_the_config_folder_work_too(tmp_path):
    root = _tree(tmp_path / "site-packages", "0.7.0")
    for given in (root / "verl", root / "verl" / "trainer" / "config"):
        assert verl_path.load(str(given)).match.version == "0.7.0"


def test_json_reports_the_path(tmp_path, capsys):
    root = _tree(tmp_path / "checkout", "0.9.0")
    assert main(["check", "--format", "json", "--verl-path", str(root), str(AFTER)]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["version_source"] == "path"
    assert result["verl_path"] == {"directory": str(root), "matches": "0.9.0", "exact": True}
    assert check(AFTER, verl_version="0.9.0").job.verl_path is None


@pytest.mark.parametrize(
    "words, says",
    [
        (["--verl-path", "/nonexistent/verl"], "not a directory"),
        (["--verl-path", "."], "no verl config tree there"),
        (["--verl-path", ".", "--verl-version", "0.9"], "give one"),
        (["--verl-path", ".", "--versions"], "no verl config tree there"),  # --versions takes a usable tree
    ],
)
def test_a_bad_path_is_one_line_and_exit_2(words, says, capsys):
    assert main(["check", *words, str(AFTER)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_yaml_file_that_cannot_be_read_is_exit_2(tmp_path, capsys):
    root = _tree(tmp_path / "broken", "0.9.0")
    (root / "verl" / "trainer" / "config" / "ppo_trainer.yaml").write_text("a: [unclosed\n")
    assert main(["check", "--verl-path", str(root), str(AFTER)]) == 2
    err = capsys.readouterr().err.strip()
    assert "ppo_trainer.yaml" in err and len(err.splitlines()) == 1


def test_the_verl_path_setting_is_relative_to_its_file(tmp_path):
    _tree(tmp_path / "vendor" / "verl-fork", "0.9.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()
    script = project / "run.sh"
    script.write_text(AFTER.read_text())
    (project / "pyproject.toml").write_text('[tool.shardcheck]\nverl-path = "../vendor/verl-fork"\n')
    r = check(script)
    assert (r.job.framework_version, r.job.version_source) == ("0.9.0", "path")
    assert "verl-path in" in r.job.version_reason
    (project / "pyproject.toml").write_text('[tool.shardcheck]\nverl-path = "../v"\nverl-version = "0.9.0"\n')
    assert check(script).status == "failed"


# -- the real trees of every release (VERL_CONFIGS_DIR) -------------------------------------------------------

needs_configs = pytest.mark.skipif(not CONFIGS_DIR, reason="VERL_CONFIGS_DIR not set (tools/fetch_reference_wheels.py)")
READ = (
    "trainer.nnodes",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.gpu_memory_utilization",
    "actor_rollout_ref.rollout.max_num_batched_tokens",
    "actor_rollout_ref.rollout.max_num_seqs",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    "actor_rollout_ref.actor.megatron.param_offload",
    "data.max_prompt_length",
)


def _release(version: str) -> Path:
    root = Path(CONFIGS_DIR) / version
    if not (root / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.skip(f"no verl {version} tree in VERL_CONFIGS_DIR")
    return root


@needs_configs
@pytest.mark.parametrize("version", catalogue().releases)
def test_each_release_tree_is_recognised_and_judges_as_the_catalogue(version, tmp_path):
    root = _release(version)
    found = verl_path.load(str(root))
    assert found.match.exact and found.match.version == version
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=2 "
        "trainer.n_gpus_per_node=8 actor_rollout_ref.rollout.tensor_model_parallel_size=4\n"
    )
    mine, theirs = check(script, verl_path=str(root)).job, check(script, verl_version=version).job
    assert mine.version_source == "path" and mine.framework_version == version
    for key in READ:
        assert mine.value(key).value == theirs.value(key).value, key


@needs_configs
def test_a_copied_release_with_one_key_added_is_a_fork_of_it(tmp_path):
    root = tmp_path / "fork"
    shutil.copytree(_release("0.9.1") / "verl" / "trainer" / "config", root / "verl" / "trainer" / "config")
    config = root / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    config.write_text(config.read_text().replace("\ntrainer:\n", "\ntrainer:\n  fork_only_knob: 3\n", 1))
    found = verl_path.load(str(root))
    assert (found.match.version, found.match.added) == ("0.9.1", ("trainer.fork_only_knob",))
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.fork_only_knob=4 trainer.n_gpus_per_node=8\n")
    assert not [f for f in check(script, verl_path=str(root)).findings if f.rule == "VERL-CFG-UNKNOWN-KEY"]
    assert [f for f in check(script, verl_version="0.9.1").findings if f.rule == "VERL-CFG-UNKNOWN-KEY"]


@needs_configs
def test_other_entry_points_read_the_directory(tmp_path):
    root = _release("0.9.1")
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.experimental.fully_async_policy.fully_async_main trainer.nnodes=1 trainer.n_gpus_per_node=8\n"
    )
    job = check(script, verl_path=str(root)).job
    assert job.version_source == "path" and str(root) in job.config_source
    assert job.value("trainer.nnodes").value == check(script, verl_version="0.9.1").job.value("trainer.nnodes").value
