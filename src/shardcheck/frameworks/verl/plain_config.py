"""verl's config as plain dicts, for the common case: overrides that set existing keys (or add new ones)
to plain values, and reads of values that are literals or the interpolations verl's generated configs use
(``${key}``, ``${.key}``, ``${oc.select:key,default}`` with a literal or another ``oc.select`` default).

OmegaConf builds ~700 nodes for verl's tree and Hydra's override code runs on them (~60 ms a script,
~100 ms to import); this reads the same tree in a few milliseconds. Anything it does not model exactly
raises :class:`Fallback` and the caller redoes the work with Hydra and OmegaConf themselves, so the
results are the same either way (``tests/test_plain_config_differential.py`` compares the two on random
override sets over verl's own keys). Semantics mirrored: hydra-core 1.3
``ConfigLoaderImpl._apply_overrides_to_config`` (change, ``+`` add, ``++`` force-add in struct mode) and
omegaconf 2.3 ``OmegaConf.select`` / ``to_container(resolve=True)`` / the ``oc.select`` resolver.
"""

from __future__ import annotations

import re

from shardcheck.errors import ShardcheckError

MISSING = "???"
_REF = re.compile(r"\$\{\s*(\.*[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)\s*\}")
_SELECT = re.compile(r"\$\{oc\.select:\s*(\.*[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)\s*,(.*)\}", re.DOTALL)
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")


class Fallback(ShardcheckError):
    """The plain reading cannot decide this exactly: use OmegaConf."""


class UnknownKey(ShardcheckError):
    """A plain ``key=value`` on a key the struct-mode config does not have: Hydra's "Could not override"."""


def _plain(value) -> bool:
    """A value that is the same in a dict and in OmegaConf: no interpolation, escape or ``???``."""
    if isinstance(value, str):
        return "$" not in value and "\\" not in value and value != MISSING
    return value is None or isinstance(value, (bool, int, float))


