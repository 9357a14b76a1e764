"""Hydra command-line overrides (``k=v``, ``+k=v``, ``++k=v``, ``~k``), parsed with Hydra's own grammar.

hydra-core's ``OverridesParser`` is the grammar verl's ``@hydra.main`` uses, so quoting, lists,
``null``/``true`` and floats such as ``1e-6`` come out exactly as verl sees them. It is imported
lazily (≈0.2 s). Words with unknown parts are parsed with a placeholder in place of each unknown
piece; values containing a placeholder are reported as unknown.

OmegaConf resolvers that read outside the config (``${oc.env:VAR}``, ``${oc.decode:...}``, and any
resolver but ``oc.select`` / ``oc.dict.*``) are never run: shardcheck's own environment is not the
launch's, and printing it would leak the caller's secrets into logs. ``${oc.env:VAR}`` takes the
``--env VAR=...`` value when one is given; every other such interpolation becomes a placeholder, so
its value is unknown with its line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from shardcheck.inputs.shell_values import Field
from shardcheck.origin import Origin

_PLACEHOLDER = "__shardcheck_unknown_{}__"
WORD_LIMIT = 1 << 16  # characters of one override word parsed with Hydra's grammar (its parser is slow)
# OmegaConf resolvers that only read the config itself (omegaconf/resolvers/oc/__init__.py, dict.py).
_CONFIG_RESOLVERS = frozenset({"oc.select", "oc.dict.keys", "oc.dict.values"})
_RESOLVER_CALL = re.compile(r"\$\{\s*([A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)\s*:")
_ENV_CALL = re.compile(r"\$\{\s*oc\.env\s*:\s*([A-Za-z_]\w*)\s*(?:,[^${}]*)?\}$")
_PLAIN_VALUE = re.compile(r"[\w./@+-]*$")

# Hydra's own flags (hydra/_internal/utils.py get_args_parser), with whether they take a value.
_HYDRA_FLAGS = {
    "--config-path": True,
    "-cp": True,
    "--config-name": True,
    "-cn": True,
    "--config-dir": True,
    "-cd": True,
    "--cfg": True,
    "-c": True,
    "--package": True,
    "-p": True,
    "--experimental-rerun": True,
    "--multirun": False,
    "-m": False,
    "--resolve": False,
    "--run": False,
    "-r": False,
    "--info": False,
    "-i": False,
    "--help": False,
    "-h": False,
    "--hydra-help": False,
    "--version": False,
    "--shell-completion": False,
    "-sc": False,
}


@dataclass(frozen=True, slots=True)
class OverrideItem:
    """One override: ``kind`` is ``change`` (k=v), ``add`` (+k), ``force_add`` (++k) or ``delete`` (~k)."""

    key: str
    kind: str
    value: object
    unknown: str | None  # why the value is unknown, when it is
    origin: Origin  # where the value was written (the variable's line when it came from one)
    word: Origin  # where the whole override word is
    text: str  # the word as Hydra saw it (unknown pieces shown as ⟨?⟩)
    hydra: object = None  # hydra's Override object, for applying it to a config (None: read by the fast path)
    source: str = ""  # the exact text parsed (unknown pieces as placeholders), to parse it with Hydra later

    def hydra_override(self):
        """Hydra's Override object for this item (parsed now when the fast path read it)."""
        if self.hydra is not None:
            return self.hydra
        if self.kind in ("change", "add", "force_add"):
            # read by the fast path: the Override Hydra's parser would build (the differential test shows the
            # kind, key and value agree; Override.value() of a parsed plain element is that value)
            hydra_parser()  # Hydra's modules, deferred as hydra_import does
            from hydra.core.override_parser.types import Override, OverrideType, ValueType

            kind = {"change": OverrideType.CHANGE, "add": OverrideType.ADD, "force_add": OverrideType.FORCE_ADD}
            return Override(
                type=kind[self.kind],
                key_or_group=self.key,
                value_type=ValueType.ELEMENT,
                _value=self.value,
                input_line=self.source,
            )
        (parsed,) = hydra_parser()[0].parse_overrides([self.source])
        return parsed


