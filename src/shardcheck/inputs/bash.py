"""Read a bash launch script statically: evaluate its variables and find the commands it would run.

tree-sitter-bash (chosen by measurement: 278/285 real verl scripts
error-free, ~0.6 ms a script, local error recovery) gives the statements; every word is re-lexed
from its raw text by :mod:`shell_words` and expanded here. Nothing from the script is executed:
command substitution, loops, an ``eval`` of a string not known and the like yield values marked *unknown*
(an ``eval`` or ``bash -c`` of a known string is read as the commands it holds). ``source FILE``
is followed when FILE is known and exists (the file is read the same way, its lines are its own
origins); ``$(dirname "$0")``-style words are the script's directory, never run.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from shardcheck.errors import InputError, ShardcheckError
from shardcheck.inputs import (
    bounds,
    files,
    read_policy,
    shell_args,
    shell_arith,
    shell_probe,
    shell_source,
    shell_words,
)
from shardcheck.inputs.shell_values import Command, Field, Seg, Var
from shardcheck.inputs.shell_words import Arith, Glob, Lit, Opaque, Param, Tilde, WordSyntaxError
from shardcheck.origin import Origin
from shardcheck.problems import Kind, Problem

_IFS = " \t\n"
_LOOPS = ("for_statement", "c_style_for_statement", "while_statement")
_VAR_REF = re.compile(r"\$\{?#?([A-Za-z_][A-Za-z0-9_]*)")
_NOT_STATEMENTS = ("comment", "heredoc_body", "file_redirect", "heredoc_redirect", "herestring_redirect")


@dataclass(frozen=True, slots=True)
class ShellReading:
    path: str
    commands: tuple[Command, ...]
    diagnostics: tuple[Problem, ...]  # about the script itself: a line not understood, ...
    variables: dict[str, Var]
    suppressions: dict[int, frozenset[str]] = field(default_factory=dict)  # line -> rule ids ("ALL")
    suppression_ids: tuple[tuple[int, str], ...] = ()  # (comment line, id as written), to check the ids
    env_unread: tuple[str, ...] = ()  # --env names the script never reads
    env_wanted: tuple[str, ...] = ()  # environment names the script reads (given or not)
    unrun: tuple[str, ...] = ()  # "line 3: `exit` ends the script" ...: code bash never runs (for "no launch")


def _parser():
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def read_bash(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    display: str | None = None,
    args: tuple[str, ...] = (),
    allow_source: tuple[str | Path, ...] = (),
    machine: shell_probe.Machine | None = None,
) -> ShellReading:
    """Read the script at ``path``; ``env`` holds values given with ``--env NAME=VALUE``; ``args`` are its
    positional parameters (``shardcheck check run.sh -- a=b``: ``$1``, ``"$@"``); ``allow_source`` names
    directories whose files ``source`` may read besides the script's own tree (``--allow-source``);
    ``machine``: the cluster that answers the script's accelerator probes (``--device``, shell_probe.py)."""
    p = Path(path)
    raw = files.read_regular(p, limit=files.SCRIPT_LIMIT, what="give the path of a launch script")
    return read_bash_text(
        raw, display or str(path), env, real_path=p, args=args, allow_source=allow_source, machine=machine
    )


def _tree(raw: bytes, path: str):
    nul = raw.find(b"\0")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise InputError(f"{path}:{line}: not a text file (a NUL byte); give the path of a bash launch script")
    # Byte offsets and character offsets agree on latin-1 text; literal text is re-decoded as UTF-8.
    src = raw.decode("latin-1") + "\n\n"  # "\n\n": tree-sitter-bash misreads a script ending without a blank line
    return src, _parser().parse(src.encode("latin-1"))


def read_bash_text(
    raw: bytes,
    path: str,
    env: dict[str, str] | None = None,
    *,
    real_path: Path | None = None,
    args: tuple[str, ...] = (),
    allow_source: tuple[str | Path, ...] = (),
    machine: shell_probe.Machine | None = None,
) -> ShellReading:
    """Read script text; ``real_path`` is where it lies on disk (for ``source`` and ``$(dirname "$0")``)."""
    src, tree = _tree(raw, path)
    real = Path(os.path.abspath(real_path if real_path is not None else path))
    interp = _Interpreter(src, path, dict(env or {}), real_path=real)
    interp.allow_source = tuple(Path(d) for d in allow_source)
    interp.machine = machine
    if args:
        origin = Origin(kind="cli", text="an argument after `--` on shardcheck's command line")
        interp.positional = tuple(Field((Seg(a, origin),), origin) for a in args)
    unrun = interp.unrun
    try:
        interp.run_block(tree.root_node.children)
    except _Exit as stop:  # `exit` outside any undecided condition: bash runs nothing after it
        if stop.skips_launch:
            said = f"{stop.where}: `exit` ends the script; the launch after it never runs"
            if not args and interp.reads_args:  # `[ "$#" -lt 2 ] && exit 1`: read with no arguments
                said += " when it is given no arguments (give them after `--`: shardcheck check run.sh -- ARGS)"
            unrun.insert(0, said)
    except RecursionError:  # every nesting has its own bound; this is the last line of defence
        raise InputError(f"{path}:1: nested too deeply for shardcheck to read; simplify the script") from None
    suppressions, written = _suppressions(tree.root_node, src)
    given = set(env or {})
    return ShellReading(
        path,
        tuple(interp.commands),
        tuple(interp.diagnostics),
        dict(interp.vars),
        suppressions,
        written,
        tuple(sorted(given - interp.env_read)),
        tuple(sorted(interp.env_read)),
        tuple(unrun + interp.uncalled_launchers()),
    )


_DISABLE = re.compile(r"#\s*shardcheck:\s*disable=([A-Za-z0-9_,\- ]+)")


def _suppressions(root, src: str) -> tuple[dict[int, frozenset[str]], tuple[tuple[int, str], ...]]:
    """``# shardcheck: disable=ID[,ID]`` comments: each covers its own line and the next one; on the line
    before a command that spans several lines (``\\``-continued, an array), every line of that command.
    Also every (line, id) as written, so that unknown ids can be reported."""
    out: dict[int, set[str]] = {}
    written: list[tuple[int, str]] = []
    if not _DISABLE.search(src):
        return {}, ()  # no disable comment anywhere: nothing to walk the tree for
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "comment":
            m = _DISABLE.search(src[node.start_byte : node.end_byte])
            if m:
                ids = {part.strip().upper() for part in m.group(1).split(",") if part.strip()}
                line = node.start_point[0] + 1
                written.extend((line, i) for i in sorted(ids))
                covered = {line, line + 1}
                after = node.next_named_sibling
                while after is not None and after.type == "comment":
                    after = after.next_named_sibling
                if (
                    after is not None
                    and after.start_point[0] + 1 == line + 1
                    and node.start_point[1] == _indent(src, node.start_byte)
                ):
                    last = after.end_point[0] + (1 if after.end_point[1] else 0)  # 1-based last line
                    covered.update(range(after.start_point[0] + 1, last + 1))
                for number in covered:
                    out.setdefault(number, set()).update(ids)
        stack.extend(node.children)
    return {line: frozenset(ids) for line, ids in out.items()}, tuple(sorted(written))


def _indent(src: str, offset: int) -> int:
    """The column of the first non-blank character of the line holding ``offset``."""
    start = src.rfind("\n", 0, offset) + 1
    return len(src[start:offset]) - len(src[start:offset].lstrip(" \t"))


def _utf8(text: str) -> str:
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        return text


class _Unset(ShardcheckError):
    pass


class _Exit(ShardcheckError):
    """``exit`` was reached: the shell (or the subshell, the ``bash -c`` string) runs nothing after it."""

    def __init__(self, where: str, *, skips_launch: bool = False) -> None:
        super().__init__(where)
        self.where = where
        self.skips_launch = skips_launch  # the text after it names a launcher


_HOLE = "__shardcheck_eval_unknown_"  # the name an unknown part of an eval'd string stands under
_LAUNCHER_TEXT = re.compile(r"\b(?:python3?|torchrun|deepspeed)\b")


# Builtins whose exit status is known without running anything (bash(1), SHELL BUILTIN COMMANDS).
_FIXED_STATUS = {"true": True, ":": True, "false": False}


