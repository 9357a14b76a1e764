"""The README stays short and true: every `shardcheck` command it shows (code blocks and inline) runs on the
files of this repository, and an output it shows is what the command prints (the example's path aside).

Commands run in-process from the repository root, as after `pip install -e .` in a fresh clone: no verl or
megatron-core installed (their versions are then chosen as a plain install chooses them)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from shardcheck.cli import EXAMPLE, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETUP = ("pip install -e . && shardcheck check", "pip install -e '.[test,verify]' && pytest")
EXAMPLE_SHOWN = "src/shardcheck/examples/qwen3_235b_256k.sh"  # as a clone's editable install prints it

_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)  # a block, indented in a list item or not
_INLINE = re.compile(r"`(shardcheck [^`]+)`")


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of each fenced block, a list item's indentation removed."""
    return [
        (lang, [line.removeprefix(indent) for line in body.splitlines()]) for indent, lang, body in _FENCE.findall(text)
    ]


def commands(text: str) -> list[tuple[str, list[str] | None]]:
    """Every shardcheck command of the README: (command line, the output shown after `$ command`, or None)."""
    found: list[tuple[str, list[str] | None]] = []
    for lang, lines in blocks(text):
        if lang:  # yaml, toml: configuration, not commands
            continue
        if lines and lines[0].startswith("$ "):
            found.append((lines[0][2:], lines[1:]))
            continue
        for line in lines:
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("shardcheck"):
                    found.append((part, None))
    prose = _FENCE.sub("", text)
    found.extend((span, None) for span in _INLINE.findall(prose))
    return found


def _words(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    assert words[0] == "shardcheck", command
    return words[1:]


def run_readme_command(command: str, tmp_path: Path, capsys) -> tuple[int, str]:
    """(exit status, standard output) of one README command, run from the repository root; `> FILE` and
    `-o FILE` write under tmp_path."""
    words = _words(command)
    target = None
    if ">" in words:
        at = words.index(">")
        words, target = words[:at], tmp_path / words[at + 1]
    if "-o" in words:
        at = words.index("-o") + 1
        words[at] = str(tmp_path / words[at])
    capsys.readouterr()
    try:
        code = main(words)
    except SystemExit as exc:  # --help
        code = exc.code
    out = capsys.readouterr().out
    if target is not None:
        target.write_text(out)
    return code, out


@pytest.fixture
def fresh_clone(monkeypatch):
    """The repository root as working directory; no verl or megatron-core installed; no colour."""
    import shardcheck.frameworks.megatron.versions as megatron_versions
    import shardcheck.frameworks.verl.resolve as verl_resolve

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(megatron_versions, "installed", lambda: None)
    monkeypatch.setattr(verl_resolve, "installed_config_dir", lambda: None)
    for name in ("FORCE_COLOR", "NO_COLOR", "SHARDCHECK_VERL_VERSION"):
        monkeypatch.delenv(name, raising=False)


def test_readme_is_short_and_keeps_the_set_up_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    for line in SETUP:  # .ci/run and the install tests run these
        assert f"\n{line}\n" in text


def test_readme_links_exist():
    links = re.findall(r"\]\(([^)#]+)", README.read_text())
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_readme_shows_commands_and_a_sample():
    found = commands(README.read_text())
    shown = [c for c, output in found if output is not None]
    assert len(found) >= 10 and shown == ["shardcheck check --env NNODES=8"]


def test_every_readme_command_runs_and_shown_output_is_real(fresh_clone, tmp_path, capsys):
    example = str(EXAMPLE.relative_to(ROOT)) if EXAMPLE.is_relative_to(ROOT) else str(EXAMPLE)
    failures = []
    for command, shown in commands(README.read_text()):
        code, out = run_readme_command(command, tmp_path, capsys)
        if code not in (0, 1):
            failures.append(f"{command}: exit {code}")
        if shown is not None and out.replace(example, EXAMPLE_SHOWN).splitlines() != shown:
            failures.append(f"{command}: the README's output differs from what it prints:\n{out}")
    assert failures == []


def test_the_set_up_check_judges_the_example_valid(fresh_clone, tmp_path, capsys):
    code, out = run_readme_command("shardcheck check", tmp_path, capsys)
    assert code == 0 and "(built-in example)" in out and "verdict: valid" in out


def test_a_changed_output_is_caught(fresh_clone, tmp_path, capsys):
    """The comparison can fail: the sample with one line changed is not what the command prints."""
    command, shown = next((c, o) for c, o in commands(README.read_text()) if o is not None)
    _, out = run_readme_command(command, tmp_path, capsys)
    example = str(EXAMPLE.relative_to(ROOT)) if EXAMPLE.is_relative_to(ROOT) else str(EXAMPLE)
    altered = [*shown[:-1], shown[-1].replace("2 errors", "3 errors")]
    assert altered != shown and out.replace(example, EXAMPLE_SHOWN).splitlines() != altered


def test_commands_parser_reads_blocks_inline_spans_and_redirections(tmp_path):
    text = (
        "Run `shardcheck rules` or `shardcheck.check(path)`.\n\n"
        "- item:\n\n  ```\n  shardcheck check x.sh   # a comment\n  ```\n\n"
        "```toml\nshardcheck = 1\n```\n\n```\n$ shardcheck mesh\nout 1\n```\n"
        "```\npip install -e . && shardcheck check\n```\n"
    )
    assert commands(text) == [
        ("shardcheck check x.sh   # a comment", None),
        ("shardcheck mesh", ["out 1"]),
        ("shardcheck check", None),
        ("shardcheck rules", None),
    ]
    assert _words("shardcheck check x.sh   # a comment") == ["check", "x.sh"]


def test_readme_settings_and_hook_are_real(tmp_path):
    """The README's [tool.shardcheck] example is read without an error, and its pre-commit hook id exists."""
    from shardcheck.settings import read_settings

    found = dict((lang, lines) for lang, lines in blocks(README.read_text()) if lang in ("toml", "yaml"))
    toml = tmp_path / "pyproject.toml"
    toml.write_text("\n".join(found["toml"]) + "\n")
    settings = read_settings(toml, required=True)
    assert settings.ignore == ("VERL-MC-ETP-MISMATCH",) and settings.verl_version == "0.9.1"
    assert settings.per_file_ignores == (("recipes/*.sh", ("MEM-",)),)
    hook_ids = re.findall(r"^- id: (\S+)", (ROOT / ".pre-commit-hooks.yaml").read_text(), re.M)
    assert [line.split("id: ")[1] for line in found["yaml"] if "id: " in line] == hook_ids[:1]