@functools.lru_cache(maxsize=1)
def hydra_parser():
    """(Hydra's OverridesParser, HydraException), made once: creating the parser registers Hydra's sweep
    functions, ~0.15 ms each time, which a batch of scripts would otherwise pay per override."""
    from shardcheck.inputs.hydra_import import load_hydra

    OverridesParser, _, _, HydraException = load_hydra()
    return OverridesParser.create(), HydraException


@dataclass(frozen=True, slots=True)
class OverrideError:
    message: str
    word: Origin
    text: str


@dataclass(frozen=True, slots=True)
class UnknownWord:
    """An argument whose key part is unknown: it may set any key."""

    word: Origin
    reason: str
    text: str


@dataclass(frozen=True, slots=True)
class HydraCommandLine:
    overrides: tuple[OverrideItem, ...]
    errors: tuple[OverrideError, ...]
    config_path: Field | None
    config_name: Field | None
    flags: tuple[str, ...]
    unknown_words: tuple[UnknownWord, ...] = ()


def _placeholder_text(field: Field) -> tuple[str, dict[str, str]]:
    reasons: dict[str, str] = {}
    out: list[str] = []
    for seg in field.segs:
        if seg.text is None:
            token = _PLACEHOLDER.format(len(reasons))
            reasons[token] = seg.unknown or "unknown"
            out.append(token)
        else:
            out.append(seg.text)
    return "".join(out), reasons


