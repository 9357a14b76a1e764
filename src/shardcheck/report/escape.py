"""One escaping function per output format: every value and file name a report writes goes through one.

A value comes from the script, its environment, a model config or a file name, so it can hold anything:
a newline that starts a forged line (``::error …`` read by the GitHub runner, a fake ``verdict: valid``),
a terminal escape sequence, a bidi override that reorders what a reader sees, a lone surrogate (a file
name that is not UTF-8) that no encoder writes, or markup that closes the report's own elements.

- ``text``: plain text (terminal, ``--quiet``, the text of every other format). C0 and C1 controls (tab
  kept), DEL, U+2028/2029, bidi controls (U+061C, U+200E/200F, U+202A–202E, U+2066–2069), the
  noncharacters U+FFFE/FFFF and lone surrogates are written escaped (``\\n``, ``\\x1b``, ``\\u202e``), so a
  value is always one line and shows what it holds. What is left is valid in XML 1.0 as well.
- ``text_lines``: lines a text renderer built, each escaped, joined by newlines (a newline inside an
  element is a value's).
- ``file_name``: a file name that may start a line: escaped, and ``./`` put before a name that starts
  with a space or ``:`` (the same file), so no name reads as a workflow command or an indented report line.
- ``github_data`` / ``github_property``: GitHub workflow commands, escaped as the runner unescapes them
  (actions/toolkit, packages/core/src/command.ts, ``escapeData`` / ``escapeProperty``: ``%`` → ``%25``,
  CR → ``%0D``, LF → ``%0A``; in a property also ``:`` → ``%3A`` and ``,`` → ``%2C``).
- ``markdown`` / ``markdown_code``: GitHub-flavoured Markdown text (HTML and Markdown punctuation
  escaped: no raw HTML, link, image or mention) and a code span fenced by more backticks than it holds.
- ``html``: HTML text and attribute values (``&<>"'``) of the escaped text.
- ``script_json``: JSON inside ``<script>``: ``<``, ``>``, ``&``, U+2028/2029 (and every control ``text``
  escapes) as ``\\uXXXX``, so neither ``</script>`` nor ``<!--<script>`` ends or swallows the element.
- ``json_text``: a JSON document as written (``ensure_ascii=False``) with lone surrogates as ``\\uXXXX``,
  so it can be encoded; JSON itself keeps every value exact.
"""

from __future__ import annotations

import html as _html
import re

_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _code(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def text(value: object) -> str:
    """``value`` as one line of plain text, every control, bidi control and lone surrogate escaped."""
    s = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_code, s)


def text_lines(lines) -> str:
    """The lines of a text report, each escaped, one per line."""
    return "\n".join(text(line) for line in lines)


def file_name(path: object) -> str:
    """A file name as text that is safe at the start of a line."""
    s = text(path)
    return "./" + s if s[:1].isspace() or s.startswith(":") else s


def github_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(value: str) -> str:
    return github_data(value).replace(":", "%3A").replace(",", "%2C")


_MD_PUNCT = re.compile(r"[\\`*\[\]|~@!#]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def markdown(value: object) -> str:
    """Markdown text that reads as ``value``: no raw HTML, no link, image, mention, emphasis or code."""
    s = _MD_PUNCT.sub(lambda m: "\\" + m.group(), text(value))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_code(value: object, *, cell: bool = False) -> str:
    """A Markdown code span of ``value`` (in a table ``cell``, ``|`` escaped as GFM reads it there)."""
    s = text(value).replace("|", "\\|") if cell else text(value)
    fence = "`" * (max((len(r) for r in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def html(value: object) -> str:
    return _html.escape(text(value), quote=True)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(document: str) -> str:
    """A JSON document (from ``json.dumps(..., ensure_ascii=False)``) with lone surrogates escaped.

    A raw character can stand only inside a JSON string, where ``\\uXXXX`` reads back as the same
    character, so the document means what it meant."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


# What JSON inside <script> writes as \uXXXX besides what json.dumps escapes (C0 controls): markup, and every
# other character ``text`` escapes. None stands outside a string in JSON, where \uXXXX reads back the same.
_SCRIPT_UNSAFE = re.compile(
    "[<>&\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff\ud800-\udfff]"
)


def script_json(document: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) safe inside ``<script type="application/json">``,
    reading back the same."""
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
