"""Run one megatron-core's ``initialize_model_parallel`` on torch's fake process group for a batch of layouts.

Usage: PYTHONPATH=<an unpacked megatron-core> python tests/oracle/megatron_versions_oracle.py < cases.json

stdin: a JSON list of ``{"world", "tp", "pp", "cp", "ep", "etp"}``; stdout: ``{"version", "results":
[{"ok", "error"}]}``, ``error`` being the text of the RuntimeError / AssertionError it raises.

Patched, and only this: megatron-core ≤ 0.13 also builds gloo groups (``new_group(..., backend="gloo")``),
which the fake backend cannot create; those calls are made on the fake backend instead. It changes no check
and no group membership. ``expert_tensor_parallel_size`` is passed only where the signature has it (≥ 0.10).
"""

from __future__ import annotations

import inspect
import json
import sys

import megatron.core
import torch.distributed as dist
from megatron.core import parallel_state
from torch.testing._internal.distributed.fake_pg import FakeStore

_new_group = dist.new_group


def _new_group_on_fake(*args, **kwargs):
    if kwargs.get("backend") == "gloo":
        kwargs.pop("backend")
    return _new_group(*args, **kwargs)


def main() -> None:
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
    json.dump({"version": getattr(megatron.core, "__version__", "?"), "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
