"""What a static reading can know about ``source FILE``, ``$(dirname "$0")`` and ``printf -v``.

Nothing here runs anything: the script's own directory is known because shardcheck is reading the
script from it, and ``printf`` with ``%s`` / ``%d`` of known words is plain text formatting
(bash(1), SHELL BUILTIN COMMANDS: ``printf``; the format is reused while arguments remain).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from shardcheck.errors import ShardcheckError
from shardcheck.inputs.read_policy import repository_root

# `$(dirname "$0")`, `$(dirname -- "${BASH_SOURCE[0]}")`, `$(cd -- "$(dirname ...)" &>/dev/null && pwd)`,
# `$(cd $(dirname $0); pwd -P)`, `$(realpath "$(dirname "$0")")`, `$(dirname "$(realpath "$0")")` and
# the backtick forms: each is the directory of the file being read (of the main script for $0).
_SELF = r"(?:\$0|\$\{0\}|\$BASH_SOURCE|\$\{BASH_SOURCE(?:\[0\])?\})"
_RESOLVE = r"(?:realpath|readlink -f|readlink -e)"
_DIRNAME = rf"(?:dirname {_SELF}|dirname \$\({_RESOLVE} {_SELF}\)|dirname `{_RESOLVE} {_SELF}`)"
_DIR = rf"(?:\$\({_DIRNAME}\)|`{_DIRNAME}`)"
_FORMS = re.compile(
    rf"^(?:\$\((?:{_DIRNAME}|cd (?:-P )?{_DIR} ?(?:&&|;) ?pwd(?: -P)?|{_RESOLVE} {_DIR})\)|`{_DIRNAME}`)$"
)
_NOISE = re.compile(r"""["']|(?<=\s)--(?=\s)|\s*(?:&>|>|2>&1|2>)\s*/dev/null|\s+2>&1""")


def _flat(text: str) -> str:
    """``text`` without quotes, ``--`` and redirections to /dev/null, one space apart, ``$( x )`` as ``$(x)``."""
    flat = " ".join(_NOISE.sub("", text).split())
    return re.sub(r"\s+\)", ")", re.sub(r"\$\(\s+", "$(", flat))


def script_dir_substitution(text: str) -> str | None:
    """``"main"`` when ``text`` is a ``$(...)`` that prints the main script's directory (``$0``),
    ``"self"`` when it prints the directory of the file being read (``BASH_SOURCE``), else None."""
    flat = _flat(text)
    if not _FORMS.match(flat):
        return None
    return "main" if re.search(r"\$0|\$\{0\}", flat) else "self"


# `$(cd DIR && pwd)` / `$(cd -P -- DIR &>/dev/null; pwd -P)`: DIR, normalised, when it is absolute;
# `$(dirname WORD)`: WORD's directory, as dirname(1) cuts it; `$(git rev-parse --show-toplevel)`: the repository root.
_CD_PWD = re.compile(
    r"^\$\(\s*cd\s+(?:-P\s+)?(?:--\s+)?(?P<dir>\S.*?)\s*(?:(?:&>|>|2>)\s*/dev/null(?:\s*2>&1)?\s*)?(?:&&|;)\s*"
    r"pwd(?:\s+-P)?\s*\)$",
    re.S,
)
_DIRNAME_OF = re.compile(r"^\$\(\s*dirname\s+(?:--\s+)?(?P<dir>\S.*?)\s*\)$", re.S)
_GIT_TOP = re.compile(r"^\$\(\s*git\s+rev-parse\s+--show-toplevel\s*(?:2>\s*/dev/null\s*)?\)$")


def path_substitution(text: str) -> tuple[str, str] | None:
    """(``"cd"`` | ``"dirname"`` | ``"git-top"``, the word it reads as written) for a ``$(...)`` whose output
    is a path computed from a word alone (nothing run); None for any other command substitution."""
    for kind, pattern in (("cd", _CD_PWD), ("dirname", _DIRNAME_OF), ("git-top", _GIT_TOP)):
        m = pattern.match(text)
        if m is not None:
            return kind, m.groupdict().get("dir") or ""
    return None


def dirname(text: str) -> str:
    """What dirname(1) prints for ``text`` (trailing slashes dropped, then the last component)."""
    stripped = text.rstrip("/")
    if not stripped:
        return "/" if text else "."
    if "/" not in stripped:
        return "."
    return stripped.rsplit("/", 1)[0].rstrip("/") or "/"


def resolve_source(target: str, current_file: Path) -> Path:
    """The file ``source TARGET`` reads: an absolute path as given, a relative one from the
    directory of the file that sources it (how these launch scripts are run: ``bash scripts/x.sh``
    from the directory the paths are written for is not knowable, so the script's own is used).

    The directory part is resolved as the kernel resolves it when bash opens the file: each symlink first, then
    the ``..`` after it (``link/../f.sh`` is ``f.sh`` beside the link's target, not beside the link), so
    ``os.path.realpath`` of the directory, never text normalisation; the last component is kept as written
    (a symlinked file is resolved by the read policy)."""
    path = Path(target)
    if not path.is_absolute():
        beside = current_file.parent / path
        top = repository_root(current_file.parent)
        # not beside the file: scripts of a repository are run from its root (`bash scripts/x.sh`), so a path
        # written for that directory is read from there
        try:
            if top is not None and not beside.exists() and (top / path).exists():
                beside = top / path
        except OSError:  # a name too long for the file system: the caller says why it is not read
            pass
        path = beside
    return Path(os.path.realpath(path.parent)) / path.name


def shown_path(real: Path, main_real: Path, main_shown: str) -> str:
    """How to name a sourced file in findings: relative to the main script as the user named it."""
    try:
        rel = os.path.relpath(real, os.path.realpath(main_real.parent))  # both with their folders resolved
    except ValueError:
        return str(real)
    return os.path.normpath(os.path.join(os.path.dirname(main_shown), rel))


_SPEC = re.compile(r"%(%|[-+ 0#]*\d*(?:\.\d+)?[sdi])")


def printf_bound(fmt: str, limit: int) -> str | None:
    """Why ``printf FORMAT`` is not evaluated: a field width or precision past ``limit``; else None."""
    for m in _SPEC.finditer(fmt):
        for number in re.findall(r"\d+", m.group(1)):
            if len(number) > 9 or int(number) > limit:
                return f"printf field width {number[:12]} is past shardcheck's bound of {limit}"
    return None


def printf_format(fmt: str, args: list[str]) -> str | None:
    """What ``printf FORMAT ARGS...`` prints, for formats of ``%s`` / ``%d`` / ``%i`` / ``%%`` and
    literal text (``\\n`` and ``\\t`` escapes); None for anything else (then the value is unknown)."""
    if "\\" in fmt.replace("\\n", "").replace("\\t", "") or re.search(r"%(?!%|[-+ 0#]*\d*(?:\.\d+)?[sdi])", fmt):
        return None
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    out: list[str] = []
    rest = list(args)
    while True:
        used = 0

        def one(m: re.Match) -> str:
            nonlocal used
            spec = m.group(1)
            if spec == "%":
                return "%"
            value = rest[used] if used < len(rest) else ""
            used += 1
            if spec[-1] in "di":
                try:
                    return ("%" + spec[:-1] + "d") % int(value or "0", 0)
                except ValueError:
                    raise _NotANumber from None
            return ("%" + spec) % value

        try:
            out.append(_SPEC.sub(one, fmt))
        except _NotANumber:
            return None
        rest = rest[used:]
        if not rest or used == 0:
            return "".join(out)


class _NotANumber(ShardcheckError):
    pass
