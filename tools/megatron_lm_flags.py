"""Generate Megatron-LM's flag tables, one per megatron-core minor, from ``megatron/training/arguments.py``.

Megatron-LM and megatron-core share one repository (NVIDIA/Megatron-LM) and its ``core_vX.Y.Z`` tags, so a
minor's Megatron-LM flags are those of ``megatron/training/arguments.py`` at the newest patch tag of that
minor. The source is read statically with ``ast``; nothing of it is imported or executed. Two kinds of
declaration are read:

- every ``<parser or group>.add_argument('--name', ..., type=, default=, action=, nargs=, choices=, dest=)``
  call in the module (argparse semantics: a ``store_true`` flag defaults to False, ``store_false`` to True;
  ``nargs='+'``/``'*'``/a count and ``action='append'`` take a list);
- from core_v0.16 on, ``ArgumentGroupFactory(SomeConfig, exclude=[...])`` (megatron/training/argument_utils.py):
  one flag per ``init`` field of the dataclass and its bases, named ``--field-name``; the type from the
  annotation (``Optional[X]`` is X, ``list[X]`` is a list, ``Literal[...]`` gives choices, an Enum its member
  names), the default from the field (``field(default=, default_factory=)``), a bool field defaulting to True
  becomes ``--no-field-name`` / ``--disable-field-name`` (store_false), and ``metadata={"argparse_meta": {...}}``
  overrides all of that. The dataclass is found through the module's imports (relative ones and package
  ``__init__`` re-exports followed).

A default that is not a literal (``torch.float32``, an expression) is written as ``{"expr": "<source>"}``: the
value Megatron-LM computes is not known to shardcheck. Calls whose option names are not string literals are
counted and reported on stderr (none in the tags read so far).

Output: ``src/shardcheck/frameworks/megatron_lm/data/flags-<minor>.json``, one flag a line:
``[names, dest, type, default, choices]`` with type one of int, float, str, bool, list, const (store_const:
no value) and ``choices`` null or a list.

Usage: python tools/megatron_lm_flags.py GIT_DIR_OF_MEGATRON_LM [MINOR ...]   (default: every supported minor)
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "shardcheck" / "frameworks" / "megatron_lm" / "data"
ARGUMENTS = "megatron/training/arguments.py"
NO_VALUE = {"store_true": "bool", "store_false": "bool", "store_const": "const", "count": "int"}
LIST_ACTIONS = {"append", "extend"}
STDLIB_ENUMS = {"signal.Signals", "Signals"}
NAMED_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}


class Source:
    """Files of one tag, read with ``git show`` (parsed once)."""

    def __init__(self, git_dir: str, tag: str) -> None:
        self.git_dir, self.tag = git_dir, tag
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            run = subprocess.run(
                ["git", "--git-dir", self.git_dir, "show", f"{self.tag}:{path}"], capture_output=True, text=True
            )
            self._trees[path] = ast.parse(run.stdout) if run.returncode == 0 else None
        return self._trees[path]

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for path in (base + ".py", base + "/__init__.py"):
            if self.tree(path) is not None:
                return path
        return None


def _module_of(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = path.removesuffix(".py").split("/")
    package = package[:-1] if not path.endswith("__init__.py") else package[:-1]
    package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join([*package, *(node.module.split(".") if node.module else [])])


def find_class(src: Source, path: str, name: str, seen: frozenset = frozenset()) -> tuple[str, ast.ClassDef] | None:
    """The ``class name`` visible in module ``path``: defined there or imported into it (followed)."""
    tree = src.tree(path)
    if tree is None or (path, name) in seen:
        return None
    seen = seen | {(path, name)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return path, node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = src.module_file(_module_of(path, node))
                    if target is not None:
                        found = find_class(src, target, alias.name, seen)
                        if found is not None:
                            return found
    return None


_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}


def _literal(node: ast.AST | None):
    if node is None:
        return None
    if isinstance(node, ast.BinOp) and (type(node.op) in _ARITH or isinstance(node.op, ast.Pow)):
        left, right = _literal(node.left), _literal(node.right)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
        if numbers and isinstance(node.op, ast.Pow) and abs(right) <= 64:  # 2 ** 32, never a huge power
            return left**right
        if numbers and type(node.op) in _ARITH:  # 1024 * 1024
            return _ARITH[type(node.op)](left, right)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"expr": ast.unparse(node)}


def _jsonable(value):
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, dict) and set(value) != {"expr"}:
        return {"expr": repr(value)}
    if isinstance(value, bytes | complex):
        return {"expr": repr(value)}
    return value


def _type_name(node: ast.AST | None) -> str:
    """An argparse ``type=``: int/float/str by name; any other callable takes the text (``str``)."""
    if isinstance(node, ast.Name) and node.id in NAMED_TYPES:
        return NAMED_TYPES[node.id]
    return "str"


def _kwargs(call: ast.Call) -> dict[str, ast.AST]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _entry(names, dest, kind, default, choices) -> list:
    return [list(names), dest, kind, _jsonable(default), _jsonable(choices) if choices is not None else None]


def _enum_value(src: Source, node: ast.AST | None):
    """``AttnBackend.auto`` as a default: the member's name (what argparse's type turns the text into);
    ``list(AttnBackend)`` as choices: the member names. None when ``node`` is neither."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        found = find_class(src, ARGUMENTS, node.value.id)
        if found is not None and _is_enum(src, *found):
            return node.attr
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "list" and len(node.args) == 1:
        inner = node.args[0]
        found = find_class(src, ARGUMENTS, inner.id) if isinstance(inner, ast.Name) else None
        if found is not None and _is_enum(src, *found):
            return _members(found[1])
    return None


