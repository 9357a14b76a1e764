"""The subcommands agree (issue 31, item 4): the built-in example wherever a path is optional, `report
--exit-zero`, usage for a bare `shardcheck`, usage errors (exit 2) with "did you mean" for mistyped
subcommands, options, choices, rule ids and devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardcheck.cli import EXAMPLE, main

ETP_UNSET = Path(__file__).parent / "data" / "cases" / "qwen3_235b_256k_etp_unset.sh"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("command", ["mesh", "plan"])
def test_without_a_path_mesh_and_plan_judge_the_built_in_example(command, capsys):
    code, out, err = run([command], capsys)
    assert code == 0, err
    assert EXAMPLE.name in out.splitlines()[0]
    assert err == ""


def test_mesh_without_a_path_is_the_example_s_mesh(capsys):
    code, bare, _ = run(["mesh", "--format", "json"], capsys)
    code_path, given, _ = run(["mesh", str(EXAMPLE.relative_to(Path.cwd())), "--format", "json"], capsys)
    assert code == code_path == 0 and bare == given


def test_mesh_sizes_still_need_no_script(capsys):
    code, out, _ = run(["mesh", "--world", "8", "--devices-per-node", "8", "--tp", "2"], capsys)
    assert code == 0 and "<sizes>" in out and EXAMPLE.name not in out


def test_report_without_a_path_writes_the_example(tmp_path, capsys):
    html = tmp_path / "r.html"
    code, out, _ = run(["report", "-o", str(html)], capsys)
    assert code == 0 and out.startswith("wrote ")
    assert EXAMPLE.name in html.read_text()


def test_report_exit_zero(tmp_path, capsys):
    html = tmp_path / "r.html"
    assert main(["check", str(ETP_UNSET), "--quiet"]) == 1
    capsys.readouterr()
    assert run(["report", str(ETP_UNSET), "-o", str(html)], capsys)[0] == 1
    assert run(["report", str(ETP_UNSET), "-o", str(html), "--exit-zero"], capsys)[0] == 0
    assert html.exists()


def test_bare_shardcheck_prints_usage(capsys):
    code, out, err = run([], capsys)
    assert code == 2 and out == ""
    assert err.startswith("usage: shardcheck") and "check" in err and "explain" in err


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["chek"], "did you mean check?"),
        (["check", "--exit-zer0"], "did you mean --exit-zero?"),
        (["memory", "--sample-tokns", "3000"], "did you mean --sample-tokens?"),
        (["check", "--format", "jsn"], "did you mean json?"),
        (["explain", "MCORE-PS-EXPERT-FOL"], "did you mean MCORE-PS-EXPERT-FOLD?"),
        (["check", "--device", "h2000"], "did you mean H200-SXM-141GB"),
        (["memory", "--device", "mi300z"], "did you mean MI300X"),
        (["plan", "--device", "h900"], "did you mean H100-SXM-80GB"),
    ],
)
def test_mistakes_are_usage_errors_with_a_suggestion(argv, suggestion, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert suggestion in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv", [["chekkkkkkkkkkkk"], ["check", "--zzzzzz"], ["explain", "QQQQ"]])
def test_no_suggestion_when_nothing_is_close(argv, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2 and "did you mean" not in err


def test_a_bad_device_is_a_usage_error_not_a_finding(capsys):
    code, out, err = run(["check", str(EXAMPLE), "--device", "h900"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("shardcheck check: --device h900: not a known device")
    assert "INPUT-UNUSABLE" not in err


def test_a_good_device_fragment_still_works(capsys):
    code, out, _ = run(["check", "--device", "h20", "--quiet"], capsys)
    assert code in (0, 1) and "not a known device" not in out


def test_env_and_mesh_sizes_have_help_text():
    import argparse

    from shardcheck.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    with_env = [name for name, p in sub.choices.items() if any("--env" in a.option_strings for a in p._actions)]
    assert set(with_env) >= {"check", "memory", "mesh", "plan", "diff", "report"}
    for name in with_env:
        env = next(a for a in sub.choices[name]._actions if "--env" in a.option_strings)
        assert env.help, name
    mesh = {s: a for a in sub.choices["mesh"]._actions for s in a.option_strings}
    sizes = ("--world", "--devices-per-node", "--tp", "--pp", "--cp", "--ep", "--etp", "--vpp", "--order")
    assert [s for s in sizes if not mesh[s].help] == []
