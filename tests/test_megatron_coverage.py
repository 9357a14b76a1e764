"""The coverage list of megatron-core's TransformerConfig.__post_init__ and Megatron-LM's validate_args checks
(tools/megatron_checks.py, tools/data/megatron_checks.json, docs/coverage.md; issue 12 item 3): every check of the
references is in the mapping, every mapped rule exists, and the doc is the one the tool writes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from shardcheck.rules.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
try:
    import megatron_checks as tool
finally:
    sys.path.remove(str(ROOT / "tools"))

WHEELS = os.environ.get("MEGATRON_CORE_VERSIONS_DIR")
GIT = os.environ.get("MEGATRON_LM_GIT")


def test_every_entry_has_a_status_and_a_rule_or_a_reason():
    rules = all_rules()
    checks = tool.load_mapping()["checks"]
    assert len({c["key"] for c in checks}) == len(checks)
    for c in checks:
        assert c["status"] in tool.STATUSES, c["key"]
        if c["status"] == "covered":
            assert c.get("rule") in rules, (c["key"], c.get("rule"))
        else:
            assert c.get("reason") and "rule" not in c, c["key"]


def test_doc_is_generated_from_the_mapping():
    assert tool.DOC.read_text(encoding="utf-8") == tool.render(tool.load_mapping())


def test_extraction_reads_asserts_and_raises():
    source = (
        "class TransformerConfig:\n"
        "    def __post_init__(self):\n"
        "        assert self.a > 0, 'a must be positive'\n"
        "        if self.b and self.c:\n"
        "            raise ValueError(f'b={self.b} and c cannot both be set')\n"
        "        def later():\n"
        "            assert False\n"
    )
    checks = tool.extract(source, "TransformerConfig.__post_init__")
    assert [(c.kind, c.condition, c.message) for c in checks] == [
        ("assert", "self.a > 0", "a must be positive"),
        ("raise", "self.b and self.c", "f'b={self.b} and c cannot both be set'"),  # an f-string as written
    ]


def _mapped(function: str) -> set[str]:
    return {c["key"] for c in tool.load_mapping()["checks"] if c["function"] == function}


@pytest.mark.skipif(not WHEELS, reason="MEGATRON_CORE_VERSIONS_DIR not set (tools/fetch_reference_wheels.py)")
@pytest.mark.parametrize("minor", tool.REFERENCES)
def test_every_transformer_config_check_is_mapped(minor):
    if not (Path(WHEELS) / minor / tool.TC_PATH).is_file():
        pytest.skip(f"megatron-core {minor} not unpacked under {WHEELS}")
    found = {c.key for c in tool.transformer_config_checks(Path(WHEELS), minor)}
    assert len(found) > 100
    assert sorted(found - _mapped("TransformerConfig.__post_init__")) == []


@pytest.mark.skipif(not GIT, reason="MEGATRON_LM_GIT (a Megatron-LM git dir) not set")
def test_every_validate_args_check_is_mapped():
    found = {c.key for c in tool.validate_args_checks(Path(GIT))}
    assert len(found) > 100
    assert sorted(found ^ _mapped("validate_args")) == []
