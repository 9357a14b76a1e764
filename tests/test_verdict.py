"""One verdict in every format (issue 26): text, JSON, SARIF, JUnit, github, Markdown and HTML say the same of a
valid, an invalid (an error that holds as read) and an undecided script; and the verdict names what it did not
judge (the memory estimate stopped by an unknown value, with its line)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from shardcheck.api import check
from shardcheck.cli import main
from shardcheck.rules.examples import verl_launch

M = "actor_rollout_ref.actor.megatron"
SCRIPTS = {
    "valid": (verl_launch(), True, "valid"),
    # an error as read: an unknown argument follows it, so it is conditional, yet it will not start as read
    "invalid": (verl_launch(f'{M}.tensor_model_parallel_size=3 "$(cat more.txt)"'), False, "will not start"),
    "undecided": (verl_launch(f"{M}.tensor_model_parallel_size=$TP"), None, "undecided"),
}


def _run(argv, capsys) -> str:
    main(argv)
    return capsys.readouterr().out


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_one_verdict_in_every_format(case, tmp_path, capsys, monkeypatch):
    text, valid, word = SCRIPTS[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.sh").write_text(text)
    (tmp_path / "good.sh").write_text(SCRIPTS["valid"][0])
    result = check(tmp_path / "run.sh")
    assert (result.valid, result.verdict.word) == (valid, word)

    said = re.search(r"verdict: (.*) \(\d+ errors?", _run(["check", "--no-fix-proof", "run.sh"], capsys)).group(1)
    assert said == result.verdict.sentence and said.startswith(
        {"valid": "valid", "invalid": "will not start as read", "undecided": "undecided"}[case]
    )

    doc = json.loads(_run(["check", "--no-fix-proof", "--format", "json", "run.sh"], capsys))["results"][0]
    assert (doc["valid"], doc["verdict"], doc["verdict_text"]) == (valid, word, said)

    sarif = json.loads(_run(["check", "--no-fix-proof", "--format", "sarif", "run.sh"], capsys))
    (entry,) = sarif["runs"][0]["invocations"][0]["properties"]["verdicts"]
    assert (entry["script"], entry["valid"], entry["verdict"], entry["text"]) == ("run.sh", valid, word, said)

    case_el = ET.fromstring(_run(["check", "--no-fix-proof", "--format", "junit", "run.sh"], capsys)).find(
        ".//testcase"
    )
    outcome = [el.tag for el in case_el if el.tag in ("failure", "error", "skipped")]
    assert outcome == {True: [], False: ["failure"], None: ["skipped"]}[valid]
    assert case_el.find("system-out").text.splitlines()[0] == f"verdict: {said}"

    github = _run(["check", "--no-fix-proof", "--format", "github", "run.sh"], capsys)
    assert f"title=shardcheck verdict%3A {word}::" in github

    md = _run(["diff", "--format", "markdown", "good.sh", "run.sh"], capsys)
    icon = {"valid": "✅", "will not start": "❌", "undecided": "❔"}[word]
    assert f"| ✅ valid | {icon} {word} |" in md

    html = _run(["diff", "--format", "html", "good.sh", "run.sh"], capsys)
    badge = {"valid": "valid", "will not start": "bad", "undecided": "undecided"}[word]
    assert f'<span class="verdict {badge}">{word}</span>' in html


MOE_FREQ_LOOP = """\
NLAYERS=48
arr=()
for ((i=0; i<NLAYERS; i++)); do
  arr+=(1)
done
printf -v MOE_LAYER_FREQ "[%s]" "$(IFS=', '; echo "${arr[*]}")"
"""


def _slime(tmp_path, freq_line: str):
    from shardcheck.rules.examples import slime_launch

    script = tmp_path / "run.sh"
    script.write_text(
        freq_line
        + slime_launch(
            "--vocab-size 151936 --rollout-max-context-len 8192 --sglang-mem-fraction-static 0.7 "
            '--moe-layer-freq "$MOE_LAYER_FREQ"'
        )
    )
    return script


def test_the_verdict_names_the_memory_it_did_not_judge(tmp_path, capsys):
    """slime's run-qwen3-30B-A3B.sh builds --moe-layer-freq with a loop and `printf -v`: the parameter counts
    are unknown, so no memory rule ran; the verdict says so with the line, and JSON lists it."""
    script = _slime(tmp_path, MOE_FREQ_LOOP)
    r = check(script, device="h100")
    assert r.valid is True
    (nj,) = r.verdict.not_judged
    assert (nj.what, nj.line) == ("memory", 6) and nj.why.startswith("parameter counts unknown: --moe-layer-freq")
    assert r.verdict.sentence.startswith("layout valid; memory not judged: parameter counts unknown")
    assert r.verdict.sentence.endswith(", line 6")
    doc = json.loads(_run(["check", "--no-fix-proof", "--format", "json", str(script)], capsys))["results"][0]
    assert doc["not_judged"] == [{"what": "memory", "why": nj.why, "path": str(script), "line": 6}]


def test_nothing_not_judged_when_the_memory_is_estimated(tmp_path):
    script = _slime(tmp_path, 'MOE_LAYER_FREQ="[1]*48"\n')
    r = check(script, device="h100")
    assert r.verdict.not_judged == () and "not judged" not in r.verdict.sentence


def test_the_verdict_names_the_model_rules_it_did_not_judge(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(verl_launch(model="NoSuchModel-7B"))
    r = check(script)
    (nj,) = r.verdict.not_judged
    assert nj.what == "model rules" and f"{len(r.skipped)} rules need the model: " in nj.why
    assert r.verdict.sentence.startswith("layout valid; model rules not judged: ")
