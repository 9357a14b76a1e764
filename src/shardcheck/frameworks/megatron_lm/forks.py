"""Megatron-LM forks (issue 26, false alarm 6): the flags a fork's code in the script's repository declares.

MindSpeed-LLM, Pai-Megatron-Patch, FlagScale, ROCm's, swiss-ai's and many other repositories run
``pretrain_gpt.py`` (or their own ``pretrain_*.py``) with flags upstream Megatron-LM does not have. When the fork's
code lies in the script's repository (found from the script's folder up to the top of its git work tree), its
``add_argument`` calls are read with ``ast`` (never imported or run), as tools/megatron_lm_flags.py reads
Megatron-LM's: the option names, ``type=int/float``, ``action='store_true'/'store_false'``, ``nargs`` and literal
defaults. Those flags are read as declared there; the launch is judged against upstream's table together with them.

A fork whose own flags are declared partly outside the repository (MindSpeed-LLM builds on the MindSpeed package;
Pai-Megatron-Patch on a Megatron-LM submodule, absent from a checkout without submodules) cannot be judged flag by
flag: its remaining unknown flags are named once ("flags of <fork>, not judged"), not one warning each.
"""

from __future__ import annotations

import ast
import functools
import warnings
from dataclasses import dataclass
from pathlib import Path

from shardcheck.frameworks.megatron_lm.flags import Flag

LEVELS = 6
MAX_SOURCE_BYTES = 1 << 20  # an arguments.py of 1 MiB is far above any fork's (Megatron-LM's is ~200 KB)
MAX_FILES = 2000
# (marker folder in the repository root, the fork's name, the package whose absence leaves its table partial)
PACKAGES = (
    ("mindspeed_llm", "MindSpeed-LLM", "mindspeed"),
    ("megatron_patch", "Pai-Megatron-Patch", "megatron"),
    ("flagscale", "FlagScale", None),
)
# a repository carrying Megatron-LM's own argument table (a fork of it, or Megatron-DeepSpeed's older layout)
MEGATRON_ARGUMENTS = ("megatron/training/arguments.py", "megatron/arguments.py")


@dataclass(frozen=True)
class Fork:
    """A fork's code found in the script's repository: its name, root, the flags it declares, and whether its
    table is complete there (``missing``: the package it builds on that the repository lacks)."""

    name: str
    root: Path
    flags: dict[str, Flag]
    missing: str | None


def find_fork(script: Path | None) -> Fork | None:
    """The fork whose code lies in the script's repository, or None (see the module doc)."""
    if script is None:
        return None
    try:
        folder = script.resolve().parent
    except OSError:
        return None
    for _ in range(LEVELS + 1):
        found = _fork_at(folder)
        if found is not None:
            return found
        if (folder / ".git").exists() or folder.parent == folder:
            return None
        folder = folder.parent
    return None


@functools.lru_cache(maxsize=16)
def _fork_at(root: Path) -> Fork | None:
    for package, name, needs in PACKAGES:
        if (root / package).is_dir():
            files = sorted((root / package).rglob("*.py"))[:MAX_FILES]
            own = [root / a for a in MEGATRON_ARGUMENTS if (root / a).is_file()]
            missing = needs if needs is not None and not (root / needs).is_dir() else None
            return Fork(name, root, declared_flags(tuple(files + own)), missing)
    for arguments in MEGATRON_ARGUMENTS:
        if (root / arguments).is_file():
            return Fork(f"the Megatron-LM fork at {root.name}", root, declared_flags((root / arguments,)), None)
    return None


def declared_flags(files: tuple[Path, ...]) -> dict[str, Flag]:
    """Every ``--flag`` the ``add_argument`` calls of ``files`` declare (files that do not parse are passed over)."""
    out: dict[str, Flag] = {}
    for path in files:
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if "add_argument" not in text:
            continue
        try:
            with warnings.catch_warnings():  # the fork's invalid escapes are its own, not the user's to read
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                for flag in _flags_of_call(node):
                    out.setdefault(flag.name, flag)
    return out


def _flags_of_call(call: ast.Call) -> list[Flag]:
    names = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--"))
    if not names:
        return []
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = kw["action"].value if isinstance(kw.get("action"), ast.Constant) else None
    nargs = kw["nargs"].value if isinstance(kw.get("nargs"), ast.Constant) else None
    type_name = kw["type"].id if isinstance(kw.get("type"), ast.Name) else None
    if action == "store_true":
        kind = "true"
    elif action == "store_false":
        kind = "false"
    elif action in ("store_const", "count", "help", "version"):
        kind = "const"
    elif nargs in ("+", "*") or isinstance(nargs, int) or action in ("append", "extend"):
        kind = "list"
    elif type_name in ("int", "float"):
        kind = type_name
    else:
        kind = "str"
    default, computed = None, None
    if "default" in kw:
        try:
            default = ast.literal_eval(kw["default"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            computed = ast.unparse(kw["default"])
    elif kind in ("true", "false"):
        default = kind == "false"
    dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else names[0][2:].replace("-", "_")
    return [Flag(name, kind, default, dest=dest, ranged=False, aliases=names, computed=computed) for name in names]
