"""verl's effective config: its generated defaults with the command line's Hydra overrides applied.

The defaults are verl's own ``verl/trainer/config/_generated_<name>.yaml`` (the composed config
verl generates from its defaults lists): read from the installed verl package when there is one
(as data, verl is never imported), else from the snapshot shipped in ``data/``. Overrides are
applied by Hydra's own code (``ConfigLoaderImpl._apply_overrides_to_config``) on a struct-mode
config, exactly as ``@hydra.main`` does (hydra/_internal/config_loader_impl.py), so unknown keys,
``+`` on existing keys and deletions fail or succeed as they would at verl's start.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.errors import InputError
from shardcheck.inputs import files
from shardcheck.inputs.hydra_overrides import OverrideItem
from shardcheck.origin import Origin, Traced

# verl's model_engine group choices and the generated config of each: ppo_megatron_trainer.yaml is
# ppo_trainer.yaml with `override model_engine: megatron` (verl/trainer/config, verl 0.9.1).
MODEL_ENGINES = {
    "dp": "ppo_trainer",
    "megatron": "ppo_megatron_trainer",
    "veomni": "ppo_veomni_trainer",
    "torchtitan": "ppo_torchtitan_trainer",
}
KNOWN_CONFIGS = tuple(MODEL_ENGINES.values())
_INTERPOLATION = re.compile(r"^\$\{(?:oc\.select:)?\s*([.\w]+)\s*(?:,.*)?\}$")


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """A problem with an override: ``kind`` is ``unknown_key``, ``added_key`` or ``hydra``."""

    kind: str
    message: str
    override: OverrideItem
    suggestion: str | None = None


@dataclass(frozen=True, slots=True)
class VerlDefaults:
    tree: dict
    version: str
    source: str
    config_name: str
    own_keys: frozenset[str] = frozenset()  # keys a launch's own config sets (custom_config.py)
    own_label: str = ""  # that config's file, for the origin of those keys


@functools.lru_cache(maxsize=8)
def installed_defaults(config_name: str) -> VerlDefaults | None:
    """verl's generated config ``config_name`` from a verl installed in the environment (read as data), if any.
    Read once per process (a batch of scripts shares it; the tree is never modified in place)."""
    spec = importlib.util.find_spec("verl")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "trainer" / "config" / f"_generated_{config_name}.yaml"
        if path.is_file():
            from importlib.metadata import PackageNotFoundError, version

            import yaml

            try:
                installed = version("verl")
            except PackageNotFoundError:
                installed = "installed"
            text = files.read_regular_text(path, limit=files.CONFIG_LIMIT, what="reinstall verl")
            tree = _with_engine_choice(yaml.safe_load(text), config_name)
            return VerlDefaults(tree, installed, f"installed verl {installed} ({path})", config_name)
    return None


@functools.lru_cache(maxsize=1)
def installed_config_dir() -> tuple[str, Path] | None:
    """(version, ``verl/trainer/config``) of a verl installed in the environment (found, never imported)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "trainer" / "config"
        if path.is_dir():
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version("verl"), path
            except PackageNotFoundError:
                return "installed", path
    return None


@functools.lru_cache(maxsize=32)
def bundled_defaults(config_name: str, version: str) -> VerlDefaults:
    """The config ``config_name`` of a version in shardcheck's catalogue (see ``versions.py``)."""
    from shardcheck.frameworks.verl.versions import version_doc

    doc = version_doc(version)
    tree = doc["configs"].get(config_name)
    if tree is None:
        raise InputError(f"verl {version} has no config {config_name!r} (it has {', '.join(sorted(doc['configs']))})")
    return VerlDefaults(tree, doc["verl_version"], doc["source"], config_name)


def load_defaults(config_name: str, version: str | None = None) -> VerlDefaults:
    """verl's config ``config_name``: of ``version`` from the catalogue, else of an installed verl, else of
    the newest bundled release."""
    if version is None:
        from shardcheck.frameworks.verl.versions import catalogue

        return installed_defaults(config_name) or bundled_defaults(config_name, catalogue().releases[-1])
    return bundled_defaults(config_name, version)


