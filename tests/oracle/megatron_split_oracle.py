"""Run one megatron-core's ``TransformerConfig`` and ``get_num_layers_to_build`` for a batch of layer splits.

Usage: PYTHONPATH=<an unpacked megatron-core> python tests/oracle/megatron_split_oracle.py < cases.json

stdin: a JSON list of ``{"layers", "heads", "groups", "tp", "pp", "vpp", "first", "last", "emb", "loss"}``
(``vpp`` / ``first`` / ``last`` may be null). stdout: ``{"version", "results": [...]}``, each result either
``{"ok": true, "counts": [[layers of each virtual stage] for each pipeline rank]}`` or ``{"ok": false, "error":
text, "type": exception class}``: the first exception that minor raises, ``TransformerConfig(...)`` first and
then ``get_num_layers_to_build`` on pipeline rank 0, 1, … and, within a rank, virtual stage 0, 1, ….

Nothing is patched. No process group is needed: the pipeline rank / world size and the virtual rank / world
size are set through ``parallel_state``'s own setters (``set_pipeline_model_parallel_rank`` and friends, in
every minor 0.9 … 0.19), which its getters read before any group; ``vp_stage`` / ``pp_rank`` are passed where
the signature takes them (0.13+ / 0.15+), as the model builder does. The first and last stage sizes go to the
minor's own field (``first_pipeline_num_layers`` before 0.11, ``num_layers_in_first_pipeline_stage`` after);
``account_for_*`` is passed only when asked, so that before 0.11 the constructor's own TypeError is the answer.

Where triton is missing, megatron-core ≥ 0.18's package ``__init__`` files cannot run; then ``megatron``,
``megatron.core`` and ``megatron.core.pipeline_parallel`` are bare packages over the same folders (as in
megatron_versions_oracle.py) and the modules are imported with their own imports as they are.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
import types

import torch

BARE = ("megatron", "megatron.core", "megatron.core.pipeline_parallel")  # packages whose __init__ needs triton


def _bare_packages() -> None:
    """``megatron``, ``megatron.core`` and ``megatron.core.pipeline_parallel`` as bare packages over their own
    folders: their ``__init__`` imports GPU kernels (triton) on ≥ 0.18; the modules below them are the same."""
    for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")]:
        del sys.modules[name]
    root = importlib.util.find_spec("megatron").submodule_search_locations[0]
    for name in BARE:
        package = types.ModuleType(name)
        package.__path__ = [root + "/" + "/".join(name.split(".")[1:])]
        sys.modules[name] = package
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, package)


def _modules():
    names = ("parallel_state", "transformer.transformer_config", "transformer.transformer_block", "package_info")
    try:
        found = [importlib.import_module(f"megatron.core.{n}") for n in names]
    except ModuleNotFoundError as exc:
        if exc.name != "triton" and not (exc.name or "").startswith("triton."):
            raise
        _bare_packages()
        found = [importlib.import_module(f"megatron.core.{n}") for n in names]
    parallel_state, config, block, info = found
    return parallel_state, config.TransformerConfig, block.get_num_layers_to_build, getattr(info, "__version__", "?")


def main() -> None:
    ps, TransformerConfig, get_num_layers_to_build, version = _modules()
    fields = set(TransformerConfig.__dataclass_fields__)
    first_name, last_name = (
        ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage")
        if "num_layers_in_first_pipeline_stage" in fields
        else ("first_pipeline_num_layers", "last_pipeline_num_layers")
    )
    takes = inspect.signature(get_num_layers_to_build).parameters
    out = []
    for case in json.load(sys.stdin):
        kwargs = dict(
            num_layers=case["layers"],
            hidden_size=case["heads"] * 8,
            num_attention_heads=case["heads"],
            num_query_groups=case["groups"],
            tensor_model_parallel_size=case["tp"],
            pipeline_model_parallel_size=case["pp"],
            virtual_pipeline_model_parallel_size=case["vpp"],
            pipeline_dtype=torch.bfloat16,
        )
        if case["first"] is not None:
            kwargs[first_name] = case["first"]
        if case["last"] is not None:
            kwargs[last_name] = case["last"]
        if case["emb"]:
            kwargs["account_for_embedding_in_pipeline_split"] = True
        if case["loss"]:
            kwargs["account_for_loss_in_pipeline_split"] = True
        try:
            config = TransformerConfig(**kwargs)
            ps.set_pipeline_model_parallel_world_size(case["pp"])
            ps.set_virtual_pipeline_model_parallel_world_size(case["vpp"])
            counts = []
            for rank in range(case["pp"]):
                ps.set_pipeline_model_parallel_rank(rank)
                row = []
                for stage in range(case["vpp"] or 1):
                    ps.set_virtual_pipeline_model_parallel_rank(stage if case["vpp"] else None)
                    extra = {}
                    if "vp_stage" in takes:
                        extra["vp_stage"] = stage if case["vpp"] else None
                    if "pp_rank" in takes:
                        extra["pp_rank"] = rank
                    row.append(get_num_layers_to_build(config, **extra))
                counts.append(row)
            out.append({"ok": True, "counts": counts})
        except (ValueError, AssertionError, ZeroDivisionError, TypeError) as exc:
            out.append({"ok": False, "error": str(exc), "type": type(exc).__name__})
    json.dump({"version": version, "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
