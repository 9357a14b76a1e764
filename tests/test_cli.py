"""The command line: exit codes, the JSON schema, bad input as one line, rule docs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shardcheck.cli import EXAMPLE, main

CASES = Path(__file__).parent / "data" / "cases"
ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shardcheck", *args], capture_output=True, text=True, cwd=cwd)


def test_exit_codes(capsys):
    assert main(["check", str(EXAMPLE)]) == 0
    assert main(["check", str(CASES / "qwen3_235b_256k_etp_unset.sh")]) == 1
    assert main(["check", str(CASES / "missing.sh")]) == 2
    # several paths: the worst wins
    assert main(["check", str(EXAMPLE), str(CASES / "qwen3_235b_256k_etp_unset.sh")]) == 1


def test_default_runs_the_built_in_example(capsys):
    assert main(["check"]) == 0
    assert "built-in example" in capsys.readouterr().out


def test_json_schema(capsys):
    main(["check", "--format", "json", str(EXAMPLE), str(CASES / "qwen3_235b_256k_etp_unset.sh")])
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 2
    assert len(doc["results"]) == 2
    ok, bad = doc["results"]
    assert set(ok) >= {"path", "framework", "valid", "layout", "model", "findings"}
    assert set(ok["layout"]) >= {
        "world",
        "nnodes",
        "devices_per_node",
        "tp",
        "pp",
        "cp",
        "ep",
        "etp",
        "dp",
        "edp",
        "vpp",
        "layers_per_stage",
    }
    assert ok["valid"] is True and ok["layout"]["dp"] == 1 and ok["model"]["name"].startswith("Qwen3-235B")
    assert bad["valid"] is False
    f = next(f for f in bad["findings"] if f["rule"] == "MCORE-PS-EXPERT-FOLD")
    assert set(f) == {
        "rule",
        "severity",
        "message",
        "path",
        "line",
        "fix",
        "fix_lines",
        "fix_check",
        "fix_note",
        "conditional",
        "covers",
        "group",
    }
    assert f["fix_check"] in ("valid", "proven") and f["fix_lines"]  # the fix, re-judged (docs/fixes.md)
    assert f["line"] == 26  # EP's line: the fix sets ETP (unset, it follows TP) or changes EP


@pytest.mark.parametrize(
    "content, expected, status, code",
    [
        (None, "INPUT-UNREADABLE error: no such file", "failed", 2),  # no input could be read
        ("echo hello\n", "INPUT-NO-LAUNCH info: no launch command; skipped", "skipped", 0),
        (
            'X="unterminated\npython3 -m verl.trainer.main_ppo\n',
            ":1: INPUT-UNUSABLE error: unterminated double quote",
            "failed",
            1,
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path, content, expected, status, code):
    path = tmp_path / "run.sh"
    if content is not None:
        path.write_text(content)
    proc = run("check", str(path))
    assert proc.returncode == code
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and expected in lines[0] and lines[0].startswith(str(path))
    assert (
        lines[1] == f"1 file: {int(status == 'judged')} judged, {int(status == 'skipped')} skipped (no launch "
        f"command), {int(status == 'failed')} failed; {int(code != 0)} error{'s' * (code == 0)}, 0 warnings"
    )


def test_non_integer_size_is_a_finding(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo model_engine=megatron "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2.5\n"
    )
    proc = run("check", str(path))
    assert proc.returncode == 1
    assert f"{path}:1: VALUE-BAD-SIZE error" in proc.stdout


def test_empty_directory_is_unreadable(tmp_path):
    proc = run("check", str(tmp_path))
    assert proc.returncode == 2 and "is a directory" in proc.stdout


def test_rules_and_explain(capsys):
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    assert "MCORE-PS-EXPERT-FOLD" in listing and "error" in listing
    assert main(["explain", "mcore-ps-expert-fold"]) == 0
    page = capsys.readouterr().out
    for heading in ("## Why it fails", "## Bad", "## Good", "## Fix", "## Source"):
        assert heading in page
    assert main(["explain", "NO-SUCH-RULE"]) == 2


def test_rule_docs_do_not_drift():
    from shardcheck.rules.docs import docs_files

    target = ROOT / "docs" / "rules"
    expected = docs_files()
    actual = {p.name: p.read_text() for p in target.glob("*.md")}
    assert actual == expected, "docs/rules is stale: run `python -m shardcheck.rules.docs`"


def test_default_install_stays_light():
    """`check` never imports torch, megatron or verl."""
    code = (
        "import sys; from shardcheck.api import check; from shardcheck.cli import EXAMPLE; check(EXAMPLE); "
        "print(sorted(m for m in ('torch', 'megatron', 'verl', 'rich') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_layers_are_one_way():
    """import-linter contract in pyproject.toml: read -> resolve -> judge -> report."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter not installed")
    proc = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_top_level_api():
    import shardcheck

    result = shardcheck.check(EXAMPLE)
    assert isinstance(result, shardcheck.Result) and result.valid


