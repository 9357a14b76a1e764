"""Which verl a launch is judged against: the bundled catalogue of verl config trees, and the choice of version.

The catalogue (``data/catalogue/``, built by ``tools/build_verl_catalogue.py`` from the released wheels and a
recent main) holds, per verl version, every top-level config composed by Hydra, and an index of which
versions have each key. The choice, in order (the first that applies):

1. ``--verl-version X`` or the environment variable ``SHARDCHECK_VERL_VERSION`` (``flag``), or
   ``[tool.shardcheck] verl-version`` (``config``);
2. ``--verl-path DIR`` or ``[tool.shardcheck] verl-path`` (``path``): a checkout, a fork or a site-packages
   folder, its config tree read as data and its version recognised by content (verl_path.py);
   likewise a verl the script's repository carries (``vendored``, vendored.py: a ``verl/`` package or submodule
   with ``trainer/config`` and ``version/version`` above the script, or on the ``PYTHONPATH`` it exports);
3. a verl installed in the environment (``installed``; read as data by ``config_tree.load_defaults``);
4. a ``verl==X`` pin in a requirements file or pyproject.toml beside the script or above it (``pinned``);
5. inference (``inferred``): the newest release whose config accepts every override of the script;
   when no release accepts them all, the newest release (``default``), and the keys each version lacks.

An override is accepted by a version as Hydra accepts it on a struct config (hydra/_internal/
config_loader_impl.py ``_apply_overrides_to_config``): ``key=v`` needs the key, ``+key=v`` needs
it absent or selecting as None (``~key`` needs it not None), ``++key=v`` always applies.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from shardcheck.errors import InputError
from shardcheck.inputs.hydra_overrides import OverrideItem

_CATALOGUE = Path(__file__).with_name("data") / "catalogue"
CATALOGUE_INDEX = _CATALOGUE / "index.json.gz"
# Behaviour that changed between verl versions (the rules read these; each with the verl file that shows it):
# rollout mode "sync" removed, RolloutConfig.__post_init__ raises (verl/workers/config/rollout.py, since 0.7.0).
SYNC_ROLLOUT_REMOVED = "0.7.0"
# vLLMHttpServer._validate_configs raises max_num_batched_tokens to max_model_len when chunked prefill is off,
# with a warning (verl/workers/rollout/vllm_rollout/vllm_async_server.py in the 0.9.1 wheel; absent from
# 0.9.0 and from main of 2026-08-22, which hand the value to vLLM unchanged).
MNBT_RAISED_BY_VERL = ("0.9.1",)
# The legacy workers (verl/workers/fsdp_workers.py, megatron_workers.py; removed in 0.8.0) turn the deprecated
# global micro batch sizes into per-GPU ones at init: ``ppo_micro_batch_size //= world / SP``, then
# ``ppo_micro_batch_size_per_gpu = ppo_micro_batch_size`` (same for log_prob_micro_batch_size; fsdp_workers.py
# ActorRolloutRefWorker.__init__, verl 0.4.0 … 0.7.1). The engine workers (0.8.0 on) read only the per-GPU key.
ENGINE_WORKERS_ONLY = "0.8.0"
# RolloutConfig.__post_init__ refuses rollout pipeline parallelism for vllm and sglang (verl/workers/config/
# rollout.py, since 0.6.0; trtllm too since 0.7.1). Before 0.6.0 the rollout section has no such key and the
# vLLM rollout never hands a pipeline size to vLLM (verl/workers/rollout/vllm_rollout/, 0.4.0 … 0.5.0).
LEGACY_SWITCH_ACTOR = "0.7.0"  # trainer.use_legacy_worker_impl=disable moves the actor (and ref) to the engine workers
LEGACY_SWITCH_CRITIC = "0.5.0"  # ... and an FSDP critic (0.5.0 … 0.6.1: verl.workers.roles.CriticWorker)


def legacy_workers(version: str, role: str, setting: object, *, fsdp: bool) -> bool:
    """Whether verl ``version`` runs ``role`` (actor, ref or critic) on its legacy workers (fsdp_workers.py /
    megatron_workers.py) rather than the engine workers (engine_workers.py), given ``trainer.use_legacy_worker_impl``
    (``setting``: its value, None when absent or unknown; "auto" and "enable" mean legacy). From 0.8.0 there are
    no legacy workers; before, main_ppo.py picks them unless the switch says "disable" — which moves the actor and
    ref from 0.7.0 and an FSDP critic from 0.5.0; a Megatron critic stays legacy (main_ppo.py add_actor_rollout_worker
    / add_critic_worker, verl 0.5.0 … 0.7.1)."""
    if at_least(version, ENGINE_WORKERS_ONLY):
        return False
    if setting != "disable":
        return True
    if role == "critic":
        return not (fsdp and at_least(version, LEGACY_SWITCH_CRITIC))
    return not at_least(version, LEGACY_SWITCH_ACTOR)


# verl builds a Megatron model through Megatron-Bridge (``vanilla_mbridge=False``; the default from 0.9.0) from 0.7.0;
# before, through mbridge or its own converter, which take ETP from the process groups (mbridge
# core/llm_bridge.py ``mpu.etp_size``): verl/workers/engine/megatron/transformer_impl.py, megatron_workers.py
MEGATRON_BRIDGE_PATH = "0.7.0"
ROLLOUT_PP_REFUSED = "0.6.0"
TRTLLM_PP_REFUSED = "0.7.1"
# actor_rollout_ref.model.mtp (verl/workers/config/model.py MtpConfig): MTP layers are built only with
# mtp.enable from 0.7.1 (0.7.0 and earlier: mbridge builds the checkpoint's depth). verl reads the depth from
# num_nextn_predict_layers, from 0.8.0 also Qwen3.5's mtp_num_hidden_layers (verl/utils/megatron_utils.py
# check_mtp_config / _get_mtp_num_layers).
MTP_KEYED = "0.7.1"
MTP_HIDDEN_LAYERS_READ = "0.8.0"


def mtp_keys(version: str) -> tuple[str, ...]:
    """The config.json keys verl ``version`` reads an MTP depth from."""
    if at_least(version, MTP_HIDDEN_LAYERS_READ):
        return ("mtp_num_hidden_layers", "num_nextn_predict_layers")
    return ("num_nextn_predict_layers",)


VERSION_SOURCES = ("flag", "config", "path", "vendored", "installed", "pinned", "inferred", "default")


@dataclass(frozen=True, slots=True)
class Catalogue:
    versions: tuple[str, ...]  # every bundled entry, oldest first (releases, then a main snapshot)
    releases: tuple[str, ...]  # the released versions among them
    keys: dict[str, dict[str, list[int]]]  # config name -> key -> [has, selects as None] bit masks over versions

    def _mask(self, config_name: str, key: str, which: int) -> int:
        masks = self.keys.get(config_name, {}).get(key)
        return masks[which] if masks else 0

    def having(self, config_name: str, key: str) -> tuple[str, ...]:
        mask = self._mask(config_name, key, 0)
        return tuple(v for bit, v in enumerate(self.versions) if mask >> bit & 1)

    def has(self, config_name: str, key: str, version: str) -> bool:
        return bool(self._mask(config_name, key, 0) >> self.versions.index(version) & 1)

    def is_none(self, config_name: str, key: str, version: str) -> bool:
        """Whether the key's default selects as None in that version (absent keys too)."""
        bit = self.versions.index(version)
        return not self._mask(config_name, key, 0) >> bit & 1 or bool(self._mask(config_name, key, 1) >> bit & 1)

    def with_config(self, config_name: str) -> tuple[str, ...]:
        """The versions that have the config ``config_name`` at all."""
        table = self.keys.get(config_name, {})
        mask = 0
        for top in ("trainer", "data"):
            mask |= table.get(top, (0, 0))[0]
        return tuple(v for bit, v in enumerate(self.versions) if mask >> bit & 1)