class _Interpreter:
    def __init__(
        self, src: str, path: str, env: dict[str, str], *, real_path: Path, parent: _Interpreter | None = None
    ) -> None:
        self.src = src
        self.path = path
        self.env = env
        self.real_path = real_path
        self.main = parent.main if parent is not None else self  # the script given, for $0
        self.sourcing: tuple[Path, ...] = (parent.sourcing if parent is not None else ()) + (real_path,)
        self.unfollowed: list[str] = parent.unfollowed if parent is not None else []
        self.unrun: list[str] = parent.unrun if parent is not None else []  # for "no launch": what was not read
        self.budget: bounds.Budget = parent.budget if parent is not None else bounds.Budget()
        self.allow_source: tuple[Path, ...] = parent.allow_source if parent is not None else ()
        self.machine: shell_probe.Machine | None = parent.machine if parent is not None else None
        self.loop_markers: list[str] = []  # the argument loops being followed (shell_args.py), innermost last
        self.condition_at_loop: dict[str, str | None] = {}
        self.env_read: set[str] = parent.env_read if parent is not None else set()  # names looked up in env
        self.reads_args = False  # (on the main script's interpreter) `$#` or `$N` read outside any function
        self.assoc: set[str] = parent.assoc if parent is not None else set()  # names declared with -A
        self.vars: dict[str, Var] = {}
        self.positional: tuple[Field, ...] = ()
        self.positional_why: str | None = None  # set when the positional parameters are not known (`shift $n`)
        self.functions: dict[str, object] = {}
        self.called: set[str] = parent.called if parent is not None else set()  # functions called at least once
        self.commands: list[Command] = []
        self.diagnostics: list[Problem] = []
        self.consumed_until = 0
        self.condition: str | None = None
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", src)]

    # -- positions -------------------------------------------------------------------------
    def origin_at(self, offset: int, text: str | None = None) -> Origin:
        import bisect

        line = bisect.bisect_right(self._line_starts, offset)
        col = offset - self._line_starts[line - 1] + 1
        return Origin(kind="script", path=self.path, line=line, column=col, text=text)

    def line_text(self, offset: int) -> str:
        import bisect

        line = bisect.bisect_right(self._line_starts, offset)
        start = self._line_starts[line - 1]
        end = self.src.find("\n", start, start + 400)
        return _utf8(self.src[start : end if end >= 0 else start + 400]).strip()

    def diag(self, kind: Kind, offset: int, **args) -> None:
        self.diagnostics.append(Problem(kind, self.origin_at(offset), args))

    # -- statements ------------------------------------------------------------------------
    def run_block(self, nodes) -> None:
        for node in nodes:
            if not node.is_named or node.type in _NOT_STATEMENTS:
                continue
            if node.start_byte < self.consumed_until:
                continue  # part of a word tree-sitter split in two (quirk 2)
            self.run(node)

    def run(self, node) -> None:
        budget = self.budget
        budget.steps += 1
        if budget.nesting >= bounds.NESTING:
            self.not_followed(node, f"statements are nested more than {bounds.NESTING} deep")
            return
        budget.nesting += 1
        try:
            self._run(node)
        finally:
            budget.nesting -= 1

    def _reread(self, start: int, end: int) -> None:
        """Run the statements of ``src[start:end]`` from a parse of that text alone: tree-sitter-bash took a
        ``<<-`` inside a word shardcheck lexed (``$((1<<-1))``) for a here-document and swallowed the lines
        after it. Offsets stay those of the script (what precedes is blanked, newlines kept)."""
        prefix = re.sub(r"[^\n]", " ", self.src[:start])
        tree = _parser().parse((prefix + self.src[start:end]).encode("latin-1"))
        self.run_block(tree.root_node.children)
        self.consumed_until = max(self.consumed_until, end)

    def not_followed(self, node, why: str, what: str = "this statement") -> None:
        """A statement past a bound: not run; every variable it could set becomes unknown (never a guess)."""
        line = self.origin_at(node.start_byte).line
        self.diag(
            Kind.SHELL_BOUND, node.start_byte, text=f"{what} is not followed: {why}; variables it sets are unknown"
        )
        reason = f"is set at line {line}, which is not followed ({why})"
        for name in self._assigned_names(node):
            old = self.vars.get(name)
            self.vars[name] = self._unknown_var(
                name, old.origin if old else self.origin_at(node.start_byte), f"${name} {reason}"
            )
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def _assigned_names(self, root) -> set[str]:
        """Names a statement may set, read off its syntax (assignments, declarations, read-like commands,
        and the bodies of functions it calls), without running anything."""
        names: set[str] = set()
        seen: set[int] = set()
        stack = [(root, self)]
        while stack:
            node, owner = stack.pop()
            src = owner.src
            kind = node.type
            if kind == "variable_assignment":
                text = src[node.start_byte : min(node.end_byte, node.start_byte + 400)]
                m = re.match(r"[A-Za-z_][A-Za-z_0-9]*", text)
                if m:
                    names.add(m.group(0))
            elif (
                kind == "variable_name"
                and node.parent is not None
                and node.parent.type in ("declaration_command", "for_statement", "c_style_for_statement")
            ):
                names.add(src[node.start_byte : node.end_byte])
            elif kind == "command":
                words = [src[c.start_byte : c.end_byte] for c in node.children if c.type in ("command_name", "word")]
                if words and words[0] in ("read", "mapfile", "readarray", "getopts", "printf", "let"):
                    for w in words[1:]:
                        w = w.split("=", 1)[0].rstrip("+-*/")
                        if w.isidentifier():
                            names.add(w)
                if words and words[0] in self.functions:
                    body, body_owner = self.functions[words[0]]
                    if id(body) not in seen:
                        seen.add(id(body))
                        stack.append((body, body_owner))
            stack.extend((c, owner) for c in node.children)
        return names

    def _run(self, node) -> None:
        kind = node.type
        handler = getattr(self, f"_run_{kind}", None)
        if handler is not None:
            handler(node)
        elif kind == "ERROR":
            self.diag(Kind.SHELL_PARSE, node.start_byte, line=self.line_text(node.start_byte)[:80])
            self.run_block(node.children)
        elif kind in _LOOPS:
            self._run_loop(node)
        elif kind == "list" and self._run_and_or(node):
            pass
        elif kind == "subshell":
            try:
                self.run_block(node.children)
            except _Exit:
                pass  # `( ...; exit )` leaves the subshell only
        elif kind in ("compound_statement", "do_group", "list", "pipeline", "negated_command"):
            self.run_block(node.children)
        elif kind == "redirected_statement":
            self._placeholders(node)
            body = node.child_by_field_name("body")
            if body is not None:
                self.run(body)
            heredoc = next((c for c in node.children if c.type == "heredoc_redirect"), None)
            if heredoc is not None and heredoc.start_byte < self.consumed_until < node.end_byte:
                self._reread(self.consumed_until, node.end_byte)
        elif kind == "test_command":
            pass
        elif kind in ("case_statement",):
            self._run_case(node)
        else:
            self.consumed_until = max(self.consumed_until, node.end_byte)

    # assignments ---------------------------------------------------------------------------
    def _run_variable_assignment(self, node) -> None:
        self._assign_at(node.start_byte)

    def _run_variable_assignments(self, node) -> None:
        self.run_block(node.children)

    def _assign_at(self, start: int, *, exported: bool = False) -> str | None:
        """Interpret ``NAME=word``, ``NAME+=word``, ``NAME=(...)`` starting at ``start``."""
        src = self.src
        j = start
        while j < len(src) and (src[j].isalnum() or src[j] == "_"):
            j += 1
        name = src[start:j]
        index: str | None = None
        if j < len(src) and src[j] == "[":
            close = src.find("]", j)
            index = src[j + 1 : close]
            j = close + 1
        append = src.startswith("+=", j)
        j += 2 if append else 1
        origin = self.origin_at(start, self.line_text(start)[:60])
        if j < len(src) and src[j] == "(":
            items, end = self._array_literal(j + 1)
            self.consumed_until = max(self.consumed_until, end)
            old = self.vars.get(name)
            if name in self.assoc:
                self.vars[name] = self._assoc_literal(name, items, origin, old if append else None, exported)
                return name
            if append and old is not None:
                prev = old.items if old.items is not None else ((old.value,) if old.value else ())
                items = prev + items
            if (why := _array_too_large(items)) is not None:
                self.diag(Kind.SHELL_BOUND, start, text=f"${bounds.short(name, 60)}: {why}; its value is unknown")
                items = (Field((Seg(None, origin, f"${bounds.short(name, 60)} {why}"),), origin),)
            self.vars[name] = Var(name, origin, items=items, exported=exported or bool(old and old.exported))
            return name
        try:
            parts, end = shell_words.lex_word(src, j)
        except WordSyntaxError as exc:
            self._syntax(exc)
            self.vars[name] = self._unknown_var(name, origin, "a word bash cannot read")
            return name
        self.consumed_until = max(self.consumed_until, end)
        value = self.expand_scalar(parts, origin)
        old = self.vars.get(name)
        if index is not None and name in self.assoc:  # m[key]=v: the subscript is a string, not arithmetic
            self.vars[name] = self._assoc_element(name, index, value, origin, old, append, exported)
            return name
        if index is not None and index.strip() not in ("0",):
            if old is not None and old.items is not None:
                items = list(old.items)
            else:
                items = [old.value] if old is not None and old.value is not None else []
            k = self._index(index, origin, len(items), start)
            if isinstance(k, str):
                self.diag(
                    Kind.SHELL_BOUND,
                    start,
                    text=f"{bounds.short(name, 60)}[{bounds.short(index, 60)}]: {k}; the array is unknown",
                )
                self.vars[name] = self._unknown_var(name, origin, f"${{{bounds.short(name, 60)}[…]}}: {k}")
                return name
            while len(items) <= k:
                items.append(Field((), origin))
            items[k] = value
            self.vars[name] = Var(name, origin, items=tuple(items), exported=exported)
            return name
        if append and old is not None:
            prev = old.as_scalar() or Field((), origin)
            value = Field(prev.segs + value.segs, origin)
        self.vars[name] = Var(name, origin, value=value, exported=exported or bool(old and old.exported))
        return name

    def _subscript(self, index: str, origin: Origin) -> str | None:
        """The key of an associative array's ``m[KEY]`` / ``${m[KEY]}``: the word expanded as bash does (quotes
        removed, variables expanded, no arithmetic); None when it is not known."""
        if not re.search(r"[$`'\"\\]", index):
            return index
        try:
            parts, end = shell_words.lex_word(index, 0)
        except WordSyntaxError:
            return None
        return self.expand_scalar(parts, origin).text if end == len(index) else None

    def _assoc_element(self, name: str, index: str, value: Field, origin: Origin, old, append: bool, exported: bool):
        """``m[KEY]=value`` (``+=`` appends to the element) on an associative array."""
        old = _as_assoc(old)
        if old is not None and old.keys is None:
            return old  # the array is unknown already (set differently in two branches, ...): it stays so
        key = self._subscript(index, origin)
        if key is None:
            shown = f"${{{bounds.short(name, 60)}[{bounds.short(index, 60)}]}}"
            return self._unknown_var(name, origin, f"{shown}: the key is unknown (line {origin.line})")
        keys = list(old.keys or ()) if old is not None else []
        items = list(old.items or ()) if old is not None else []
        if key in keys:
            k = keys.index(key)
            items[k] = Field(items[k].segs + value.segs, origin) if append else value
        else:
            keys.append(key)
            items.append(value)
        was_exported = exported or bool(old and old.exported)
        return Var(name, origin, items=tuple(items), exported=was_exported, keys=tuple(keys))

    def _assoc_literal(self, name: str, items: tuple[Field, ...], origin: Origin, old, exported: bool) -> Var:
        """``declare -A m=([a]=1 ["b"]=2)``: each element names its key; anything else leaves the array unknown."""
        from shardcheck.inputs.launch import suffix_field

        var = old if old is not None and old.keys is not None else Var(name, origin, items=(), keys=())
        for item in items:
            m = re.match(r"\[([^\]\0]*)\](\+?)=", item.render("\0"))
            if m is None:
                return self._unknown_var(name, origin, f"${name}: an element without [key]= at line {origin.line}")
            var = self._assoc_element(
                name, m.group(1), suffix_field(item, m.end()), origin, var, bool(m.group(2)), exported
            )
        return replace(var, origin=origin)

    def _index(self, index: str, origin: Origin, length: int, offset: int) -> int | str:
        """An array subscript as bash evaluates it (arithmetic; negative counts from the end), or why not."""
        text = index.strip()
        if text.isascii() and text.isdigit() and len(text) < 10:
            k = int(text)
        else:
            parts, _ = shell_words.lex_arith_body(index, 0, len(index))
            seg = self._arith(Arith(parts, True, offset), origin)
            if seg.text is None:
                return f"the index is unknown ({seg.unknown})"
            k = int(seg.text)
            if k < 0:
                k += length
                if k < 0:
                    return "bad array subscript (bash would fail here)"
        if k >= bounds.ARRAY_ITEMS:
            return f"index {k} is past the {bounds.ARRAY_ITEMS:,} elements shardcheck keeps"
        return k

    def _array_literal(self, i: int) -> tuple[tuple[Field, ...], int]:
        src = self.src
        start = i - 1
        items: list[Field] = []
        n = len(src)
        while i < n:
            c = src[i]
            if c in " \t\n":
                i += 1
                continue
            if c == "\\" and i + 1 < n and src[i + 1] == "\n":
                i += 2
                continue
            if c == "#":
                i = src.find("\n", i)
                continue
            if c == ")":
                return tuple(items), i + 1
            try:
                parts, end = shell_words.lex_word(src, i, in_array=True)
            except WordSyntaxError as exc:
                self._syntax(exc)
                return tuple(items), n
            if end == i:  # a metacharacter bash would reject inside ( )
                i += 1
                continue
            origin = self.origin_at(i, _utf8(src[i : min(end, i + 80)]))
            if len(items) <= bounds.ARRAY_ITEMS:
                items.extend(self.expand(parts, origin))
            i = end
        self.diag(Kind.SHELL_SYNTAX, start, reason="array `(` is never closed")
        return tuple(items), n

    def _unknown_var(self, name: str, origin: Origin, reason: str) -> Var:
        return Var(name, origin, value=Field((Seg(None, origin, reason),), origin))

    def _run_declaration_command(self, node) -> None:
        keyword = node.children[0].type if node.children else ""
        exported = keyword == "export"
        flags = ""
        for child in node.children[1:]:
            if child.start_byte < self.consumed_until:
                continue
            if child.type == "variable_assignment":
                if "A" in flags:  # declare -A m=(...): its subscripts are strings
                    self.assoc.add(re.match(r"\w*", self.src[child.start_byte : child.end_byte]).group(0))
                self._assign_at(child.start_byte, exported=exported or "x" in flags)
            elif child.type == "variable_name":
                name = self.src[child.start_byte : child.end_byte]
                var = self.vars.get(name)
                if "A" in flags:
                    self.assoc.add(name)
                if var is not None:
                    self.vars[name] = replace(var, exported=True) if exported else var
                elif "a" in flags or "A" in flags:
                    keys = () if "A" in flags else None
                    self.vars[name] = Var(name, self.origin_at(child.start_byte), items=(), keys=keys)
            elif child.type == "word":
                text = self.src[child.start_byte : child.end_byte]
                if text.startswith("-"):
                    flags += text[1:]
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def _run_unset_command(self, node) -> None:
        for child in node.children[1:]:
            name = self.src[child.start_byte : child.end_byte]
            self.vars.pop(name, None)

    def _run_function_definition(self, node) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is not None and body is not None:
            self.functions[self.src[name_node.start_byte : name_node.end_byte]] = (body, self)
        self.consumed_until = max(self.consumed_until, node.end_byte)

    # control flow --------------------------------------------------------------------------
    def _run_if_statement(self, node) -> None:
        """Take the branch a known condition selects; merge the branches when it is not known."""
        branches: list[tuple[object | None, list]] = []  # (condition node, body nodes)
        cond = None
        body: list = []
        state = "cond"
        for child in node.children:
            t = child.type
            if t in ("if", "elif", "fi"):
                continue
            if t == "then":
                state = "body"
                continue
            if t == "elif_clause":
                branches.append((cond, body))
                cond, body = self._split_clause(child)
                continue
            if t == "else_clause":
                branches.append((cond, body))
                cond, body = None, [c for c in child.children if c.type != "else"]
                state = "else"
                continue
            if state == "cond":
                if child.is_named and child.type not in _NOT_STATEMENTS:
                    cond = child
            else:
                body.append(child)
        branches.append((cond, body))
        if state != "else":
            branches.append((None, []))  # implicit empty else
        self._run_branches(branches, node)

    def _split_clause(self, clause):
        cond = None
        body: list = []
        seen_then = False
        for c in clause.children:
            if c.type in ("elif",):
                continue
            if c.type == "then":
                seen_then = True
                continue
            if not seen_then:
                if c.is_named and c.type not in _NOT_STATEMENTS:
                    cond = c
            else:
                body.append(c)
        return cond, body

    def _run_branches(self, branches, node) -> None:
        candidates: list[list] = []
        undecided = []
        for cond, body in branches:
            verdict = True if cond is None else self.eval_condition(cond)
            if verdict is True:
                candidates.append(body)
                break
            if verdict is None:
                candidates.append(body)
                undecided.append(cond)
        if len(candidates) == 1:
            self.run_block(candidates[0])
        else:
            where = self.origin_at(node.start_byte)
            names = sorted({n for c in undecided for n in _VAR_REF.findall(self.src[c.start_byte : c.end_byte])})
            tests = (
                f"the variables it tests ({', '.join('$' + n for n in names)})" if names else "the variables it tests"
            )
            settles = next((o for o in (self._settles(c) for c in undecided) if o != "--env"), "--env")
            given = f"give {tests} with --env" if settles == "--env" else f"give {settles}"
            self._merge_runs(
                candidates,
                f"depends on the condition at line {where.line}, which is not known statically ({given})",
            )
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def _deciding(self, node) -> str:
        """The variables a condition or case subject reads, for "give them with --env"."""
        names = sorted(set(_VAR_REF.findall(self.src[node.start_byte : node.end_byte]))) if node is not None else []
        return f" (it reads {', '.join('$' + n for n in names)})" if names else ""

    def _word_text(self, node) -> str | None:
        """The value of one word node (quotes removed, variables expanded); None when not known."""
        try:
            parts, _ = shell_words.lex_word(self.src, node.start_byte, in_array=True)
        except WordSyntaxError:
            return None
        fields = self.expand(parts, self.origin_at(node.start_byte), split=False)
        return fields[0].text if fields else ""

    def _run_case(self, node) -> None:
        """``case WORD in PATTERN) ...;; esac``: the first item whose pattern matches a known subject runs;
        items before it whose patterns are not known, and every item when the subject is not known, are
        merged (a variable they set differently becomes unknown, naming what decides it)."""
        subject_node = node.child_by_field_name("value")
        items = [c for c in node.children if c.type == "case_item"]
        subject = self._word_text(subject_node) if subject_node is not None else None
        where = self.origin_at(node.start_byte)
        fallthrough = any(c.type in (";&", ";;&") for item in items for c in item.children)
        if subject is None or fallthrough:
            why = (
                f"depends on the case at line {where.line}, whose subject is not known"
                f"{self._deciding(subject_node)}; give it with {self._settles(subject_node)}"
                if subject is None
                else f"depends on the case at line {where.line}, whose ;& / ;;& fall-through is not evaluated"
            )
            self._merge_runs([self._case_body(item) for item in items] + [[]], why)
            self.consumed_until = max(self.consumed_until, node.end_byte)
            return
        candidates: list[list] = []
        for item in items:
            patterns = [c for i, c in enumerate(item.children) if item.field_name_for_child(i) == "value"]
            verdicts = [self._case_match(subject, p) for p in patterns]
            if True in verdicts:
                candidates.append(self._case_body(item))
                break
            if None in verdicts:
                candidates.append(self._case_body(item))
        else:
            candidates.append([])  # no pattern matched: nothing runs
        if len(candidates) == 1:
            self.run_block(candidates[0])
        else:
            self._merge_runs(candidates, f"depends on the case at line {where.line}, whose patterns are not all known")
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def _case_body(self, item) -> list:
        return [c for i, c in enumerate(item.children) if c.is_named and item.field_name_for_child(i) != "value"]

    def _case_match(self, subject: str, pattern_node) -> bool | None:
        pattern = self._word_text(pattern_node)
        if pattern is None:
            return None
        return fnmatch.fnmatchcase(subject, pattern)

    def _run_and_or(self, node) -> bool:
        """``[ c ] && x=a || x=b``: a list holding a test runs each part only when the status before it lets it
        (known test results, ``true`` / ``false`` / ``:`` and assignments, which succeed); a part behind an
        unknown status is merged with not running it. Lists without either are run whole, as before, except that
        an ``exit`` after ``||`` (``cd dir || exit 1``) does not end the reading. Returns whether it handled
        ``node``."""
        items: list[tuple[str | None, object]] = []

        def flatten(n, op):
            if n.type == "list":
                parts = [c for c in n.children if c.is_named and c.type not in _NOT_STATEMENTS]
                ops = [c.type for c in n.children if not c.is_named and c.type in ("&&", "||")]
                if len(parts) == 2 and len(ops) == 1:
                    flatten(parts[0], op)
                    items.append((ops[0], parts[1]))
                    return
            items.append((op, n))

        flatten(node, None)
        tests = {
            id(n)
            for _, n in items
            if n.type in ("test_command", "negated_command") or self._fixed_status(n) is not None or self._is_probe(n)
        }
        if not tests:
            if not any(op == "||" for op, _ in items):
                return False
            for op, part in items:
                if part.start_byte < self.consumed_until:
                    continue  # part of a word tree-sitter split in two (as run_block skips it)
                try:
                    self.run(part)
                except _Exit:
                    if op != "||":
                        raise
            self.consumed_until = max(self.consumed_until, node.end_byte)
            return True
        status: bool | None = True
        where = self.origin_at(node.start_byte)
        for op, part in items:
            runs = True if op is None else (status if op == "&&" else (None if status is None else not status))
            if runs is False:
                continue
            if id(part) in tests:
                verdict = self.eval_condition(part)
                status = verdict if runs is True else None
                continue
            if runs is None:
                self._merge_runs(
                    [[part], []],
                    f"depends on the test at line {where.line}, which is not known "
                    f"statically{self._deciding(node)}; give it with {self._settles(node)}",
                )
                status = None
                continue
            self.run(part)
            status = True if part.type in ("variable_assignment", "variable_assignments") else None
        self.consumed_until = max(self.consumed_until, node.end_byte)
        return True

    def _run_unknown_branches(self, node, items, what: str) -> None:
        bodies = [[c for c in item.children if c.is_named] for item in items] + [[]]
        where = self.origin_at(node.start_byte)
        self._merge_runs(bodies, f"depends on the {what} at line {where.line}, which is not evaluated")
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def _merge_runs(self, bodies: list[list], reason: str) -> None:
        """Run each body from the same state; a variable the bodies leave different becomes unknown."""
        start = dict(self.vars)
        outcomes: list[dict[str, Var]] = []
        saved_condition = self.condition
        self.condition = reason
        for body in bodies:
            self.vars = dict(start)
            saved = self.consumed_until
            try:
                self.run_block(body)
                outcomes.append(self.vars)
            except _Exit:
                pass  # this branch ends the script: what follows runs only after the others
            self.consumed_until = max(saved, self.consumed_until)
        self.condition = saved_condition
        if not outcomes:
            raise _Exit(self.origin_at(bodies[0][0].start_byte).location if bodies[0] else self.path)
        merged: dict[str, Var] = {}
        for name in set().union(*outcomes):
            versions = [o.get(name) for o in outcomes]
            first = versions[0]
            if all(_same_value(first, v) for v in versions[1:]):
                if first is not None:
                    merged[name] = first
                continue
            some = next(v for v in versions if v is not None)
            if all(v is not None and v.is_array and v.keys is None for v in versions):
                merged[name] = _merge_arrays(name, versions, f"${name} {reason}")
            else:
                merged[name] = self._unknown_var(name, some.origin, f"${name} {reason}")
        self.vars = merged

    def _run_loop(self, node) -> None:
        """Loops are not run: what their bodies assign becomes unknown; commands inside are kept. Argument
        loops (``while [[ $# -gt 0 ]]``, ``for a in "$@"``, getopts) are followed round by round (shell_args.py)."""
        if shell_args.run(self, node):
            return
        where = self.origin_at(node.start_byte)
        reason = f"is assigned in the loop at line {where.line}, which is not run"
        body = node.child_by_field_name("body")
        start = dict(self.vars)
        var_node = node.child_by_field_name("variable")
        if var_node is not None:
            name = self.src[var_node.start_byte : var_node.end_byte]
            self.vars[name] = self._unknown_var(name, where, f"${name} {reason}")
        saved_condition = self.condition
        self.condition = f"inside the loop at line {where.line}"
        cond = node.child_by_field_name("condition")
        never = (
            node.type == "while_statement"
            and cond is not None
            and self._fixed_status(cond) is (self.src[node.start_byte : node.start_byte + 5] == "until")
        )  # `while false` / `until true`: bash never runs the body
        if body is not None and not never:
            try:
                self.run_block(body.children)
            except _Exit:
                pass  # the loop may run no time: an `exit` in it does not end the reading
        self.condition = saved_condition
        after = self.vars
        self.vars = dict(start)
        for name, var in after.items():
            if not _same_value(start.get(name), var):
                self.vars[name] = self._unknown_var(name, var.origin, f"${name} {reason}")
        self.consumed_until = max(self.consumed_until, node.end_byte)

    def eval_condition(self, node) -> bool | None:
        """Evaluate a ``[ ... ]`` / ``[[ ... ]]`` test when its operands are known; None otherwise."""
        if node.type == "list":
            parts = [c for c in node.children if c.is_named and c.type not in _NOT_STATEMENTS]
            ops = [c.type for c in node.children if not c.is_named and c.type in ("&&", "||")]
            if len(parts) != 2 or len(ops) != 1:
                return None
            left, right = self.eval_condition(parts[0]), self.eval_condition(parts[1])
            if ops[0] == "&&":
                return False if False in (left, right) else (True if left and right else None)
            return True if True in (left, right) else (False if left is False and right is False else None)
        if node.type == "negated_command":
            inner = [c for c in node.children if c.is_named]
            verdict = self.eval_condition(inner[0]) if len(inner) == 1 else None
            return None if verdict is None else not verdict
        if node.type == "command" and (fixed := self._fixed_status(node)) is not None:
            return fixed
        if node.type == "compound_statement" and self.src.startswith("((", node.start_byte):
            return self._arith_condition(node)
        if node.type in ("compound_statement", "subshell"):  # `{ [ a ] || [ b ]; }` inside a condition
            inner = [c for c in node.children if c.is_named and c.type not in _NOT_STATEMENTS]
            return self.eval_condition(inner[0]) if len(inner) == 1 else None
        if node.type in ("command", "redirected_statement", "pipeline"):
            return self._probe_condition(node)
        if node.type != "test_command":
            return None
        text = self.src[node.start_byte : node.end_byte].strip()
        if text.startswith("[["):
            inner_start = node.start_byte + 2
            inner_end = node.end_byte - 2
        elif text.startswith("["):
            inner_start = node.start_byte + 1
            inner_end = node.end_byte - 1
        else:
            return None
        words: list[str | None] = []
        i = inner_start
        while i < inner_end:
            if self.src[i] in " \t\n\\":
                i += 1
                continue
            try:
                parts, end = shell_words.lex_word(self.src, i, in_array=True)
            except WordSyntaxError:
                return None
            if end == i:
                return None
            fields = self.expand(parts, self.origin_at(i), split=False)
            words.append(fields[0].text if fields else "")
            i = end
        return _test(words)

    def _fixed_status(self, node) -> bool | None:
        """The exit status of ``true`` / ``false`` / ``:`` (no arguments that could matter); None otherwise."""
        if node.type != "command" or node.child_by_field_name("name") is None:
            return None
        words = [c for c in node.children if c.is_named]
        if len(words) != 1 or any(c.type == "variable_assignment" for c in node.children):
            return None
        return _FIXED_STATUS.get(self.src[node.start_byte : node.end_byte].strip())

    def _arith_condition(self, node) -> bool | None:
        """``(( EXPR ))``: true when EXPR is known and not 0."""
        start, end = node.start_byte + 2, node.end_byte - 2
        if not self.src.startswith("))", end):
            return None
        parts, _ = shell_words.lex_arith_body(self.src, start, end)
        seg = self._arith(Arith(parts, True, start), self.origin_at(start))
        return None if seg.text is None else seg.text != "0"

    def _set_value(self, name: str) -> tuple[bool, str | None]:
        """Whether the script or --env sets ``name``, and its value (None: not known)."""
        var = self.vars.get(name)
        if var is not None:
            value = var.as_scalar()
            return True, value.text if value is not None else None
        given = self._lookup_env(name)
        return given is not None, given.text if given is not None else None

    def _is_probe(self, node) -> bool:
        """Whether a command of an ``&&`` / ``||`` list asks the machine (``python3 -c 'import torch_npu'``)."""
        if node.type not in ("command", "redirected_statement", "pipeline"):
            return False
        words = shell_probe.words_of(self.src[node.start_byte : node.end_byte])
        return bool(words) and shell_probe.condition(words, None) != "no"

    def _probe_condition(self, node) -> bool | None:
        """``if python3 -c 'import torch_npu' &>/dev/null; then``: a probe's status from the machine named."""
        words = shell_probe.words_of(self.src[node.start_byte : node.end_byte])
        verdict = shell_probe.condition(words, self.machine) if words else "no"
        return None if verdict == "no" else verdict

    def _settles(self, node) -> str:
        """The option that settles what ``node`` reads: ``--device`` (or devices-per-node) when an accelerator
        probe left it unknown, else ``--env``."""
        text = self.src[node.start_byte : node.end_byte] if node is not None else ""
        for name in sorted(set(_VAR_REF.findall(text))):
            value = self.vars[name].as_scalar() if name in self.vars else None
            for seg in value.unknowns if value is not None else ():
                if (option := shell_probe.settled_by(seg.unknown)) is not None:
                    return option
        if shell_probe.answer(text.strip(), None, 0) is not None:
            return "--device"
        words = shell_probe.words_of(text)
        return "--device" if words and shell_probe.condition(words, None) != "no" else "--env"

    # simple commands -----------------------------------------------------------------------
    def _run_command(self, node) -> None:
        redirects = ("file_redirect", "heredoc_redirect", "herestring_redirect")
        name_node = node.child_by_field_name("name")
        prefix = [
            c
            for c in node.children
            if c.type == "variable_assignment" and (name_node is None or c.start_byte < name_node.start_byte)
        ]
        saved = dict(self.vars)
        assigned: list[str] = []
        last_end = node.start_byte
        for c in prefix:
            if c.start_byte < self.consumed_until:
                continue
            var_name = self._assign_at(c.start_byte)
            if var_name is not None:
                assigned.append(var_name)
            last_end = self.consumed_until
        # The words left once the assignments took what they lex to (tree-sitter-bash #315 splits
        # `M=$A/$B` into an assignment and a "command" `B`).
        words = [
            c
            for c in node.children
            if c.is_named and c.start_byte >= self.consumed_until and c.type != "variable_assignment"
        ]
        if not any(c.type not in redirects for c in words):
            self.consumed_until = max(self.consumed_until, node.end_byte)
            return  # only assignments: they stay set in the shell
        gap = self.src[last_end : words[0].start_byte].replace("\\\n", "")
        env_prefix: list[tuple[str, Field]] = []
        if prefix and "\n" not in gap:  # NAME=v cmd: the assignments are the command's environment only
            for var_name in assigned:
                value = self.vars[var_name].as_scalar() if var_name in self.vars else None
                env_prefix.append((var_name, value or Field((), self.origin_at(node.start_byte))))
            self.vars = saved
        fields: list[Field] = []
        i = words[0].start_byte
        for c in words:
            if c.start_byte < i:
                continue
            if c.type in redirects:
                i = max(i, c.end_byte)
                continue
            fields.extend(self._word_fields(c.start_byte))
            i = max(i, self.consumed_until)
        self.consumed_until = max(self.consumed_until, node.end_byte, i)
        fields.extend(self._escaped_space(node))
        self._blank_after_continuation(node)
        self._placeholders(node)
        if fields:
            self._dispatch(fields, words[0], tuple(env_prefix))

    def _escaped_space(self, node) -> list[Field]:
        """``cmd a \\ # note``: the backslash escapes the space, not the newline; bash passes a ``' '`` word
        and the command ends at the comment (the lines below are commands of their own)."""
        end = node.end_byte
        line_end = self.src.find("\n", end)
        rest = self.src[end : line_end if line_end >= 0 else len(self.src)]
        m = re.match(r"[ \t]*\\ ", rest)
        if m is None:
            return []
        at = end + m.end() - 2
        origin = self.origin_at(at, "\\ ")
        self.diag(Kind.SHELL_CONTINUATION, at)
        return [Field((Seg(" ", origin),), origin)]

    def _blank_after_continuation(self, node) -> None:
        """``cmd a \\`` then a blank line: the backslash joins the blank line, which ends the command; the
        continuation-looking line after it (indented, an option, ``key=value``) runs as a command of its own."""
        m = re.compile(r"[ \t]*\\\n[ \t]*\n(?:[ \t]*\n)*([ \t]+\S|-|[\w.+~/]+=)").match(self.src, node.end_byte)
        if m is not None:
            after = self.origin_at(m.start(1)).line
            self.diag(Kind.SHELL_CONTINUATION, self.src.index("\\", node.end_byte), blank=True, next_line=after)

    def _placeholders(self, node) -> None:
        """``key=<your path>``: bash reads ``<`` and ``>`` as redirections. Before the end of the command that
        is a syntax error; otherwise the command fails opening the input file, before it starts."""
        for child in node.children:
            if child.type != "file_redirect" or not child.children or child.children[0].type != "<":
                continue
            line_end = self.src.find("\n", child.start_byte)
            line = self.src[child.start_byte : line_end if line_end >= 0 else len(self.src)]
            m = re.match(r"<([^<>|;&()\s](?:[^<>|;&()]*[^<>|;&()\s])?)>", line)
            if m is None:
                continue
            after = self.src[child.start_byte + m.end() :]
            ends = re.match(r"[ \t]*(\\\n[ \t]*)*(\n|$)", after) is not None and not re.match(
                r"[ \t]*\\\n[ \t]*\S", after
            )
            what = (
                f"bash: syntax error near unexpected token `newline' (`<{m.group(1)}>` reads as redirections)"
                if ends
                else f"`<{m.group(1)}>` reads as redirections (input from the file "
                f"`{m.group(1).split()[0]}`): bash fails to open it and never runs the command"
            )
            self.diag(Kind.SHELL_PLACEHOLDER, child.start_byte, what=what)

    def _word_fields(self, start: int) -> list[Field]:
        try:
            parts, end = shell_words.lex_word(self.src, start)
        except WordSyntaxError as exc:
            self._syntax(exc)
            reason = str(exc) if isinstance(exc, shell_words.WordTooDeep) else "a word bash cannot read"
            return [Field((Seg(None, self.origin_at(start), reason),), self.origin_at(start))]
        self.consumed_until = max(self.consumed_until, end)
        origin = self.origin_at(start, _utf8(self.src[start:end])[:80])
        return self.expand(parts, origin)

    def _dispatch(self, fields: list[Field], node, env_prefix) -> None:
        name = fields[0].text
        origin = self.origin_at(node.start_byte, self.line_text(node.start_byte)[:80])
        if name in ("source", "."):
            self._source(name, fields, node, env_prefix, origin)
            return
        if name == "eval":
            self._eval(fields, node, origin)
            return
        if self.loop_markers and name in ("break", "continue"):
            if len(fields) > 1 and fields[1].text != "1":  # `break 2`: out of loops this one does not follow
                raise shell_args.GiveUp(name)
            raise shell_args.LoopExit(name)
        if self.loop_markers and name == "exit":
            raise shell_args.GiveUp(name)
        if name == "exit":
            raise _Exit(origin.location, skips_launch=bool(_LAUNCHER_TEXT.search(self.src, node.end_byte)))
        if name in ("read", "mapfile", "readarray", "getopts", "printf", "let"):
            self._unknown_targets(name, fields, origin)
            return
        if name == "set":
            args = [f.text for f in fields[1:]]
            if "--" in args:
                self.positional = tuple(fields[1 + args.index("--") + 1 :])
                self.positional_why = None
            return
        if name == "shift":
            count = fields[1].text if len(fields) > 1 else "1"
            if count is None or not (count.isascii() and count.isdigit() and len(count) < 10):
                shown = fields[1].unknowns[0].unknown if count is None else f"`shift {bounds.short(count, 40)}`"
                self.positional_why = f"the script's arguments after the shift at line {origin.line} ({shown})"
                return
            self.positional = self.positional[int(count) :]
            return
        if name in self.functions:
            self._call_function(name, fields, origin)
            return
        if self._command_string(fields):
            return
        self.commands.append(Command(tuple(fields), origin, env_prefix, self.condition))

    def _command_string(self, fields: list[Field]) -> bool:
        """``bash -c "$CMD"`` (also behind ``srun``, ``nohup`` ...): the string is read as a script of its own
        (never run), each of its positions traced to where the string was written. False when ``fields`` is
        not such a command or the string is not known."""
        for k in range(len(fields) - 2):
            text = fields[k].text
            if text is None:
                continue  # `srun -N $NODES sh -c "$CMD"`: an unknown option value is no shell
            if text.rsplit("/", 1)[-1] in ("bash", "sh") and fields[k + 1].text == "-c":
                body = fields[k + 2]
                if body.text is None or len(self.sourcing) > 16:
                    return False
                child = self._string_shell(body.text, body.value_origin(0))
                child.vars = dict(self.vars)  # a shell of its own: what it sets stays there
                child.positional = tuple(fields[k + 4 :])  # bash -c STRING NAME ARGS...: $0 = NAME
                child.positional_why = None
                try:
                    child.run_block(child.tree.root_node.children)
                except _Exit:
                    pass  # the `bash -c` string ends; the script goes on
                return True
        return False

    def _string_shell(self, text: str, at: Origin) -> _StringInterpreter:
        """An interpreter for a command string (``bash -c``, ``eval``) sharing this one's functions and findings."""
        src, tree = _tree(text.encode(), self.path)
        child = _StringInterpreter(src, at, self)
        child.tree = tree
        child.vars, child.functions, child.positional = self.vars, self.functions, self.positional
        child.commands, child.diagnostics, child.condition = self.commands, self.diagnostics, self.condition
        return child

    def _eval(self, fields: list[Field], node, origin: Origin) -> None:
        """``eval ARGS``: bash joins the arguments with spaces and runs the result in this shell. The string is read
        as the commands it holds (never run). A part of it that is not known (``--master_addr $MASTER_ADDR`` with
        MASTER_ADDR not given) stands in it as an unquoted variable of unknown value, read as bash would read such
        a word: one word of unknown content (inside single quotes, the word it lands in is unknown). When the
        command's own name is not known, what it runs is unknown, with the line."""
        words = fields[1:]
        if not words:
            return
        holes: dict[str, Seg] = {}
        pieces: list[str] = []
        for seg in (s for k, f in enumerate(words) for s in ((Seg(" ", origin),) if k else ()) + f.segs):
            if seg.text is None:
                hole = f"{_HOLE}{len(holes)}"
                holes[hole] = seg
                pieces.append("${" + hole + "}")
            else:
                pieces.append(seg.text)
        before = len(self.commands)
        if len(self.sourcing) <= 16:
            child = self._string_shell("".join(pieces), words[0].value_origin(0))
            for hole, seg in holes.items():
                child.vars[hole] = Var(hole, seg.origin, value=Field((seg,), seg.origin))
            try:
                child.run_block(child.tree.root_node.children)
            finally:
                self.vars, self.functions = child.vars, child.functions
                for hole in holes:
                    self.vars.pop(hole, None)
                self._fill_holes(before, holes)
        named = any(c.fields and c.fields[0].known for c in self.commands[before:])
        if len(self.sourcing) > 16 or (holes and not named):
            self.diag(Kind.SHELL_EVAL, node.start_byte)
            self.unrun.append(
                f"{origin.location}: `eval` of a string that is not known: the command it runs is unknown"
            )

    def _fill_holes(self, start: int, holes: dict[str, Seg]) -> None:
        """A hole that landed inside single quotes of an eval'd string is text there: the word is unknown."""
        if not holes:
            return
        for k in range(start, len(self.commands)):
            command = self.commands[k]
            if any(_HOLE in (s.text or "") for f in command.fields for s in f.segs):
                fields = tuple(
                    Field((Seg(None, f.origin, "a part of an eval'd string that is not known"),), f.origin)
                    if any(_HOLE in (s.text or "") for s in f.segs)
                    else f
                    for f in command.fields
                )
                self.commands[k] = replace(command, fields=fields)
        for name, var in list(self.vars.items()):
            if any(_HOLE in (s.text or "") for f in (var.items or (var.value,)) if f is not None for s in f.segs):
                self.vars[name] = self._unknown_var(
                    name, var.origin, f"${name}: a part of an eval'd string is not known"
                )

    def _source(self, name: str, fields: list[Field], node, env_prefix, origin: Origin) -> None:
        """Read the sourced file in this shell: its assignments and commands count as the script's."""
        target = fields[1].text if len(fields) > 1 else None
        shown = bounds.short(fields[1].render(), 120) if len(fields) > 1 else ""
        why = None
        real = None
        if target is None:
            why = f"its path is unknown ({fields[1].unknowns[0].unknown})" if len(fields) > 1 else "it names no file"
        else:
            real = shell_source.resolve_source(target, self.real_path)
            if os.path.realpath(real) in {os.path.realpath(p) for p in self.sourcing}:
                why = "it is already being read (a file that sources itself)"
            elif len(self.sourcing) > bounds.SOURCE_DEPTH:
                why = f"sources are nested more than {bounds.SOURCE_DEPTH} deep"
            elif self.budget.sources >= bounds.SOURCE_FILES:
                why = f"more than {bounds.SOURCE_FILES} files were sourced already"
            elif files.is_regular(real):  # anything else: read_regular below says what it is
                why = read_policy.ReadPolicy(self.main.real_path.parent, self.allow_source).refusal(real)
        raw = None
        if why is None:
            try:
                raw = files.read_regular(real, limit=files.SCRIPT_LIMIT, what="")
                self.budget.sources += 1
            except files.UnreadableFile as exc:
                why = (
                    f"{bounds.short(str(real))} does not exist here"
                    if exc.reason == "no such file"
                    else f"it {exc.reason}"
                    if exc.reason.startswith("is ")
                    else exc.reason
                )
        tree = None
        if why is None:
            path = shell_source.shown_path(real, self.main.real_path, self.main.path)
            try:
                src, tree = _tree(raw, path)
            except InputError:
                why = "it holds a NUL byte: not a text file"
        if why is not None:
            self.unfollowed.append(f"`{name} {shown}` at {origin.location}")
            self.diag(Kind.SHELL_SOURCE, node.start_byte, command=name, target=shown, why=why)
            return
        child = _Interpreter(src, path, self.env, real_path=real, parent=self)
        child.vars, child.functions, child.positional = self.vars, self.functions, self.positional
        child.positional_why = self.positional_why
        child.commands, child.diagnostics, child.condition = self.commands, self.diagnostics, self.condition
        temporary = {k: self.vars.get(k) for k, _ in env_prefix}  # `A=1 source f`: A holds while f runs
        for k, value in env_prefix:
            child.vars[k] = Var(k, value.origin, value=value)
        try:
            child.run_block(tree.root_node.children)
        finally:  # an `exit` in the file ends the script: what it set before stays read
            self.vars, self.functions = child.vars, child.functions
        for k, old in temporary.items():
            if old is None:
                self.vars.pop(k, None)
            else:
                self.vars[k] = old

    def _unknown_targets(self, name: str, fields: list[Field], origin: Origin) -> None:
        texts = [f.text or "" for f in fields[1:]]
        if name == "printf" and len(texts) > 2 and texts[0] == "-v" and texts[1].isidentifier():
            values = fields[4:]  # fields: printf -v NAME FORMAT ARGS...
            text = None
            if (why := shell_source.printf_bound(texts[2], bounds.PRINTF_WIDTH)) is not None:
                self.diagnostics.append(
                    Problem(Kind.SHELL_BOUND, replace(origin, text=None), {"text": f"{why}; ${texts[1]} is unknown"})
                )
                self.vars[texts[1]] = self._unknown_var(texts[1], origin, f"{why} (line {origin.line})")
                return
            if fields[3].known and all(f.known for f in values):
                text = shell_source.printf_format(texts[2], [f.text for f in values])
                if text is not None and len(text) > bounds.VALUE_CHARS:
                    text = None
            if text is not None:
                self.vars[texts[1]] = Var(texts[1], origin, value=Field((Seg(text, origin),), origin))
                return
        targets: list[str] = []
        if name == "printf":
            if "-v" in texts:
                targets.append(texts[texts.index("-v") + 1] if texts.index("-v") + 1 < len(texts) else "")
        elif name == "let":
            targets = [t.split("=", 1)[0].rstrip("+-*/") for t in texts if "=" in t]
        else:
            targets = [t for t in texts if t and not t.startswith("-") and t.isidentifier()]
            if name == "getopts":
                targets = targets[1:2]
        for target in targets:
            if target:
                self.vars[target] = self._unknown_var(
                    target, origin, f"${target} is set by `{name}` at line {origin.line}, which is not run"
                )

    def uncalled_launchers(self) -> list[str]:
        """Functions whose body names a Python launcher and that are never called (bash never runs them)."""
        out = []
        for name, (body, owner) in self.functions.items():
            if name not in self.called and _LAUNCHER_TEXT.search(owner.src[body.start_byte : body.end_byte]):
                where = owner.origin_at(body.start_byte).location
                out.append(f"{where}: function {bounds.short(name, 60)}() holds a launch but is never called")
        return out

    def _call_function(self, name: str, fields: list[Field], origin: Origin) -> None:
        self.called.add(name)
        body, owner = self.functions[name]
        if owner is not self:  # defined in another file: its body's offsets are that file's
            owner.vars, owner.functions, owner.condition = self.vars, self.functions, self.condition
            owner._call_function(name, fields, origin)
            self.vars, self.functions = owner.vars, owner.functions
            return
        budget = self.budget
        why = None
        if budget.call_depth >= bounds.CALL_DEPTH:
            why = f"functions call functions more than {bounds.CALL_DEPTH} deep"
        elif budget.calls >= bounds.FUNCTION_CALLS:
            why = f"more than {bounds.FUNCTION_CALLS:,} function calls were followed already"
        elif budget.steps >= bounds.STEPS:
            why = f"more than {bounds.STEPS:,} statements were read already"
        if why is not None:
            names = budget.assigned.get(id(body))
            if names is None:
                names = budget.assigned[id(body)] = self._assigned_names(body)
            saved_consumed = self.consumed_until
            if (name, why) not in budget.said:  # once per function and reason, not at every call past the bound
                budget.said.add((name, why))
                self.diagnostics.append(
                    Problem(
                        Kind.SHELL_BOUND,
                        replace(origin, text=None),
                        {
                            "text": f"the call of {bounds.short(name, 60)}() is not followed: {why}; "
                            "variables it sets are unknown"
                        },
                    )
                )
            for var_name in names:
                old = self.vars.get(var_name)
                self.vars[var_name] = self._unknown_var(
                    var_name,
                    old.origin if old else origin,
                    f"${var_name} is set by {bounds.short(name, 60)}() at line "
                    f"{origin.line}, which is not followed ({why})",
                )
            self.consumed_until = saved_consumed
            return
        budget.calls += 1
        budget.call_depth += 1
        try:
            self._run_function(name, body, fields, origin)
        finally:
            budget.call_depth -= 1

    def _run_function(self, name: str, body, fields: list[Field], origin: Origin) -> None:
        saved_positional, saved_why = self.positional, self.positional_why
        self.positional_why = None
        saved_consumed = self.consumed_until
        self.positional = tuple(fields[1:])
        self.consumed_until = 0
        start = dict(self.vars)
        saved_condition = self.condition
        self.condition = self.condition or f"inside function {name}() called at line {origin.line}"
        try:
            self.run_block(body.children)
        finally:
            self.condition = saved_condition
            self.positional = saved_positional
        after = self.vars
        self.vars = dict(start)
        reason = f"is assigned by function {name}() called at line {origin.line}, which is not run"
        for var_name, var in after.items():
            if not _same_value(start.get(var_name), var):
                self.vars[var_name] = self._unknown_var(var_name, var.origin, f"${var_name} {reason}")
        self.positional, self.positional_why = saved_positional, saved_why
        self.consumed_until = saved_consumed

    def _syntax(self, exc: WordSyntaxError) -> None:
        if isinstance(exc, shell_words.WordTooDeep):
            self.diag(Kind.SHELL_BOUND, exc.offset, text=f"a word with {exc}; its value is unknown")
            return
        self.diag(Kind.SHELL_SYNTAX, exc.offset, reason=str(exc))

    # -- expansion --------------------------------------------------------------------------
    def _too_large(self, chars: int, origin: Origin) -> Field | None:
        """None while ``chars`` more characters fit one value and the reading's budget; else the unknown."""
        if chars > bounds.VALUE_CHARS:
            why = f"the value grows past {bounds.VALUE_CHARS:,} characters, shardcheck's bound"
        elif self.budget.chars + chars > bounds.TEXT_BUDGET:
            why = f"the script's values grow past {bounds.TEXT_BUDGET:,} characters in all, shardcheck's bound"
            if self.budget.exhausted:
                return Field((Seg(None, origin, f"{why} (line {origin.line})"),), origin)
            self.budget.exhausted = True
        else:
            return None
        self.diagnostics.append(
            Problem(Kind.SHELL_BOUND, replace(origin, text=None), {"text": f"{why}; the value here is unknown"})
        )
        return Field((Seg(None, origin, f"{why} (line {origin.line})"),), origin)

    def expand_scalar(self, parts: tuple, origin: Origin) -> Field:
        """Expand an assignment's value: no field splitting, no globbing (bash rules)."""
        segs: list[Seg] = []
        chars = 0
        for piece in self._pieces(parts, origin, assignment=True):
            if piece is _BREAK:
                new = [Seg(" ", origin)]
            elif isinstance(piece, _Item):
                new = piece.segs
            else:
                new = piece[0]
            segs.extend(new)
            chars += _cost(new)
            if (unknown := self._too_large(chars, origin)) is not None:
                return unknown
        self.budget.chars += chars
        return Field(tuple(_merge_literals(segs, origin)), origin)

    def expand(self, parts: tuple, origin: Origin, *, split: bool = True) -> list[Field]:
        """Expand a command word into the fields a command would receive."""
        fields: list[Field] = []
        current: list[Seg] = []
        have = False
        item_origin: Origin | None = None  # set while the field is exactly one array element
        chars = 0
        for piece in self._pieces(parts, origin, assignment=False):
            chars += 1 if piece is _BREAK else _cost(piece.segs if isinstance(piece, _Item) else piece[0])
            if (unknown := self._too_large(chars, origin)) is not None:
                return [unknown]
            if piece is _BREAK:
                if current or have:
                    fields.append(Field(tuple(_merge_literals(current, origin)), item_origin or origin))
                current, have, item_origin = [], False, None
                continue
            if isinstance(piece, _Item):
                item_origin = piece.origin.with_via(origin) if not current and not have else None
                piece = (piece.segs, False, True)
            elif piece[0]:
                item_origin = None
            segs, splittable, quoted = piece
            have = have or quoted
            if not (split and splittable):
                current.extend(segs)
                continue
            for seg in segs:
                if seg.text is None:
                    current.append(seg)
                    continue
                words = seg.text.split()
                if not words:
                    if seg.text and (current or have):
                        fields.append(Field(tuple(_merge_literals(current, origin)), origin))
                        current, have = [], False
                    continue
                if seg.text[0] in _IFS and (current or have):
                    fields.append(Field(tuple(_merge_literals(current, origin)), origin))
                    current, have = [], False
                for k, w in enumerate(words):
                    if k > 0:
                        fields.append(Field(tuple(_merge_literals(current, origin)), origin))
                        current, have = [], False
                    current.append(Seg(w, seg.origin))
                if seg.text[-1] in _IFS:
                    fields.append(Field(tuple(_merge_literals(current, origin)), origin))
                    current, have = [], False
        if current or have:
            fields.append(Field(tuple(_merge_literals(current, origin)), item_origin or origin))
        self.budget.chars += chars
        return fields

    def _pieces(self, parts: tuple, origin: Origin, *, assignment: bool):
        """Yield (segments, splittable, quoted) per part, or _BREAK between array elements."""
        for part in parts:
            if isinstance(part, Lit):
                yield [Seg(_utf8(part.text), origin)], False, part.quoted
            elif isinstance(part, Glob):
                yield [Seg(part.text, origin)], False, False
            elif isinstance(part, Tilde):
                home = self._lookup_env("HOME") if not part.user else None
                if home is not None:
                    yield list(home.segs), False, False
                else:
                    who = f"~{part.user}"
                    yield (
                        [Seg(None, origin, f"{who} (the home directory on the launch machine); pass --env HOME=...")],
                        False,
                        False,
                    )
            elif isinstance(part, Opaque) and (which := shell_source.script_dir_substitution(part.text)):
                real = (self.main if which == "main" else self).real_path
                note = Origin(
                    kind="script",
                    path=origin.path,
                    line=origin.line,
                    column=origin.column,
                    text=f"{_utf8(part.text)[:40]}: the directory of {real.name}, not run",
                )
                yield [Seg(str(real.parent), note)], not part.quoted, part.quoted
            elif isinstance(part, Opaque) and (path := self._path_substitution(part.text, origin)) is not None:
                yield [path], not part.quoted, part.quoted
            elif isinstance(part, Opaque) and (
                probe := shell_probe.answer(part.text, self.machine, origin.line, self._set_value)
            ):
                note = replace(origin, text=probe.note)
                seg = Seg(probe.text, note) if probe.text is not None else Seg(None, note, probe.note)
                yield [seg], not part.quoted, part.quoted
            elif isinstance(part, Opaque):
                yield (
                    [Seg(None, origin, f"{_utf8(part.text)[:40]} at line {origin.line} is not run")],
                    not part.quoted,
                    part.quoted,
                )
            elif isinstance(part, Arith):
                yield [self._arith(part, origin)], not part.quoted, part.quoted
            elif isinstance(part, Param):
                yield from self._param(part, origin, assignment=assignment)

    def _path_substitution(self, text: str, origin: Origin) -> Seg | None:
        """``$(cd "${SCRIPT_DIR}/../.." && pwd)``, ``$(dirname "$X")``, ``$(git rev-parse --show-toplevel)``: the
        path they print, computed from the word (never run); None when the word is not known or, for ``cd``, not
        absolute (relative to a working directory the script does not show)."""
        found = shell_source.path_substitution(text)
        if found is None:
            return None
        kind, word = found
        if kind == "git-top":
            top = read_policy.repository_root(self.main.real_path.parent)
            value = str(top) if top is not None else None
            what = f"the repository root of {self.main.real_path.name}"
        else:
            try:
                parts, end = shell_words.lex_word(word, 0)
            except WordSyntaxError:
                return None
            if end != len(word):
                return None
            arg = self.expand_scalar(parts, origin).text
            if arg is None or (kind == "cd" and not arg.startswith("/")):
                return None
            value = os.path.normpath(arg) if kind == "cd" else shell_source.dirname(arg)
            what = f"{bounds.short(value, 60)}"
        if value is None:
            return None
        note = replace(origin, text=f"{_utf8(text)[:40]}: {what}, not run")
        return Seg(value, note)

    def _arith(self, part: Arith, origin: Origin) -> Seg:
        body = self.expand_scalar(part.parts, origin)
        if not body.known:
            return Seg(None, origin, body.unknowns[0].unknown)
        used: list[Origin] = []

        def lookup(name: str) -> str | None:
            var = self.vars.get(name)
            if var is None:
                env_field = self._lookup_env(name)
                if env_field is None:
                    return None
                used.append(env_field.segs[0].origin if env_field.segs else origin)
                return env_field.text
            value = var.as_scalar()
            if value is None or not value.known:
                return None
            used.append(var.origin)
            return value.text

        seg_origins = tuple(s.origin for s in body.segs if s.origin != origin)
        try:
            value = shell_arith.evaluate(body.text or "", lookup)
        except shell_arith.ArithUnknown as exc:
            name = str(exc)
            var = self.vars.get(name)
            reason = (
                var.as_scalar().unknowns[0].unknown
                if var and var.as_scalar() and var.as_scalar().unknowns
                else f"${name} is not set in the script; pass --env {name}=..."
            )
            return Seg(None, origin, reason)
        except shell_arith.ArithError as exc:
            self.diag(Kind.SHELL_ARITH, part.offset, expression=bounds.short(body.text or "", 80), reason=str(exc))
            return Seg(None, origin, f"$(({bounds.short(body.text or '', 80)})) is not valid arithmetic")
        except shell_arith.ArithBound as exc:
            why = f"$(({bounds.short(body.text or '', 80)})): {exc}"
            self.diagnostics.append(
                Problem(Kind.SHELL_BOUND, replace(origin, text=None), {"text": f"{why}; its value is unknown"})
            )
            return Seg(None, origin, f"{why} (line {origin.line})")
        return Seg(str(value), origin.with_via(*seg_origins, *used))

    def _lookup_env(self, name: str) -> Field | None:
        self.env_read.add(name)
        if name in self.env:
            o = Origin(kind="env", text=f"--env {name}={self.env[name]}")
            return Field((Seg(self.env[name], o),), o)
        if (value := shell_probe.env_answer(name, self.machine)) is not None:
            o = Origin(kind="env", text=f"${name}: set by the scheduler, answered by {self.machine.said}")
            return Field((Seg(value, o),), o)
        return None

    def _get(self, name: str, index: str | None, origin: Origin):
        """Return ('scalar', Field) / ('array', [Field]) / raise _Unset."""
        if self.budget.call_depth == 0 and (
            name in ("@", "*", "#") or (name.isascii() and name.isdigit() and name != "0")
        ):
            self.main.reads_args = True  # the script's own arguments (a function's are its own)
        if self.positional_why is not None and (name in ("@", "*", "#") or (name.isascii() and name.isdigit())):
            if name != "0":
                unknown = Field((Seg(None, origin, f"${name}: {self.positional_why} are not known"),), origin)
                return ("array", [unknown]) if name in ("@", "*") else ("scalar", unknown)
        if name in ("@", "*"):
            return "array", list(self.positional)
        if name.isascii() and name.isdigit():
            k = int(name)
            if k == 0:
                return "scalar", Field((Seg(self.main.path, origin),), origin)
            if k <= len(self.positional):
                return "scalar", self.positional[k - 1]
            raise _Unset
        if name == "#":
            return "scalar", Field((Seg(str(len(self.positional)), origin),), origin)
        if name in "?$!-" or name in ("RANDOM", "SECONDS", "LINENO", "PPID", "BASHPID"):
            return "scalar", Field((Seg(None, origin, f"${name} is only known at run time"),), origin)
        if name == "BASH_SOURCE":
            return "scalar", Field((Seg(self.path, origin),), origin)
        var = self.vars.get(name)
        if var is None:
            env_field = self._lookup_env(name)
            if env_field is None:
                raise _Unset
            return "scalar", env_field
        if name in self.assoc and index not in ("@", "*"):
            return self._assoc_get(var, index, origin)
        if var.items is not None:
            if index in ("@", "*"):
                return "array", list(var.items)
            k = 0
            if index is not None:
                try:
                    k = int(index)
                except ValueError:
                    return "scalar", Field((Seg(None, origin, f"${{{name}[{index}]}} not evaluated"),), origin)
            if k < 0:
                k += len(var.items)
                if k < 0:
                    why = f"${{{bounds.short(name, 60)}[{index}]}}: bad array subscript (bash would fail here)"
                    return "scalar", Field((Seg(None, origin, why),), origin)
            if k < len(var.items):
                return "scalar", var.items[k]
            raise _Unset
        if index in ("@", "*"):
            return "array", [var.value] if var.value is not None else []
        if index not in (None, "0"):
            raise _Unset
        return "scalar", var.value

    def _assoc_get(self, var: Var, index: str | None, origin: Origin):
        """``${m[KEY]}`` (``$m`` is ``${m[0]}``) of an associative array, or raise _Unset."""
        var = _as_assoc(var)
        if var.keys is None:
            return "scalar", var.as_scalar()  # unknown as a whole: the reason is the array's
        key = "0" if index is None else self._subscript(index, origin)
        if key is None:
            return "scalar", Field((Seg(None, origin, f"${{{var.name}[{index}]}}: the key is unknown"),), origin)
        if key not in var.keys:
            raise _Unset
        return "scalar", var.items[var.keys.index(key)]

    def _param(self, part: Param, origin: Origin, *, assignment: bool):
        name, op = part.name, part.op
        splittable = not part.quoted and not assignment
        try:
            kind, value = self._get(name, part.index, origin)
            is_set = True
        except _Unset:
            kind, value, is_set = "scalar", None, False
        var = self.vars.get(name)
        if var is not None and var.keys is not None and part.index in ("@", "*") and op in (None, "indirect"):
            if len(var.keys) > 1:  # bash lists an associative array in its hash table's order
                why = f"the order of ${{{'!' if op else ''}{name}[@]}} is bash's hash order, not evaluated"
                yield [Seg(None, origin, why)], splittable, part.quoted
                return
            if op == "indirect":
                yield from self._pieces(tuple(Lit(k, True, part.offset) for k in var.keys), origin, assignment=True)
                return
        if op == "indirect":
            yield [Seg(None, origin, f"${{!{name}}} (indirect expansion) is not evaluated")], splittable, part.quoted
            return
        if op == "len":
            if not is_set:
                yield [Seg(None, origin, self._unset_reason(name))], False, part.quoted
            elif kind == "array" and part.index in ("@", "*"):
                yield [Seg(str(len(value)), origin)], False, part.quoted
            elif value is not None and value.known:
                yield [Seg(str(len(value.text)), origin)], False, part.quoted
            else:
                yield [Seg(None, origin, f"length of ${name}: its value is unknown")], False, part.quoted
            return
        empty = is_set and kind == "scalar" and value is not None and value.known and value.text == ""
        null = empty or (is_set and kind == "array" and not value)
        if op in (":-", "-", ":=", "=", ":?", "?"):
            use_default = (not is_set) or (op.startswith(":") and null)
            if is_set and value is not None and kind == "scalar" and not value.known and op.startswith(":"):
                use_default = False  # unknown value: cannot tell whether it is empty; keep unknown
            if use_default:
                if op in ("?", ":?"):
                    yield (
                        [Seg(None, origin, f"${{{name}{op}}}: {name} is not set, bash would stop here")],
                        False,
                        part.quoted,
                    )
                    return
                default = self.expand_scalar(part.arg or (), origin)
                if not is_set and default.known:
                    note = Origin(
                        kind="script",
                        path=origin.path,
                        line=origin.line,
                        column=origin.column,
                        text=f"default of ${{{name}{op}…}}; environment {name} not given",
                    )
                    default = Field(
                        tuple(Seg(s.text, note if s.origin == origin else s.origin, s.unknown) for s in default.segs),
                        origin,
                    )
                if op in (":=", "="):
                    self.vars[name] = Var(name, origin, value=default)
                if part.quoted or assignment:
                    yield list(default.segs), False, part.quoted
                else:
                    yield from self._pieces(part.arg or (), origin, assignment=False)
                return
        elif op in (":+", "+"):
            use_alt = is_set and not (op == ":+" and null)
            if is_set and kind == "scalar" and value is not None and not value.known:
                yield [Seg(None, origin, f"${{{name}{op}…}}: whether {name} is empty is unknown")], False, part.quoted
                return
            if use_alt:
                yield from self._pieces(part.arg or (), origin, assignment=assignment)
            else:
                yield [], False, part.quoted
            return
        if not is_set:
            if name in ("@", "*"):
                return
            if self.loop_markers and name.isascii() and name.isdigit():
                yield [], splittable, part.quoted  # in an argument loop the count is known: past it, $N is empty
                return
            yield [Seg(None, origin, self._unset_reason(name))], splittable, part.quoted
            return
        if kind == "array":
            if part.quoted and name != "*" and part.index != "*":
                for k, item in enumerate(value):
                    if k > 0:
                        yield _BREAK
                    yield _Item(self._apply_op(op, part, item, origin), item.origin)
            else:
                for k, item in enumerate(value):
                    if k > 0:
                        yield [Seg(" ", origin)], True, False
                    yield self._apply_op(op, part, item, origin), splittable, part.quoted
            return
        yield self._apply_op(op, part, value, origin), splittable, part.quoted

    def _apply_op(self, op: str | None, part: Param, value: Field, origin: Origin) -> list[Seg]:
        """Apply a pattern operator (``#``, ``%``, ``/``, case) to a known value."""
        if op is None or op in (":-", "-", ":=", "=", ":?", "?"):
            return list(value.segs)
        if not value.known:
            return [Seg(None, origin, value.unknowns[0].unknown)]
        text = value.text or ""
        pattern_field = self.expand_scalar(part.arg or (), origin)
        if not pattern_field.known:
            return [Seg(None, origin, pattern_field.unknowns[0].unknown)]
        pattern = pattern_field.text or ""
        new_origin = value.segs[0].origin if len(value.segs) == 1 else origin
        if op in ("#", "##", "%", "%%"):
            cut = _strip(text, pattern, op)
            if cut is None:
                why = (
                    f"${{{bounds.short(part.name, 60)}{op}…}} on a value of {len(text):,} characters is past "
                    "shardcheck's bound for pattern matching"
                )
                self.diagnostics.append(
                    Problem(Kind.SHELL_BOUND, replace(origin, text=None), {"text": f"{why}; its value is unknown"})
                )
                return [Seg(None, origin, why)]
            return [Seg(cut, new_origin)]
        if op in ("/", "//") and "/" not in pattern and not any(ch in pattern for ch in "*?["):
            return _replace(text, pattern, "", op, new_origin, origin)
        if op in ("/", "//"):
            before, after = _split_at_slash(part.arg or ())
            old_field = self.expand_scalar(before, origin)
            new_field = self.expand_scalar(after, origin)
            if not (old_field.known and new_field.known):
                return [Seg(None, origin, (old_field.unknowns or new_field.unknowns)[0].unknown)]
            old, new = old_field.text or "", new_field.text or ""
            if not any(ch in old for ch in "*?["):
                return _replace(text, old, new, op, new_origin, origin)
        if op == "^^":
            return [Seg(text.upper(), new_origin)]
        if op == ",,":
            return [Seg(text.lower(), new_origin)]
        if op == "^":
            return [Seg(text[:1].upper() + text[1:], new_origin)]
        if op == ",":
            return [Seg(text[:1].lower() + text[1:], new_origin)]
        if op == ":":
            spec = pattern.split(":")
            try:
                off = int(spec[0]) if spec[0].strip() else 0
                length = int(spec[1]) if len(spec) > 1 else None
            except ValueError:
                return [Seg(None, origin, f"${{{part.name}:{pattern}}} not evaluated")]
            sliced = text[off:] if length is None else text[off : (off + length if length >= 0 else len(text) + length)]
            return [Seg(sliced, new_origin)]
        return [Seg(None, origin, f"${{{part.name}{op}…}} not evaluated")]

    def _unset_reason(self, name: str) -> str:
        if name.isascii() and name.isdigit():
            return f"${name} is a script argument, not given (give the arguments after --: check run.sh -- ARGS)"
        if name in shell_probe.ENV_PROBES:
            setting = shell_probe.ENV_PROBES[name].replace("_", "-")
            return f"${name} is set by the scheduler; set {setting} in [tool.shardcheck] or pass --env {name}=..."
        if self.unfollowed:
            return (
                f"${name} is not set in the script (it may come from {self.unfollowed[0]}, which was not "
                f"followed); pass --env {name}=..."
            )
        return f"${name} is not set in the script; pass --env {name}=..."