def _members(cls: ast.ClassDef) -> list[str]:
    return [t.id for stmt in cls.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)]


def from_add_argument(call: ast.Call, src: Source | None = None) -> list | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(names) != len(call.args) or not names or not all(n.startswith("-") for n in names):
        return None
    kw = _kwargs(call)
    action = _literal(kw.get("action")) if isinstance(kw.get("action"), ast.Constant) else None
    if isinstance(kw.get("action"), ast.Attribute) and kw["action"].attr == "BooleanOptionalAction":
        action = "boolean_optional"
    nargs = _literal(kw.get("nargs"))
    long_names = [n for n in names if n.startswith("--")]
    dest = _literal(kw["dest"]) if "dest" in kw else (long_names or names)[0].lstrip("-").replace("-", "_")
    choices = _literal(kw.get("choices")) if "choices" in kw else None
    if src is not None and (members := _enum_value(src, kw.get("choices"))) is not None:
        choices = members
    if action in NO_VALUE:
        default = (
            _literal(kw.get("default")) if "default" in kw else {"store_true": False, "store_false": True}.get(action)
        )
        return _entry(names, dest, NO_VALUE[action], default, None)
    if action == "boolean_optional":
        negated = ["--no-" + n[2:] for n in long_names]
        return _entry([*names, *negated], dest, "bool", _literal(kw.get("default")), None)
    kind = "list" if action in LIST_ACTIONS or nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1) else None
    kind = kind or _type_name(kw.get("type"))
    default = _literal(kw.get("default"))
    if src is not None and (member := _enum_value(src, kw.get("default"))) is not None:
        default = member
    return _entry(names, dest, kind, default, choices)


# -- ArgumentGroupFactory (megatron/training/argument_utils.py, core_v0.16.1 .. core_v0.19.0) -----------------


def _annotation(src: Source, path: str, node: ast.AST) -> tuple[str, list | None] | None:
    """(type, choices) the factory infers from an annotation; None where it raises TypeInferenceError."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval").body
    if isinstance(node, ast.Name) and node.id in NAMED_TYPES:
        return NAMED_TYPES[node.id], None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        if isinstance(node.right, ast.Constant) and node.right.value is None:
            return _annotation(src, path, node.left)
        return None
    if isinstance(node, ast.Subscript):
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        inner = node.slice
        args = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if head == "Optional":
            return _annotation(src, path, args[0])
        if head == "Union":
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is None:
                return _annotation(src, path, args[0])
            return None
        if head in ("list", "List"):
            return ("list", None) if len(args) == 1 and _annotation(src, path, args[0]) else None
        if head == "Literal":
            values = [_literal(a) for a in args]
            kind = {int: "int", float: "float", str: "str", bool: "bool"}.get(type(values[0]), "str")
            return kind, values
        return None
    if isinstance(node, ast.Name | ast.Attribute):  # an Enum class: its member names are the choices
        name = node.id if isinstance(node, ast.Name) else node.attr
        found = find_class(src, path, name)
        if found is not None and _is_enum(src, *found):
            return "str", _members(found[1])
    return None


def _is_enum(src: Source, path: str, cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        if name in ("Enum", "IntEnum", "StrEnum", "Flag"):
            return True
        found = find_class(src, path, name)
        if found is not None and _is_enum(src, *found):
            return True
    return False


def dataclass_fields(src: Source, path: str, cls: ast.ClassDef) -> list[tuple[str, str, ast.AnnAssign]]:
    """(name, module path, node) of the dataclass's fields in ``dataclasses.fields`` order (bases first)."""
    out: dict[str, tuple[str, str, ast.AnnAssign]] = {}
    for base in reversed(cls.bases):
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
        found = find_class(src, path, name) if name else None
        if found is not None:
            for item in dataclass_fields(src, *found):
                out[item[0]] = item
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            text = ast.unparse(stmt.annotation)
            if text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")):
                continue
            out.pop(stmt.target.id, None)  # a redefinition keeps the base's place; close enough for a table
            out[stmt.target.id] = (stmt.target.id, path, stmt)
    return list(out.values())


