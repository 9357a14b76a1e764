"""Bash integer arithmetic (``$((...))``), evaluated without running anything.

Follows the bash manual's "Shell Arithmetic": C-like precedence, integer division truncating
toward zero, ``**`` right-associative, names evaluated recursively as arithmetic. A name whose
value is not known makes the whole result unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from shardcheck.errors import ShardcheckError

_TOKEN = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+#[0-9a-zA-Z@_]+|\d+)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>!~&|^?:,]))"
)


class ArithUnknown(ShardcheckError):
    """The expression depends on a value that is not known statically."""


class ArithError(ShardcheckError, ValueError):
    """The expression is not valid bash arithmetic (bash would fail here)."""


# Binary operators by precedence level, loosest first (bash manual, "Shell Arithmetic").
_BINARY_LEVELS = (
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
)


def _to_int(text: str) -> int:
    if text.lower().startswith("0x"):
        return int(text, 16)
    if "#" in text:
        base, digits = text.split("#", 1)
        return int(digits, int(base))
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text)


def evaluate(expr: str, lookup: Callable[[str], str | None], depth: int = 0) -> int:
    """Evaluate ``expr``; ``lookup(name)`` gives a variable's text, None when it is unknown."""
    if depth > 32:
        raise ArithError("expression recursion level exceeded")
    tokens = _tokenize(expr)
    parser = _Parser(tokens, lookup, depth)
    if not tokens:
        return 0
    value = parser.comma()
    if parser.pos != len(tokens):
        raise ArithError(f"syntax error in expression (error token is {tokens[parser.pos][1]!r})")
    return value


def _tokenize(expr: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ArithError(f"syntax error: operand expected (error token is {expr[pos:]!r})")
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        raise ArithError("division by 0")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_mod(a: int, b: int) -> int:
    return a - b * _trunc_div(a, b)


_BINARY: dict[str, Callable[[int, int], int]] = {
    "||": lambda a, b: int(bool(a) or bool(b)),
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _trunc_div,
    "%": _trunc_mod,
}


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], lookup: Callable[[str], str | None], depth: int):
        self.tokens = tokens
        self.pos = 0
        self.lookup = lookup
        self.depth = depth

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ArithError("syntax error: operand expected")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, op: str) -> None:
        kind, text = self.take()
        if text != op:
            raise ArithError(f"syntax error: {op!r} expected (error token is {text!r})")

    def comma(self) -> int:
        value = self.ternary()
        while self.peek() == ",":
            self.take()
            value = self.ternary()
        return value

    def ternary(self) -> int:
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            self.expect(":")
            b = self.ternary()
            return a if cond else b
        return cond

    def binary(self, level: int) -> int:
        if level == len(_BINARY_LEVELS):
            return self.power()
        left = self.binary(level + 1)
        while self.peek() in _BINARY_LEVELS[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _BINARY[op](left, right)
        return left

    def power(self) -> int:
        base = self.unary()
        if self.peek() == "**":
            self.take()
            exponent = self.power()
            if exponent < 0:
                raise ArithError("exponent less than 0")
            return base**exponent
        return base

    def unary(self) -> int:
        op = self.peek()
        if op in ("-", "+", "!", "~"):
            self.take()
            value = self.unary()
            return {"-": -value, "+": value, "!": int(not value), "~": ~value}[op]
        return self.primary()

    def primary(self) -> int:
        kind, text = self.take()
        if text == "(":
            value = self.comma()
            self.expect(")")
            return value
        if kind == "num":
            try:
                return _to_int(text)
            except ValueError as exc:
                raise ArithError(f"value too great for base (error token is {text!r})") from exc
        if kind == "name":
            raw = self.lookup(text)
            if raw is None:
                raise ArithUnknown(text)
            raw = raw.strip()
            if not raw:
                return 0
            return evaluate(raw, self.lookup, self.depth + 1)
        raise ArithError(f"syntax error: operand expected (error token is {text!r})")
