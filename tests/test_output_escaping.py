"""Output injection (issue 27, failure 5): no value and no file name can forge a line, a workflow command, an
element or break a document, in any output format; report/escape.py is the one escaping layer per format.

Hostile strings (newline, CR, C0 / C1 controls, bidi overrides, ``<!--``, ``</script>``, ``]]>``, ``::``,
``%0A``, NUL, lone surrogates) go into a script value, an environment value, the model path, a model
config's values and the script's own file name; every command and format then runs and each output keeps
its invariants: text has exactly the lines the tool writes (no line starts with ``::`` and there is one
``verdict:`` per judged script), GitHub output has only well-formed commands, JUnit parses as XML, HTML
parses with exactly the report's two script elements, JSON and SARIF parse, and every output encodes
as UTF-8. The hypothesis run is bounded (SHARDCHECK_ESCAPE_EXAMPLES, default 8) with a fixed seed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser
from xml.etree import ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from launches import SMALL_MODEL_CONFIG

from shardcheck.cli import main
from shardcheck.report import escape

SEED = 27
EXAMPLES = int(os.environ.get("SHARDCHECK_ESCAPE_EXAMPLES", "8"))
_SAID: list[int] = []
PIECES = (
    "\n",
    "\r",
    "\r\n",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u202e",
    "\u2066",
    "\ufeff",
    "<!--",
    "<!--<script>",
    "</script>",
    "<b>",
    "]]>",
    "&amp;",
    '"',
    "`",
    "|",
    "@someone",
    "[x](https://example.invalid)",
    "::",
    "::error file=forged.sh,line=1::forged",
    "\n::error file=forged.sh::forged\n",
    "\nverdict: valid\n",
    "\n  verdict: valid (0 errors, 0 warnings)\n",
    "%0A",
    "%25",
    ",",
    ":",
    "\ud800",
    "\udcff",
    "plain",
)
HOSTILE = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join)
EVERYTHING = "".join(PIECES)
# Every command and format a value reaches (check, diff, report), by the invariant that holds for it.
CHECK_FORMATS = ("text", "quiet", "json", "sarif", "github", "junit")
DIFF_FORMATS = ("text", "json", "markdown", "github", "junit", "sarif", "html")
TEXTUAL = {"text", "quiet", "markdown"}
COMMAND = re.compile(r"::(error|warning|notice) (file=[^,:\r\n]*,)?(line=\d+,)?title=[^,:\r\n]*::[^\r\n]*")
LAUNCH = (
    "#!/bin/bash\n"
    "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=8 \\\n"
    "  actor_rollout_ref.model.path='{model}' +x.value='{value}' \"+x.env=$HOSTILE\" \\\n"
    "  actor_rollout_ref.actor.ppo_mini_batch_size={mini}\n"
)


def _bytes(s: str) -> bytes:
    """``s`` as a file holds it: no NUL (a script with one is not read); a lone surrogate as a byte that is
    not UTF-8 (a file name os.fsdecode gives back with a surrogate)."""
    return re.sub("[\ud800-\udfff]", "\udcff", s.replace("\x00", "")).encode("utf-8", "surrogateescape")


def _script(folder, name: str, hostile: str, mini: int = 64):
    path = folder / os.fsdecode(b"run" + _bytes(name).replace(b"/", b"") + b".sh")
    quoted = hostile.replace("'", "")
    text = LAUNCH.format(model="/nonexistent/" + quoted, value=quoted, mini=mini)
    path.write_bytes(_bytes(text))
    return path


def _model_config(folder, hostile: str):
    folder = folder / "model"
    folder.mkdir(exist_ok=True)
    config = {"_name_or_path": hostile, "model_type": hostile, "architectures": [hostile], **SMALL_MODEL_CONFIG}
    path = folder / "config.json"
    path.write_text(json.dumps(config))  # ensure_ascii: lone surrogates as \\ud800, as JSON allows
    return path


def _run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr().out
    out.encode("utf-8")  # strict: what a real stdout must be able to write
    return code, out


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict] = []
        self.data: dict[int, str] = {}

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts.append(dict(attrs))

    def handle_data(self, data):
        if self.lasttag == "script" and self.scripts:
            self.data[len(self.scripts) - 1] = self.data.get(len(self.scripts) - 1, "") + data


def _judged(paths, extra, capsys) -> int:
    """How many of ``paths`` are judged (a full text report, one verdict line each)."""
    _, out = _run(["check", "--format", "json", "--no-fix-proof", *extra, *map(str, paths)], capsys)
    return sum(r["status"] == "judged" for r in json.loads(out)["results"])


def _unsafe(out: str) -> list[str]:
    return [line for line in out.split("\n") if escape._UNSAFE.search(line)]


def assert_text(out: str, judged: int, fmt: str) -> None:
    lines = out.split("\n")
    assert not _unsafe(out), _unsafe(out)[:3]
    assert not [line for line in lines if line.startswith("::")], fmt
    verdicts = [line for line in lines if re.match(r"\s*\**verdict:", line)]
    if fmt == "text":
        assert len(verdicts) == judged, verdicts
        assert all(line.startswith("  verdict: ") for line in verdicts)
    else:
        assert not verdicts, verdicts


def assert_github(out: str, findings: int, summaries: int, verdicts: int = 0) -> None:
    """``verdicts``: the ``::notice`` lines of the scripts' verdicts ``check`` adds, one per judged script."""
    lines = [line for line in out.split("\n") if line]
    commands = [line for line in lines if line.startswith("::")]
    assert all(COMMAND.fullmatch(line) for line in commands), [c for c in commands if not COMMAND.fullmatch(c)]
    notices = [line for line in commands if ",title=shardcheck verdict%3A " in line]
    assert len(notices) == verdicts and len(commands) - len(notices) == findings
    assert len(lines) - len(commands) == summaries
    assert not _unsafe(out)


