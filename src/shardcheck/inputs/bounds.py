"""The bounds of the static bash reading: how far a value, a loop-free evaluation or a nesting may grow.

A launch script is a few KiB and its values are short; a hostile or broken one can make a value
double on every line, name an array index of 2**40, nest expansions thousands deep or call
functions that call each other thrice over. Past each bound below the value is *unknown*, with a
one-line reason at its line (the SHELL-BOUND note), never a guess and never hours or gigabytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VALUE_CHARS = 1 << 20  # characters of one value (a word, a variable, an array's elements together)
TEXT_BUDGET = 16 << 20  # characters all expansions of one reading may produce together (SEG_COST per piece)
SEG_COST = 64  # what one piece of a value (a Seg object) counts for in TEXT_BUDGET, beyond its characters
ARRAY_ITEMS = 1 << 12  # elements of one array; an index past it is not followed
PRINTF_WIDTH = 4096  # a printf field width or precision
PATTERN_WORK = 4_000_000  # characters a ${x#pattern} strip may try against before giving up
FUNCTION_CALLS = 1_000  # function calls followed in one reading
CALL_DEPTH = 32  # functions calling functions
STEPS = 500_000  # statements run in one reading (function bodies counted each time they run)
NESTING = 100  # statements inside statements (if in if in { ... })
WORD_NESTING = 32  # expansions inside expansions in one word (${a:-${b:-$(...)}})
SOURCE_DEPTH = 16  # files sourcing files
SOURCE_FILES = 64  # files sourced in one reading
ARITH_NESTING = 64  # parentheses and prefix operators inside one $((...))
ARITH_WORK = 20_000  # tokens one $((...)) may evaluate, through the variables it names
SHOWN = 200  # characters of a value quoted in a message


@dataclass
class Budget:
    """What one reading (a script and the files it sources) has spent so far."""

    chars: int = 0
    calls: int = 0
    steps: int = 0
    sources: int = 0
    nesting: int = 0  # statements being run inside each other now
    call_depth: int = 0  # function calls in progress now
    exhausted: bool = False  # TEXT_BUDGET was reached (said once)
    assigned: dict = field(default_factory=dict)  # id(function body) -> the names it may set
    said: set = field(default_factory=set)  # (function, reason) already reported past a bound


def short(text: str, limit: int = SHOWN) -> str:
    """``text`` for a one-line message: at most ``limit`` characters, newlines shown as ``⏎``."""
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"