def _with_engine_choice(tree: dict, config_name: str) -> dict:
    """The composed config also holds the group choice itself (model_engine/<choice>.yaml says
    ``model_engine: <choice>``); verl's generated files leave it out."""
    if "model_engine" in tree:
        return tree
    choice = next(k for k, v in MODEL_ENGINES.items() if v == config_name)
    return {"model_engine": choice, **tree}


@dataclass
class VerlConfig:
    """The effective config and, for each key set on the command line, the override that set it.

    Held either as plain dicts (``plain``, see plain_config.py) or as an OmegaConf tree (``cfg``); a read the
    plain tree cannot answer exactly switches it to OmegaConf (built by Hydra's code from the same overrides).
    """

    defaults: VerlDefaults
    cfg: object  # omegaconf.DictConfig, or None while the plain tree answers
    set_by: dict[str, OverrideItem] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)
    custom: str | None = None
    read: set[str] = field(default_factory=set)  # every key asked for (versions.py compares their defaults)
    plain: object = None  # plain_config.PlainTree
    overrides: tuple[OverrideItem, ...] = ()

    applied: list[OverrideItem] = field(default_factory=list)  # the overrides Hydra accepted, in order

    def _omega(self) -> None:
        """Leave the plain tree: the same overrides applied by Hydra to an OmegaConf tree."""
        full = _apply_omega(self.defaults, self.overrides, custom=self.custom)
        self.cfg, self.plain, self.applied = full.cfg, None, full.applied

    def _plain(self, method: str, *args):
        """``plain.<method>(*args)``, or None after switching to OmegaConf when it cannot decide."""
        from shardcheck.frameworks.verl.plain_config import Fallback

        if self.plain is None:
            return None
        try:
            return (getattr(self.plain, method)(*args),)
        except Fallback:
            self._omega()
            return None

    def select(self, key: str):
        """The resolved value at ``key`` (containers as plain containers), None when absent or ``???``;
        OmegaConf's errors propagate."""
        answer = self._plain("select", key)
        if answer is not None:
            return answer[0]
        from omegaconf import OmegaConf

        self._ensure_section(key.split(".")[0])
        value = OmegaConf.select(self.cfg, key, throw_on_missing=False)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value

    def replaced_inheritance(self, key: str) -> OverrideItem | None:
        """The override that replaced ``key``'s inherited value, when verl's default for ``key`` is an
        interpolation (``${oc.select:<other key>,...}``) and the command line set ``key`` or a key under it.

        Hydra's ``+``/``++`` of ``key.child`` on an interpolation node replaces the node with a new dict
        holding only the added child (measured with hydra.compose over verl 0.9.1's config tree), so
        the other key's entries are no longer inherited.
        """
        node = self.defaults.tree
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        if not (isinstance(node, str) and _INTERPOLATION.match(node.strip())):
            return None
        return next((item for item in self.applied if item.key == key or item.key.startswith(key + ".")), None)

    @property
    def version(self) -> str:
        return self.defaults.version

    def default_origin(self, key: str) -> Origin:
        if key in self.defaults.own_keys:
            return Origin(kind="default", text=f"{self.defaults.own_label}: {key} (composed over verl {self.version})")
        return Origin(kind="default", text=f"default of verl {self.version}: {key}")

    def get(self, key: str, _depth: int = 0) -> Traced:
        """The effective value at ``key`` with where it came from; unknown when an input was unknown."""
        self.read.add(key)
        item = self.setter(key)
        from omegaconf.errors import OmegaConfBaseException

        try:
            value = self.select(key)
        except OmegaConfBaseException as exc:  # OmegaConf's message spans lines (full_key: …, object_type=…)
            return Traced(None, item.origin if item else self.default_origin(key), f"{key}: {_one_line(exc)}")
        reason = self._unknown_reason(key, value)
        if item is not None:
            return Traced(None if reason else value, item.origin, reason)
        origin = self.default_origin(key)
        if self.custom is not None:
            return Traced(
                None,
                Origin(kind="default", text=f"{key} from config {self.custom}"),
                f"{key} comes from config {self.custom}, which shardcheck does not read; set it on the command line",
            )
        followed = self._interpolation_target(key)
        if followed is not None and _depth < 8:
            if self.is_missing(followed) or self._is_mandatory(followed):
                # oc.select falls back to its default (OmegaConf resolved it above)
                origin = Origin(
                    kind="default",
                    text=f"verl {self.version} default: {key} (its oc.select target {followed} is absent)",
                )
            else:
                target = self.get(followed, _depth + 1)
                origin = Origin(
                    kind="default", text=f"verl {self.version} default: {key} follows {followed}", via=(target.origin,)
                )
                reason = reason or target.unknown
        elif self.is_missing(key):
            return Traced(None, origin, f"{key} is not in verl {self.version}'s config")
        elif self._is_mandatory(key):
            return Traced(None, origin, f"{key} is ??? in verl {self.version}'s config: it must be set")
        return Traced(None if reason else value, origin, reason)

    def _ensure_section(self, section: str) -> None:
        """Bring in a top-level section left out when the tree was built (no override touched it)."""
        if self.cfg is None or section in self.cfg or section not in self.defaults.tree:
            return
        from omegaconf import open_dict

        with open_dict(self.cfg):
            for name in needed_sections(self.defaults.tree, (), (section,)):
                if name not in self.cfg:
                    self.cfg[name] = self.defaults.tree[name]

    def is_missing(self, key: str) -> bool:
        """Whether ``key`` is absent from the config (a ``???`` value is present, but mandatory)."""
        answer = self._plain("parent", key)
        if answer is not None:
            node, last = answer[0]
            return not (node is not None and last in node)
        from omegaconf import OmegaConf

        self._ensure_section(key.split(".")[0])

        parent, _, last = key.rpartition(".")
        node = OmegaConf.select(self.cfg, parent, throw_on_missing=False) if parent else self.cfg
        return not (OmegaConf.is_dict(node) and node._get_node(last, validate_access=False) is not None)

    def _is_mandatory(self, key: str) -> bool:
        answer = self._plain("raw", key)
        if answer is not None:
            found, raw = answer[0]
            return found and raw == "???"
        from omegaconf import OmegaConf

        self._ensure_section(key.split(".")[0])

        parent, _, last = key.rpartition(".")
        node = OmegaConf.select(self.cfg, parent, throw_on_missing=False) if parent else self.cfg
        return (
            OmegaConf.is_dict(node)
            and node._get_node(last, validate_access=False) is not None
            and OmegaConf.is_missing(node, last)
        )

    def setter(self, key: str) -> OverrideItem | None:
        parts = key.split(".")
        for k in range(len(parts), 0, -1):
            item = self.set_by.get(".".join(parts[:k]))
            if item is not None:
                return item
        return None

    def _unknown_reason(self, key: str, value: object) -> str | None:
        for k, reason in self.unknown.items():
            if key == k or key.startswith(k + "."):
                return reason
        if isinstance(value, str) and "__shardcheck_unknown_" in value:
            return f"{key} depends on a value that is not known"
        return None

    def _interpolation_target(self, key: str) -> str | None:
        answer = self._plain("raw", key)
        if answer is not None:
            found, raw = answer[0]
            if not (found and isinstance(raw, str) and "${" in raw):
                return None
        else:
            from omegaconf import OmegaConf

            self._ensure_section(key.split(".")[0])
            parent_key, _, last = key.rpartition(".")
            parent = OmegaConf.select(self.cfg, parent_key) if parent_key else self.cfg
            if not OmegaConf.is_dict(parent) or last not in parent:
                return None
            if not OmegaConf.is_interpolation(parent, last):
                return None
            raw = parent._get_node(last)._value()
        m = _INTERPOLATION.match(str(raw).strip())
        if not m:
            return None
        target = m.group(1)
        if target.startswith("."):
            up = len(target) - len(target.lstrip("."))
            base = key.split(".")[:-up] if up else key.split(".")
            target = ".".join(base + [target.lstrip(".")])
        return target