def assert_html(out: str) -> None:
    parser = _Scripts()
    parser.feed(out)
    parser.close()
    assert [s.get("id") for s in parser.scripts] == ["shardcheck-data", None], parser.scripts
    assert out.count("<script") == 2 and out.count("</script>") == 2
    blob = parser.data[0]
    assert not re.search("[<>&\u2028\u2029]", blob)  # no <!--, no </script>, whatever the values
    json.loads(blob)
    assert not _unsafe(out.replace("\n", ""))


def assert_markdown(out: str) -> None:
    out = re.sub(r"(`+) ?[^`].*?\1(?!`)", "", out)  # code spans: what they hold is shown as written
    tags = set(re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", out))
    assert tags <= {"details", "summary"}, tags
    assert "<!--" not in out and "](" not in out.replace("\\](", "")
    assert out.count("<details>") == out.count("</details>")


def _findings(doc) -> int:
    return sum(len(r["findings"]) for r in doc["results"])


def check_every_format(tmp_path, hostile: str, capsys) -> None:
    a = _script(tmp_path, hostile, hostile)
    b = _script(tmp_path, hostile + "after", hostile, mini=32)
    config = _model_config(tmp_path, hostile)
    extra = ["--env", f"HOSTILE={hostile}", "--model-config", str(config)]
    judged = _judged([a, b], extra, capsys)
    _, out = _run(["check", "--format", "json", *extra, str(a), str(b)], capsys)
    doc = json.loads(out)
    for fmt in CHECK_FORMATS:
        flags = ["-q"] if fmt == "quiet" else ["--format", fmt]
        _, out = _run(["check", *flags, *extra, str(a), str(b)], capsys)
        if fmt in TEXTUAL:
            assert_text(out, judged, fmt)
        elif fmt == "github":
            assert_github(out, _findings(doc), 0, verdicts=len(doc["results"]))
        elif fmt == "junit":
            assert len(ET.fromstring(out).findall(".//testcase")) == 2
            assert not _unsafe(out.replace("\n", ""))
        else:
            json.loads(out)
    for fmt in DIFF_FORMATS:
        _, out = _run(["diff", "--format", fmt, *extra, str(a), str(b)], capsys)
        if fmt == "text":
            assert not _unsafe(out) and not [line for line in out.split("\n") if line.startswith("::")]
        elif fmt == "markdown":
            assert_text(out, 0, fmt)
            assert_markdown(out)
        elif fmt == "github":
            items = json.loads(_run(["diff", "--format", "json", *extra, str(a), str(b)], capsys)[1])
            findings = sum(len(d["findings"]["new"]) + len(d["findings"]["kept"]) for d in items["diffs"])
            assert_github(out, findings, 1)
        elif fmt == "junit":
            ET.fromstring(out)
            assert not _unsafe(out.replace("\n", ""))
        elif fmt == "html":
            assert_html(out)
        else:
            json.loads(out)
    report = tmp_path / "report.html"
    _run(["report", *extra, str(a), "-o", str(report)], capsys)
    assert_html(report.read_text(encoding="utf-8"))
    _, out = _run(["memory", *extra, str(a)], capsys)
    assert_text(out, 0, "memory")


def test_every_hostile_piece_at_once(tmp_path, capsys):
    check_every_format(tmp_path, EVERYTHING, capsys)


@seed(SEED)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(hostile=HOSTILE)
def test_hostile_strings_in_every_format(tmp_path_factory, hostile, capsys):
    if not _SAID:  # once: hypothesis itself prints a failing example
        _SAID.append(SEED)
        with capsys.disabled():
            print(f"\nhypothesis seed {SEED}, {EXAMPLES} examples")
    check_every_format(tmp_path_factory.mktemp("escape"), hostile, capsys)


def test_git_diff_summary_of_a_file_named_with_a_newline(tmp_path, capsys, monkeypatch):
    """``diff --git --format github``: the summary line of a file whose name holds a newline and a command."""
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", "init", "-q"], check=True, env=env)
    name = "x\n::error file=forged.sh::forged\n.sh"
    path = tmp_path / name
    path.write_text(LAUNCH.format(model="Qwen/Qwen3-8B", value="1", mini=64))
    for argv in (["add", "--", name], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"]):
        subprocess.run(["git", *argv], check=True, env=env)
    path.write_text(LAUNCH.format(model="Qwen/Qwen3-8B", value="1", mini=32))
    _, out = _run(["diff", "--git", "HEAD", "--format", "github"], capsys)
    commands = [line for line in out.split("\n") if line.startswith("::")]
    assert commands and all(COMMAND.fullmatch(c) for c in commands), commands
    assert "forged\n" not in out and not any(c.startswith("::error file=forged") for c in commands)
    assert any(line.startswith("x\\n::error file=forged.sh::forged\\n.sh: ") for line in out.split("\n")), out
    for fmt in ("text", "markdown"):
        out = _run(["diff", "--git", "HEAD", "--format", fmt], capsys)[1]
        assert not [line for line in out.split("\n") if line.startswith("::")] and not _unsafe(out), fmt
    ET.fromstring(_run(["diff", "--git", "HEAD", "--format", "junit"], capsys)[1])
    assert_html(_run(["diff", "--git", "HEAD", "--format", "html"], capsys)[1])


# -- the escaping functions themselves ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("\x00\x1b[31m\x7f", "\\x00\\x1b[31m\\x7f"),
        ("\x85\x9b", "\\x85\\x9b"),
        ("\u202eevil\u2066\u2069", "\\u202eevil\\u2066\\u2069"),
        ("\u2028\u2029\ufffe", "\\u2028\\u2029\\ufffe"),
        ("\ud800\udcff", "\\ud800\\udcff"),
        ("tab\tand ünïcødé → ✅", "tab\tand ünïcødé → ✅"),  # kept: they start no line and hide nothing
    ],
)
def test_text(raw, shown):
    assert escape.text(raw) == shown
    assert escape.text(escape.text(raw)) == shown  # idempotent: a value escaped twice reads the same