def _read(path: Path) -> dict:
    try:
        return json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{path}: shardcheck's verl catalogue cannot be read ({exc}); reinstall shardcheck") from None


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    doc = _read(_CATALOGUE / "index.json.gz")
    return Catalogue(tuple(doc["versions"]), tuple(doc["releases"]), doc["keys"])


@lru_cache(maxsize=16)
def version_doc(version: str) -> dict:
    """One bundled version's file: ``{"verl_version", "source", "model_engines", "configs"}``."""
    return _read(_CATALOGUE / f"verl-{version}.json.gz")


def entry_config(module: str, version: str) -> tuple[str, str] | None:
    """(config dir, config name) of verl ``version``'s Hydra entry point ``module`` (its ``@hydra.main``, read
    from the wheel by tools/build_verl_catalogue.py); None when that version has no such entry point."""
    found = version_doc(version).get("entries", {}).get(module)
    return (found[0], found[1]) if found else None


def versions_with_entry(module: str) -> tuple[str, ...]:
    return tuple(v for v in catalogue().versions if entry_config(module, v) is not None)


def entry_files(version: str, folder: str) -> dict[str, tuple[dict, object]]:
    """verl ``version``'s config files of ``folder`` kept for its other entry points (``{"group/x.yaml": (header,
    tree)}``), for custom_config.compose_files."""
    stored = version_doc(version).get("entry_files", {}).get(folder, {})
    return {name: (header, tree) for name, (header, tree) in stored.items()}


