"""Which megatron-core a job runs on, and what differs between its minors for the layout rules.

The choice, in order: ``--megatron-core-version`` (``flag``); the megatron-core installed in this
environment (``installed``; its metadata is read, nothing imported); one a container image tag near the script
names (``pinned``: ``...-mcore0.13.0-...``); the one the chosen verl release runs
with (``verl``: the megatron-core of that release's own Docker images, below); otherwise ``default``, the
minor shardcheck's differential tests run against.

What differs (megatron/core/parallel_state.py ``initialize_model_parallel`` at each ``core_vX.Y.Z`` tag of
NVIDIA/Megatron-LM):

- before 0.10 the expert layers have no grid of their own: EP is carved out of DP and
  ``data_parallel_size % expert_model_parallel_size`` must be 0 (``RuntimeError: data_parallel_size (DP) is
  not divisible by expert_model_parallel_size``); there is no expert tensor parallel size;
- 0.10 brings MoE parallel folding (ETP, and the expert grid ETP·EP·EDP·PP = world); until 0.13 its text
  reads ``decoder world_size (W) is not divisible by expert_tensor_model_pipeline_parallel size (N)``;
- from 0.14 on the text reads ``world_size (W) is not divisible by expert_tensor_model_pipeline_parallel size (N)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from shardcheck.errors import InputError

# Every minor from the last before MoE folding to the newest on the package index (0.17-0.19: cp312 wheels).
MINORS = ("0.9", "0.10", "0.11", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18", "0.19")
DEFAULT = "0.16"  # the minor the differential tests install (megatron-core 0.16.1)
FOLDING_SINCE = (0, 10)
WORLD_TEXT_SINCE = (0, 14)
MEGATRON_CORE_SOURCES = ("flag", "installed", "pinned", "verl", "default")


def as_tuple(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest.partition(".")[0] or 0)


def normalize(text: str) -> str:
    """``0.16.1`` / ``core_v0.16.1`` / ``0.16`` → ``0.16``; exit-2 error for one outside ``MINORS``."""
    wanted = text.strip().lower().removeprefix("megatron-core").strip("=@ ").removeprefix("core_v").removeprefix("v")
    parts = wanted.split(".")
    minor = ".".join(parts[:2])
    if len(parts) >= 2 and minor in MINORS and all(p.isdigit() for p in parts):
        return minor
    raise InputError(f"megatron-core {text!r} is not supported; supported minors: {', '.join(MINORS)}")


@dataclass(frozen=True, slots=True)
class MegatronCoreChoice:
    version: str  # a minor from MINORS
    source: str  # one of MEGATRON_CORE_SOURCES
    reason: str

    @property
    def folding(self) -> bool:
        return as_tuple(self.version) >= FOLDING_SINCE


@lru_cache(maxsize=1)
def installed() -> str | None:
    """The megatron-core minor installed here (looked up once per process: the lookup scans every installed
    distribution, and ``plan`` resolves a script once per proven plan)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("megatron-core")
    except PackageNotFoundError:
        return None
    try:
        return normalize(text)
    except InputError:
        return None


def choose(
    requested: str | None, implied: tuple[str, str] | None = None, pinned: tuple[str, str] | None = None
) -> MegatronCoreChoice:
    """The megatron-core minor to judge with: ``requested`` (the flag), else the installed one, else ``pinned``
    (version text, where: a container tag near the script naming ``mcore0.13.0``; ignored when outside MINORS),
    else ``implied`` (minor, what implies it: e.g. the one the chosen verl release's images install), else
    DEFAULT."""
    if requested is not None:
        minor = normalize(requested)
        return MegatronCoreChoice(minor, "flag", f"megatron-core {minor} as given by --megatron-core-version")
    found = installed()
    if found is not None:
        return MegatronCoreChoice(found, "installed", f"megatron-core {found} installed in this environment")
    if pinned is not None:
        try:
            minor = normalize(pinned[0])
        except InputError:
            minor = None
        if minor is not None:
            return MegatronCoreChoice(minor, "pinned", f"megatron-core {minor} as named by {pinned[1]}")
    if implied is not None:
        minor, what = implied
        return MegatronCoreChoice(minor, "verl", f"megatron-core {minor}, which {what}")
    return MegatronCoreChoice(DEFAULT, "default", f"megatron-core {DEFAULT} (not given, installed or implied)")


def expert_error(world: int, etp: int, ep: int, pp: int, dp: int, version: str = DEFAULT) -> str | None:
    """The expert-layer check ``initialize_model_parallel`` of ``version`` fails, in its own words."""
    if as_tuple(version) < FOLDING_SINCE:
        if ep > 0 and dp % ep == 0:
            return None
        return f"data_parallel_size ({dp}) is not divisible by expert_model_parallel_size "
    grid = etp * ep * pp
    if grid > 0 and world % grid == 0:
        return None
    prefix = "world_size" if as_tuple(version) >= WORLD_TEXT_SINCE else "decoder world_size"
    return f"{prefix} ({world}) is not divisible by expert_tensor_model_pipeline_parallel size ({grid})"
