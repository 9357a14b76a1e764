"""A verl the script's repository carries (frameworks/verl/vendored.py, issue 26 false alarm 4): a ``verl/``
package with ``trainer/config`` and ``version/version`` beside or above the script, a ``verl/`` submodule holding
the checkout, or one on the ``PYTHONPATH`` the script exports, is judged against as ``--verl-path`` would be, with
``version_source: "vendored"``; a copy that does not load is named in one line and the version is chosen as
without it."""

from __future__ import annotations

import pytest
from test_rules import FSDP, script
from test_verl_path import _tree

from shardcheck.api import check
from shardcheck.report.json_report import result_to_dict


@pytest.fixture(autouse=True)
def _no_version_given(monkeypatch):
    monkeypatch.delenv("SHARDCHECK_VERL_VERSION", raising=False)


def _carry(root, version="0.6.0", written="0.6.0"):
    _tree(root, version)
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "version" / "version").write_text(written + "\n")
    return root


def _run(folder, text=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run.sh"
    path.write_text(text or script("", config=FSDP))
    return check(path)


def test_a_carried_package_above_the_script_is_judged_against(tmp_path):
    _carry(tmp_path / "repo")
    result = _run(tmp_path / "repo" / "examples" / "grpo")
    job = result.job
    assert (job.framework_version, job.version_source) == ("0.6.0", "vendored")
    assert job.verl_path == (str((tmp_path / "repo").resolve()), "0.6.0", True)
    assert "carried verl 0.6.0" in job.version_reason
    assert result_to_dict(result)["version_source"] == "vendored"


def test_a_submodule_checkout_is_found(tmp_path):
    _carry(tmp_path / "repo" / "verl")  # repo/verl/verl/trainer/config: a git submodule named verl
    assert _run(tmp_path / "repo" / "scripts").job.version_source == "vendored"


def test_a_copy_on_the_exported_pythonpath_is_found(tmp_path):
    _carry(tmp_path / "elsewhere" / "third_party")
    text = f"export PYTHONPATH={tmp_path / 'elsewhere' / 'third_party'}:$PYTHONPATH\n" + script("", config=FSDP)
    job = _run(tmp_path / "repo", text).job
    assert job.version_source == "vendored" and "PYTHONPATH" in job.version_reason


def test_an_older_copy_than_the_catalogue_says_so(tmp_path):
    _carry(tmp_path / "repo", "0.4.0", "0.1")
    job = _run(tmp_path / "repo" / "examples").job
    assert job.version_source == "vendored" and "older than every bundled release" in job.version_reason


def test_a_copy_that_does_not_load_is_named_and_the_version_chosen_without_it(tmp_path):
    _carry(tmp_path / "repo")
    (tmp_path / "repo" / "verl" / "trainer" / "config" / "ppo_trainer.yaml").write_text("data: [\n")
    result = _run(tmp_path / "repo" / "examples")
    assert result.error is None
    assert result.job.version_source != "vendored"
    assert f"the carried verl at {(tmp_path / 'repo').resolve()} does not load" in result.job.version_reason


def test_no_copy_no_vendored(tmp_path):
    (tmp_path / "repo" / "verl").mkdir(parents=True)  # a verl folder without a config tree is no copy
    assert _run(tmp_path / "repo").job.version_source != "vendored"


@pytest.mark.parametrize(("written", "judged"), [("0.2.0.dev", False), ("0.3.0", True), ("0.4.0", True)])
def test_a_check_an_older_copy_does_not_make_is_not_judged(tmp_path, written, judged):
    """verl's train_batch_size >= ppo_mini_batch_size assert first appears in v0.3.0 (ray_trainer.py:350 at
    v0.3.0.post1; none at v0.2.0.post2): on an older carried copy VERL-ACT-TBS-MINI is not judged, and said so."""
    _carry(tmp_path / "repo", "0.4.0", written)
    text = script("data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=256", config=FSDP)
    result = _run(tmp_path / "repo" / "examples", text)
    assert result.job.version_source == "vendored"
    assert any(f.rule == "VERL-ACT-TBS-MINI" for f in result.findings) is judged
    assert ("train_batch_size >= ppo_mini_batch_size check not judged" in result.job.version_reason) is (not judged)


GENERATE = """python3 -m verl.trainer.main_generation \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8 \\
    data.path=/data/test.parquet data.output_path=/data/out.parquet \\
    model.path=/models/qwen rollout.tensor_model_parallel_size=2
"""


def _carry_generation(root, version):
    """A carried verl ``version`` with main_generation.py and its generation.yaml (verl/trainer of a checkout)."""
    import yaml

    from shardcheck.frameworks.verl.versions import version_doc

    _carry(root, version, version)
    trainer = root / "verl" / "trainer"
    (trainer / "config" / "generation.yaml").write_text(
        yaml.safe_dump(version_doc(version)["configs"]["generation"], sort_keys=False)
    )
    (trainer / "main_generation.py").write_text(
        'import hydra\n\n\n@hydra.main(config_path="config", config_name="generation", version_base=None)\n'
        "def main(config):\n    pass\n"
    )


def test_a_generation_launch_is_judged_against_the_carried_copy(tmp_path):
    """Forks carrying verl 0.1 … 0.6 ran main_generation with a sync rollout; judging them on the bundled 0.7.0
    (whose rollouts are all async) gave a false VERL-GEN-SYNC on 16 scripts of the ecosystem corpus."""
    _carry_generation(tmp_path / "repo", "0.6.0")
    result = _run(tmp_path / "repo" / "examples" / "generation", GENERATE)
    assert (result.job.framework, result.job.version_source) == ("verl-gen", "vendored")
    assert result.job.framework_version == "0.6.0"
    assert not [f for f in result.findings if f.severity == "error"]


def test_a_generation_launch_without_a_carried_copy_is_judged_on_0_7_0(tmp_path):
    result = _run(tmp_path / "repo", GENERATE)
    assert result.job.version_source != "vendored"
    assert "VERL-GEN-SYNC" in {f.rule for f in result.findings}
