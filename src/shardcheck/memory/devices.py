"""Device presets for the memory estimate (``--device NAME``), and the default for a job's device kind."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from shardcheck.errors import UsageError

GIB = 1 << 30
# The device assumed when none is named: verl's trainer.device (cuda | npu) says only the kind.
DEFAULT_FOR_KIND = {"cuda": "H100-SXM-80GB", "npu": "Ascend-910B"}


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    kind: str  # "cuda" | "npu"
    memory_bytes: int
    source: str
    note: str | None = None  # why this device was chosen when it was not named

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


@cache
def _table() -> dict[str, dict]:
    return json.loads((Path(__file__).with_name("data") / "devices.json").read_text())["devices"]


def names() -> list[str]:
    return list(_table())


def _device(name: str, note: str | None = None) -> Device:
    row = _table()[name]
    return Device(name, row["kind"], int(row["memory_gib"] * GIB), row["source"], note)


def find_device(text: str) -> Device:
    """A preset by name, case-insensitive, matched on any unambiguous fragment ("h200", "910c", "a100-80")."""
    key = text.lower().replace("_", "-")
    table = {n.lower(): n for n in _table()}
    if key in table:
        return _device(table[key])
    hits = [n for low, n in table.items() if key in low or all(part in low for part in key.split("-"))]
    if len(hits) == 1:
        return _device(hits[0])
    shown = ", ".join(names())
    if not hits:
        raise UsageError(f"--device {text}: not a known device; use one of {shown}")
    raise UsageError(f"--device {text}: ambiguous ({', '.join(hits)}); use one of {shown}")


def device_for(choice: str | None, kind: str | None, setting: str | None = "trainer.device") -> Device:
    """The named device, else the default for the device kind (verl's ``trainer.device``; ``setting``
    None: the framework has no such setting, e.g. Megatron-LM and slime launches) with a note saying so."""
    if choice:
        return find_device(choice)
    kind = (kind or "cuda").lower()
    name = DEFAULT_FOR_KIND.get(kind, DEFAULT_FOR_KIND["cuda"])
    if setting is None:
        return _device(name, f"the launch names no device model; assuming {name}; pass --device NAME")
    said = f"{setting}={kind}" if kind in DEFAULT_FOR_KIND else f"{setting}={kind} (unknown kind)"
    return _device(name, f"{said} names no variant; assuming {name}; pass --device NAME")
