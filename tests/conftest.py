"""Test-wide set-up.

- Every JSON report `shardcheck check` renders during the tests is validated against the documented schema
  (docs/schema/check-report.schema.json); a report that does not match fails the test that produced it.
- The suite's tests were written against verl 0.9.1 (the release shardcheck's rules were verified on): they
  judge with it unless a test unsets ``SHARDCHECK_VERL_VERSION`` (tests/test_verl_versions.py does, to test
  the choice of version itself).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("SHARDCHECK_VERL_VERSION", "0.9.1")
# Models are looked for in the Hugging Face cache (models/hf_cache.py): the tests' own, never this machine's.
os.environ["HF_HUB_CACHE"] = str(Path(__file__).resolve().parent / "data" / "no-hf-cache")
os.environ.pop("HF_ENDPOINT", None)

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "schema" / "check-report.schema.json"
_VALIDATOR = []


def validate_report(doc: dict) -> None:
    """Raise when ``doc`` does not match the check report schema."""
    import jsonschema

    if not _VALIDATOR:
        schema = json.loads(SCHEMA.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR.append(jsonschema.Draft202012Validator(schema))
    errors = sorted(_VALIDATOR[0].iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise AssertionError(f"JSON report does not match {SCHEMA.name} at {list(e.absolute_path)}: {e.message}")


VALIDATED: list[int] = [0]  # how many reports were validated in this session


@pytest.fixture(autouse=True)
def _check_reports_match_the_schema(monkeypatch):
    from shardcheck.report import json_report

    original = json_report.render_json

    def render_and_validate(results):
        text = original(results)
        validate_report(json.loads(text))
        VALIDATED[0] += 1
        return text

    monkeypatch.setattr(json_report, "render_json", render_and_validate)
    yield
