"""A launch's own Hydra config (``--config-path DIR --config-name NAME``), composed as Hydra composes it.

A recipe (verl's ``recipe/`` collection, a fork, a project built on verl) starts verl's trainer with a config of
its own next to the script, typically a defaults list over verl's trainer config::

    hydra:
      searchpath: [file://verl/trainer/config]      # or pkg://verl.trainer.config
    defaults: [ppo_megatron_trainer, _self_]
    data: {gen_batch_size: ${data.train_batch_size}}

Here the config directory is found as Hydra finds it (``--config-path`` relative to the file of the module that
holds ``@hydra.main``, else that decorator's own ``config_path``; hydra/_internal/utils.py
``compute_search_path_dir``, hydra-core 1.3), every YAML in it is read as data (regular files, size-capped,
``inputs/files.py``) and Hydra's own loader (``ConfigLoaderImpl.load_configuration``) composes the named config
over an in-memory search path: the script's config directory first, then verl's config tree of the chosen
version wherever ``hydra.searchpath`` names verl's (``…verl/trainer/config`` or ``pkg://verl.trainer.config``).
verl's tree is the catalogue's composed top-level configs (``ppo_trainer``, ``ppo_megatron_trainer``, …), or the
files of a verl directory (an installed verl, ``--verl-path``) read as data. Nothing is imported or run: a
``pkg://`` or ``file://`` entry never reaches Hydra's own sources (which would import the package).

What cannot be read (no config directory, a group of verl's tree the catalogue does not hold, an entry of
``hydra.searchpath`` outside the script's tree) is one reason; the caller reports the config as unread.
"""

from __future__ import annotations

import ast
import copy
import itertools
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.errors import ShardcheckError
from shardcheck.inputs import files

SCHEME = "shardcheck-verl"
MAX_FILES = 2000  # YAML files read from one config directory (verl's own tree has ~60)
MAX_DEPTH = 6
_VERL_TREE = re.compile(r"(?:^|[/.])verl[/.]trainer[/.]config/?$")
# name -> {relative file path "group/name.yaml": (header dict, plain tree)}; one entry per composition
_SOURCES: dict[str, dict[str, tuple[dict, object]]] = {}
_COUNTER = itertools.count()