def flatten_keys(tree: dict, prefix: str = "") -> list[str]:
    keys: list[str] = []
    for k, v in tree.items():
        full = f"{prefix}{k}"
        keys.append(full)
        if isinstance(v, dict):
            keys.extend(flatten_keys(v, full + "."))
    return keys


def did_you_mean(key: str, defaults: VerlDefaults) -> str | None:
    """The closest existing key: same parent first, then the same last part in the same top-level section (a
    generic leaf such as ``level`` or ``enable`` elsewhere in the tree names another setting), then anywhere in the
    tree by spelling."""
    all_keys = _all_keys(defaults)
    parent, _, last = key.rpartition(".")
    siblings = [k for k in all_keys if k.rpartition(".")[0] == parent]
    close = difflib.get_close_matches(key, siblings, n=1, cutoff=0.75)
    if close:
        return close[0]
    section = key.split(".", 1)[0] + "."
    same_leaf = [k for k in all_keys if k.rpartition(".")[2] == last and k.startswith(section)]
    if same_leaf:
        return min(same_leaf, key=lambda k: -difflib.SequenceMatcher(None, k, key).ratio())
    # a ratio ≥ 0.8 needs the shorter of the two within 2/3 of the longer: the others cannot match
    near = [k for k in all_keys if 3 * min(len(k), len(key)) >= 2 * max(len(k), len(key))]
    close = difflib.get_close_matches(key, near, n=1, cutoff=0.8)
    return close[0] if close else None