_BREAK = object()


def _split_at_slash(parts: tuple) -> tuple[tuple, tuple]:
    """The parts of ``${x/old/new}``'s word before and after its first unquoted ``/``."""
    for k, p in enumerate(parts):
        if isinstance(p, Lit) and "/" in p.text:
            head, _, tail = p.text.partition("/")
            before = parts[:k] + ((Lit(head, False, p.offset),) if head else ())
            after = ((Lit(tail, False, p.offset + len(head) + 1),) if tail else ()) + parts[k + 1 :]
            return before, after
    return parts, ()


def _strip(text: str, pattern: str, op: str) -> str | None:
    """``${x#p}`` / ``##`` / ``%`` / ``%%``: ``text`` without the shortest or longest prefix or suffix that
    matches the glob ``pattern``; None when that would take more than PATTERN_WORK characters of matching."""
    if not any(ch in pattern for ch in "*?["):  # a literal: no search at all
        if op.startswith("#"):
            return text.removeprefix(pattern)
        return text[: len(text) - len(pattern)] if pattern and text.endswith(pattern) else text
    matcher = re.compile(fnmatch.translate(pattern), re.DOTALL)
    n = len(text)
    work = 0
    if op in ("#", "##"):
        for k in range(n + 1) if op == "#" else range(n, -1, -1):
            work += k + 1
            if work > bounds.PATTERN_WORK:
                return None
            if matcher.fullmatch(text, 0, k):
                return text[k:]
        return text
    for k in range(n, -1, -1) if op == "%" else range(n + 1):
        work += n - k + 1
        if work > bounds.PATTERN_WORK:
            return None
        if matcher.fullmatch(text, k):
            return text[:k]
    return text


