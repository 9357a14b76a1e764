"""Argument-parsing loops, evaluated with the script's arguments (``shardcheck check run.sh -- a b c``).

``while [[ $# -gt 0 ]]; do case $1 in --nodes) NNODES=$2; shift 2;; esac; done``, ``for arg in "$@"; do ...;
done`` and ``while getopts "n:t:" opt; do ...; done`` are run iteration by iteration, as bash would, when the
loop reads the positional parameters and its condition is known: with no arguments ``$#`` is 0, which is
known, so such a loop runs 0 times and the script's defaults stay. Any other loop, a condition that is not
known, ``break`` under a branch that is not decided, or more than ``ITERATIONS`` rounds: the reader's usual
treatment (what the body assigns becomes unknown). ``getopts`` follows bash(1), SHELL BUILTIN COMMANDS.
"""

from __future__ import annotations

import re

from shardcheck.errors import ShardcheckError
from shardcheck.inputs.shell_values import Field, Seg, Var

ITERATIONS = 256  # rounds of one argument loop before shardcheck stops following it
_POSITIONAL = re.compile(r"\$(?:#|@|\*|\{#\}|\{@\}|\{\*\}|\{?[1-9]\}?)")


class LoopExit(ShardcheckError):
    """``break`` / ``continue`` reached in a followed loop's body, outside any undecided branch."""

    def __init__(self, word: str) -> None:
        super().__init__(word)
        self.word = word


class GiveUp(ShardcheckError):
    """The followed loop cannot be followed after all (``break`` under an undecided branch, ``exit``, ...)."""


def reads_arguments(text: str) -> bool:
    return _POSITIONAL.search(text) is not None


def run(interp, node) -> bool:
    """Follow the loop ``node`` when it is an argument loop whose rounds are known; False when it is not
    (the caller then treats it as any loop). The interpreter's state is left as after the last round."""
    text = interp.src[node.start_byte : node.end_byte]
    body = node.child_by_field_name("body")
    if body is None:
        return False
    condition = text[: body.start_byte - node.start_byte]
    if not (reads_arguments(condition) or re.match(r"while\s+getopts\s", condition) or _bare_for(node)):
        return False
    start_vars, start_positional, start_why = dict(interp.vars), interp.positional, interp.positional_why
    start_commands, start_diagnostics = len(interp.commands), len(interp.diagnostics)
    saved_consumed = interp.consumed_until
    where = interp.origin_at(node.start_byte)
    marker = f"the argument loop at line {where.line}"
    saved_condition = interp.condition
    interp.loop_markers.append(marker)
    try:
        if node.type == "for_statement":
            done = _for(interp, node, body, marker)
        elif node.type == "while_statement":
            done = _while(interp, node, body, marker)
        else:
            done = False
    except GiveUp:
        done = False
    finally:
        interp.loop_markers.pop()
        interp.condition = saved_condition
    if not done:  # undo every round: the loop is read the usual way
        interp.vars, interp.positional, interp.positional_why = start_vars, start_positional, start_why
        del interp.commands[start_commands:]
        del interp.diagnostics[start_diagnostics:]
        interp.consumed_until = saved_consumed
        return False
    interp.consumed_until = max(interp.consumed_until, node.end_byte)
    return True


def _round(interp, body, marker: str) -> bool:
    """One round of the body; False after ``break``."""
    saved = interp.consumed_until
    try:
        interp.run_block(body.children)
    except LoopExit as exc:
        if interp.condition != interp.condition_at_loop.get(marker):
            raise GiveUp from None
        return exc.word != "break"
    finally:
        interp.consumed_until = saved
    return True


def _bare_for(node) -> bool:
    """``for arg; do``: no ``in`` list, so the loop goes over ``"$@"``."""
    return node.type == "for_statement" and not any(c.type == "in" for c in node.children)


