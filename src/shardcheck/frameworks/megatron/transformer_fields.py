"""The fields of megatron-core's TransformerConfig, as data (no megatron import in the default install)."""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

_DATA = Path(__file__).with_name("data") / "transformer_config_fields.json"


@cache
def transformer_config_fields() -> frozenset[str]:
    """Field names of TransformerConfig and MLATransformerConfig (megatron-core 0.16.1, dataclasses.fields)."""
    return frozenset(json.loads(_DATA.read_text())["fields"])


def closest_field(name: str) -> str | None:
    """The field ``name`` is a near-miss of, or None when it is a field or close to none."""
    fields = transformer_config_fields()
    if name in fields:
        return None
    close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.85)
    return close[0] if close else None