def test_deferred_hydra_package_is_the_real_one_afterwards():
    """shardcheck defers hydra/__init__.py; later users of Hydra still get the whole package."""
    code = (
        "from shardcheck.api import check; from shardcheck.cli import EXAMPLE; check(EXAMPLE); "
        "import sys; print('hydra.utils' in sys.modules); "
        "import hydra; from hydra import compose, initialize_config_dir, MissingConfigException, utils; "
        "from hydra.errors import MissingConfigException as M; "
        "print(callable(compose), MissingConfigException is M, hydra.__version__ == hydra.version.__version__ "
        "if hasattr(hydra.version, '__version__') else True, 'hydra.utils' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "True", "True", "True"], proc.stdout


def test_config_cache_gives_the_same_result(tmp_path):
    """The cached verl config (a pickle in the user's cache) resolves exactly like a fresh build."""
    import os

    # a deletion (~key) is applied by Hydra on OmegaConf, not by the plain tree: the cached tree is used
    deleting = tmp_path / "scripts" / "run.sh"
    deleting.parent.mkdir()
    deleting.write_text(
        EXAMPLE.read_text().replace(
            "    trainer.device=npu \\\n", "    trainer.device=npu \\\n    ~trainer.val_before_train \\\n"
        )
    )
    assert "~trainer.val_before_train" in deleting.read_text()
    outputs = []
    for cache in ("0", "1", "1"):  # no cache, cold cache, warm cache
        env = dict(os.environ, SHARDCHECK_CACHE=cache, XDG_CACHE_HOME=str(tmp_path))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "shardcheck",
                "check",
                "--format",
                "json",
                str(EXAMPLE),
                str(CASES / "qwen3_235b_256k_etp_unset.sh"),
                str(deleting),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        outputs.append(proc.stdout)
    assert json.loads(outputs[0])["results"][2]["status"] == "judged"
    assert outputs[0] == outputs[1] == outputs[2]
    assert list((tmp_path / "shardcheck").glob("verl-config-*.signed-pickle"))


def test_suppression_comments(tmp_path):
    bad = (
        "python3 -m verl.trainer.main_ppo model_engine=megatron "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3 \\\n  trainer.n_gpus_per_node=8\n"
    )
    path = tmp_path / "run.sh"
    path.write_text(bad)
    assert "MCORE-PS-WORLD" in {f.rule for f in __import__("shardcheck").check(path).findings}
    path.write_text("# shardcheck: disable=MCORE-PS-WORLD\n" + bad)
    assert "MCORE-PS-WORLD" not in {f.rule for f in __import__("shardcheck").check(path).findings}
    path.write_text(bad.replace("=3 ", "=3  # shardcheck: disable=all\n  "))
    assert "MCORE-PS-WORLD" not in {f.rule for f in __import__("shardcheck").check(path).findings}


def test_pyproject_settings_and_exit_zero(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo model_engine=megatron "
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3\n"
    )
    assert main(["check", str(path)]) == 1
    assert main(["check", "--exit-zero", str(path)]) == 0
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nignore = ["MCORE-PS-WORLD"]\n')
    result = __import__("shardcheck").check(path)
    assert "MCORE-PS-WORLD" not in {f.rule for f in result.findings}
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nfail-on = "info"\n')
    assert main(["check", str(CASES / "qwen3_235b_256k_before.sh")]) == 1  # its own pyproject: none
    assert main(["check", str(path)]) == 1
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nfail_on = "info"\n')
    result = __import__("shardcheck").check(path)
    assert result.exit_code == 2 and "has no setting 'fail_on'" in result.error
    assert main(["check", str(path)]) == 2  # unusable settings are a usage error