_KEYS_CACHE: dict[int, list[str]] = {}


def _all_keys(defaults: VerlDefaults) -> list[str]:
    cached = _KEYS_CACHE.get(id(defaults.tree))
    if cached is None:
        cached = _KEYS_CACHE[id(defaults.tree)] = flatten_keys(defaults.tree)
    return cached


def _added_key_issue(item: OverrideItem, defaults: VerlDefaults) -> ConfigIssue | None:
    """A ``+key`` that looks like a typo of a key verl's config has (a warning, with the key meant).

    verl reads many free-form keys (``engine_kwargs``, ``*_kwargs``, ``override_*`` dicts, keys
    fetched with ``.get``), so a new key alone proves nothing; only a near-miss of an existing
    sibling is reported.
    """
    parts = item.key.split(".")
    node = defaults.tree
    depth = 0
    for part in parts[:-1]:
        if not (isinstance(node, dict) and part in node):
            break
        child = node[part]
        if not isinstance(child, dict):
            return None  # an existing field (null or an interpolation): Hydra decides, the field exists
        node = child
        depth += 1
    missing = parts[depth]
    if depth == len(parts) - 1 and missing in node:
        return None
    siblings = [k for k in node if not k.startswith("_")]
    close = difflib.get_close_matches(missing, siblings, n=1, cutoff=0.8)
    if not close:
        return None
    suggestion = ".".join(parts[:depth] + [close[0]] + parts[depth + 1 :])
    if node.get("_target_"):
        # A section verl builds a dataclass from: its YAML does not list every field the dataclass
        # has (RolloutConfig.moe_tensor_parallel_size, verl 0.9.1), so the YAML cannot judge it.
        return None
    return ConfigIssue(
        "added_key", f"verl's config has no key `{item.key}`; `+` adds it and nothing reads it", item, suggestion
    )


# The top-level sections shardcheck reads.
READ_SECTIONS = ("trainer", "actor_rollout_ref", "algorithm")


def _interpolation_strings(node) -> Iterator[str]:
    if isinstance(node, dict):
        for v in node.values():
            yield from _interpolation_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _interpolation_strings(v)
    elif isinstance(node, str) and "${" in node:
        yield node


