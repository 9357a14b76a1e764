"""``--verl-path DIR``: a verl checkout, a fork or a site-packages folder, its config tree read as data.

The directory is a verl source checkout or a site-packages folder (``DIR/verl/trainer/config``), the ``verl``
package folder itself (``DIR/trainer/config``) or that config folder. Its YAML files are read as data
(custom_config.read_config_dir: regular files, size-capped) and each config verl's ``@hydra.main`` names is
composed by Hydra's own loader over them, in memory (custom_config.compose_files), as ``hydra.compose`` does at
verl's start-up. Nothing of it is imported or run; its version file is not read.

Its version is recognised by content: its composed ``ppo_trainer`` and ``ppo_megatron_trainer`` are compared,
key by key and default by default, with every bundled version's (the catalogue, versions.py). The version whose
trees are equal is the one it is; when none is equal, it is a fork of (or a revision near) the version with the
fewest differing keys (the newest among equals), and the report says which keys differ. The version-dependent
rules follow that version; the defaults are the directory's own.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from shardcheck.errors import UsageError

# The configs compared with the catalogue's to recognise the version (main_ppo's, every bundled version has them).
COMPARED = ("ppo_trainer", "ppo_megatron_trainer")
SHOWN = 3  # differing keys named in the reason line
MATCH_RULES = 1  # raised when the way a tree is read or matched changes (cached matches are then made afresh)


@dataclass(frozen=True, slots=True)
class VerlPathRequest:
    """A ``--verl-path`` (or ``[tool.shardcheck] verl-path``) request: the directory and where it was given."""

    directory: str
    where: str

    def __getitem__(self, index: int) -> str:  # the (text, where) shape of a version request
        return (self.directory, self.where)[index]


@dataclass(frozen=True, slots=True)
class Match:
    """The bundled version nearest to a directory's config tree and how it differs (keys, dotted)."""

    version: str
    added: tuple[str, ...]  # keys the directory has and the version lacks
    removed: tuple[str, ...]  # keys the version has and the directory lacks
    changed: tuple[str, ...]  # keys both have, with different defaults

    @property
    def exact(self) -> bool:
        return not (self.added or self.removed or self.changed)

    @property
    def differences(self) -> int:
        return len(self.added) + len(self.removed) + len(self.changed)


