"""JUnit XML (the Ant/Jenkins/GitLab schema): one test case per script; it fails when the script has an
error finding (for ``diff``: on the after side), errors when the input cannot be used, and (``check``) is
skipped when its verdict is undecided; the verdict (verdict.py), warnings and notes go to ``system-out``. Every
value is escaped as text (report/escape.py): XML 1.0 forbids most C0 controls even as character references, and
a value's newline would make a line of its own."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from shardcheck.report import escape
from shardcheck.report.findings_source import Item


def _line(it: Item) -> str:
    loc = escape.file_name(f"{it.path}:{it.line}" if it.path and it.line else (it.path or it.script))
    mark = " (new)" if it.baseline == "new" else ""
    fix = f"\n  fix: {escape.text(it.fix)}" if it.fix else ""
    return f"{loc}: {it.rule or 'input'} {it.severity}{mark}: {escape.text(it.message)}{fix}"


def render_junit(
    items: list[Item],
    scripts: list[str],
    *,
    suite: str = "shardcheck check",
    summaries: dict[str, str] | None = None,
    verdicts: dict | None = None,
) -> str:
    """``verdicts`` (``check``): script -> its Verdict; its sentence opens ``system-out``, and an undecided
    script is ``skipped`` (not judged either way), as a failing one fails."""
    by_script: dict[str, list[Item]] = {s: [] for s in scripts}
    for it in items:
        by_script.setdefault(it.script, []).append(it)
    root = ET.Element("testsuites", name="shardcheck")
    ts = ET.SubElement(root, "testsuite", name=suite)
    failures = errors = 0
    for script, found in by_script.items():
        case = ET.SubElement(ts, "testcase", classname=suite.replace(" ", "."), name=escape.text(script))
        bad = [i for i in found if i.unusable]
        failing = [i for i in found if not i.unusable and i.severity == "error"]
        if bad:
            errors += 1
            el = ET.SubElement(case, "error", message=escape.text(bad[0].message), type="input")
            el.text = "\n".join(_line(i) for i in bad)
        elif failing:
            failures += 1
            rules = sorted({i.rule for i in failing})
            el = ET.SubElement(
                case,
                "failure",
                type="shardcheck",
                message=f"{len(failing)} error{'s' * (len(failing) != 1)}: {', '.join(rules)}",
            )
            el.text = "\n".join(_line(i) for i in failing)
        elif verdicts and script in verdicts and verdicts[script].state == "undecided":
            ET.SubElement(case, "skipped", message=verdicts[script].sentence)
        rest = [i for i in found if not i.unusable and i.severity != "error"]
        out = [_line(i) for i in rest]
        if summaries and script in summaries:
            out.insert(0, escape.text(summaries[script]))
        if verdicts and script in verdicts:
            out.insert(0, escape.text(f"verdict: {verdicts[script].sentence}"))
        if out:
            ET.SubElement(case, "system-out").text = "\n".join(out)
    for el in (root, ts):
        el.set("tests", str(len(by_script)))
        el.set("failures", str(failures))
        el.set("errors", str(errors))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