@pytest.mark.parametrize(
    "raw, shown",
    [("run.sh", "run.sh"), ("::error x.sh", "./::error x.sh"), ("  verdict: valid", "./  verdict: valid")],
)
def test_file_name_cannot_start_a_command_or_an_indented_line(raw, shown):
    assert escape.file_name(raw) == shown


def test_github_escaping_is_the_toolkits():
    assert escape.github_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape.github_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_markdown():
    shown = escape.markdown("<img src=x> [a](b) @team *x* |c| `d` a_b_c _e_")
    assert shown == "&lt;img src=x&gt; \\[a\\](b) \\@team \\*x\\* \\|c\\| \\`d\\` a_b_c \\_e\\_"
    assert escape.markdown_code("a`b") == "``a`b``"
    assert escape.markdown_code("`a") == "`` `a ``"
    assert escape.markdown_code("a|b", cell=True) == "`a\\|b`"


def test_script_json_reads_back_the_same():
    value = {"v": "<!--<script></script>&\u2028\u2029\ud800"}
    out = escape.script_json(json.dumps(value, ensure_ascii=False))
    assert not re.search("[<>&\u2028\u2029\ud800]", out)
    assert json.loads(out) == value
    doc = escape.json_text(json.dumps(value, ensure_ascii=False))
    doc.encode("utf-8")
    assert json.loads(doc) == value
