"""SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format), for GitHub code scanning and IDEs.

The log follows the 2.1.0 schema (tests validate it against the official ``sarif-schema-2.1.0.json``
from github.com/oasis-tcs/sarif-spec, shipped in tests/data/sarif/). One run; ``tool.driver.rules``
holds the metadata of each rule that has a result: its title, its ``explain`` text as ``help`` (text and
Markdown) and ``helpUri`` = the docs base + ``ID.md`` (``docs/rules/ID.md`` of this repository; the base
comes from ``SHARDCHECK_DOCS_URL``, e.g. a GitHub blob URL, and is left out when not set, as the schema
requires an absolute URI). Results carry the script line as a region with its text as snippet; the fix
is text (SARIF's ``fixes`` need concrete replacements, which shardcheck does not make), in the message
and in ``properties.fix``. For ``diff`` each result has ``baselineState`` new or unchanged. An input that
cannot be used is its INPUT-* result (a tool execution notification if the settings left that rule out)
and makes ``executionSuccessful`` false; a file without a launch is skipped, as ``check`` skips it.
Texts a viewer shows (messages, snippets) are escaped as text (report/escape.py); URIs percent-encode the
file name's bytes (a name that is not UTF-8 included); the rest is JSON, exact.
For ``check`` the invocation's properties list each script's verdict (verdict.py), as the text and JSON
say it.
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote

from shardcheck.report import escape
from shardcheck.report.findings_source import Item

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
INFORMATION_URI = "https://pypi.org/project/shardcheck/"


def _docs_base() -> str | None:
    base = os.environ.get("SHARDCHECK_DOCS_URL", "").strip()
    if not base or "://" not in base:
        return None
    return base if base.endswith("/") else base + "/"


def _rule_descriptor(rule_id: str) -> dict:
    from shardcheck.rules.docs import rule_page
    from shardcheck.rules.registry import all_rules

    rule = all_rules().get(rule_id)
    doc: dict = {"id": rule_id, "name": rule_id.title().replace("-", "")}
    if rule is None:
        doc["shortDescription"] = {"text": rule_id}
        return doc
    page = rule_page(rule)
    doc["shortDescription"] = {"text": rule.title}
    what = rule.section("what").strip()
    if what:
        doc["fullDescription"] = {"text": what}
    doc["help"] = {"text": page, "markdown": page}
    base = _docs_base()
    if base:
        doc["helpUri"] = f"{base}{rule_id}.md"
    doc["defaultConfiguration"] = {"level": LEVELS[rule.severity]}
    doc["properties"] = {"tags": [rule_id.split("-")[0].lower()], "needs_model": rule.needs_model}
    return doc


def _uri(path: str) -> str:
    return quote(path, errors="surrogateescape")


def _verdicts(verdicts: dict | None) -> dict:
    if verdicts is None:
        return {}
    return {
        "verdicts": [
            {"script": script, "verdict": v.word, "valid": v.valid, "text": escape.text(v.sentence)}
            for script, v in verdicts.items()
        ]
    }


def render_sarif(items: list[Item], *, scripts: list[str], command: str = "check", verdicts: dict | None = None) -> str:
    """``verdicts``: script -> its Verdict (``check``), listed in the invocation's properties."""
    import shardcheck

    rule_ids = list(dict.fromkeys(i.rule for i in items if i.rule is not None))
    index = {r: k for k, r in enumerate(rule_ids)}
    results = []
    notifications = []
    for it in items:
        location = {"physicalLocation": {"artifactLocation": {"uri": _uri(it.path or it.script)}}}
        if it.line:
            region: dict = {"startLine": it.line}
            if it.snippet:
                region["snippet"] = {"text": escape.text(it.snippet)}
            location["physicalLocation"]["region"] = region
        if it.rule is None:
            notifications.append(
                {"level": "error", "message": {"text": escape.text(it.message)}, "locations": [location]}
            )
            continue
        text = escape.text(it.message) + (f"\nfix: {escape.text(it.fix)}" if it.fix else "")
        result: dict = {
            "ruleId": it.rule,
            "ruleIndex": index[it.rule],
            "level": LEVELS[it.severity],
            "message": {"text": text},
            "locations": [location],
        }
        if it.baseline:
            result["baselineState"] = it.baseline
        props = {"script": it.script}
        if it.fix:
            props["fix"] = it.fix
        result["properties"] = props
        results.append(result)
    run = {
        "tool": {
            "driver": {
                "name": "shardcheck",
                "version": shardcheck.__version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_descriptor(r) for r in rule_ids],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not any(i.unusable for i in items),
                "toolExecutionNotifications": notifications,
                "properties": {"command": command, "scripts": scripts, **_verdicts(verdicts)},
            }
        ],
        "artifacts": [{"location": {"uri": _uri(s)}} for s in dict.fromkeys(i.path or i.script for i in items)],
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    doc = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return escape.json_text(json.dumps(doc, indent=2, ensure_ascii=False))
