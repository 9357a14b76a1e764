"""The vLLM and SGLang versions a verl version runs its rollout on, and the choice of them.

The rollout engine's version is ``--vllm-version X`` / ``--sglang-version X`` when given (``flag``), else the one a
container image tag near the script names (``pinned``: ``...-vllm0.10.0-...``, ``vllm024.dev2``), else the one
the chosen verl version pins (``verl``). verl's pin, from each wheel's ``Requires-Dist`` (its ``vllm`` /
``sglang`` extras, setup.py at the tag): an exact pin (``==``) is that version; an upper bound (``<=X``) is X, the
newest the pin admits; verl 0.9.0 has only a lower bound (``vllm>=0.18.0``), so its Docker image's is taken
(docker/Dockerfile.stable.vllm ``VLLM_VERSION=0.24.0`` at tag v0.9.0); main's is its pyproject.toml
(``vllm==0.24.0``, ``sglang==0.5.12``, verl main of 2026-08-22).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardcheck.errors import UsageError

# verl version -> (vLLM version, the pin it comes from)
VERL_VLLM = {
    "0.4.0": ("0.8.5", "vllm<=0.8.5"),
    "0.4.1": ("0.8.5", "vllm<=0.8.5"),
    "0.5.0": ("0.8.5", "vllm>=0.7.3,<=0.8.5"),
    "0.6.0": ("0.9.1", "vllm>=0.7.3,<=0.9.1"),
    "0.6.1": ("0.11.0", "vllm>=0.8.5,<=0.11.0"),
    "0.7.0": ("0.12.0", "vllm>=0.8.5,<=0.12.0"),
    "0.7.1": ("0.12.0", "vllm>=0.8.5,<=0.12.0"),
    "0.8.0": ("0.12.0", "vllm>=0.8.5,<=0.12.0"),
    "0.9.0": ("0.24.0", "vllm>=0.18.0; its Docker image vllm==0.24.0"),
    "0.9.1": ("0.24.0", "vllm==0.24.0"),
    "main": ("0.24.0", "vllm==0.24.0 in pyproject.toml"),
}
# verl version -> (SGLang version, the pin)
VERL_SGLANG = {
    "0.4.0": ("0.4.6.post5", "sglang==0.4.6.post5"),
    "0.4.1": ("0.4.6.post5", "sglang==0.4.6.post5"),
    "0.5.0": ("0.4.6.post5", "sglang==0.4.6.post5"),
    "0.6.0": ("0.5.2", "sglang==0.5.2"),
    "0.6.1": ("0.5.5", "sglang==0.5.5"),
    "0.7.0": ("0.5.6", "sglang==0.5.6"),
    "0.7.1": ("0.5.6", "sglang==0.5.6"),
    "0.8.0": ("0.5.8", "sglang==0.5.8"),
    "0.9.0": ("0.5.8", "sglang==0.5.8"),
    "0.9.1": ("0.5.12", "sglang==0.5.12"),
    "main": ("0.5.12", "sglang==0.5.12 in pyproject.toml"),
}
# The vLLM versions whose source the VLLM-* rules were checked against (their wheels read as data); another
# known version is judged with the text and condition of the nearest of these (rules/vllm_engine.py says which).
VLLM_CHECKED = ("0.8.5", "0.9.1", "0.11.0", "0.12.0", "0.24.0")
SGLANG_CHECKED = ("0.5.12",)
ENGINES = {"vllm": ("vLLM", VERL_VLLM, VLLM_CHECKED), "sglang": ("SGLang", VERL_SGLANG, SGLANG_CHECKED)}


@dataclass(frozen=True, slots=True)
class EngineChoice:
    engine: str  # vllm | sglang
    version: str | None  # None: the verl version pins none shardcheck knows
    source: str  # flag | pinned | verl | unknown
    reason: str


def as_tuple(version: str) -> tuple[int, ...]:
    """``0.10.0`` → (0, 10, 0); a shorter version is padded (``0.24`` → (0, 24, 0)) so that it compares as its .0."""
    parts = tuple(int(p) for p in re.findall(r"\d+", version))
    return parts + (0,) * (3 - len(parts))


def known(engine: str) -> tuple[str, ...]:
    """The versions of ``engine`` shardcheck knows: those a bundled verl pins and those its rules were checked on."""
    _, table, checked = ENGINES[engine]
    return tuple(sorted({v for v, _ in table.values()} | set(checked), key=as_tuple))


def normalize(engine: str, text: str) -> str:
    """A known ``engine`` version named by ``text`` (``0.24``, ``v0.24.0``); a UsageError (exit 2) otherwise."""
    name = ENGINES[engine][0]
    wanted = text.strip().lower().removeprefix(engine).strip("=@ ").removeprefix("v")
    versions = known(engine)
    if wanted in versions:
        return wanted
    prefix = [v for v in versions if v.startswith(wanted + ".")]
    if wanted and prefix:
        return prefix[-1]
    raise UsageError(f"{name} {text!r} is not one shardcheck knows; known: {', '.join(versions)}")


def choose(
    engine: str, requested: str | None, verl_version: str | None, pinned: tuple[str, str] | None = None
) -> EngineChoice:
    """``engine``'s version: ``requested`` (``--vllm-version`` / ``--sglang-version``), else ``pinned`` (version,
    where: a container image tag near the script that names it), else verl's pin."""
    name, table, _ = ENGINES[engine]
    if requested is not None:
        version = normalize(engine, requested)
        return EngineChoice(engine, version, "flag", f"{name} {version} as given by --{engine}-version")
    if pinned is not None:
        try:  # a tag naming a minor (vllm024) is that minor's version shardcheck knows (0.24.0)
            version = normalize(engine, pinned[0])
        except UsageError:
            version = pinned[0]
        return EngineChoice(engine, version, "pinned", f"{name} {version} as named by {pinned[1]}")
    pinned = table.get(verl_version or "")
    if pinned is None:
        return EngineChoice(engine, None, "unknown", f"verl {verl_version} pins no {name} version shardcheck knows")
    return EngineChoice(
        engine, pinned[0], "verl", f"{name} {pinned[0]}, the one verl {verl_version} pins ({pinned[1]})"
    )


def nearest_checked(engine: str, version: str | None) -> str:
    """The checked version whose source a rule follows for ``version``: the newest checked one not above it, else
    the oldest checked one (None: the newest)."""
    checked = ENGINES[engine][2]
    if version is None:
        return checked[-1]
    below = [v for v in checked if as_tuple(v) <= as_tuple(version)]
    return below[-1] if below else checked[0]