def _replace(text: str, old: str, new: str, op: str, new_origin: Origin, origin: Origin) -> list[Seg]:
    """``${x/old/new}`` / ``${x//old/new}`` with a literal ``old`` (an empty one changes nothing, as in bash)."""
    if not old:
        return [Seg(text, new_origin)]
    count = text.count(old) if op == "//" else min(1, text.count(old))
    if len(text) + count * (len(new) - len(old)) > bounds.VALUE_CHARS:
        return [
            Seg(
                None,
                origin,
                f"the replacement grows the value past {bounds.VALUE_CHARS:,} characters, shardcheck's bound",
            )
        ]
    return [Seg(text.replace(old, new, -1 if op == "//" else 1), new_origin)]


def _cost(segs) -> int:
    """What segments count for against the bounds: their characters and a little for each piece."""
    return sum(len(s.text) if s.text is not None else 1 for s in segs) + bounds.SEG_COST * len(segs)


def _field_chars(field: Field) -> int:
    return sum(len(s.text) if s.text is not None else 1 for s in field.segs)


def _array_too_large(items: tuple[Field, ...]) -> str | None:
    if len(items) > bounds.ARRAY_ITEMS:
        return f"has more than {bounds.ARRAY_ITEMS:,} elements, past shardcheck's bound"
    if sum(_field_chars(f) for f in items) > bounds.VALUE_CHARS:
        return f"holds more than {bounds.VALUE_CHARS:,} characters, past shardcheck's bound"
    return None


