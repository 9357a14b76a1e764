"""'Did you mean' for the command line: a mistyped subcommand, option or choice (argparse's own
``suggest_on_error`` exists only from Python 3.14), found with difflib among the words the parser knows."""

from __future__ import annotations

import argparse
import difflib
import re

_CHOICE = re.compile(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)$")
_UNRECOGNIZED = "unrecognized arguments: "


def closest(word: str, pool) -> str | None:
    """The one word of ``pool`` closest to ``word``, or None when none is close."""
    hits = difflib.get_close_matches(word, list(pool), n=1, cutoff=0.6)
    return hits[0] if hits else None


def did_you_mean(word: str, pool) -> str:
    """``"; did you mean X?"`` for the closest word of ``pool``, else ``""``."""
    hit = closest(word, pool)
    return f"; did you mean {hit}?" if hit else ""


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The subcommand's parser when ``argv`` names one, else ``parser`` itself."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word in argv:
                if word in action.choices:
                    return action.choices[word]
    return parser


def hint(parser: argparse.ArgumentParser, message: str, argv: list[str]) -> str:
    """What to append to argparse's error ``message``: a suggestion for a bad choice or an unknown option."""
    choice = _CHOICE.search(message)
    if choice:
        pool = [c.strip().strip("'") for c in choice.group(2).split(",")]
        return did_you_mean(choice.group(1), pool)
    if message.startswith(_UNRECOGNIZED):
        known = _options(_command_parser(parser, argv))
        for word in message[len(_UNRECOGNIZED) :].split():
            name = word.partition("=")[0]
            if name.startswith("--"):
                found = closest(name, known)
                if found:
                    return f"; did you mean {found}?"
    return ""
