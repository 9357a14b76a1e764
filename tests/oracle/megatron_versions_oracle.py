"""Run one megatron-core's ``initialize_model_parallel`` on torch's fake process group for a batch of layouts.

Usage: PYTHONPATH=<an unpacked megatron-core> python tests/oracle/megatron_versions_oracle.py < cases.json

stdin: a JSON list of ``{"world", "tp", "pp", "cp", "ep", "etp"}``; stdout: ``{"version", "results":
[{"ok", "error"}]}``, ``error`` being the text of the RuntimeError / AssertionError it raises.

Patched, and only this: megatron-core ≤ 0.13 also builds gloo groups (``new_group(..., backend="gloo")``),
which the fake backend cannot create; those calls are made on the fake backend instead. It changes no check
and no group membership. ``expert_tensor_parallel_size`` is passed only where the signature has it (≥ 0.10).

Where triton is not installed, megatron-core ≥ 0.18 cannot run its package ``__init__`` (it imports
``distributed`` → ``pipeline_parallel/schedules.py`` → ``transformer/moe/paged_stash.py``, GPU kernels that
import triton). Then ``megatron`` and ``megatron.core`` are made bare packages over the same folders and
``megatron.core.parallel_state`` is imported alone, with its own imports as they are: the same module and
the same checks; what is skipped is only the package's re-exports and start-up side effects.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
import types

import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore


def _parallel_state():
    """megatron.core.parallel_state, and the version of the megatron-core it comes from."""
    try:
        import megatron.core
    except ModuleNotFoundError as exc:
        if exc.name != "triton" and not (exc.name or "").startswith("triton."):
            raise
        for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")]:
            del sys.modules[name]
        spec = importlib.util.find_spec("megatron")
        for name, folder in (("megatron", spec.submodule_search_locations[0]), ("megatron.core", None)):
            package = types.ModuleType(name)
            package.__path__ = [folder or f"{sys.modules['megatron'].__path__[0]}/core"]
            sys.modules[name] = package
        sys.modules["megatron"].core = sys.modules["megatron.core"]
        info = importlib.import_module("megatron.core.package_info")
        sys.modules["megatron.core"].__version__ = getattr(info, "__version__", "?")
    import megatron.core
    from megatron.core import parallel_state

    return parallel_state, getattr(megatron.core, "__version__", "?")


_new_group = dist.new_group


def _new_group_on_fake(*args, **kwargs):
    if kwargs.get("backend") == "gloo":
        kwargs.pop("backend")
    return _new_group(*args, **kwargs)


def main() -> None:
    parallel_state, version = _parallel_state()
    dist.new_group = _new_group_on_fake
    takes_etp = "expert_tensor_parallel_size" in inspect.signature(parallel_state.initialize_model_parallel).parameters
    out = []
    for case in json.load(sys.stdin):
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
        kwargs = dict(
            tensor_model_parallel_size=case["tp"],
            pipeline_model_parallel_size=case["pp"],
            context_parallel_size=case["cp"],
            expert_model_parallel_size=case["ep"],
        )
        if takes_etp:
            kwargs["expert_tensor_parallel_size"] = case["etp"]
        try:
            parallel_state.initialize_model_parallel(**kwargs)
            out.append({"ok": True, "error": None})
        except (RuntimeError, AssertionError, ValueError) as exc:
            out.append({"ok": False, "error": str(exc)})
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    json.dump({"version": version, "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
