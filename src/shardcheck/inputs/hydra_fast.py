"""A fast path for the plainest Hydra overrides: ``key=value``, ``+key=value``, ``++key=value`` where the
value is an unquoted primitive, a quoted string without backslashes or ``$``, or a flat list of those
(``[console,wandb]``, ``['console','wandb']``, ``[8, 16]``); no escapes, interpolations, nested containers,
dicts, sweeps or functions.

Hydra's own parser (an ANTLR grammar) costs ~1.5 ms an override and ~60 ms to import; most overrides in
launch scripts are ``actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4``. For those this module
reproduces Hydra's lexer exactly (hydra-core 1.3, hydra/grammar/OverrideLexer.g4: longest match, rule order
FLOAT, INT, BOOL, NULL, UNQUOTED_CHAR, ID for ties; a value of several tokens is their text joined, as
``OverridesVisitor._createPrimitive`` does) and returns None for everything else, which then goes to
Hydra. ``tests/test_hydra_fast_differential.py`` compares it with Hydra's parser on 100,000 generated
overrides.
"""

from __future__ import annotations

import re

# Key: ID or DOT_PATH of KEY_SPECIAL segments (OverrideLexer.g4), without '$' and integer segments.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)*")
# Value characters of tokens ID, INT, FLOAT, BOOL, NULL, UNQUOTED_CHAR (less '$' and '\') and COLON.
_VALUE = re.compile(r"[A-Za-z0-9_/\-+.%*@?|:]+")
_INTU = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT = rf"(?:{_INTU}\.|{_INTU}?\.[0-9](?:_?[0-9])*)"
_EXP = rf"(?:(?:{_INTU}|{_POINT})[eE][+-]?[0-9](?:_?[0-9])*)"
_FLOAT = re.compile(rf"[+-]?(?:{_EXP}|{_POINT}|[Ii][Nn][Ff]|[Nn][Aa][Nn])")
_INT = re.compile(rf"[+-]?{_INTU}")
_BOOL = re.compile(r"[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]")
_NULL = re.compile(r"[Nn][Uu][Ll][Ll]")
# A quoted string (QUOTED_VALUE) without backslashes, '$' or its own quote inside.
_QUOTED = re.compile(r"'([^'\\$]*)'|\"([^\"\\$]*)\"")
_WS = " \t"

KINDS = {"": "change", "+": "add", "++": "force_add"}


def fast_override(text: str) -> tuple[str, str, object] | None:
    """(kind, key, value) of a plain override, or None when Hydra's parser must decide."""
    if text.startswith("++"):
        prefix, rest = "++", text[2:]
    elif text.startswith("+"):
        prefix, rest = "+", text[1:]
    else:
        prefix, rest = "", text
    key, eq, value = rest.partition("=")
    if not eq or not value or not _KEY.fullmatch(key):
        return None
    value = value.lstrip(_WS)  # EQUAL: '=' WS?
    parsed = _element(value)
    if parsed is _NO and value.startswith("[") and value.endswith("]"):
        parsed = _list(value[1:-1])
    return None if parsed is _NO else (KINDS[prefix], key, parsed)


_NO = object()


def _element(text: str) -> object:
    """A primitive or a quoted string, typed; _NO when it is anything else."""
    if _VALUE.fullmatch(text):
        return _primitive(text)
    m = _QUOTED.fullmatch(text)
    if m:
        return m.group(1) if m.group(1) is not None else m.group(2)
    return _NO


def _list(inner: str) -> object:
    """The elements of a flat list (BRACKET_OPEN '[' WS?, COMMA WS? ',' WS?, BRACKET_CLOSE WS? ']')."""
    if not inner:
        return []
    if ":" in inner and any(ch in inner for ch in _WS):
        return _NO  # VALUE_COLON (WS? ':' WS?) keeps the blanks around a colon in the element's text
    out = []
    for part in inner.split(","):
        item = _element(part.strip(_WS))
        if item is _NO:
            return _NO
        out.append(item)
    return out


def _primitive(value: str) -> object:
    """One token typed as Hydra types it; several tokens are a string (ANTLR's longest match means the whole
    value is one token exactly when one of these token rules matches all of it)."""
    if _FLOAT.fullmatch(value):
        return float(value)
    if _INT.fullmatch(value):
        return int(value)
    if _BOOL.fullmatch(value):
        return value.lower() == "true"
    if _NULL.fullmatch(value):
        return None
    return value