@dataclass(frozen=True, slots=True)
class _Item:
    """One element of a quoted ``"${A[@]}"`` expansion: it becomes a field of its own."""

    segs: list
    origin: Origin


class _StringInterpreter(_Interpreter):
    """A command string run by ``bash -c`` or ``eval``: read like a script; every position is where the string was
    written."""

    def __init__(self, src: str, at: Origin, parent: _Interpreter) -> None:
        super().__init__(src, parent.path, parent.env, real_path=parent.real_path, parent=parent)
        self.at = at
        self.tree = None

    def origin_at(self, offset: int, text: str | None = None) -> Origin:
        return Origin(kind="script", path=self.at.path, line=self.at.line, column=self.at.column, text=text)


def _merge_literals(segs: list[Seg], origin: Origin) -> list[Seg]:
    """Join neighbouring known segments of the same origin (keeps fields small)."""
    out: list[Seg] = []
    for seg in segs:
        if out and seg.text is not None and out[-1].text is not None and out[-1].origin == seg.origin:
            out[-1] = Seg(out[-1].text + seg.text, seg.origin)
        elif seg.text == "" and seg.origin == origin:
            continue
        else:
            out.append(seg)
    return out


def _merge_arrays(name: str, versions: list[Var], reason: str) -> Var:
    """Branches that leave an array different: the elements all of them share (a common prefix)
    stay known; the rest is one element of unknown content (which may stand for none or several)."""
    prefix: list[Field] = []
    for items in zip(*(v.items for v in versions)):
        if not all(_same_field(items[0], other) for other in items[1:]):
            break
        prefix.append(items[0])
    first = versions[0]
    origin = next((v.origin for v in versions if len(v.items) > len(prefix)), first.origin)
    tail = Field((Seg(None, origin, reason),), origin)
    return Var(name, origin, items=tuple(prefix) + (tail,), exported=first.exported)