def from_field(src: Source, name: str, path: str, stmt: ast.AnnAssign, problems: list[str]) -> list | None:
    value = stmt.value
    meta: dict[str, ast.AST] = {}
    default: object = None
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
        kw = _kwargs(value)
        if isinstance(kw.get("init"), ast.Constant) and kw["init"].value is False:
            return None
        if "default" in kw:
            default = _literal(kw["default"])
        elif "default_factory" in kw:
            factory = kw["default_factory"]
            if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "set", "tuple"):
                default = {"list": [], "dict": {}, "set": [], "tuple": []}[factory.id]
            elif isinstance(factory, ast.Lambda):
                default = _literal(factory.body)
            else:
                default = {"expr": ast.unparse(factory) + "()"}
        metadata = kw.get("metadata")
        if isinstance(metadata, ast.Dict):
            for k, v in zip(metadata.keys, metadata.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                    meta = {
                        kk.value: vv for kk, vv in zip(v.keys, v.values, strict=True) if isinstance(kk, ast.Constant)
                    }
    elif value is not None:
        default = _literal(value)
        if isinstance(default, dict) and set(default) == {"expr"} and isinstance(value, ast.Attribute):
            default = value.attr  # an Enum member: argparse shows and compares the member; its name is the text
    names = ["--" + name.replace("_", "-")]
    inferred = _annotation(src, path, stmt.annotation)
    kind, choices = inferred if inferred is not None else (None, None)
    if inferred is None and ast.unparse(stmt.annotation) in STDLIB_ENUMS:
        inferred = ("str", None)  # an Enum of the standard library: its member names (choices not listed here)
    if inferred is None and not meta:
        problems.append(f"{path}: field {name}: annotation {ast.unparse(stmt.annotation)} not inferable")
        kind = "str"
    if kind == "bool":
        if default is not True:
            default = False if default is None else default
        if default is True:
            names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
    if meta:
        if "arg_names" in meta:
            names = _literal(meta["arg_names"])
        if "type" in meta:
            kind = _type_name(meta["type"]) if kind != "list" else kind
        if "nargs" in meta:
            nargs = _literal(meta["nargs"])
            kind = "list" if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1) else kind
        if "action" in meta:
            action = _literal(meta["action"])
            if action in NO_VALUE:
                kind = NO_VALUE[action]
        if "default" in meta:
            default = _literal(meta["default"])
        if "choices" in meta:
            choices = _literal(meta["choices"])
        name = _literal(meta["dest"]) if "dest" in meta else name
    return _entry(names, name, kind or "str", default, choices)


def _exclude(call: ast.Call, scope: ast.AST) -> set[str]:
    node = _kwargs(call).get("exclude") or (call.args[1] if len(call.args) > 1 else None)
    if isinstance(node, ast.Name):  # exclude = [...] earlier in the same function
        wanted = node.id
        for stmt in ast.walk(scope):
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == wanted for t in stmt.targets):
                node = stmt.value
    value = _literal(node) if node is not None else []
    return set(value) if isinstance(value, list | tuple | set) else set()


