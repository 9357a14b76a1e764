"""Lexing of one shell word into its parts, following bash's quoting and expansion syntax.

tree-sitter-bash gives the statement structure; inside and between words it has long-standing bugs
(tree-sitter-bash #315, #53, #280: ``$A/$B`` split into two words, ``${X:-$((a+b))}`` read as a
subshell, ``${X:-1e-6}`` mis-split). So shardcheck re-lexes each word from its raw source text here
Nothing is executed: command substitutions are kept as
opaque parts that evaluate to *unknown*.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.errors import ShardcheckError

# Characters that end an unquoted word (bash "metacharacters" plus newline).
_WORD_END = frozenset(" \t\n;&|<>()")
_SPECIAL_PARAMS = frozenset("@*#?$!-0123456789")


class WordSyntaxError(ShardcheckError, ValueError):
    """A word that bash itself would reject (unterminated quote or expansion)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class WordTooDeep(WordSyntaxError):
    """A word whose expansions nest past NESTING: bash may accept it, shardcheck does not read it."""


NESTING = 32  # expansions inside expansions in one word (${a:-${b:-$(...)}})
_depth = 0  # expansions being lexed inside each other now (lexing is not re-entered across threads)


def _nested(offset: int) -> None:
    global _depth
    _depth += 1
    if _depth > NESTING:
        _depth -= 1
        raise WordTooDeep(f"expansions nested more than {NESTING} deep, past shardcheck's bound", offset)


def _unnest() -> None:
    global _depth
    _depth -= 1


@dataclass(frozen=True, slots=True)
class Lit:
    text: str
    quoted: bool
    offset: int


@dataclass(frozen=True, slots=True)
class Param:
    """``$name``, ``${name}``, ``${name[idx]}`` or ``${name op word}``."""

    name: str
    index: str | None  # "@", "*", a number/expression, or None
    op: str | None  # ":-", "-", ":=", "=", ":+", "+", ":?", "?", "#", "##", "%", "%%", "/", "//", "len", ...
    arg: tuple | None  # parts of the word after the operator
    quoted: bool
    offset: int


@dataclass(frozen=True, slots=True)
class Arith:
    """``$((expr))``; ``expr`` is itself a word (parameter expansion happens inside)."""

    parts: tuple
    quoted: bool
    offset: int


@dataclass(frozen=True, slots=True)
class Opaque:
    """Anything that would run code: ``$(...)``, backticks, ``<(...)``. Its value is unknown."""

    text: str
    quoted: bool
    offset: int


@dataclass(frozen=True, slots=True)
class Tilde:
    user: str
    offset: int


@dataclass(frozen=True, slots=True)
class Glob:
    """An unquoted ``*``, ``?`` or ``[``: pathname expansion, which a static reader cannot do."""

    text: str
    offset: int


def word_end(src: str, pos: int, *, in_array: bool = False) -> int:
    """Offset just past the shell word that starts at ``pos`` (``\\``-newline continues a word)."""
    _, end = lex_word(src, pos, in_array=in_array)
    return end