class CustomConfigUnread(ShardcheckError):
    """The launch's own config cannot be composed; ``reason`` says why (one line, no traceback)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class VerlOwnTree(ShardcheckError):
    """The launch's config directory is verl's own ``verl/trainer/config`` (a recipe's ``@hydra.main`` pointing
    there, ``--config-path ./config`` beside verl's main_ppo): ``name`` is one of verl's own configs."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"verl's own config {name}")


@dataclass(frozen=True, slots=True)
class ConfigFiles:
    """One config directory read as data: ``files`` maps ``group/name.yaml`` to (Hydra header, plain tree)."""

    directory: Path
    files: dict[str, tuple[dict, object]]

    def keys(self) -> frozenset[str]:
        """Every leaf key any file sets (dotted, as written; a ``# @package`` header moves it)."""
        out: set[str] = set()
        for header, tree in self.files.values():
            package = header.get("package")
            prefix = "" if package in (None, "_global_", "_group_") else package.replace("_global_.", "") + "."
            if isinstance(tree, dict):
                _flat(tree, prefix, out)
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class CustomConfig:
    """The script's own config: where it is, its files, and the verl configs its defaults lists name."""

    name: str
    files: ConfigFiles
    verl_bases: tuple[str, ...]  # names in the primary's defaults list that are not the directory's own configs
    searchpath: tuple[str, ...]  # hydra.searchpath as written
    found_by: str  # how the directory was found, for the report

    @property
    def label(self) -> str:
        return f"{self.files.directory / (self.name + '.yaml')}"


def _flat(tree: dict, prefix: str, out: set[str]) -> None:
    for key, value in tree.items():
        if key in ("defaults", "hydra") and not prefix:
            continue
        full = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            _flat(value, full + ".", out)
        else:
            out.add(full)


def read_config_dir(directory: Path, vet=None) -> ConfigFiles:
    """Every ``*.yaml`` under ``directory`` (at most MAX_DEPTH deep, MAX_FILES files), parsed with OmegaConf's
    YAML loader as Hydra's FileConfigSource does; a file that cannot be parsed is a CustomConfigUnread.
    ``vet``: why a file may not be read (inputs/read_policy.py's ``refusal``), for a folder a script names: a
    refused file is a CustomConfigUnread that names it, its contents never read."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    found: dict[str, tuple[dict, object]] = {}
    base = directory.resolve()
    todo = [(base, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            raise CustomConfigUnread(f"{folder}: cannot be listed ({exc.strerror or exc})") from None
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_dir() and not entry.is_symlink():
                if depth < MAX_DEPTH:
                    todo.append((entry, depth + 1))
                continue
            if entry.suffix != ".yaml" or not files.is_regular(entry):
                continue
            if len(found) >= MAX_FILES:
                raise CustomConfigUnread(f"{directory}: more than {MAX_FILES} YAML files")
            rel = entry.relative_to(base).as_posix()
            refused = vet(entry) if vet is not None else None
            if refused is not None:
                raise CustomConfigUnread(f"{entry} is not read: {refused}")
            text = files.read_regular_text(entry, limit=files.CONFIG_LIMIT, what="give a YAML config file")
            try:
                header = _header(text)
                tree = OmegaConf.to_container(OmegaConf.create(text), resolve=False) if text.strip() else {}
            except (yaml.YAMLError, OmegaConfBaseException, ValueError, TypeError, RecursionError) as exc:
                # a YAML error, a document OmegaConf rejects (a list, a bad key), nesting past the stack
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise CustomConfigUnread(f"{entry}: not a YAML config Hydra can load ({first})") from None
            found[rel] = (header, tree)
    return ConfigFiles(directory, found)


def _header(text: str) -> dict:
    """Hydra's ``# @package`` header (hydra/plugins/config_source.py ``_get_header_dict``, hydra-core 1.3)."""
    from hydra.plugins.config_source import ConfigSource

    try:
        return ConfigSource._get_header_dict(text[:512])
    except ValueError as exc:
        raise CustomConfigUnread(f"bad Hydra header: {exc}") from None


# -- finding the config directory ----------------------------------------------------------------------------


def _ancestors(script: Path, levels: int = 6) -> list[Path]:
    out = []
    folder = script.resolve().parent
    for _ in range(levels + 1):
        out.append(folder)
        if folder.parent == folder or (folder / ".git").exists():
            break
        folder = folder.parent
    return out


def module_file(script: Path, module: str) -> Path | None:
    """The file of ``python -m module`` as run from the script's folder or one above it (a package's leading
    parts may be a mount point, e.g. verl's ``recipe`` submodule: ``recipe.dapo.main_dapo`` is ``dapo/main_dapo.py``
    in the verl-recipe repository)."""
    parts = module.split(".")
    for folder in _ancestors(script):
        for skip in range(len(parts)):
            rel = Path(*parts[skip:])
            for candidate in (folder / rel.with_suffix(".py"), folder / rel / "__main__.py"):
                if files.is_regular(candidate):
                    return candidate
    return None


def hydra_main_args(source_file: Path) -> dict[str, str]:
    """``config_path`` / ``config_name`` of the ``@hydra.main(...)`` in ``source_file``, read with ``ast`` (never
    run); only string literals count."""
    try:
        text = files.read_regular_text(source_file, limit=files.SCRIPT_LIMIT, what="")
        tree = ast.parse(text)
    except (ShardcheckError, SyntaxError, ValueError):
        return {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            func = deco.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name != "main" or (isinstance(func, ast.Attribute) and getattr(func.value, "id", "") != "hydra"):
                continue
            out = {}
            for kw in deco.keywords:
                if kw.arg in ("config_path", "config_name") and isinstance(kw.value, ast.Constant):
                    if isinstance(kw.value.value, str):
                        out[kw.arg] = kw.value.value
            return out
    return {}


def locate(script: Path, module: str | None, path_field, name: str | None) -> tuple[Path, str, str]:
    """(config directory, config name, how it was found) for the launch; CustomConfigUnread when not found.

    ``path_field``: the ``--config-path`` word (a shell Field) or None; ``name``: ``--config-name`` or None."""
    mod_file = module_file(script, module) if module else None
    decorator = hydra_main_args(mod_file) if mod_file is not None else {}
    name = name or decorator.get("config_name")
    if not name:
        raise CustomConfigUnread(f"no --config-name, and the @hydra.main of {module} was not found to give one")
    if path_field is None:
        if "config_path" not in decorator:
            where = f"{mod_file}" if mod_file else f"{module}'s source file (not found near the script)"
            raise CustomConfigUnread(f"no --config-path, and no config_path in the @hydra.main of {where}")
        text, known_prefix = decorator["config_path"], True
    else:
        text, known_prefix = _known_tail(path_field)
    package_dir = "/".join(module.split(".")[:-1]) if module else ""
    if _is_verl_tree(text) or (
        known_prefix and not Path(text).is_absolute() and _is_verl_tree(os.path.normpath(f"{package_dir}/{text}"))
    ):
        raise VerlOwnTree(name)
    candidates: list[tuple[Path, str]] = []
    rel = Path(text)
    if known_prefix and rel.is_absolute():
        candidates.append((rel, f"--config-path {text}"))
    elif known_prefix:
        if mod_file is not None:
            candidates.append((mod_file.parent / rel, f"{text} beside {mod_file.name} (as Hydra resolves it)"))
        candidates.append((script.resolve().parent / rel, f"{text} beside the script"))
    # last: `${ROOT}/recipe/dapo/config`, or a root the script's machine has and this one lacks: the path's tail
    # under the script's folder or one above it
    parts = [p for p in rel.parts if p not in (".", "..", "/")]
    for folder in _ancestors(script):
        for skip in range(len(parts)):
            candidates.append((folder.joinpath(*parts[skip:]), f"…/{'/'.join(parts[skip:])} under {folder}"))
    for directory, how in candidates:
        if files.is_regular(directory / f"{name}.yaml"):
            return directory, name, how
    shown = path_field.render() if path_field is not None else text
    raise CustomConfigUnread(f"{name}.yaml is not found in --config-path {shown} near the script")


def _known_tail(path_field) -> tuple[str, bool]:
    """The text of the ``--config-path`` word; when part of it is unknown, the known part after the last unknown
    one (``${ROOT}/recipe/dapo/config`` → ``recipe/dapo/config``) and False."""
    if path_field.known:
        return path_field.text, True
    tail = []
    for seg in reversed(path_field.segs):
        if seg.text is None:
            break
        tail.append(seg.text)
    text = "".join(reversed(tail)).lstrip("/")
    if not text:
        raise CustomConfigUnread(f"--config-path {path_field.render()} is not known")
    return text, False


def load(script: Path, module: str | None, path_field, name: str | None) -> CustomConfig:
    """The script's own config, read (not yet composed: that needs verl's version)."""
    from shardcheck.inputs import read_policy

    directory, name, how = locate(script, module, path_field, name)
    return from_dir(directory, name, how, vet=read_policy.refusal)  # a folder the script names


def from_dir(directory: Path, name: str, how: str, vet=None) -> CustomConfig:
    """The config ``name`` of ``directory``, read with its directory's other files (its groups); ``vet`` as
    ``read_config_dir``'s."""
    config_files = read_config_dir(directory, vet)
    header, primary = config_files.files[f"{name}.yaml"]
    if not isinstance(primary, dict):
        raise CustomConfigUnread(f"{directory / (name + '.yaml')}: not a mapping")
    searchpath = ((primary.get("hydra") or {}) if isinstance(primary.get("hydra"), dict) else {}).get("searchpath")
    searchpath = tuple(str(s) for s in searchpath) if isinstance(searchpath, list) else ()
    defaults = primary.get("defaults") or []
    if not isinstance(defaults, list):
        # hydra/_internal/config_repository.py _extract_defaults_list (hydra-core 1.3), as Hydra words it
        shown = "mapping" if isinstance(defaults, dict) else type(defaults).__name__
        raise CustomConfigUnread(
            f"{directory / (name + '.yaml')}: Invalid defaults list in '{name}', defaults must be a list (got {shown})"
        )
    bases = []
    for entry in defaults:
        if isinstance(entry, str) and entry != "_self_" and "/" not in entry and "@" not in entry:
            if f"{entry.removesuffix('.yaml')}.yaml" not in config_files.files:
                bases.append(entry.removesuffix(".yaml"))
    return CustomConfig(name, config_files, tuple(bases), searchpath, how)


# -- composing -----------------------------------------------------------------------------------------------


@dataclass
class VerlTree:
    """verl's side of the search path: a catalogue version's composed configs, or a verl config dir's files."""

    label: str  # "verl 0.9.1 (catalogue)" or the directory
    files: dict[str, tuple[dict, object]] = field(default_factory=dict)


def catalogue_tree(version: str) -> VerlTree:
    """verl ``version``'s top-level configs from the catalogue, each already composed (no defaults list)."""
    from shardcheck.frameworks.verl.versions import version_doc

    doc = version_doc(version)
    return VerlTree(
        f"verl {version}", {f"{name}.yaml": ({"package": None}, tree) for name, tree in doc["configs"].items()}
    )


def directory_tree(directory: Path, label: str) -> VerlTree:
    return VerlTree(label, read_config_dir(directory).files)


def _is_verl_tree(entry: str) -> bool:
    path = entry.split("://", 1)[-1].rstrip("/")
    return bool(_VERL_TREE.search(path))


def compose(custom: CustomConfig, verl: VerlTree) -> dict:
    """The script's config composed by Hydra's own loader over ``verl``'s tree (no command-line override: the
    caller applies those as ``@hydra.main`` does, on the struct config); interpolations left unresolved."""
    from shardcheck.inputs.hydra_import import load_hydra

    load_hydra()
    _register()
    key = f"c{next(_COUNTER)}"
    own, theirs = f"{key}-own", f"{key}-verl"
    unresolved = [s for s in custom.searchpath if not _is_verl_tree(s)]
    own_files = dict(custom.files.files)
    header, primary = own_files[f"{custom.name}.yaml"]
    primary = copy.deepcopy(primary)
    if custom.searchpath:
        # verl's tree stands for every entry naming it; another entry (outside the script's tree) is left out
        mapped = [f"{SCHEME}://{theirs}" for s in custom.searchpath if _is_verl_tree(s)]
        primary["hydra"]["searchpath"] = mapped
    own_files[f"{custom.name}.yaml"] = (header, primary)
    _SOURCES[own] = own_files
    _SOURCES[theirs] = verl.files
    try:
        return _load(own, custom.name, [])  # verl's tree is reached through the rewritten hydra.searchpath
    except CustomConfigUnread as exc:
        text = exc.reason.replace(f"{SCHEME}://{own}", str(custom.files.directory))
        text = text.replace(f"{SCHEME}://{theirs}", verl.label)
        if unresolved:
            text += f" (hydra.searchpath {', '.join(unresolved)} is not read: outside verl's config tree)"
        raise CustomConfigUnread(f"Hydra cannot compose {custom.label} over {verl.label}: {text}") from None
    finally:
        _SOURCES.pop(own, None)
        _SOURCES.pop(theirs, None)


def compose_files(files: dict[str, tuple[dict, object]], name: str, choices: list[str], label: str) -> dict:
    """Config ``name`` of one in-memory config tree (verl's own files from the catalogue) composed by Hydra with
    the command line's group choices (``engine=megatron``: Hydra applies them while composing)."""
    from shardcheck.inputs.hydra_import import load_hydra

    load_hydra()
    _register()
    key = f"c{next(_COUNTER)}-verl"
    _SOURCES[key] = files
    try:
        return _load(key, name, choices)
    except CustomConfigUnread as exc:
        text = exc.reason.replace(f"{SCHEME}://{key}", label)
        raise CustomConfigUnread(f"Hydra cannot compose {label}'s {name}: {text}") from None
    finally:
        _SOURCES.pop(key, None)


def _load(primary: str, name: str, overrides: list[str]) -> dict:
    """Hydra's ``ConfigLoaderImpl.load_configuration`` with the in-memory source ``primary`` as the primary config
    directory, as ``hydra.compose`` runs it; the ``hydra`` node removed, interpolations unresolved."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
    from hydra.errors import HydraException
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    search = ConfigSearchPathImpl()
    search.append("hydra", "pkg://hydra.conf")
    search.append("main", f"{SCHEME}://{primary}")
    search.append("schema", "structured://")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = ConfigLoaderImpl(config_search_path=search).load_configuration(
                config_name=name, overrides=overrides, run_mode=RunMode.RUN, from_shell=False
            )
        with open_dict(cfg):
            del cfg["hydra"]
        return OmegaConf.to_container(cfg, resolve=False)
    except (HydraException, OmegaConfBaseException, ValueError, KeyError) as exc:
        raise CustomConfigUnread(" ".join(str(exc).split()) or type(exc).__name__) from None


_REGISTERED = False


def _norm(name: str) -> str:
    """``critic/../engine/fsdp.yaml`` as ``engine/fsdp.yaml``: Hydra's FileConfigSource joins a defaults-list path
    to its directory, so ``..`` steps up a group (verl 0.7.1's critic/dp_critic.yaml names ``../engine/fsdp``)."""
    if ".." not in name:
        return name
    out = os.path.normpath(name).replace(os.sep, "/")
    return "" if out == "." else out


def _register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.object_type import ObjectType
    from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
    from omegaconf import OmegaConf

    class InMemorySource(ConfigSource):
        """A Hydra config source over files already read (``_SOURCES[path]``)."""

        @staticmethod
        def scheme() -> str:
            return SCHEME

        def _files(self) -> dict:
            return _SOURCES.get(self.path, {})

        def load_config(self, config_path: str) -> ConfigResult:
            name = _norm(self._normalize_file_name(config_path))
            if name not in self._files():
                raise ConfigLoadError(f"Config not found : {name}")
            header, tree = self._files()[name]
            return ConfigResult(
                config=OmegaConf.create(copy.deepcopy(tree) if tree is not None else {}),
                path=f"{SCHEME}://{self.path}",
                provider=self.provider,
                header=dict(header),
            )

        def available(self) -> bool:
            return self.path in _SOURCES

        def is_group(self, config_path: str) -> bool:
            prefix = _norm(config_path.strip("/"))
            return prefix == "" or any(name.startswith(prefix + "/") for name in self._files())

        def is_config(self, config_path: str) -> bool:
            return _norm(self._normalize_file_name(config_path.strip("/"))) in self._files()

        def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
            prefix = _norm(config_path.strip("/"))
            names = set()
            for name in self._files():
                rest = name[len(prefix) + 1 :] if prefix else name
                if prefix and not name.startswith(prefix + "/"):
                    continue
                names.add(rest.split("/")[0])
            out: list[str] = []
            for name in sorted(names):
                self._list_add_result(
                    files=out,
                    file_path=f"{prefix}/{name}" if prefix else name,
                    file_name=name,
                    results_filter=results_filter,
                )
            return sorted(set(out))

    from hydra.core.plugins import Plugins

    Plugins.instance()  # Hydra's core plugins: its config sources and the hydra/* configs they store
    SourcesRegistry.instance().register(InMemorySource)
    _REGISTERED = True