def table(src: Source, problems: list[str]) -> list[list]:
    tree = src.tree(ARGUMENTS)
    if tree is None:
        raise SystemExit(f"{src.tag}: no {ARGUMENTS}")
    entries: list[list] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    owner = {id(c): f for f in functions for c in ast.walk(f)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            entry = from_add_argument(node, src)
            if entry is None:
                problems.append(f"{ARGUMENTS}:{node.lineno}: option names are not literals")
            else:
                entries.append(entry)
        elif getattr(func, "id", None) == "ArgumentGroupFactory" and node.args:
            cls_name = getattr(node.args[0], "id", None)
            found = find_class(src, ARGUMENTS, cls_name) if cls_name else None
            if found is None:
                problems.append(f"{ARGUMENTS}:{node.lineno}: dataclass {cls_name} not found")
                continue
            excluded = _exclude(node, owner.get(id(node), tree))
            for name, path, stmt in dataclass_fields(src, *found):
                if name in excluded:
                    continue
                entry = from_field(src, name, path, stmt, problems)
                if entry is not None:
                    entries.append(entry)
    seen: dict[str, list] = {}
    for entry in entries:
        for name in entry[0]:
            if name in seen and seen[name] != entry:
                problems.append(f"{name} declared twice ({seen[name][1]}, {entry[1]})")
            seen[name] = entry
    return sorted(entries, key=lambda e: e[0][0])


def _function(src: Source, path: str, name: str) -> tuple[str, ast.FunctionDef] | None:
    """The ``def name`` visible in module ``path`` (defined there or imported into it)."""
    tree = src.tree(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return path, node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = src.module_file(_module_of(path, node))
                    if target is not None and target != path:
                        return _function(src, target, alias.name)
    return None


def extra_tables(src: Source, problems: list[str]) -> dict[str, list[list]]:
    """Flags an entry script adds: ``pretrain_gpt.py``'s ``extra_args_provider=add_modelopt_args if
    has_nvidia_modelopt else None`` (accepted where ModelOpt is installed), ``pretrain_vlm.py``'s own."""
    out: dict[str, list[list]] = {}
    listing = subprocess.run(
        ["git", "--git-dir", src.git_dir, "ls-tree", "--name-only", src.tag], capture_output=True, text=True
    ).stdout.split()
    for script in sorted(n for n in listing if n.startswith("pretrain_") and n.endswith(".py")):
        tree = src.tree(script)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.keyword) or node.arg != "extra_args_provider":
                continue
            value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
            if not isinstance(value, ast.Name):
                continue
            found = _function(src, script, value.id)
            if found is None:
                problems.append(f"{script}: extra_args_provider {value.id} not found")
                continue
            entries = [
                e
                for call in ast.walk(found[1])
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "add_argument"
                and (e := from_add_argument(call)) is not None
            ]
            out[script] = sorted(entries, key=lambda e: e[0][0])
    return out


def newest_tag(git_dir: str, minor: str) -> str:
    tags = subprocess.run(["git", "--git-dir", git_dir, "tag"], capture_output=True, text=True, check=True).stdout
    pattern = re.compile(rf"core_v{re.escape(minor)}\.(\d+)")
    patches = [int(m.group(1)) for t in tags.split() if (m := pattern.fullmatch(t))]
    if not patches:
        raise SystemExit(f"no core_v{minor}.N tag in {git_dir}")
    return f"core_v{minor}.{max(patches)}"


def render(tag: str, entries: list[list], extra: dict[str, list[list]]) -> str:
    head = {
        "source": f"NVIDIA/Megatron-LM {tag}, {ARGUMENTS} (and the dataclasses its ArgumentGroupFactory reads)",
        "generated_by": "tools/megatron_lm_flags.py",
        "columns": ["names", "dest", "type", "default", "choices"],
    }
    lines = [json.dumps(e, ensure_ascii=False) for e in entries]
    body = ",\n".join("  " + line for line in lines)
    parts = []
    for script, rows in extra.items():
        inner = ",\n".join("   " + json.dumps(e, ensure_ascii=False) for e in rows)
        parts.append(f"  {json.dumps(script)}: [\n{inner}\n  ]")
    extras = "{\n" + ",\n".join(parts) + "\n}" if parts else "{}"
    return json.dumps(head)[:-1] + ', "flags": [\n' + body + '\n], "extra": ' + extras + "}\n"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from shardcheck.frameworks.megatron.versions import MINORS

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    git_dir, minors = argv[0], argv[1:] or list(MINORS)
    OUT.mkdir(parents=True, exist_ok=True)
    for minor in minors:
        tag = newest_tag(git_dir, minor)
        problems: list[str] = []
        src = Source(git_dir, tag)
        entries = table(src, problems)
        extra = extra_tables(src, problems)
        (OUT / f"flags-{minor}.json").write_text(render(tag, entries, extra))
        more = ", ".join(f"{k} +{len(v)}" for k, v in extra.items())
        print(f"{minor}: {tag}, {len(entries)} declarations, {sum(len(e[0]) for e in entries)} option names; {more}")
        for p in problems:
            print(f"  {tag}: {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