def lex_word(src: str, pos: int, *, in_array: bool = False) -> tuple[tuple, int]:
    """Lex the unquoted-context word starting at ``pos``; return its parts and end offset."""
    parts: list = []
    i = pos
    n = len(src)
    buf: list[str] = []
    buf_start = i

    def flush() -> None:
        nonlocal buf
        if buf:
            parts.append(Lit("".join(buf), False, buf_start))
            buf = []

    while i < n:
        c = src[i]
        if c in _WORD_END:
            break
        if c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                i += 2
                continue
            if not buf:
                buf_start = i
            if i + 1 < n:
                buf.append(src[i + 1])
            i += 2
            continue
        if c == "'":
            flush()
            close = src.find("'", i + 1)
            if close < 0:
                raise WordSyntaxError("unterminated single quote", i)
            parts.append(Lit(src[i + 1 : close], True, i + 1))
            i = close + 1
            buf_start = i
            continue
        if c == '"':
            flush()
            inner, i = _lex_double_quoted(src, i + 1)
            parts.extend(inner)
            if not inner:
                parts.append(Lit("", True, i))
            buf_start = i
            continue
        if c == "$":
            part, j = _lex_dollar(src, i, quoted=False)
            if part is not None:
                flush()
                parts.append(part)
                i = j
                buf_start = i
                continue
        if c == "`":
            flush()
            j = _find_backtick_end(src, i)
            parts.append(Opaque(src[i:j], False, i))
            i = j
            buf_start = i
            continue
        if c == "~" and i == pos:
            # A tilde prefix: ~ or ~user up to the first slash (bash "Tilde Expansion"). A prefix
            # with a dot (a Hydra deletion such as ~trainer.x) names no user bash would find, and
            # bash leaves such a word unchanged.
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] in "_-"):
                j += 1
            if j >= n or src[j] in _WORD_END or src[j] in "/:":
                flush()
                parts.append(Tilde(src[i + 1 : j], i))
                i = j
                buf_start = i
                continue
        if c in "*?[" and not in_array:
            flush()
            parts.append(Glob(c, i))
            i += 1
            buf_start = i
            continue
        if not buf:
            buf_start = i
        buf.append(c)
        i += 1
    flush()
    return tuple(parts), i


def _lex_double_quoted(src: str, i: int) -> tuple[list, int]:
    """Lex inside ``"..."`` from just after the opening quote; return parts and the offset after ``"``."""
    parts: list = []
    buf: list[str] = []
    start = i
    n = len(src)
    while i < n:
        c = src[i]
        if c == '"':
            if buf:
                parts.append(Lit("".join(buf), True, start))
            return parts, i + 1
        if c == "\\" and i + 1 < n:
            nxt = src[i + 1]
            if nxt == "\n":
                i += 2
                continue
            if nxt in '$`"\\':
                if not buf:
                    start = i
                buf.append(nxt)
                i += 2
                continue
        if c == "$":
            part, j = _lex_dollar(src, i, quoted=True)
            if part is not None:
                if buf:
                    parts.append(Lit("".join(buf), True, start))
                    buf = []
                parts.append(part)
                i = j
                start = i
                continue
        if c == "`":
            if buf:
                parts.append(Lit("".join(buf), True, start))
                buf = []
            j = _find_backtick_end(src, i)
            parts.append(Opaque(src[i:j], True, i))
            i = j
            start = i
            continue
        if not buf:
            start = i
        buf.append(c)
        i += 1
    raise WordSyntaxError("unterminated double quote", start - 1)


def _find_backtick_end(src: str, i: int) -> int:
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == "`":
            return j + 1
        j += 1
    raise WordSyntaxError("unterminated backquote", i)


def _find_closing(src: str, i: int, opener: str, closer: str) -> int:
    """Offset of the ``closer`` matching an already-consumed ``opener``, skipping quotes and nesting."""
    _nested(i)
    try:
        return _find_closing_at(src, i, opener, closer)
    finally:
        _unnest()


def _find_closing_at(src: str, i: int, opener: str, closer: str) -> int:
    depth = 1
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and opener != "{":
            close = src.find("'", i + 1)
            if close < 0:
                raise WordSyntaxError("unterminated single quote", i)
            i = close + 1
            continue
        if c == "'" and opener == "{":
            # Inside ${...} single quotes only matter in the operator word; treat as quoting.
            close = src.find("'", i + 1)
            if close < 0:
                raise WordSyntaxError("unterminated single quote", i)
            i = close + 1
            continue
        if c == '"':
            _, i = _lex_double_quoted(src, i + 1)
            continue
        if c == "$" and i + 1 < n and src[i + 1] in "({":
            inner_open = src[i + 1]
            inner_close = ")" if inner_open == "(" else "}"
            i = _find_closing(src, i + 2, inner_open, inner_close) + 1
            continue
        if c == "`":
            i = _find_backtick_end(src, i)
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise WordSyntaxError(f"unterminated {opener}...{closer}", i)