def _for(interp, node, body, marker: str) -> bool:
    var_node = node.child_by_field_name("variable")
    values = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "value"]
    if var_node is None or not (values or _bare_for(node)):
        return False
    name = interp.src[var_node.start_byte : var_node.end_byte]
    fields: list[Field] = []
    if _bare_for(node):
        if interp.positional_why is not None:
            return False
        fields = list(interp.positional)
    for v in values:
        fields.extend(interp._word_fields(v.start_byte))
    if not all(f.known for f in fields) or len(fields) > ITERATIONS:
        return False
    interp.condition_at_loop[marker] = interp.condition
    for f in fields:
        interp.vars[name] = Var(name, f.origin, value=f)
        if not _round(interp, body, marker):
            break
    return True


def _while(interp, node, body, marker: str) -> bool:
    cond = next(
        (c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "condition" and c.is_named), None
    )
    if cond is None:
        return False
    getopts = _getopts_words(interp, cond)
    until = node.children[0].type == "until"  # tree-sitter-bash reads `until C` as a while_statement
    if until and getopts is not None:
        return False
    state = {"index": 0, "char": 0}
    interp.condition_at_loop[marker] = interp.condition
    for _ in range(ITERATIONS):
        verdict = _getopts_step(interp, getopts, state, cond) if getopts is not None else interp.eval_condition(cond)
        if verdict is None:
            return False
        if verdict is until:  # while: False ends the loop; until: True does
            return True
        if not _round(interp, body, marker):
            return True
    return False  # past the bound: not followed


def _getopts_words(interp, cond) -> tuple[str, str] | None:
    """``getopts OPTSTRING NAME``: its two known words; None when the condition is something else."""
    if cond.type != "command":
        return None
    words = [c for c in cond.children if c.is_named]
    texts = [interp._word_text(w) for w in words]
    if len(texts) != 3 or texts[0] != "getopts" or None in texts or not texts[2].isidentifier():
        return None
    return texts[1], texts[2]


def _set(interp, name: str, text: str | None, origin) -> None:
    if text is None:
        interp.vars.pop(name, None)
    else:
        interp.vars[name] = Var(name, origin, value=Field((Seg(text, origin),), origin))


def _end(interp, name: str, k: int, origin) -> bool:
    """getopts at the end of the options: NAME is ``?`` and OPTIND the index of the first operand."""
    _set(interp, name, "?", origin)
    _set(interp, "OPTIND", str(k + 1), origin)
    return False


def _getopts_step(interp, spec: tuple[str, str], state: dict, cond) -> bool | None:
    """One call of ``getopts``: sets NAME and OPTARG from the positional parameters; False at their end."""
    optstring, name = spec
    silent = optstring.startswith(":")
    args = interp.positional
    origin = interp.origin_at(cond.start_byte, interp.line_text(cond.start_byte)[:60])
    k, c = state["index"], state["char"]
    if k >= len(args):
        return _end(interp, name, k, origin)
    word = args[k].text
    if word is None:
        return None
    if c == 0:
        if word == "--":
            return _end(interp, name, k + 1, origin)
        if not word.startswith("-") or word == "-":
            return _end(interp, name, k, origin)
        c = 1
    letter = word[c]
    rest = word[c + 1 :]
    at = optstring.find(letter) if letter != ":" else -1
    takes = at >= 0 and optstring[at + 1 : at + 2] == ":"
    interp.vars.pop("OPTARG", None)
    if at < 0:
        _set(interp, name, "?", origin)
        if silent:
            _set(interp, "OPTARG", letter, origin)
        k, c = (k, c + 1) if rest else (k + 1, 0)
    elif takes:
        if rest:
            _set(interp, "OPTARG", rest, args[k].origin)
            k, c = k + 1, 0
        elif k + 1 < len(args):
            value = args[k + 1]
            interp.vars["OPTARG"] = Var("OPTARG", value.origin, value=value)
            k, c = k + 2, 0
        else:
            _set(interp, name, ":" if silent else "?", origin)
            if silent:
                _set(interp, "OPTARG", letter, origin)
            state["index"], state["char"] = k + 1, 0
            return True
        _set(interp, name, letter, origin)
    else:
        _set(interp, name, letter, origin)
        k, c = (k, c + 1) if rest else (k + 1, 0)
    state["index"], state["char"] = k, c
    _set(interp, "OPTIND", str(k + 1), origin)
    return True