def normalize(text: str) -> str:
    """A bundled version named by ``text`` (``0.9``, ``v0.9.0``, ``0.9.0``, ``main``); exit-2 error otherwise."""
    cat = catalogue()
    wanted = text.strip().lower().removeprefix("verl").strip("=@ ").removeprefix("v")
    if wanted in cat.versions:
        return wanted
    prefix = [v for v in cat.releases if v.startswith(wanted + ".")]
    if prefix:
        return prefix[-1]  # "0.9" is the newest 0.9.x
    raise InputError(f"verl {text!r} is not in shardcheck's catalogue; bundled: {', '.join(cat.versions)}")


def key_of(version: str) -> tuple[int, ...]:
    """A sort key: releases by number; ``main`` (or any other label) after every release."""
    parts = re.findall(r"\d+", version)
    return tuple(int(p) for p in parts) if version in catalogue().releases else (1 << 30,)


def at_least(version: str, floor: str) -> bool:
    """Whether verl ``version`` is ``floor`` or newer (a main snapshot counts as newer than every release)."""
    return key_of(version) >= tuple(int(p) for p in re.findall(r"\d+", floor))


def span(versions: tuple[str, ...] | list[str]) -> str:
    """``0.6.0 … 0.9.0, main``: runs of consecutive bundled versions."""
    order = catalogue().versions
    picked = sorted({order.index(v) for v in versions})
    runs: list[list[int]] = []
    for i in picked:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(order[r[0]] if len(r) == 1 else f"{order[r[0]]} … {order[r[-1]]}" for r in runs)


def accepts(config_name: str, item: OverrideItem, version: str) -> bool:
    """Whether ``version``'s config ``config_name`` accepts the override ``item`` (see the module doc)."""
    if item.key == "hydra" or item.key.startswith("hydra."):
        return True
    cat = catalogue()
    if item.kind == "add":  # Hydra: `+key` applies when the key selects as None or the value is a dict or list
        return cat.is_none(config_name, item.key, version) or isinstance(item.value, (dict, list))
    if item.kind == "delete":  # Hydra: `~key` needs a value that does not select as None
        return not cat.is_none(config_name, item.key, version)
    present = cat.has(config_name, item.key, version)
    if item.kind == "force_add":
        return True
    return present


