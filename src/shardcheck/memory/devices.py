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
    compute_capability: str | None = None  # NVIDIA's CUDA compute capability ("9.0"); None: not NVIDIA / unknown

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
    return Device(name, row["kind"], int(row["memory_gib"] * GIB), row["source"], note, row.get("compute_capability"))


def _token_match(fragment: str, token: str) -> bool:
    """A fragment token names a preset token: equal, or a prefix that does not stop inside a number
    (``80`` matches ``80gb``; ``h20`` does not match ``h200``)."""
    if fragment == token:
        return True
    if not token.startswith(fragment):
        return False
    return not (fragment[-1].isdigit() and token[len(fragment)].isdigit())


def _did_you_mean(key: str) -> str:
    """``" (did you mean H200-SXM-141GB?)"``: the presets whose name, or one of its tokens, is close to ``key``."""
    import difflib

    by_word = {}
    for name in names():
        for word in (name.lower(), *name.lower().split("-")):
            by_word.setdefault(word, set()).add(name)
    close = difflib.get_close_matches(key, list(by_word), n=3, cutoff=0.7)
    hits = sorted({name for word in close for name in by_word[word]}, key=names().index)[:3]
    return f" (did you mean {' or '.join(hits)}?)" if hits else ""


MEMORY_CHOICE = "memory="  # a --device-memory SIZE choice, carried as the device choice "memory=<bytes>"


def find_device(text: str) -> Device:
    """``memory=<bytes>`` (``--device-memory``): a device of that size. Else a preset by name,
    case-insensitive, or by fragments that each name one token of exactly one preset
    ("h200", "910c", "a100-80"); a fragment matching a preset only by part of a number (``h20`` of H200)
    names nothing, and one matching several presets is ambiguous: never a silent guess."""
    if text.startswith(MEMORY_CHOICE):
        return custom_device(int(text[len(MEMORY_CHOICE) :]))
    key = text.lower().replace("_", "-")
    table = {n.lower(): n for n in _table()}
    if key in table:
        return _device(table[key])
    parts = [p for p in key.split("-") if p]
    hits = [
        n for low, n in table.items() if parts and all(any(_token_match(p, t) for t in low.split("-")) for p in parts)
    ]
    if len(hits) == 1:
        return _device(hits[0])
    shown = ", ".join(names())
    if not hits:
        raise UsageError(
            f"--device {text}: not a known device{_did_you_mean(key)}; use one of {shown}, or give "
            "--device-memory SIZE (e.g. 96GiB) for any other"
        )
    raise UsageError(f"--device {text}: ambiguous ({', '.join(hits)}); use one of {shown}")


def kind_of(choice: str) -> str | None:
    """The kind (cuda | npu) of the device a ``--device`` choice names; None for ``--device-memory``."""
    return None if choice.startswith(MEMORY_CHOICE) else find_device(choice).kind


def largest_of_kind(kind: str) -> Device:
    """The preset with the most memory among devices of ``kind`` (cuda | npu)."""
    rows = [(row["memory_gib"], name) for name, row in _table().items() if row["kind"] == kind]
    return _device(max(rows)[1])


def device_choice(device: Device) -> str:
    """What names ``device`` again for ``find_device``: its preset name, or ``--device-memory``'s choice."""
    return f"{MEMORY_CHOICE}{device.memory_bytes}" if device.source == "--device-memory" else device.name


def custom_device(memory_bytes: int, kind: str = "cuda") -> Device:
    """``--device-memory SIZE``: a device of that memory, for cards without a preset."""
    return Device(f"{memory_bytes / GIB:g} GiB device", kind, memory_bytes, "--device-memory")


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