def _as_assoc(var: Var | None) -> Var | None:
    """``var`` as an associative array: a known scalar is its element ``0`` (bash converts it so on ``declare
    -A``); an empty indexed array has no elements; anything else (unknown, indexed with elements) is unknown."""
    if var is None or var.keys is not None:
        return var
    if var.items == ():
        return replace(var, keys=())
    scalar = var.as_scalar()
    if var.items is None and scalar is not None and scalar.known:
        return replace(var, value=None, items=(scalar,), keys=("0",))
    why = f"${var.name} was not an associative array before `declare -A`"
    return (
        var if var.items is None else Var(var.name, var.origin, value=Field((Seg(None, var.origin, why),), var.origin))
    )


def _same_value(a: Var | None, b: Var | None) -> bool:
    """Whether two versions of a variable hold the same value (unknown parts included)."""
    if a is b:
        return True
    if a is None or b is None or a.is_array != b.is_array:
        return False
    if a.is_array:
        return (
            a.keys == b.keys
            and len(a.items) == len(b.items)
            and all(_same_field(x, y) for x, y in zip(a.items, b.items))
        )
    return _same_field(a.as_scalar(), b.as_scalar())


def _same_field(x: Field | None, y: Field | None) -> bool:
    if x is None or y is None:
        return x is y
    if x.known and y.known:
        return x.text == y.text
    return x.segs == y.segs