def rejected(
    config_name: str, overrides: tuple[OverrideItem, ...], version: str, own: frozenset[str] = frozenset()
) -> list[OverrideItem]:
    """The overrides ``version``'s config ``config_name`` rejects; ``own``: the keys a launch's own config sets over
    it (composed in before the command line: an override of one of them never depends on verl's tree)."""
    if version not in catalogue().with_config(config_name):
        return list(overrides)
    return [
        item for item in overrides if not accepts(config_name, item, version) and not (own and _owned(item.key, own))
    ]


def _owned(key: str, own: frozenset[str]) -> bool:
    parts = key.split(".")
    return any(".".join(parts[:k]) in own for k in range(len(parts), 0, -1))


@dataclass(frozen=True, slots=True)
class VersionChoice:
    version: str
    source: str  # one of VERSION_SOURCES
    accepted: tuple[str, ...]  # bundled versions whose config accepts every override
    reason: str  # one line for the report

    @property
    def strict(self) -> bool:
        """Whether the version is known for sure (a verdict that depends on it is an error, not a warning)."""
        return self.source in ("flag", "config", "path", "installed", "pinned")


def choose(
    config_name: str,
    overrides: tuple[OverrideItem, ...],
    *,
    requested: tuple[str, str] | None = None,
    pinned: tuple[str, str] | None = None,
    engine: str | None = None,
    own: frozenset[str] = frozenset(),
) -> VersionChoice:
    """The version to judge with. ``requested`` / ``pinned``: (version text, where it was given), or a
    ``verl_path.VerlPathRequest``; ``own``: keys the launch's own config sets (see ``rejected``)."""
    cat = catalogue()
    accepted = tuple(v for v in cat.versions if _engine_ok(engine, v) and not rejected(config_name, overrides, v, own))
    from shardcheck.frameworks.verl.verl_path import VerlPathRequest, load

    if isinstance(requested, VerlPathRequest):
        tree = load(requested.directory)
        return VersionChoice(tree.match.version, "path", accepted, tree.reason(requested.where))
    if requested is not None:
        version = normalize(requested[0])
        source = "config" if requested[1].endswith("pyproject.toml") else "flag"
        return VersionChoice(version, source, accepted, f"verl {version} as given by {requested[1]}")
    if pinned is not None and pinned[0] in cat.versions:
        version = pinned[0]
        return VersionChoice(version, "pinned", accepted, f"verl {version} as pinned in {pinned[1]}")
    releases = [v for v in accepted if v in cat.releases]
    if releases:
        version = releases[-1]
        return VersionChoice(
            version,
            "inferred",
            accepted,
            f"verl {version}: the newest release that accepts every key of this script (accepted: {span(accepted)})",
        )
    if accepted:  # only a main snapshot accepts every key
        version = accepted[-1]
        return VersionChoice(
            version,
            "inferred",
            accepted,
            f"verl {version}: no release accepts every key of this script; {version} does",
        )
    version = cat.releases[-1]
    return VersionChoice(
        version,
        "default",
        accepted,
        f"verl {version}, the newest release: no bundled verl accepts every key of this script",
    )


def _engine_ok(engine: str | None, version: str) -> bool:
    """A ``model_engine=X`` group choice needs that option in the version's config tree (verl ≥ 0.7.1)."""
    return engine is None or engine in version_doc(version)["model_engines"]