class VerlPath:
    """One verl directory's config tree (files read once; configs composed when first asked for)."""

    def __init__(self, given: str, root: Path, config_dir: Path) -> None:
        self.given = given
        self.root = root  # the folder holding ``verl/`` (or None-like: the package's parent)
        self.config_dir = config_dir
        self._files = None
        self._configs: dict[tuple[str, tuple[str, ...]], dict] = {}

    @property
    def files(self) -> dict:
        if self._files is None:
            from shardcheck.frameworks.verl import custom_config

            try:
                self._files = custom_config.read_config_dir(self.config_dir).files
            except custom_config.CustomConfigUnread as exc:
                raise UsageError(f"--verl-path {self.given}: {exc.reason}") from None
        return self._files

    @property
    def model_engines(self) -> list[str]:
        return sorted(
            name.split("/")[1].removesuffix(".yaml") for name in self.files if name.startswith("model_engine/")
        )

    def has_config(self, name: str) -> bool:
        return self._how(name) is not None

    def _how(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """(config file, group choices) that compose ``name``: its own file, else ``ppo_trainer`` with the
        ``model_engine`` choice verl names its generated file after (config_tree.MODEL_ENGINES)."""
        from shardcheck.frameworks.verl.config_tree import MODEL_ENGINES

        if f"{name}.yaml" in self.files:
            return name, ()
        choice = next((k for k, v in MODEL_ENGINES.items() if v == name), None)
        if choice is not None and f"model_engine/{choice}.yaml" in self.files and "ppo_trainer.yaml" in self.files:
            return "ppo_trainer", (f"model_engine={choice}",)
        return None

    def config(self, name: str) -> dict:
        """Config ``name`` composed by Hydra over the directory's files (interpolations unresolved)."""
        how = self._how(name)
        if how is None:
            tops = sorted(n.removesuffix(".yaml") for n in self.files if "/" not in n and not n.startswith("_"))
            raise UsageError(
                f"--verl-path {self.given}: {self.config_dir} has no config {name!r} (it has "
                f"{', '.join(tops) or 'none'})"
            )
        if how not in self._configs:
            from shardcheck.frameworks.verl import custom_config

            try:
                self._configs[how] = custom_config.compose_files(self.files, how[0], list(how[1]), str(self.config_dir))
            except custom_config.CustomConfigUnread as exc:
                raise UsageError(f"--verl-path {self.given}: {exc.reason}") from None
        return self._configs[how]

    @functools.cached_property
    def match(self) -> Match:
        """The bundled version whose compared configs equal this directory's, else the nearest (see module doc)."""
        from shardcheck.frameworks.verl.versions import catalogue, version_doc

        mine = {name: _flat(self.config(name)) for name in COMPARED if self.has_config(name)}
        if not mine:
            raise UsageError(f"--verl-path {self.given}: {self.config_dir} has no ppo_trainer.yaml")
        best: tuple[int, int, Match] | None = None
        for order, version in enumerate(catalogue().versions):
            configs = version_doc(version)["configs"]
            added: set[str] = set()
            removed: set[str] = set()
            changed: set[str] = set()
            for name, flat in mine.items():
                theirs = _flat(configs.get(name, {}))
                added |= flat.keys() - theirs.keys()
                removed |= theirs.keys() - flat.keys()
                changed |= {k for k in flat.keys() & theirs.keys() if flat[k] != theirs[k]}
            found = Match(version, *(tuple(sorted(_tops(s))) for s in (added, removed, changed)))
            score = (found.differences, -order)
            if best is None or score < best[:2]:
                best = (*score, found)
        return best[2]

    def reason(self, where: str) -> str:
        m = self.match
        if m.exact:
            return f"verl {m.version}: the config tree at {self.given} ({where}) equals verl {m.version}'s"
        parts = []
        for what, keys in (("added", m.added), ("removed", m.removed), ("with another default", m.changed)):
            if keys:
                shown = ", ".join(keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")
                parts.append(f"{len(keys)} key{'s' if len(keys) != 1 else ''} {what} ({shown})")
        return (
            f"a fork of (or a revision near) verl {m.version}: the config tree at {self.given} ({where}) differs from "
            f"verl {m.version}'s, the nearest bundled one, in {'; '.join(parts)}; its own defaults are used"
        )

    @property
    def label(self) -> str:
        """The version as messages name it: ``0.9.0``, or ``0.9.0+fork`` for a tree that differs from it."""
        m = self.match
        return m.version if m.exact else f"{m.version}+fork"

    def defaults(self, name: str):
        """config_tree.VerlDefaults of this directory's config ``name``."""
        from shardcheck.frameworks.verl.config_tree import VerlDefaults

        return VerlDefaults(
            self.config(name),
            self.label,
            f"verl at {self.given} ({self.config_dir}, read as data; {self.recognised})",
            name,
        )

    @property
    def recognised(self) -> str:
        m = self.match
        return f"equals verl {m.version}" if m.exact else f"a fork of verl {m.version}"

    def entry_config(self, module: str) -> tuple[str, str] | None:
        """(config dir relative to the root, config name) of ``module``'s ``@hydra.main`` in this directory's
        source (read with ``ast``, never run); None when there is no such module or it is no Hydra app."""
        from shardcheck.frameworks.verl.custom_config import hydra_main_args

        source = self.root.joinpath(*module.split(".")).with_suffix(".py")
        args = hydra_main_args(source) if source.is_file() else {}
        if "config_path" not in args or "config_name" not in args:
            return None
        folder = (source.parent.relative_to(self.root) / args["config_path"]).as_posix()
        import os

        return os.path.normpath(folder), args["config_name"]

    def entry_files(self, folder: str) -> dict:
        """The YAML files of ``folder`` (relative to the root) as ``{"group/name.yaml": (header, tree)}``."""
        from shardcheck.frameworks.verl import custom_config

        directory = self.root / folder
        if directory.resolve() == self.config_dir.resolve():
            return self.files
        try:
            return custom_config.read_config_dir(directory).files
        except custom_config.CustomConfigUnread as exc:
            raise UsageError(f"--verl-path {self.given}: {exc.reason}") from None


def _flat(tree: object, prefix: str = "") -> dict[str, str]:
    """Every key of a composed config (dotted) with its default (JSON text; a mapping's own value is ``{}``)."""
    out: dict[str, str] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            full = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                out[full] = "{}"
                out.update(_flat(value, full + "."))
            else:
                out[full] = json.dumps(value, sort_keys=True, default=str)
    return out


def _tops(keys: set[str]) -> set[str]:
    """The keys without those under another key of the set (a whole added section is named once)."""
    return {k for k in keys if not any(k.startswith(other + ".") for other in keys if other != k)}


def locate(given: str) -> tuple[Path, Path]:
    """(root holding ``verl/``, ``verl/trainer/config``) of a ``--verl-path``; a UsageError (exit 2) otherwise."""
    base = Path(given).expanduser()
    if not base.is_dir():
        raise UsageError(
            f"--verl-path {given}: not a directory; give a verl checkout, a site-packages folder or "
            "the verl package folder"
        )
    base = base.resolve()
    candidates = [
        (base, base / "verl/trainer/config"),  # a checkout, a site-packages folder
        (base.parent, base / "trainer/config"),  # the verl package folder
    ]
    if base.name == "config" and base.parent.name == "trainer":  # verl/trainer/config itself
        candidates.append((base.parent.parent.parent, base))
    for root, config_dir in candidates:
        if (config_dir / "ppo_trainer.yaml").is_file():
            return root, config_dir
    raise UsageError(
        f"--verl-path {given}: no verl config tree there (looked for verl/trainer/config/ppo_trainer.yaml); give a "
        "verl checkout, a site-packages folder holding verl, or the verl package folder"
    )


@functools.lru_cache(maxsize=4)
def load(given: str) -> VerlPath:
    """The verl directory ``given`` (read once per process: a batch of scripts shares it).

    Reading and composing a config tree costs ~2 s (OmegaConf parses ~50 YAML files); what it gives (the files
    as parsed trees, the compared configs and the match) is kept in this user's cache (config_cache.py, HMAC-
    signed JSON) under a digest of every YAML file's path and bytes, so a later run over the same tree reads it
    back in milliseconds and a changed file is read afresh."""
    root, config_dir = locate(given)
    found = VerlPath(given, root, config_dir)
    from shardcheck.frameworks.verl import config_cache

    directory = config_cache.cache_dir()
    name = f"verl-path-{_digest(config_dir)}.json" if directory is not None else None
    payload = config_cache.load(directory, name) if name is not None else None
    if payload is not None:
        try:
            doc = json.loads(payload)
            found._files = {rel: (header, tree) for rel, (header, tree) in doc["files"].items()}
            found._configs = {(how[0], tuple(how[1])): tree for how, tree in doc["configs"]}
            found.match = Match(doc["match"][0], *(tuple(keys) for keys in doc["match"][1:]))
            return found
        except (ValueError, KeyError, TypeError, IndexError):
            found = VerlPath(given, root, config_dir)
    m = found.match
    if name is not None:
        doc = {
            "files": found.files,
            "configs": [[list(how), tree] for how, tree in found._configs.items()],
            "match": [m.version, list(m.added), list(m.removed), list(m.changed)],
        }
        config_cache.store(directory, name, json.dumps(doc, default=str).encode())
    return found


def _digest(config_dir: Path) -> str:
    """A digest of every YAML file under ``config_dir`` (relative path and bytes), of shardcheck's version and of
    the catalogue's versions (the match depends on them)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from shardcheck.frameworks.verl.versions import CATALOGUE_INDEX

    try:
        mine = version("shardcheck")
    except PackageNotFoundError:
        mine = "unknown"
    h = hashlib.sha256(f"{mine} {MATCH_RULES}".encode() + b"\0")
    try:
        h.update(CATALOGUE_INDEX.read_bytes())
    except OSError:
        pass
    for path in sorted(config_dir.rglob("*.yaml")):
        try:
            if path.is_symlink() or not path.is_file():
                continue
            h.update(path.relative_to(config_dir).as_posix().encode() + b"\0")
            h.update(path.read_bytes()[: 1 << 22] + b"\0")
        except OSError:
            continue
    return h.hexdigest()[:32]