def _lex_dollar(src: str, i: int, *, quoted: bool):
    """Lex an expansion starting with ``$`` at ``i``; (None, i) when the ``$`` is literal."""
    _nested(i)
    try:
        return _lex_dollar_at(src, i, quoted=quoted)
    finally:
        _unnest()


def _lex_dollar_at(src: str, i: int, *, quoted: bool):
    n = len(src)
    if i + 1 >= n:
        return None, i
    c = src[i + 1]
    if src.startswith("$((", i):
        try:
            close = _find_arith_end(src, i + 3)
        except WordSyntaxError:
            close = -1
        if close >= 0:
            inner, _ = lex_arith_body(src, i + 3, close)
            return Arith(inner, quoted, i), close + 2
        # "$( (cmd) )": a command substitution of a subshell.
    if c == "(":
        close = _find_closing(src, i + 2, "(", ")")
        return Opaque(src[i : close + 1], quoted, i), close + 1
    if c == "{":
        close = _find_closing(src, i + 2, "{", "}")
        return _parse_brace(src, i + 2, close, quoted, i), close + 1
    if c == "'" and not quoted:
        text, j = _lex_ansi_c(src, i + 2)
        return Lit(text, True, i), j
    if c in _SPECIAL_PARAMS:
        return Param(c, None, None, None, quoted, i), i + 2
    if c.isalpha() or c == "_":
        j = i + 1
        while j < n and (src[j].isalnum() or src[j] == "_"):
            j += 1
        return Param(src[i + 1 : j], None, None, None, quoted, i), j
    return None, i


def _find_arith_end(src: str, i: int) -> int:
    """Offset of the ``))`` closing ``$((`` whose body starts at ``i``."""
    depth = 0
    n = len(src)
    while i < n:
        c = src[i]
        if c == "$" and i + 1 < n and src[i + 1] == "{":
            i = _find_closing(src, i + 2, "{", "}") + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                if i + 1 < n and src[i + 1] == ")":
                    return i
                raise WordSyntaxError("not an arithmetic expansion", i)
            depth -= 1
        elif c in "'\"`":
            raise WordSyntaxError("quote inside arithmetic", i)
        i += 1
    raise WordSyntaxError("unterminated $((", i)


def lex_arith_body(src: str, start: int, end: int) -> tuple[tuple, int]:
    """Parts of an arithmetic body: literal text with ``$`` expansions lexed out."""
    parts: list = []
    buf: list[str] = []
    b0 = start
    i = start
    while i < end:
        c = src[i]
        if c == "$":
            part, j = _lex_dollar(src, i, quoted=True)
            if part is not None:
                if buf:
                    parts.append(Lit("".join(buf), True, b0))
                    buf = []
                parts.append(part)
                i = j
                b0 = i
                continue
        if c == "\\" and i + 1 < end and src[i + 1] == "\n":
            i += 2
            continue
        if not buf:
            b0 = i
        buf.append(c)
        i += 1
    if buf:
        parts.append(Lit("".join(buf), True, b0))
    return tuple(parts), end


_ANSI_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
}