_PIN = re.compile(r"^\s*verl\s*(?:\[[^\]]*\])?\s*==\s*v?([0-9][\w.]*)", re.M)
_PIN_FILES = ("requirements.txt", "requirements-verl.txt", "pyproject.toml")
# Lock files resolve every package to one version: uv.lock / poetry.lock / pdm.lock hold ``[[package]]`` tables
# (``name = "verl"`` then ``version = "X"``), Pipfile.lock a JSON ``"verl": {..., "version": "==X"}``.
_LOCK_PIN = re.compile(r'^name\s*=\s*"verl"\s*\nversion\s*=\s*"v?([0-9][\w.]*)"', re.M)
_PIPFILE_PIN = re.compile(r'"verl"\s*:\s*\{[^{}]*?"version"\s*:\s*"==\s*v?([0-9][\w.]*)"', re.S)
_LOCK_FILES = {"uv.lock": _LOCK_PIN, "poetry.lock": _LOCK_PIN, "pdm.lock": _LOCK_PIN, "Pipfile.lock": _PIPFILE_PIN}


# Container images verl publishes name the versions they bundle in the tag (verl's docker/ and docs/ at v0.4.1 …
# v0.9.0): ``verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2``,
# ``verlai/verl:base-verl0.4-cu124-cudnn9.8-torch2.6-fa2.7.4``, ``verlai/verl:app-verl0.6-transformers4.56.1-
# sglang0.5.2-mcore0.13.0-te2.2``, ``whatcanyousee/verl:ngc-cu124-vllm0.8.5-sglang0.4.6.post5-mcore0.12.0-te2.3``.
# Only a ``verl<major>.<minor>[.<patch>]`` part names verl; the later ``vllm011.dev7`` / ``sgl0512.latest`` tags name
# only the rollout engine, and images of other names (``hiyouga/verl:ngc-...``) name no verl version.
_IMAGE = re.compile(r"(?<![\w./-])((?:[\w.-]+(?::\d+)?/)*[\w.-]+):([\w][\w.-]{0,127})")
_TAG_PART = re.compile(r"(?<![a-z])(verl|mcore|megatron|vllm|sglang)(\d+\.\d+(?:\.\d+)?)(?![\d])")
# verl's later images: ``vllm024.dev2`` is vLLM 0.24 (docker/Dockerfile.stable.vllm ``VLLM_VERSION=0.24.0`` at v0.9.0),
# ``sgl0512.dev4`` SGLang 0.5.12 (docker/Dockerfile.stable.sglang), ``vllm011.latest``, ``sgl055.latest``
_TAG_COMPACT = re.compile(r"(?<![a-z])(vllm|sgl)0(\d{2,3})(?=[._-]|$)")
_TAG_FILES = ("Dockerfile", "Containerfile", "docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml")
_TAG_SUFFIXES = (".dockerfile", ".sbatch", ".slurm")


@dataclass(frozen=True, slots=True)
class ContainerTag:
    """An image tag near a launch script and the versions its tag names (None: not named)."""

    image: str  # the image reference as written
    where: str  # file:line
    versions: dict[str, str]  # "verl" / "mcore" / "vllm" / "sglang" -> the version text in the tag

    def verl(self) -> tuple[str, str] | None:
        """(bundled verl version, how the tag names it) for ``find_pin``; None when the tag names no bundled one."""
        text = self.versions.get("verl")
        if text is None:
            return None
        cat = catalogue()
        # verl's images carry its dependencies, not verl itself (docs/start/install.rst): the tag names the verl
        # line an image was built for
        if text in cat.releases:
            return text, f"the container tag {self.image} at {self.where} (the verl its image was built for)"
        newer = [v for v in cat.releases if v.startswith(text + ".")]
        if not newer:
            return None
        return newer[-1], (
            f"the container tag {self.image} at {self.where} (it names the verl {text} line its image was built for: "
            f"the newest bundled {text}.x release, {newer[-1]}, is taken)"
        )


