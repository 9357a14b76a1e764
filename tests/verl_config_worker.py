"""Run verl 0.9.1's own config dataclasses on CPU (a subprocess of the differential test).

verl's package ``__init__`` imports ray, and its config modules import transformers, tensordict,
codetiming, orjson: none is installed here and none is used by the checks themselves, so they are
replaced by empty stand-ins, and ``verl`` is mounted from VERL_SOURCE without running its
``__init__``. Reads a JSON list of cases on stdin, writes one error text (or null) per case.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types

_STUBBED = {
    "transformers",
    "orjson",
    "codetiming",
    "ray",
    "tensordict",
    "torchdata",
    "wandb",
    "pylatexenc",
    "datasets",
    "peft",
    "accelerate",
}


class _Any:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Any()

    def __getattr__(self, name):
        return _Any()

    def __class_getitem__(cls, item):
        return cls


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Any,), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in _STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Stub(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def main() -> None:
    source = sys.argv[1]
    sys.meta_path.insert(0, _Finder())
    package = types.ModuleType("verl")
    package.__path__ = [f"{source}/verl"]
    sys.modules["verl"] = package
    from verl.workers.config import CriticConfig, RolloutConfig

    out = []
    for case in json.load(sys.stdin):
        try:
            if case["kind"] == "critic":
                cfg = CriticConfig(strategy="megatron", **case["fields"])
                cfg.validate(**case["validate"])
            else:
                RolloutConfig(**case["fields"])
            out.append(None)
        except (ValueError, AssertionError, NotImplementedError) as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