def _interpolation_end(text: str, start: int) -> int:
    """The index after the ``}`` that closes the ``${`` at ``start`` (the text's end when unclosed)."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _outside_resolvers(text: str, env: dict[str, str], reasons: dict[str, str]) -> str:
    """``text`` with each resolver call that reads outside the config replaced: ``${oc.env:VAR}`` by the
    ``--env`` value of VAR, everything else by a placeholder whose reason ``reasons`` records."""
    out: list[str] = []
    i = 0
    while True:
        m = _RESOLVER_CALL.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        if m.group(1) in _CONFIG_RESOLVERS:
            out.append(text[i : m.end()])
            i = m.end()
            continue
        end = _interpolation_end(text, m.start())
        call = text[m.start() : end]
        out.append(text[i : m.start()])
        env_call = _ENV_CALL.match(call)
        if env_call and env_call.group(1) in env and _PLAIN_VALUE.match(env[env_call.group(1)]):
            out.append(env[env_call.group(1)])
        else:
            token = _PLACEHOLDER.format(len(reasons))
            shown = call if len(call) <= 60 else call[:57] + "..."
            if env_call:
                why = (
                    f"`{shown}` reads the environment of the machine verl runs on; shardcheck never uses its "
                    f"own (give it with --env {env_call.group(1)}=VALUE)"
                )
            else:
                why = (
                    f"`{shown}` calls an OmegaConf resolver shardcheck does not run (it runs only oc.select and "
                    "oc.dict.*, which read the config itself)"
                )
            reasons[token] = why
            out.append(token)
        i = end


def _contains(value: object, tokens: dict[str, str]) -> str | None:
    if isinstance(value, str):
        for token, reason in tokens.items():
            if token in value:
                return reason
    elif isinstance(value, dict):
        for v in value.values():
            r = _contains(v, tokens)
            if r:
                return r
    elif isinstance(value, list):
        for v in value:
            r = _contains(v, tokens)
            if r:
                return r
    return None


def _parse_word(text: str, fast: bool):
    """(kind, key, value, Hydra's parsed override or None) of one override word, or Hydra's error text.
    Plain words go by :mod:`hydra_fast` unless ``fast`` is False, the rest by Hydra's own parser."""
    from shardcheck.inputs.hydra_fast import fast_override

    quick = fast_override(text) if fast else None
    if quick is not None:
        kind, key, value = quick
        return kind, key, value, None
    parser, HydraException = hydra_parser()
    try:
        (parsed,) = parser.parse_overrides([text])
    except HydraException as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    kind = {"CHANGE": "change", "ADD": "add", "FORCE_ADD": "force_add", "DEL": "delete"}[parsed.type.name]
    key = parsed.key_or_group
    return kind, key, None if kind == "delete" else parsed.value(), parsed


def parse_hydra_args(
    args: tuple[Field, ...], env: dict[str, str] | None = None, *, fast: bool = True
) -> HydraCommandLine:
    """Split a Hydra app's arguments into its flags and its overrides, and parse the overrides (plain
    ``key=value`` ones by :mod:`hydra_fast` unless ``fast`` is False, the rest by Hydra's own parser).
    ``env``: the ``--env`` values, the only environment ``${oc.env:...}`` may read."""
    overrides: list[OverrideItem] = []
    errors: list[OverrideError] = []
    config_path: Field | None = None
    config_name: Field | None = None
    flags: list[str] = []
    unknown_words: list[UnknownWord] = []
    i = 0
    while i < len(args):
        field = args[i]
        text, tokens = _placeholder_text(field)
        flag, eq, _ = text.partition("=")
        if flag in _HYDRA_FLAGS and text.startswith("-"):
            takes_value = _HYDRA_FLAGS[flag]
            value_field = None
            if takes_value and eq:
                from shardcheck.inputs.launch import suffix_field

                value_field = suffix_field(field, len(flag) + 1)
            elif takes_value and i + 1 < len(args):
                i += 1
                value_field = args[i]
            if flag in ("--config-path", "-cp"):
                config_path = value_field
            elif flag in ("--config-name", "-cn"):
                config_name = value_field
            flags.append(flag)
            i += 1
            continue
        shown = field.render()
        plain = field.render("?")  # unknown pieces count one character, as value_origin counts them
        key_part = plain.split("=", 1)[0]
        head = "".join(seg.text if seg.text is not None else "\0" for seg in field.segs).split("=", 1)[0]
        if "\0" in head:
            reason = next(seg.unknown for seg in field.segs if seg.text is None) or "unknown"
            unknown_words.append(UnknownWord(field.origin, reason, shown))
            i += 1
            continue
        if len(text) > WORD_LIMIT:
            unknown_words.append(
                UnknownWord(
                    field.origin,
                    f"an override of {len(text):,} characters is past the {WORD_LIMIT:,} shardcheck parses",
                    shown[:200] + "…",
                )
            )
            i += 1
            continue
        text = _outside_resolvers(text, env or {}, tokens)
        try:
            parsed_word = _parse_word(text, fast)
        except (ValueError, RecursionError) as exc:
            # hydra's visitor converts integers with int(): past Python's 4,300-digit limit it raises
            # ValueError, and verl stops there with a traceback (hydra-core 1.3 overrides_visitor.py).
            why = str(exc).split(";")[0] if isinstance(exc, ValueError) else "nested too deeply"
            errors.append(OverrideError(f"Hydra cannot parse this value ({why})", field.origin, shown[:200]))
            i += 1
            continue
        if isinstance(parsed_word, str):  # Hydra's own error
            errors.append(OverrideError(parsed_word, field.origin, shown))
            i += 1
            continue
        kind, key, value, parsed = parsed_word
        unknown = None if kind == "delete" else _contains(value, tokens) or _contains(key, tokens)
        start = len(key_part) + 1 if "=" in plain else len(plain)
        overrides.append(
            OverrideItem(key, kind, value, unknown, field.value_origin(start), field.origin, shown, parsed, text)
        )
        i += 1
    return HydraCommandLine(
        tuple(overrides), tuple(errors), config_path, config_name, tuple(flags), tuple(unknown_words)
    )