def container_tag(text: str, where: str, want: str | None = None) -> ContainerTag | None:
    """The first image reference in ``text`` whose tag names a verl, megatron-core, vLLM or SGLang version (``want``:
    one that names that one)."""
    for m in _IMAGE.finditer(text):
        image, tag = m.group(1), m.group(2)
        if "/" not in image and "verl" not in image:
            continue  # `key:value` text, not an image
        parts: dict[str, str] = {}
        for part in _TAG_PART.finditer(tag.lower()):
            name = "mcore" if part.group(1) == "megatron" else part.group(1)
            parts.setdefault(name, part.group(2))
        for part in _TAG_COMPACT.finditer(tag.lower()):
            digits = part.group(2)
            if part.group(1) == "vllm":
                parts.setdefault("vllm", f"0.{int(digits)}")
            else:
                parts.setdefault("sglang", f"0.{digits[0]}.{int(digits[1:])}")
        if parts and (want is None or want in parts):
            line = text[: m.start()].count("\n") + 1
            return ContainerTag(f"{image}:{tag}", f"{where}:{line}", parts)
    return None


def find_container_tag(script: Path, *, levels: int = 3, want: str | None = None) -> ContainerTag | None:
    """A container image tag naming versions (``want``: naming that one), in the script itself or in a Dockerfile,
    compose file or sbatch/slurm script beside it or up to ``levels`` folders above it (read as text; nothing is
    run)."""
    script = script.resolve()
    found = _tag_in(script, want)
    if found is not None:
        return found
    folder = script.parent
    for _ in range(levels + 1):
        try:
            names = sorted(p.name for p in folder.iterdir() if p.name != script.name)
        except OSError:
            names = []
        for name in names:
            if name in _TAG_FILES or name.startswith("Dockerfile.") or name.endswith(_TAG_SUFFIXES):
                found = _tag_in(folder / name, want)
                if found is not None:
                    return found
        if folder.parent == folder or (folder / ".git").exists():
            break
        folder = folder.parent
    return None


def _tag_in(path: Path, want: str | None) -> ContainerTag | None:
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        return container_tag(path.read_text(errors="replace"), str(path), want)
    except OSError:
        return None


def find_pin(script: Path, *, levels: int = 3) -> tuple[str, str] | None:
    """A ``verl==X`` pin in a requirements file or pyproject.toml, or verl's version in a lock file (uv.lock,
    poetry.lock, pdm.lock, Pipfile.lock), in the script's folder or up to ``levels`` folders above it (read as
    text, nothing installed or run); else a container image tag naming verl (``find_container_tag``);
    (version, "file:line" or what names it)."""
    found = _package_pin(script, levels=levels)
    if found is not None:
        return found
    tag = find_container_tag(script, levels=levels, want="verl")
    return tag.verl() if tag is not None else None


def _package_pin(script: Path, *, levels: int) -> tuple[str, str] | None:
    folder = script.resolve().parent
    for _ in range(levels + 1):
        for name, pattern in _LOCK_FILES.items():
            found = _search(folder / name, pattern)
            if found is not None:
                return found
        for name in _PIN_FILES:
            path = folder / name
            try:
                if not path.is_file() or path.stat().st_size > 1 << 20:
                    continue
                text = path.read_text(errors="replace")
            except OSError:
                continue
            m = _PIN.search(text.replace('"', "\n").replace("'", "\n"))  # same length: positions hold
            if m:
                line = text[: m.start(1)].count("\n") + 1
                return m.group(1).rstrip("."), f"{path}:{line}"
        if folder.parent == folder or (folder / ".git").exists():
            break
        folder = folder.parent
    return None


def _search(path: Path, pattern: re.Pattern) -> tuple[str, str] | None:
    """(version, "file:line") of ``pattern``'s first match in the regular file ``path`` (at most 8 MiB)."""
    try:
        if not path.is_file() or path.stat().st_size > 8 << 20:
            return None
        text = path.read_text(errors="replace")
    except OSError:
        return None
    m = pattern.search(text)
    if m is None:
        return None
    return m.group(1).rstrip("."), f"{path}:{text[: m.start(1)].count(chr(10)) + 1}"