def needed_sections(
    tree: dict, overrides: tuple[OverrideItem, ...], read: tuple[str, ...] = READ_SECTIONS
) -> list[str]:
    """The top-level sections the overrides touch or shardcheck reads, closed over interpolation references.

    Building an OmegaConf tree costs ~0.1 ms a node; the sections nothing touches or refers to
    cannot change any value read, so they are left out (the result is the same, only faster).
    """
    wanted = {item.key.split(".")[0] for item in overrides} | set(read)
    for item in overrides:  # an override's value may interpolate another section
        for text in _interpolation_strings(item.value):
            wanted.update(other for other in tree if re.search(rf"(?<![\w.]){re.escape(other)}\.", text))
    todo = [name for name in wanted if name in tree]
    keep: set[str] = set()
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        for text in _interpolation_strings(tree[name]):
            for other in tree:
                if other not in keep and re.search(rf"(?<![\w.]){re.escape(other)}\.", text):
                    todo.append(other)
    return [name for name in tree if name in keep]


def _base_config(tree: dict, source: str):
    """``OmegaConf.create(tree)``, from this user's cache when it holds an intact entry of the same tree
    (building ~700 nodes costs ~35 ms; loading the entry ~3 ms). The cache (``config_cache``) keeps
    pickles under an HMAC keyed per user, so a planted or altered entry is never unpickled; any
    problem with it: build afresh."""
    import hashlib
    import pickle

    import omegaconf
    from omegaconf import OmegaConf

    from shardcheck.frameworks.verl import config_cache

    directory = config_cache.cache_dir()
    if directory is None:
        return OmegaConf.create(tree)
    digest = hashlib.sha256(json.dumps([source, omegaconf.__version__, tree]).encode()).hexdigest()[:32]
    name = f"verl-config-{digest}.signed-pickle"  # not the unsigned .pickle of earlier versions: no thrashing
    payload = config_cache.load(directory, name)
    cached = None
    if payload is not None:
        try:
            cached = pickle.loads(payload)  # our own entry (HMAC-verified): safe to unpickle
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError, IndexError):
            # an entry of another omegaconf build, say (the errors pickle.loads documents): rebuild it
            cached = None
    if cached is not None:
        return cached
    cfg = OmegaConf.create(tree)
    config_cache.store(directory, name, pickle.dumps(cfg))
    return cfg


def _one_line(exc: BaseException) -> str:
    """An OmegaConf / Hydra error's message with its line breaks and runs of whitespace folded."""
    return " ".join(str(exc).split())


def apply_overrides(
    defaults: VerlDefaults, overrides: tuple[OverrideItem, ...], *, custom: str | None = None, fast: bool = True
) -> VerlConfig:
    """Apply ``overrides`` to ``defaults`` as Hydra does, one at a time, recording what failed.

    ``custom`` names a config shardcheck cannot read (a recipe's own config): then only the keys
    the command line sets are known, every other value is unknown, and no key is checked.
    ``fast``: first try the plain tree (plain_config.py), which answers when every override is a plain set
    or add Hydra would accept; otherwise, or with ``fast`` False, Hydra's own code on OmegaConf.
    """
    if fast and custom is None:
        config = _apply_plain(defaults, overrides)
        if config is not None:
            return config
    return _apply_omega(defaults, overrides, custom=custom)