class PlainTree:
    """A config tree that is never mutated in place: applying an override copies the dicts on its path."""

    def __init__(self, root: dict) -> None:
        self.root = root

    # -- applying overrides ------------------------------------------------------------------------------

    def apply(self, kind: str, key: str, value) -> None:
        """Apply one override as Hydra does in struct mode, or raise Fallback (also for every error case,
        whose message is Hydra's to give)."""
        is_list = isinstance(value, list)
        if not all(_plain(v) for v in (value if is_list else [value])):
            raise Fallback
        parts = key.split(".")
        found, existing = self._raw(parts)
        if found and isinstance(existing, dict):
            raise Fallback  # a merge into a section (or Hydra's error)
        if kind == "change":
            if not found and self._absent_under_dicts(parts):
                raise UnknownKey(key)
            if not found or (isinstance(existing, list) and not is_list):
                raise Fallback  # a path through null or a value; a value over a list
        elif kind == "add":
            if found and isinstance(existing, str) and "${" in existing:
                raise Fallback  # Hydra resolves it first (OmegaConf.select), which may fail
            if found and not is_list and not (existing is None or existing == MISSING):
                raise Fallback  # "Could not append to config. An item is already at ..."
        elif kind == "force_add":
            if found and isinstance(existing, list) and not is_list:
                raise Fallback
        else:
            raise Fallback
        self.root = self._set(self.root, parts, list(value) if is_list else value)

    def _absent_under_dicts(self, parts: list[str]) -> bool:
        """Whether the key is missing and every part of it that exists is a section (a dict)."""
        node: object = self.root
        for part in parts:
            if not isinstance(node, dict):
                return False
            if part not in node:
                return True
            node = node[part]
        return False

    def _set(self, node: dict, parts: list[str], value) -> dict:
        copy = dict(node)
        head = parts[0]
        if len(parts) == 1:
            copy[head] = value
            return copy
        child = node.get(head, {})
        if not isinstance(child, dict):
            raise Fallback
        copy[head] = self._set(child, parts[1:], value)
        return copy

    def _raw(self, parts: list[str]) -> tuple[bool, object]:
        """(present, raw value) without resolving; Fallback when the path passes through a list or an
        interpolation (OmegaConf would write through it into the node it points at)."""
        node: object = self.root
        for part in parts:
            if not isinstance(node, dict):
                if isinstance(node, list) or (isinstance(node, str) and "${" in node):
                    raise Fallback  # through a list or an interpolation: OmegaConf decides
                return False, None  # through null or a plain value: OmegaConf.select gives None
            if part not in node:
                return False, None
            node = node[part]
        return True, node

    def _read(self, parts: list[str], depth: int = 0) -> tuple[bool, object, list[str]]:
        """(present, raw value, path of its container) for reading: a section that is an interpolation
        (``ref.megatron.override_transformer_config: ${oc.select:actor...,{}}``) is followed to the node it
        names, as ``OmegaConf.select`` does."""
        node: object = self.root
        path: list[str] = []
        for part in parts:
            if isinstance(node, str) and "${" in node and depth < 16:
                found, node, path = self._follow(node, path[:-1], depth + 1)
                if not found:
                    return False, None, []
            if not isinstance(node, dict):
                if isinstance(node, list) or (isinstance(node, str) and "${" in node):
                    raise Fallback
                return False, None, []
            if part not in node:
                return False, None, []
            node = node[part]
            path = [*path, part]
        return True, node, path[:-1]

    def _follow(self, text: str, parent: list[str], depth: int) -> tuple[bool, object, list[str]]:
        """Where an interpolation points: (present, raw node, its path); an oc.select whose key is absent
        gives its ``{}`` default (an empty section); anything else: Fallback."""
        m = _REF.fullmatch(text) or _SELECT.fullmatch(text)
        if m is None:
            raise Fallback
        target = self._target(m.group(1), parent)
        found, raw, _ = self._read(target, depth)
        if found and raw != MISSING:
            return True, raw, target
        if m.re is _SELECT and m.group(2).strip() == "{}":
            return True, {}, target
        raise Fallback

    # -- reading -----------------------------------------------------------------------------------------

    def parent(self, key: str) -> tuple[dict | None, str]:
        """The dict holding ``key`` (None when a parent is absent) and the last part of the key."""
        parts = key.split(".")
        found, node, _ = self._read(parts[:-1]) if len(parts) > 1 else (True, self.root, [])
        if isinstance(node, str) and "${" in node:
            found, node, _ = self._follow(node, parts[:-2], 1)
        if isinstance(node, list) or (isinstance(node, str) and "${" in node):
            raise Fallback
        return (node if found and isinstance(node, dict) else None), parts[-1]

    def select(self, key: str):
        """``OmegaConf.select(cfg, key, throw_on_missing=False)``, containers as resolved plain containers."""
        found, raw, parent = self._read(key.split("."))
        if not found or raw == MISSING:
            return None
        return self._resolved(raw, parent)

    def _resolved(self, raw, parent: list[str], depth: int = 0):
        """A raw value as OmegaConf gives it resolved (``parent``: the path of the container holding it)."""
        if depth > 32:
            raise Fallback
        if isinstance(raw, dict):
            return self._container(raw, depth)
        if isinstance(raw, list):
            return self._list(raw)
        if isinstance(raw, str) and "${" in raw:
            return self._interpolated(raw, parent, depth)
        return raw

    def _container(self, raw: dict, depth: int) -> dict:
        if depth > 32:
            raise Fallback
        out = {}
        for k, v in raw.items():
            if isinstance(v, dict):
                out[k] = self._container(v, depth + 1)
            elif isinstance(v, list):
                out[k] = self._list(v)
            elif isinstance(v, str) and "${" in v:
                raise Fallback  # an interpolation inside a container read whole: OmegaConf resolves it
            else:
                out[k] = v
        return out

    def _list(self, raw: list) -> list:
        out = []
        for v in raw:
            if isinstance(v, (dict, list)) or (isinstance(v, str) and "${" in v):
                raise Fallback
            out.append(v)
        return out

    def _target(self, ref: str, parent: list[str]) -> list[str]:
        """The absolute path of an interpolation key: ``a.b`` from the root, ``.a`` beside the node, ``..a``
        one level up (omegaconf's relative keys)."""
        dots = len(ref) - len(ref.lstrip("."))
        if not dots:
            return ref.split(".")
        base = parent[: len(parent) - (dots - 1)] if dots - 1 <= len(parent) else None
        if base is None:
            raise Fallback
        return [*base, *ref[dots:].split(".")]

    def _interpolated(self, text: str, parent: list[str], depth: int):
        m = _REF.fullmatch(text)
        if m:
            found, raw, container = self._read(self._target(m.group(1), parent), depth + 1)
            if not found or raw == MISSING:
                raise Fallback  # OmegaConf raises an interpolation error: its message is wanted
            return self._resolved(raw, container, depth + 1)
        m = _SELECT.fullmatch(text)
        if m:
            found, raw, container = self._read(self._target(m.group(1), parent), depth + 1)
            if found and raw != MISSING:
                return self._resolved(raw, container, depth + 1)
            return self._default(m.group(2).strip(), parent, depth)
        raise Fallback  # string interpolation, other resolvers

    def _default(self, text: str, parent: list[str], depth: int):
        """An ``oc.select`` default as OmegaConf's grammar reads it (the literals verl uses)."""
        low = text.lower()
        if low == "null":
            return None
        if low in ("true", "false"):
            return low == "true"
        if text == "{}":
            return {}
        if text == "[]":
            return []
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        if text.startswith("${") and text.endswith("}"):
            return self._interpolated(text, parent, depth + 1)
        raise Fallback

    def raw(self, key: str) -> tuple[bool, object]:
        """(present, raw value) of ``key`` for reading (interpolated sections followed)."""
        found, raw, _ = self._read(key.split("."))
        return found, raw