def behaviour(version: str, config_name: str, keys: frozenset[str]) -> tuple:
    """What decides a verdict under ``version`` besides the script: the defaults of ``keys`` in that version's
    config and the version-dependent behaviour above. Versions with equal tuples judge a script alike."""
    tree = version_doc(version)["configs"].get(config_name, {})
    values = []
    for key in sorted(keys):
        node = tree
        for part in key.split("."):
            node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
        values.append(json.dumps(node, sort_keys=True, default=str))
    return (
        tuple(values),
        at_least(version, SYNC_ROLLOUT_REMOVED),
        version in MNBT_RAISED_BY_VERL,
        megatron_core_minor(version),
    )


_ABSENT = "<absent>"

# verl release -> the megatron-core its Docker images install (verl repository at each tag):
# 0.4.x docker/Dockerfile.vllm.sglang.megatron (Megatron-LM core_v0.12.x); 0.5.0-0.6.1
# docker/verl0.5-cu126-torch2.7-fa2.7.4/Dockerfile.app.vllm.mcore0.13; 0.7.x docker/Dockerfile.stable.vllm
# (core_v0.15.0); 0.8.0 docker/Dockerfile.stable.vllm (MCORE_VERSION=core_v0.16.1); 0.9.0 and main
# docker/Dockerfile.stable.vllm (MCORE_VERSION=core_v0.18.0; 0.9.1 has no tag, its 0.9 line is taken).
VERL_MEGATRON_CORE = {
    "0.4": "0.12",
    "0.5": "0.13",
    "0.6": "0.13",
    "0.7": "0.15",
    "0.8": "0.16",
    "0.9": "0.18",
    "main": "0.18",
}


def megatron_core_minor(version: str | None) -> str | None:
    """The megatron-core minor verl ``version``'s Docker images install (None: not known)."""
    if version is None:
        return None
    return VERL_MEGATRON_CORE.get(version if version == "main" else ".".join(version.split(".")[:2]))


def implied_megatron_core(version: str | None) -> tuple[str, str] | None:
    """(minor, why) for megatron.versions.choose: the megatron-core verl ``version`` runs on."""
    minor = megatron_core_minor(version)
    return (minor, f"verl {version}'s Docker images install") if minor is not None else None


# ---- renames, derived from the catalogue (no hand table) -------------------------------------------------------
# A key ``old`` is taken as renamed to ``new`` at release R when, in one config:
# - ``old`` is present in a contiguous run of versions ending just before R and absent from R to the newest entry
#   (while the config itself exists), and ``new`` is absent before R and present from R on (a rename, not a key that
#   comes and goes, like grad_offload, absent from 0.9.1 only);
# - their last path parts are equal, and ``new`` is the only key added at R with that leaf (or, among several, the only
#   one under the parent its siblings moved to);
# - ``new``'s default at R equals ``old``'s at the release before (a changed default is a changed setting, not only a
#   new name: 0.6.1's ``rollout_is`` false -> ``rollout_correction.rollout_is`` null is not reported);
# - every other key removed at R beside ``old`` (same parent) reappears at R with its leaf (a section that moved, not
#   one key that happens to share a name with a key of an unrelated new section: 0.7.1's ``reward_model.megatron.dtype``
#   vs ``reward.reward_model.rollout.dtype``, whose megatron siblings vanished).
# Descendants of a renamed section whose whole default is equal move with it. ``_target_`` leaves are never paired.


def _parent_leaf(key: str) -> tuple[str, str]:
    parent, _, leaf = key.rpartition(".")
    return parent, leaf


def _default_at(version: str, config_name: str, key: str) -> object:
    node: object = version_doc(version)["configs"].get(config_name, {})
    for part in key.split("."):
        node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
    return node


