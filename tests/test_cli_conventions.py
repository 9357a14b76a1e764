"""The command line behaves like the linters its users know: exit status per run, stdin, directories,
colour, grouped findings, suppression, settings, messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardcheck.cli import EXAMPLE, main

CASES = Path(__file__).parent / "data" / "cases"
ETP_UNSET = CASES / "qwen3_235b_256k_etp_unset.sh"
TP3 = (
    "python3 -m verl.trainer.main_ppo model_engine=megatron "
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3 \\\n  trainer.n_gpus_per_node=8\n"
)


def run(*args: str, cwd=None, env=None, stdin: str | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "shardcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        input=stdin,
        check=False,
    )


def folder(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp_path


def summary(out: str) -> str:
    return out.strip().splitlines()[-1]


# --- exit status per run, as ruff ----------------------------------------------------------------


def test_mixed_folder_judges_the_launches_and_skips_the_rest(tmp_path):
    d = folder(
        tmp_path,
        **{
            "good.sh": EXAMPLE.read_text(),
            "helper.sh": "echo preparing data\n",
            "sub/bad.sh": ETP_UNSET.read_text(),
            ".hidden/skip.sh": "exit 1\n",
            "notes.txt": "x\n",
        },
    )
    proc = run("check", str(d))
    assert proc.returncode == 1  # bad.sh has an error; the helper does not make it 2
    assert summary(proc.stdout) == "3 files: 2 judged, 1 skipped (no launch command), 0 failed; 2 errors, 1 warning"
    assert f"{d / 'helper.sh'}:1: INPUT-NO-LAUNCH info: no launch command; skipped" in proc.stdout
    assert "skip.sh" not in proc.stdout and "notes.txt" not in proc.stdout
    (d / "sub" / "bad.sh").unlink()
    proc = run("check", str(d))
    assert proc.returncode == 0, proc.stdout
    assert summary(proc.stdout).startswith("2 files: 1 judged, 1 skipped (no launch command), 0 failed")


def test_missing_file_is_an_error_finding_and_the_others_stand(tmp_path):
    missing = tmp_path / "typo.sh"
    assert main(["check", str(EXAMPLE), str(missing)]) == 1  # one input could be read: 1, not 2
    assert main(["check", str(missing)]) == 2  # no input could be read
    assert main(["check", str(missing), str(tmp_path / "other.sh")]) == 2
    assert main(["check", "--exit-zero", str(EXAMPLE), str(missing)]) == 0


def test_missing_file_in_json(tmp_path, capsys):
    main(["check", "--format", "json", str(EXAMPLE), str(tmp_path / "typo.sh")])
    doc = json.loads(capsys.readouterr().out)
    good, bad = doc["results"]
    assert good["status"] == "judged" and bad["status"] == "failed" and bad["valid"] is False
    assert [f["rule"] for f in bad["findings"]] == ["INPUT-UNREADABLE"]
    assert bad["findings"][0]["path"].endswith("typo.sh") and bad["findings"][0]["line"] is None
    assert doc["summary"] == {
        "files": 2,
        "judged": 1,
        "skipped": 0,
        "failed": 1,
        "errors": 1,
        "warnings": 0,
        "infos": 0,
    }


def test_usage_errors_exit_2():
    assert run("check", "--no-such-option").returncode == 2
    assert run("check", "--fail-on", "fatal").returncode == 2


# --- conventions ----------------------------------------------------------------------------------


def test_version():
    from shardcheck import __version__

    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"shardcheck {__version__}"


def test_stdin(tmp_path):
    proc = run("check", "-", "--quiet", stdin=ETP_UNSET.read_text())
    assert proc.returncode == 1
    assert proc.stdout.startswith("-:26: MCORE-PS-EXPERT-FOLD error")
    proc = run("check", "-", stdin=EXAMPLE.read_text())
    assert proc.returncode == 0 and proc.stdout.startswith("-\n")
    # --stdin-filename: the name shown, and the folder whose settings apply
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nignore = ["MCORE-PS-EXPERT-FOLD"]\n')
    proc = run("check", "-", "--quiet", "--stdin-filename", str(tmp_path / "run.sh"), stdin=ETP_UNSET.read_text())
    assert (
        "MCORE-PS-EXPERT-FOLD" not in proc.stdout and f"{tmp_path / 'run.sh'}:59: VERL-CFG-UNKNOWN-KEY" in proc.stdout
    )


def test_select_ignore_fail_on_on_the_command_line(tmp_path, capsys):
    path = folder(tmp_path, **{"run.sh": TP3}) / "run.sh"
    assert main(["check", "--quiet", "--select", "MCORE-PS-WORLD", str(path)]) == 1
    assert "MCORE-PS-WORLD" in capsys.readouterr().out
    assert main(["check", "--quiet", "--select", "MCORE-PS-WORLD", "--ignore", "MCORE-PS-WORLD", str(path)]) == 0
    assert "MCORE-PS-WORLD" not in capsys.readouterr().out
    assert main(["check", "--quiet", "--select", "VERL-MC-,MODEL-", str(path)]) == 0  # warnings and infos only
    out = capsys.readouterr().out
    assert "MCORE-" not in out and "MODEL-NOT-FOUND" in out and "VERL-MC-ONE-INIT" in out
    assert main(["check", "--quiet", "--select", "MODEL-", "--fail-on", "info", str(path)]) == 1
    assert main(["check", "--quiet", "--select", "MODEL-", "--fail-on", "warning", str(path)]) == 0
    capsys.readouterr()
    # the command line replaces the settings' values
    (tmp_path / "pyproject.toml").write_text('[tool.shardcheck]\nselect = ["MODEL-"]\n')
    assert main(["check", "--quiet", str(path)]) == 0
    assert main(["check", "--quiet", "--select", "MCORE-PS-WORLD", str(path)]) == 1


def test_quiet_statistics_and_output_format_alias(capsys):
    assert main(["check", "-q", str(ETP_UNSET), str(EXAMPLE)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{ETP_UNSET}:26: MCORE-PS-EXPERT-FOLD error")
    # no layout, no summary: the findings, their fixes and the fixes' proofs (docs/fixes.md)
    assert all(line.startswith((str(ETP_UNSET), "  fix:", "  proven", "  fix check:")) for line in lines)
    assert main(["check", "--statistics", str(ETP_UNSET), str(CASES / "qwen3_235b_256k_before.sh")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["2", "VERL-CFG-UNKNOWN-KEY", "error"]
    assert {line.split()[1] for line in out[1:-1]} == {
        "MCORE-PS-EXPERT-FOLD",
        "MCORE-PS-LOCALITY",
        "VERL-MC-ETP-MISMATCH",
    }
    assert out[-1].startswith("2 files: 2 judged")
    main(["check", "--output-format", "json", str(EXAMPLE)])
    assert json.loads(capsys.readouterr().out)["results"][0]["valid"] is True


def test_env_the_script_never_reads_is_warned(capsys):
    main(["check", "--quiet", "--env", "nnodes=4", "--env", "NPUS_PER_NODE=16", str(EXAMPLE)])
    out = capsys.readouterr().out
    assert "SHELL-ENV-UNUSED warning: --env nnodes:" in out and "did you mean --env NNODES=...?" in out
    assert "NPUS_PER_NODE" not in out.split("SHELL-ENV-UNUSED")[1].split("\n")[0].split(":")[0]
    assert out.count("SHELL-ENV-UNUSED") == 1


def _pty_run(args: list[str], env: dict[str, str]) -> str:
    import pty

    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update(env, TERM="xterm")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shardcheck", *args], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=full_env
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_colour_on_a_terminal_off_in_a_pipe():
    args = ["check", "--quiet", str(ETP_UNSET)]
    on_tty = _pty_run(args, {})
    assert "\x1b[" in on_tty and "MCORE-PS-EXPERT-FOLD" in on_tty
    assert "\x1b[" not in _pty_run(args, {"NO_COLOR": "1"})
    piped = run(*args)
    assert "\x1b[" not in piped.stdout and "MCORE-PS-EXPERT-FOLD" in piped.stdout
    assert "\x1b[" in run(*args, env={"FORCE_COLOR": "1"}).stdout


def test_progress_only_on_a_terminal_after_a_second(monkeypatch):
    import io

    from shardcheck import cli

    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    import itertools

    clock = itertools.chain([0.0, 0.2, 1.5], itertools.repeat(2.0))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    progress = cli._Progress(3)
    progress.advance("a.sh")  # 0.2 s: nothing yet
    assert progress.bar is None
    progress.advance("b.sh")  # 1.5 s: the bar appears
    assert progress.bar is not None
    progress.pause()
    progress.stop()
    assert not cli._Progress(1).enabled  # one file: never
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not cli._Progress(5).enabled  # not a terminal: never


# --- grouped findings ------------------------------------------------------------------------------


def test_one_finding_per_rule_and_cause_over_pipeline_stages(tmp_path, capsys):
    text = EXAMPLE.read_text().replace("trainer.device=npu", "trainer.device=cuda")
    text = "\n".join(line for line in text.splitlines() if "recompute_" not in line)
    path = folder(tmp_path, **{"run.sh": text}) / "run.sh"
    main(["check", "--quiet", "--select", "MEM-TRAIN-OOM", str(path)])
    out = capsys.readouterr().out.splitlines()
    assert sum("MEM-TRAIN-OOM" in line for line in out) == 1
    # stages 0–13 of 16 overflow an 80 GB device (the last two hold fewer activations in flight)
    assert any(line.startswith("  covers: stages 0–13 (14 findings of one cause)") for line in out), out
    main(["check", "--format", "json", "--select", "MEM-TRAIN-OOM", str(path)])
    (f,) = json.loads(capsys.readouterr().out)["results"][0]["findings"]
    assert f["covers"] == [f"stage {i}" for i in range(14)]
    assert [m["scope"] for m in f["group"]] == f["covers"] and f["message"] == f["group"][0]["message"]


def test_actor_and_ref_share_one_finding(tmp_path, capsys):
    text = (
        EXAMPLE.read_text()
        .replace("train_tp=2", "train_tp=$(get_tp)")
        .replace(
            "    actor_rollout_ref.model.path=",
            "    actor_rollout_ref.actor.use_kl_loss=True\n    actor_rollout_ref.model.path=",
        )
    )
    assert "use_kl_loss=True" in text
    path = folder(tmp_path, **{"run.sh": text}) / "run.sh"
    from shardcheck import check

    r = check(path)
    unknown = [f for f in r.findings if f.rule == "VALUE-UNKNOWN" and "tensor_model_parallel_size" in f.message]
    assert len(unknown) == 1 and unknown[0].covers == ("actor", "ref"), [f.message for f in r.findings]
    main(["check", "--quiet", str(path)])
    # one cause: the actor's and the ref's TP, and the DP they make (issue 28 item 4)
    assert "covers: actor and ref (3 findings of one cause)" in capsys.readouterr().out
    assert unknown[0].message.startswith("$(get_tp) at line 25 is not run, so ")


def test_group_labels():
    from shardcheck.rules.grouping import join_labels

    assert join_labels(["stage 0", "stages 1–13", "stage 15"]) == "stages 0–13, 15"
    assert join_labels(["actor", "ref"]) == "actor and ref"
    assert join_labels(["actor", "ref", "critic"]) == "actor, ref and critic"


# --- suppression -----------------------------------------------------------------------------------


def test_disable_before_a_multi_line_command_covers_the_command(tmp_path):
    from shardcheck import check

    script = (
        "N=3\n# shardcheck: disable=MCORE-PS-WORLD\npython3 -m verl.trainer.main_ppo model_engine=megatron \\\n"
        "  trainer.n_gpus_per_node=8 \\\n  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=$N\n"
    )
    path = folder(tmp_path, **{"run.sh": script}) / "run.sh"
    assert "MCORE-PS-WORLD" not in {f.rule for f in check(path).findings}
    # the same comment two lines above the command (not right before it) does not reach it
    path.write_text(script.replace("# shardcheck", "# shardcheck").replace("\npython3", "\necho x\npython3"))
    assert "MCORE-PS-WORLD" in {f.rule for f in check(path).findings}


def test_per_file_ignores(tmp_path):
    from shardcheck import check

    d = folder(tmp_path, **{"recipes/run.sh": TP3, "run.sh": TP3})
    (d / ".git").mkdir()  # settings above a script's folder apply inside its git work tree only
    (d / "pyproject.toml").write_text('[tool.shardcheck.per-file-ignores]\n"recipes/*.sh" = ["MCORE-PS-"]\n')
    assert "MCORE-PS-WORLD" not in {f.rule for f in check(d / "recipes" / "run.sh").findings}
    assert "MCORE-PS-WORLD" in {f.rule for f in check(d / "run.sh").findings}


def test_unknown_ids_in_comments_are_warned_with_did_you_mean(tmp_path):
    from shardcheck import check

    d = folder(tmp_path, **{"run.sh": "# shardcheck: disable=MCORE-TC-HEAD-TP\n" + TP3})
    (comment,) = [f for f in check(d / "run.sh").findings if f.rule == "SUPPRESS-UNKNOWN-ID"]
    assert comment.line == 1 and comment.fix == "did you mean MCORE-TC-HEADS-TP?"
    # prefixes are fine in settings, with or without their dash
    (d / "pyproject.toml").write_text('[tool.shardcheck]\nselect = ["MCORE-", "VERL", "SHELL-ENV-"]\n')
    r = check(d / "run.sh")
    assert r.error is None and not [f for f in r.findings if f.path and f.path.endswith("toml")]


def test_an_unknown_id_in_the_settings_is_a_usage_error(tmp_path, capsys):
    """As ruff refuses an unknown selector: exit 2, file:line, did you mean (it silently selected nothing)."""
    from shardcheck import check

    d = folder(tmp_path, **{"run.sh": TP3})
    (d / "pyproject.toml").write_text('[tool.shardcheck]\nignore = [\n  "VERL-RO-EP",\n  "MCORE-TC-HEAD-TP",\n]\n')
    r = check(d / "run.sh")
    assert r.exit_code == 2 and r.error_kind == "usage"
    assert r.error == (
        f"{d / 'pyproject.toml'}:4: [tool.shardcheck] ignore names MCORE-TC-HEAD-TP, which is no rule id or "
        "prefix; did you mean MCORE-TC-HEADS-TP?"
    )
    assert main(["check", str(d / "run.sh")]) == 2
    (d / "pyproject.toml").write_text('[tool.shardcheck.per-file-ignores]\n"*.sh" = ["NOPE-XYZ"]\n')
    assert "per-file-ignores '*.sh' names NOPE-XYZ, which is no rule id or prefix" in check(d / "run.sh").error


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_an_unknown_id_on_the_command_line_is_a_usage_error(option, tmp_path, capsys):
    d = folder(tmp_path, **{"run.sh": TP3})
    assert main(["check", option, "MCORE-PS-WORLD,MCORE-PS-EXPERT-FLD", str(d / "run.sh")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"shardcheck: {option} names MCORE-PS-EXPERT-FLD, which is no rule id or prefix; "
        "did you mean MCORE-PS-EXPERT-FOLD?"
    )
    assert main(["check", option, "MCORE-PS-", "--no-fix-proof", str(d / "run.sh")]) in (0, 1)  # a prefix is fine


def test_renamed_and_removed_ids_are_redirected(tmp_path, monkeypatch):
    from shardcheck import check
    from shardcheck.rules import registry

    monkeypatch.setitem(registry.RENAMED, "MCORE-PS-WORLD-SIZE", "MCORE-PS-WORLD")
    d = folder(tmp_path, **{"run.sh": "# shardcheck: disable=MCORE-PS-WORLD-SIZE,VERL-CFG-ADDED-FIELD\n" + TP3})
    r = check(d / "run.sh")
    assert "MCORE-PS-WORLD" not in {f.rule for f in r.findings}  # the old id still suppresses
    messages = [f.message for f in r.findings if f.rule == "SUPPRESS-UNKNOWN-ID"]
    assert any("renamed MCORE-PS-WORLD; applied as MCORE-PS-WORLD" in m for m in messages)
    assert any("VERL-CFG-ADDED-FIELD, a rule that was removed" in m for m in messages)


# --- messages --------------------------------------------------------------------------------------


def test_one_node_is_singular(tmp_path, capsys):
    text = EXAMPLE.read_text().replace("NNODES=${NNODES:-16}", "NNODES=${NNODES:-1}")
    main(["check", str(folder(tmp_path, **{"run.sh": text}) / "run.sh")])
    assert "cluster    1 node × 16 devices" in capsys.readouterr().out


def test_fix_text_without_a_dangling_or():
    from shardcheck import check

    r = check(ETP_UNSET)
    (fold,) = [f for f in r.findings if f.rule == "MCORE-PS-EXPERT-FOLD"]
    assert fold.fix == "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1, or an EP in 1, 2, 4, 8"
    assert not any(f.fix and f.fix.startswith("or ") for f in r.findings)


def test_megatron_lm_reports_use_its_own_names(tmp_path):
    from shardcheck import check

    script = (
        "torchrun --nnodes $NODES --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
        "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 "
        "--micro-batch-size 1 --global-batch-size 8\n"
    )
    r = check(folder(tmp_path, **{"run.sh": script}) / "run.sh")
    text = " ".join(f"{f.message} {f.fix}" for f in r.findings)
    assert "torchrun --nnodes" in text
    assert "trainer.nnodes" not in text and "trainer.n_gpus_per_node" not in text and "trainer.device" not in text


def test_built_in_example_name_is_a_real_path(capsys):
    main(["check"])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(" (built-in example)")
    assert Path(first.removesuffix(" (built-in example)")).resolve() == EXAMPLE.resolve()


def test_json_layout_origins(capsys):
    main(["check", "--format", "json", str(ETP_UNSET)])
    origins = json.loads(capsys.readouterr().out)["results"][0]["layout_origins"]
    assert set(origins) >= {"cluster", "actor", "rollout"}
    tp, etp = origins["actor"]["tp"], origins["actor"]["etp"]
    assert tp["value"] == 2 and tp["kind"] == "script" and tp["line"] == 25 and "train_tp=2" in tp["origin"]
    assert etp["kind"] == "default" and "ETP = TP" in etp["origin"]
    assert origins["cluster"]["nnodes"]["line"] == 7


def test_a_suppressed_layout_error_does_not_make_the_layout_valid(tmp_path, capsys):
    from shardcheck import check

    path = (
        folder(tmp_path, **{"run.sh": "# shardcheck: disable=MCORE-PS-WORLD,MCORE-PS-EXPERT-FOLD\n" + TP3}) / "run.sh"
    )
    r = check(path)
    assert not {f.rule for f in r.findings} & {"MCORE-PS-WORLD", "MCORE-PS-EXPERT-FOLD"}
    assert r.layout_valid is False and len(r.suppressed) == 2
    main(["check", str(path)])
    verdict = next(line for line in capsys.readouterr().out.splitlines() if "verdict:" in line)
    assert "layout itself is valid" not in verdict and "its errors are suppressed" in verdict
    assert "2 findings suppressed" in verdict