def _lex_ansi_c(src: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    n = len(src)
    while i < n:
        c = src[i]
        if c == "'":
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            out.append(_ANSI_ESCAPES.get(src[i + 1], "\\" + src[i + 1]))
            i += 2
            continue
        out.append(c)
        i += 1
    raise WordSyntaxError("unterminated $'...'", i)


_OPERATORS = (":-", ":=", ":+", ":?", "##", "%%", "//", "^^", ",,", "-", "=", "+", "?", "#", "%", "/", "^", ",", ":")


def _parse_brace(src: str, start: int, end: int, quoted: bool, offset: int) -> Param:
    """Parse the body of ``${...}`` (between ``start`` and the closing brace at ``end``)."""
    body = src[start:end]
    if body.startswith("#") and len(body) > 1 and body[1] not in "}":
        name, index, rest = _split_name(body[1:])
        if not rest:
            return Param(name, index, "len", None, quoted, offset)
    if body.startswith("!"):
        name, index, rest = _split_name(body[1:])
        return Param(name, index, "indirect", None, quoted, offset)
    name, index, rest = _split_name(body)
    if not name:
        raise WordSyntaxError(f"bad substitution: ${{{body}}}", offset)
    if not rest:
        return Param(name, index, None, None, quoted, offset)
    for op in _OPERATORS:
        if rest.startswith(op):
            arg_start = start + (len(body) - len(rest)) + len(op)
            arg_parts = _lex_operator_word(src, arg_start, end, quoted)
            return Param(name, index, op, arg_parts, quoted, offset)
    raise WordSyntaxError(f"bad substitution: ${{{body}}}", offset)


def _split_name(body: str) -> tuple[str, str | None, str]:
    if body[:1].isascii() and body[:1].isdigit():  # ${10}: inside braces every digit belongs to the number
        j = 1
        while j < len(body) and body[j].isascii() and body[j].isdigit():
            j += 1
        return body[:j], None, body[j:]
    if body and body[0] in _SPECIAL_PARAMS:
        return body[0], None, body[1:]
    j = 0
    while j < len(body) and (body[j].isalnum() or body[j] == "_"):
        j += 1
    name = body[:j]
    rest = body[j:]
    index = None
    if rest.startswith("["):
        close = rest.find("]")
        if close > 0:
            index = rest[1:close]
            rest = rest[close + 1 :]
    return name, index, rest


def _lex_operator_word(src: str, i: int, end: int, quoted: bool) -> tuple:
    """Lex the word after a ``${name op`` operator up to ``end`` (quotes and expansions allowed)."""
    parts: list = []
    buf: list[str] = []
    b0 = i
    if not quoted and i < end and src[i] == "~":  # bash tilde-expands the word of ${V:-~/x}
        j = i + 1
        while j < end and (src[j].isalnum() or src[j] in "_-."):
            j += 1
        if j >= end or src[j] == "/":
            parts.append(Tilde(src[i + 1 : j], i))
            i = j
            b0 = i
    while i < end:
        c = src[i]
        if c == "\\" and i + 1 < end:
            if src[i + 1] == "\n":
                i += 2
                continue
            if not buf:
                b0 = i
            buf.append(src[i + 1])
            i += 2
            continue
        if c == "'" and not quoted:
            if buf:
                parts.append(Lit("".join(buf), quoted, b0))
                buf = []
            close = src.find("'", i + 1)
            parts.append(Lit(src[i + 1 : close], True, i + 1))
            i = close + 1
            b0 = i
            continue
        if c == '"':
            if buf:
                parts.append(Lit("".join(buf), quoted, b0))
                buf = []
            inner, i = _lex_double_quoted(src, i + 1)
            parts.extend(inner or [Lit("", True, i)])
            b0 = i
            continue
        if c == "$":
            part, j = _lex_dollar(src, i, quoted=quoted)
            if part is not None:
                if buf:
                    parts.append(Lit("".join(buf), quoted, b0))
                    buf = []
                parts.append(part)
                i = j
                b0 = i
                continue
        if c == "`":
            if buf:
                parts.append(Lit("".join(buf), quoted, b0))
                buf = []
            j = _find_backtick_end(src, i)
            parts.append(Opaque(src[i:j], quoted, i))
            i = j
            b0 = i
            continue
        if not buf:
            b0 = i
        buf.append(c)
        i += 1
    if buf:
        parts.append(Lit("".join(buf), quoted, b0))
    return tuple(parts)