@lru_cache(maxsize=16)
def renames(config_name: str) -> dict[str, tuple[str, str]]:
    """``{old key: (new key, release that renamed it)}`` for ``config_name``, derived as described above."""
    cat = catalogue()
    order = cat.versions
    with_config = {order.index(v) for v in cat.with_config(config_name)}
    removed: dict[int, list[str]] = {}
    added: dict[int, list[str]] = {}
    for key, masks in cat.keys.get(config_name, {}).items():
        bits = [i for i in range(len(order)) if masks[0] >> i & 1]
        if not bits or _parent_leaf(key)[1] == "_target_" or bits != list(range(bits[0], bits[-1] + 1)):
            continue
        after = range(bits[-1] + 1, len(order))
        if after and all(i in with_config for i in after):
            removed.setdefault(bits[-1] + 1, []).append(key)
        if bits[0] > 0 and bits[0] - 1 in with_config and bits[-1] == len(order) - 1:
            added.setdefault(bits[0], []).append(key)
    found: dict[str, tuple[str, str]] = {}
    for at, olds in sorted(removed.items()):
        found.update(_pair(config_name, order[at - 1], order[at], olds, added.get(at, [])))
    return found


def _pair(config_name: str, before: str, at: str, olds: list[str], news: list[str]) -> dict[str, tuple[str, str]]:
    new_by_leaf: dict[str, list[str]] = {}
    for key in news:
        new_by_leaf.setdefault(_parent_leaf(key)[1], []).append(key)
    old_by_leaf: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for key in olds:
        parent, leaf = _parent_leaf(key)
        old_by_leaf.setdefault(leaf, []).append(key)
        children.setdefault(parent, []).append(key)

    def equal(old: str, new: str) -> bool:
        return _default_at(before, config_name, old) == _default_at(at, config_name, new)

    def covered(old: str) -> bool:  # every removed sibling's leaf reappears at ``at``
        parent = _parent_leaf(old)[0]
        return not parent or all(_parent_leaf(k)[1] in new_by_leaf for k in children[parent])

    pairs: dict[str, str] = {}
    for leaf, keys in old_by_leaf.items():
        cands = new_by_leaf.get(leaf, [])
        if len(keys) == 1 and len(cands) == 1 and equal(keys[0], cands[0]) and covered(keys[0]):
            pairs[keys[0]] = cands[0]
    # several new keys with the leaf: the one under the parent the old key's siblings moved to
    moved: dict[str, set[str]] = {}
    for old, new in pairs.items():
        moved.setdefault(_parent_leaf(old)[0], set()).add(_parent_leaf(new)[0])
    for leaf, keys in old_by_leaf.items():
        for old in keys:
            targets = moved.get(_parent_leaf(old)[0], set())
            if old in pairs or len(targets) != 1:
                continue
            cands = [k for k in new_by_leaf.get(leaf, []) if _parent_leaf(k)[0] in targets]
            if len(cands) == 1 and cands[0] not in pairs.values() and equal(old, cands[0]) and covered(old):
                pairs[old] = cands[0]
    # a renamed section with an equal default carries its descendants
    for old, new in list(pairs.items()):
        if isinstance(_default_at(before, config_name, old), dict):
            for key in olds:
                if key.startswith(old + "."):
                    pairs.setdefault(key, new + key[len(old) :])
    return {old: (new, at) for old, new in pairs.items()}


def renamed(config_name: str, key: str, version: str) -> tuple[str, str, str] | None:
    """For ``key`` absent from verl ``version``: ("to" | "from", other key, release) when the catalogue shows it
    renamed — ``("to", new, R)``: ``version`` is R or newer and names it ``new``; ``("from", old, R)``: ``version``
    is older than R and names it ``old``."""
    table = renames(config_name)
    cat = catalogue()
    if key in table:
        new, at = table[key]
        if at_least(version, at) and version in cat.versions and cat.has(config_name, new, version):
            return "to", new, at
    for old, (new, at) in table.items():
        if new == key and version in cat.versions and not at_least(version, at) and cat.has(config_name, old, version):
            return "from", old, at
    return None
