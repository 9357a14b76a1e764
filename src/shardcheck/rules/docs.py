"""Rule documentation generated from the rule definitions: the list, one page per rule, docs/rules/."""

from __future__ import annotations

import json

from shardcheck.rules.base import Rule
from shardcheck.rules.registry import all_rules


def render_rule_list(fmt: str = "text") -> str:
    rules = all_rules()
    if fmt == "json":
        return json.dumps(
            [
                {"id": r.id, "severity": r.severity, "title": r.title, "needs_model": r.needs_model}
                for r in rules.values()
            ],
            indent=2,
        )
    width = max(len(r) for r in rules)
    return "\n".join(f"{r.id:<{width}}  {r.severity:<7}  {r.title}" for r in rules.values())


def rule_page(r: Rule) -> str:
    """The Markdown page of one rule: what, why, versions, its bad and good cases (rules/cases/<ID>.yml, run by the
    tests), fix, source."""
    from shardcheck.rules.examples import rule_cases

    cases = rule_cases().get(r.id)
    lines = [
        f"# {r.id}: {r.title}",
        "",
        f"Severity: **{r.severity}**" + (" · needs the model's architecture" if r.needs_model else ""),
        "",
        f"Applies to: {scope(r)}",
        "",
        r.section("what"),
        "",
    ]
    for name, heading in (
        ("why", "Why it fails"),
        ("versions", "Versions"),
        ("bad", "Bad"),
        ("good", "Good"),
        ("fix", "Fix"),
        ("source", "Source"),
    ):
        if name in ("bad", "good") and cases is not None:
            case = cases[0] if name == "bad" else cases[1]
            body = case.shown()
        else:
            body = r.section(name)
        if body:
            lines += [f"## {heading}", "", body, ""]
    return "\n".join(lines).rstrip() + "\n"


def scope(r: Rule) -> str:
    """Which launches a rule judges, as its declaration says (``frameworks=``, ``engine=``)."""
    frameworks = ", ".join(r.frameworks) if r.frameworks else "every framework"
    return frameworks + (f"; engine {' or '.join(r.engines)}" if r.engines else "")


def render_rule_page(rule_id: str) -> str | None:
    r = all_rules().get(rule_id.upper())
    return rule_page(r) if r else None


def docs_files() -> dict[str, str]:
    """docs/rules/ as it must be: one page per rule and an index."""
    rules = all_rules()
    files = {f"{r.id}.md": rule_page(r) for r in rules.values()}
    index = [
        "# shardcheck rules",
        "",
        "Generated from the rule definitions (`python -m shardcheck.rules.docs`).",
        "",
        "| id | severity | applies to | title |",
        "|---|---|---|---|",
    ]
    index += [f"| [{r.id}]({r.id}.md) | {r.severity} | {scope(r)} | {r.title} |" for r in rules.values()]
    files["README.md"] = "\n".join(index) + "\n"
    return files


def main() -> None:
    from pathlib import Path

    target = Path(__file__).resolve().parents[3] / "docs" / "rules"
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.md"):
        old.unlink()
    for name, text in docs_files().items():
        (target / name).write_text(text)
    print(f"wrote {len(docs_files())} files to {target}")


if __name__ == "__main__":
    main()
