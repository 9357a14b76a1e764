"""Bash integer arithmetic (``$((...))``), evaluated without running anything.

Follows the bash manual's "Shell Arithmetic": C-like precedence, integer division truncating
toward zero, ``**`` right-associative, names evaluated recursively as arithmetic. A name whose
value is not known makes the whole result unknown.

bash computes in 64-bit signed integers and wraps around silently; a launch value that wrapped is
not one anybody meant, so a result outside that range is *unknown* (``ArithBound``), as are shifts
by a negative count or by 64 or more (undefined in C, bash gives whatever the CPU does). Nesting and
the work one expression may cost through the variables it names are bounded too.
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


class ArithBound(ShardcheckError):
    """The value is past what shardcheck evaluates (outside bash's 64-bit range, nested or costly past its
    bounds): unknown, with the reason as the message."""


INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
NESTING = 32  # parentheses, prefix operators and ** / ?: chains inside one expression
WORK = 20_000  # tokens evaluated for one expression, through the variables it names


def _fit(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise ArithBound("outside bash's 64-bit integers (bash would wrap it around)")
    return value


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
    if len(text) > 80:  # no 64-bit number has that many digits, in any base
        raise ArithBound(f"the number {text[:20]}… is outside bash's 64-bit integers")
    if text.lower().startswith("0x"):
        return _fit(int(text, 16))
    if "#" in text:
        base_text, digits = text.split("#", 1)
        base = int(base_text)
        if not 2 <= base <= 64:
            raise ArithError(f"invalid arithmetic base (error token is {text!r})")
        if base > 36:
            raise ArithBound(f"the base-{base} number {text} is not evaluated")
        return _fit(int(digits, base))
    if len(text) > 1 and text.startswith("0"):
        return _fit(int(text, 8))
    return _fit(int(text))


class _Work:
    def __init__(self) -> None:
        self.tokens = 0


def evaluate(expr: str, lookup: Callable[[str], str | None], depth: int = 0, work: _Work | None = None) -> int:
    """Evaluate ``expr``; ``lookup(name)`` gives a variable's text, None when it is unknown.
    ArithUnknown: a name is unknown; ArithError: bash would fail; ArithBound: past shardcheck's bounds."""
    if depth > 32:
        raise ArithError("expression recursion level exceeded")
    work = work or _Work()
    if len(expr) > WORK * 8:
        raise ArithBound(f"an expression of {len(expr):,} characters is past shardcheck's bound")
    tokens = _tokenize(expr)
    work.tokens += len(tokens)
    if work.tokens > WORK:
        raise ArithBound(
            f"the expression evaluates more than {WORK:,} tokens through its variables, past shardcheck's bound"
        )
    parser = _Parser(tokens, lookup, depth, work)
    if not tokens:
        return 0
    try:
        value = parser.comma()
    except RecursionError:
        raise ArithBound("the expression is nested too deeply for shardcheck to evaluate") from None
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
            raise ArithError(f"syntax error: operand expected (error token is {expr[pos : pos + 40]!r})")
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


def _shift(count: int) -> int:
    if not 0 <= count < 64:
        raise ArithBound(f"a shift by {count} (negative or 64 or more) is undefined in bash's 64-bit arithmetic")
    return count


_LEVEL = {op: level for level, ops in enumerate(_BINARY_LEVELS) for op in ops}

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
    "<<": lambda a, b: a << _shift(b),
    ">>": lambda a, b: a >> _shift(b),
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _trunc_div,
    "%": _trunc_mod,
}


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], lookup: Callable[[str], str | None], depth: int, work: _Work):
        self.tokens = tokens
        self.pos = 0
        self.lookup = lookup
        self.depth = depth
        self.work = work
        self.nesting = 0

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > NESTING:
            raise ArithBound(f"the expression is nested more than {NESTING} deep, past shardcheck's bound")

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
            self.enter()
            a = self.ternary()
            self.expect(":")
            b = self.ternary()
            self.nesting -= 1
            return a if cond else b
        return cond

    def binary(self, min_level: int) -> int:
        """Precedence climbing: left-associative operators of ``min_level`` and tighter."""
        left = self.power()
        while True:
            level = _LEVEL.get(self.peek() or "")
            if level is None or level < min_level:
                return left
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _fit(_BINARY[op](left, right))

    def power(self) -> int:
        base = self.unary()
        if self.peek() == "**":
            self.take()
            self.enter()
            exponent = self.power()
            self.nesting -= 1
            if exponent < 0:
                raise ArithError("exponent less than 0")
            if base in (0, 1) or exponent == 0:
                return 1 if exponent == 0 else base
            if base == -1:
                return 1 if exponent % 2 == 0 else -1
            if exponent >= 64:
                raise ArithBound(f"{base}**{exponent} is outside bash's 64-bit integers (bash would wrap it around)")
            return _fit(base**exponent)
        return base

    def unary(self) -> int:
        op = self.peek()
        if op in ("-", "+", "!", "~"):
            self.take()
            self.enter()
            value = self.unary()
            self.nesting -= 1
            return _fit({"-": -value, "+": value, "!": int(not value), "~": ~value}[op])
        return self.primary()

    def primary(self) -> int:
        kind, text = self.take()
        if text == "(":
            self.enter()
            value = self.comma()
            self.expect(")")
            self.nesting -= 1
            return value
        if kind == "num":
            try:
                return _to_int(text)
            except ValueError as exc:
                raise ArithError(f"value too great for base (error token is {text[:40]!r})") from exc
        if kind == "name":
            raw = self.lookup(text)
            if raw is None:
                raise ArithUnknown(text)
            raw = raw.strip()
            if not raw:
                return 0
            return evaluate(raw, self.lookup, self.depth + 1, self.work)
        raise ArithError(f"syntax error: operand expected (error token is {text!r})")