def _test(words: list[str | None]) -> bool | None:
    """Evaluate the words of a test expression (``test``/``[``/``[[``) when all are known."""
    if any(w is None for w in words):
        return None
    if words and words[0] == "!":
        inner = _test(words[1:])
        return None if inner is None else not inner
    for joiner in ("||", "-o", "&&", "-a"):
        if joiner in words and len(words) > 3:
            k = words.index(joiner)
            left, right = _test(words[:k]), _test(words[k + 1 :])
            if left is None or right is None:
                return None
            return (left or right) if joiner in ("||", "-o") else (left and right)
    if len(words) == 1:
        return words[0] != ""
    if len(words) == 2:
        op, arg = words
        if op == "-n":
            return arg != ""
        if op == "-z":
            return arg == ""
        return None  # file tests etc. depend on the launch machine
    if len(words) == 3:
        a, op, b = words
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(a, b)
        if op == "!=":
            return not fnmatch.fnmatchcase(a, b)
        ints = {
            "-eq": int.__eq__,
            "-ne": int.__ne__,
            "-lt": int.__lt__,
            "-le": int.__le__,
            "-gt": int.__gt__,
            "-ge": int.__ge__,
        }
        if op in ints:
            try:
                return ints[op](int(a), int(b))
            except ValueError:
                return None
    return None