def _apply_plain(defaults: VerlDefaults, overrides: tuple[OverrideItem, ...]) -> VerlConfig | None:
    from shardcheck.frameworks.verl.plain_config import Fallback, PlainTree, UnknownKey

    tree = PlainTree(defaults.tree)
    config = VerlConfig(defaults, None, plain=tree, overrides=overrides)
    for item in overrides:
        if item.key.startswith("hydra.") or item.key == "hydra":
            continue
        if item.kind == "add":
            issue = _added_key_issue(item, defaults)
            if issue is not None:
                config.issues.append(issue)
        try:
            tree.apply(item.kind, item.key, item.value)
        except Fallback:
            return None
        except UnknownKey:
            # hydra/_internal/config_loader_impl.py _apply_overrides_to_config (hydra-core 1.3), as the
            # OmegaConf path words it (whitespace folded)
            message = f"Could not override '{item.key}'. To append to your config use +{item.source}"
            config.issues.append(ConfigIssue("unknown_key", message, item, did_you_mean(item.key, defaults)))
            continue
        config.applied.append(item)
        config.set_by[item.key] = item
        if item.unknown:
            config.unknown[item.key] = item.unknown
        else:
            config.unknown.pop(item.key, None)
    return config


def _apply_omega(
    defaults: VerlDefaults, overrides: tuple[OverrideItem, ...], *, custom: str | None = None
) -> VerlConfig:
    """Hydra's own ``_apply_overrides_to_config`` on an OmegaConf tree of the sections needed."""
    from omegaconf import OmegaConf

    from shardcheck.inputs.hydra_import import load_hydra

    _, ConfigLoaderImpl, ConfigCompositionException, _ = load_hydra()
    from omegaconf.errors import OmegaConfBaseException

    tree = {name: defaults.tree[name] for name in needed_sections(defaults.tree, overrides)}
    try:
        cfg = _base_config(tree, defaults.source)
    except OmegaConfBaseException as exc:  # a broken installed config
        raise InputError(f"{defaults.source}: verl's config cannot be read ({exc})") from None
    OmegaConf.set_struct(cfg, custom is None)  # hydra/_internal/config_loader_impl.py: set_struct(cfg, True)
    config = VerlConfig(defaults, cfg, custom=custom, overrides=overrides)
    applied = config.applied

    parsed = {id(item): item.hydra_override() for item in overrides}

    def rebuild() -> None:
        """A rejected override may have half-changed the config (OmegaConf.update replaces a node
        before it fails): start again from the defaults with the accepted overrides only."""
        config.cfg = _base_config(tree, defaults.source)
        OmegaConf.set_struct(config.cfg, custom is None)
        ConfigLoaderImpl._apply_overrides_to_config([parsed[id(a)] for a in applied], config.cfg)

    for item in overrides:
        if item.key.startswith("hydra.") or item.key == "hydra":
            continue  # Hydra's own settings, not verl's config
        if item.kind == "add" and custom is None:
            issue = _added_key_issue(item, defaults)
            if issue is not None:
                config.issues.append(issue)
        try:
            ConfigLoaderImpl._apply_overrides_to_config([parsed[id(item)]], config.cfg)
        except ConfigCompositionException as exc:
            rebuild()
            if custom is not None:
                continue  # the real config may well have (or lack) this key
            message = _one_line(exc)
            kind = "unknown_key" if item.kind == "change" and "Could not override" in message else "hydra"
            suggestion = did_you_mean(item.key, defaults) if kind == "unknown_key" else None
            config.issues.append(ConfigIssue(kind, message, item, suggestion))
            continue
        except (OmegaConfBaseException, ValueError, TypeError, IndexError) as exc:
            # ValueError / TypeError / IndexError: a key under a list node (`trainer.logger.q=1`,
            # `trainer.logger.q.r=1`): OmegaConf.update's `int(last)` / `_select_one` raise past Hydra's
            # handlers (omegaconf/omegaconf.py update, 2.3), and Hydra's main prints the error and exits 1
            rebuild()
            config.issues.append(ConfigIssue("hydra", f"Error merging override {item.text}: {_one_line(exc)}", item))
            continue
        applied.append(item)
        if item.kind == "delete":
            config.set_by.pop(item.key, None)
            config.unknown.pop(item.key, None)
            continue
        config.set_by[item.key] = item
        if item.unknown:
            config.unknown[item.key] = item.unknown
        else:
            config.unknown.pop(item.key, None)
    return config
