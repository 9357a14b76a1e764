"""Megatron-Core worker: runs the real megatron-core on cases, for ``--verify`` and the differential tests.

Usage::

    python -m shardcheck.verify.worker [--jobs N] [--strict] [--timing] < cases.json > results.json

Input: a JSON list of cases::

    {"world": 256 | null, "tp": 2, "pp": 16, "cp": 8, "ep": 16, "etp": 1 | null,
     "vpp": null | int, "order": "tp-cp-ep-dp-pp", "ranks": [0, 13],
     "model": {...}}                  # optional, see below

Output: a JSON list, one result per case, in input order::

    {"valid": bool | null, "error": "RuntimeError: ..." | null,
     "dp": int | null, "edp": int | null, "etp": int | null,
     "groups": {"13": {"tp": [...], "cp": [...], "dp": [...], "pp": [...],
                       "ep": [...], "etp": [...], "edp": [...]}},
     "config_valid": bool | null, "config_error": "ValueError: ..." | null,
     "layers_per_stage": [5, 6, ..., 5] | null,
     "megatron_version": "0.16.1"}

**Parallel state.** Each case runs the real ``megatron.core.parallel_state.initialize_model_parallel``
on torch's ``fake`` process-group backend (one simulated rank, no communication), so every check
megatron-core makes is the one that decides validity. ``"world": null`` skips it (``valid`` null).

**Model.** A case may carry ``"model"``: ``num_layers``, ``hidden_size``, ``num_attention_heads``,
``num_query_groups``, ``num_moe_experts``, ``ffn_hidden_size``, ``moe_ffn_hidden_size``,
``num_layers_in_first_pipeline_stage``, ``num_layers_in_last_pipeline_stage``,
``virtual_pipeline_model_parallel_size``, ``recompute_granularity``, ``recompute_method``,
``recompute_num_layers``, ``moe_token_dispatcher_type``, ``variable_seq_lengths``,
``add_bias_linear``, ``sequence_parallel`` (and any other ``TransformerConfig`` field, e.g.
``account_for_embedding_in_pipeline_split``, ``moe_enable_deepep``). The worker then, independently of
the parallel-state result and in the order a model build meets them:

1. constructs ``megatron.core.transformer.TransformerConfig(**model, tensor_model_parallel_size=tp,
   pipeline_model_parallel_size=pp, context_parallel_size=cp, expert_model_parallel_size=ep,
   expert_tensor_parallel_size=etp)`` -- plus ``pipeline_dtype=torch.bfloat16, bf16=True`` when
   pp > 1, as Megatron-Bridge / verl fill them; ``virtual_pipeline_model_parallel_size`` defaults to
   the case's ``vpp``;
2. calls ``megatron.core.transformer.transformer_block.get_num_layers_to_build(config, vp_stage=v,
   pp_rank=r)`` for every pipeline rank r and virtual stage v (v in range(vpp); ``vp_stage`` None
   without vpp); ``layers_per_stage`` sums over the chunks (null, with a ``layers_note``, for VPP with
   PP 1, which initialize_model_parallel rejects: megatron-core has no split for it);
3. checks ``num_moe_experts % expert_model_parallel_size == 0``, what ``BaseMoELayer.__init__``
   asserts (a bare ``assert``: megatron has no text for it, the worker names the condition).

``config_error`` is the first exception (type and first line of its text), ``config_valid`` whether
there was none; both null, and ``layers_per_stage`` null, without ``"model"``.

Speed (the only things touched; none is validation logic):

* Default mode initialises megatron once per case, as the first listed rank
  (rank 0 when none is listed).  Megatron itself enumerates *every* group of
  every kind and hands each rank list to ``create_group``; we record those
  lists, and the groups of the other listed ranks are the recorded lists that
  contain them -- exactly megatron's own ``if rank in ranks`` selection (for more
  than a few ranks, looked up in a rank -> lists index built once per case).  For
  the initialising rank the result comes from the real getters
  (``get_tensor_model_parallel_group`` ... + ``get_process_group_ranks``) and
  is cross-checked against the recording.
* megatron's pure ``generate_masked_orthogonal_rank_groups`` is memoised
  (small LRU, fresh copies returned): one init asks for the same groups up to
  three times and random layouts repeat shapes.  It is ~90% of what remains of
  a large-world case and is the rank math under test, so it is not replaced.
* ``create_group`` calls for groups the simulated rank is not a member of skip
  ``torch.distributed.new_group`` (which, for a non-member, only does
  bookkeeping and returns ``GroupMember.NON_GROUP_MEMBER``); torch's cheap rank
  sanity checks (duplicates / out of range) are replicated.  Member groups go
  through megatron's real ``create_group``/``new_group``.

``--strict`` (or SHARDCHECK_ORACLE_STRICT=1) disables all three: no wrappers, a
fresh init per listed rank with results from the getters only.

``--jobs N`` (or SHARDCHECK_ORACLE_JOBS) forks N workers after the (slow, ~5 s)
megatron import; default: all available cores (max 8) for >= 16 cases.

stdout carries only the JSON; everything megatron/torch print goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

_REAL_STDOUT_FD = None
if __name__ == "__main__":
    # Route everything written to fd 1 (Python prints, C-level writes, logging
    # to stdout) to stderr; keep a private handle on the real stdout for JSON.
    _REAL_STDOUT_FD = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.filterwarnings("ignore")

import dataclasses
import logging

with warnings.catch_warnings():
    # megatron-core warns at import that Transformer Engine / Apex are missing
    warnings.simplefilter("ignore")
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from torch.distributed.distributed_c10d import GroupMember
    from torch.testing._internal.distributed.fake_pg import FakeStore

try:
    from megatron.core.package_info import __version__ as MEGATRON_VERSION
except ImportError:  # pragma: no cover - very old or unusual installs: no package_info module
    from importlib.metadata import version as _version

    MEGATRON_VERSION = _version("megatron-core")

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
KINDS = ("tp", "cp", "dp", "pp", "ep", "etp", "edp")

# The model keys of the protocol (any other TransformerConfig field is accepted too).
MODEL_KEYS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "num_moe_experts",
    "ffn_hidden_size",
    "moe_ffn_hidden_size",
    "num_layers_in_first_pipeline_stage",
    "num_layers_in_last_pipeline_stage",
    "virtual_pipeline_model_parallel_size",
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "moe_token_dispatcher_type",
    "variable_seq_lengths",
    "add_bias_linear",
    "sequence_parallel",
)
_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(TransformerConfig))
# Set by the worker from the case's sizes; a model dict must not set them.
_SIZE_FIELDS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
)

# group_desc megatron passes to create_group -> our group kind
_DESC_TO_KIND = {
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "DATA_PARALLEL_GROUP": "dp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_TENSOR_PARALLEL_GROUP": "etp",
    "EXPERT_DATA_PARALLEL_GROUP": "edp",
}

_GETTERS = {
    "tp": lambda: ps.get_tensor_model_parallel_group(),
    "cp": lambda: ps.get_context_parallel_group(),
    "dp": lambda: ps.get_data_parallel_group(with_context_parallel=False),
    "pp": lambda: ps.get_pipeline_model_parallel_group(),
    "ep": lambda: ps.get_expert_model_parallel_group(),
    "etp": lambda: ps.get_expert_tensor_parallel_group(),
    "edp": lambda: ps.get_expert_data_parallel_group(),
}

# Module globals that destroy_model_parallel() leaves set in megatron-core
# 0.16.1.  None of them is asserted-None by initialize_model_parallel (those are
# all reset by destroy), but some feed getters (e.g. _MPU_DATA_PARALLEL_WORLD_SIZE
# short-circuits get_data_parallel_world_size), so reset them between cases.
_EXTRA_RESET = {
    "_PIPELINE_GLOBAL_RANKS": None,
    "_EMBEDDING_GLOBAL_RANKS": None,
    "_DATA_PARALLEL_GLOBAL_RANKS": None,
    "_TENSOR_MODEL_PARALLEL_GLOBAL_RANKS": None,
    "_EXPERT_MODEL_PARALLEL_RANKS": None,
    "_MODEL_PARALLEL_GLOBAL_RANKS": None,
    "_DATA_PARALLEL_GLOBAL_RANKS_WITH_CP": None,
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP": None,
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO": None,
    "_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS": None,
    "_MPU_DATA_PARALLEL_WORLD_SIZE": None,
    "_MPU_DATA_PARALLEL_RANK": None,
    "_VIRTUAL_PIPELINE_MODEL_PARALLEL_RANK": None,
    "_VIRTUAL_PIPELINE_MODEL_PARALLEL_WORLD_SIZE": None,
}

_ORIG_CREATE_GROUP = ps.create_group
_ORIG_GEN_GROUPS = ps.generate_masked_orthogonal_rank_groups

# Memo for megatron's (pure) generate_masked_orthogonal_rank_groups: one
# initialize_model_parallel asks for the same (world, sizes, mask) up to 3
# times ('pp' for both generators and the equality assert, 'tp-ep-pp' twice),
# and random layouts repeat shapes across cases.  Results are returned as fresh
# copies, so callers can't observe the cache.
_GEN_CACHE: dict[tuple, list[list[int]]] = {}
_GEN_CACHE_MAX = 64


def _cached_gen_groups(world_size, parallel_size, mask):
    key = (world_size, tuple(parallel_size), tuple(bool(m) for m in mask))
    hit = _GEN_CACHE.pop(key, None)
    if hit is None:
        hit = _ORIG_GEN_GROUPS(world_size, list(parallel_size), list(mask))
        if len(_GEN_CACHE) >= _GEN_CACHE_MAX:
            _GEN_CACHE.pop(next(iter(_GEN_CACHE)))
    _GEN_CACHE[key] = hit  # (re)insert as most recent
    return [list(g) for g in hit]


class _Recorder:
    """Wraps megatron's create_group: records every rank list per kind and
    skips torch.new_group for groups the simulated rank is not in."""

    def __init__(self, rank: int, world: int):
        self.rank = rank
        self.world = world
        self.lists: dict[str, list[list[int]]] = {k: [] for k in KINDS}
        self._index: dict[str, dict[int, list[list[int]]]] | None = None
        self._calls = 0

    def __call__(self, ranks=None, *args, group_desc=None, **kwargs):
        kind = _DESC_TO_KIND.get(group_desc)
        if kind is not None and ranks is not None:
            self.lists[kind].append(list(ranks))
            self._index = None
        if ranks is not None and self.rank not in ranks:
            # Same sanity checks torch's new_group performs, then the value it
            # would return for a non-member.
            if len(set(ranks)) != len(ranks):
                raise ValueError(f"ranks list must not contain duplicate entries, got {sorted(ranks)}")
            if len(ranks) > self.world:
                raise ValueError(
                    "the new group's world size should be less or equal to the world size set by init_process_group"
                )
            if ranks and (min(ranks) < 0 or max(ranks) >= self.world):
                bad = min(ranks) if min(ranks) < 0 else max(ranks)
                raise ValueError(
                    f"Rank {bad} is out of range. Valid ranks are 0 to {self.world - 1} (world_size={self.world})"
                )
            return GroupMember.NON_GROUP_MEMBER
        return _ORIG_CREATE_GROUP(ranks, *args, group_desc=group_desc, **kwargs)

    def groups_of(self, rank: int) -> dict[str, list[int] | None]:
        """The recorded lists holding ``rank``, per kind (a list of them if several, None if none)."""
        self._calls += 1
        if self._index is None and self._calls <= 8:  # a few ranks: scan (C-speed `in`)
            out: dict[str, list[int] | None] = {}
            for kind in KINDS:
                hits = [sorted(g) for g in self.lists[kind] if rank in g]
                out[kind] = hits[0] if len(hits) == 1 else (hits or None)
            return out
        if self._index is None:  # many ranks: rank -> its lists in recording order, built once
            self._index = {k: {} for k in KINDS}
            for kind in KINDS:
                idx = self._index[kind]
                for g in self.lists[kind]:
                    for r in set(g):
                        idx.setdefault(r, []).append(g)
        out: dict[str, list[int] | None] = {}
        for kind in KINDS:
            hits = [sorted(g) for g in self._index[kind].get(rank, ())]
            out[kind] = hits[0] if len(hits) == 1 else (hits or None)
        return out


def _format_error(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    name = type(exc).__name__
    return f"{name}: {first}" if first else name


def _reset_state() -> None:
    try:
        ps.destroy_model_parallel()
    except (RuntimeError, AssertionError, AttributeError, ValueError):  # pragma: no cover - defensive
        pass  # nothing was initialised, or a half-made state: the globals are reset below either way
    for name, value in _EXTRA_RESET.items():
        if hasattr(ps, name):
            setattr(ps, name, value)
    if hasattr(ps, "_HYBRID_DP_CP_GROUPS"):
        ps._HYBRID_DP_CP_GROUPS = {}
    ps.create_group = _ORIG_CREATE_GROUP
    ps.generate_masked_orthogonal_rank_groups = _ORIG_GEN_GROUPS
    if dist.is_initialized():
        dist.destroy_process_group()


def _opt_int(v):
    return None if v is None else int(v)


def _run_one(case: dict, rank: int, record: bool):
    """Initialise megatron as `rank`; return (result_fields, recorder|None)."""
    world = int(case["world"])
    recorder = _Recorder(rank, world) if record else None
    dist.init_process_group(backend="fake", store=FakeStore(), world_size=world, rank=rank)
    try:
        if recorder is not None:
            ps.create_group = recorder
            ps.generate_masked_orthogonal_rank_groups = _cached_gen_groups
        try:
            ps.initialize_model_parallel(
                tensor_model_parallel_size=int(case.get("tp", 1)),
                pipeline_model_parallel_size=int(case.get("pp", 1)),
                virtual_pipeline_model_parallel_size=_opt_int(case.get("vpp")),
                context_parallel_size=int(case.get("cp", 1)),
                expert_model_parallel_size=int(case.get("ep", 1)),
                expert_tensor_parallel_size=_opt_int(case.get("etp")),
                order=case.get("order") or DEFAULT_ORDER,
                create_gloo_process_groups=False,
            )
        except Exception as exc:  # noqa: BLE001 — the oracle's answer: whatever megatron-core raises is the verdict
            return {"valid": False, "error": _format_error(exc)}, None
        groups = {k: sorted(dist.get_process_group_ranks(get())) for k, get in _GETTERS.items()}
        res = {
            "valid": True,
            "error": None,
            "dp": ps.get_data_parallel_world_size(),
            "edp": ps.get_expert_data_parallel_world_size(),
            "etp": ps.get_expert_tensor_parallel_world_size(),
            "own_groups": groups,
        }
        if recorder is not None:
            rec = recorder.groups_of(rank)
            if rec != groups:
                raise AssertionError(f"oracle self-check failed for rank {rank}: recorded {rec} != getters {groups}")
        return res, recorder
    finally:
        _reset_state()


def _parallel_state(case: dict, strict: bool) -> dict:
    if case.get("world") is None:
        return {"valid": None, "error": None, "dp": None, "edp": None, "etp": None, "groups": {}}
    world = int(case["world"])
    ranks = [int(r) for r in (case.get("ranks") or [])]
    in_range = [r for r in ranks if 0 <= r < world]
    first = in_range[0] if in_range else 0
    try:
        res, recorder = _run_one(case, first, record=not strict)
    except Exception as exc:  # noqa: BLE001  # oracle-side failure: report, don't crash the batch
        return {
            "valid": False,
            "error": "OracleError: " + _format_error(exc),
            "dp": None,
            "edp": None,
            "etp": None,
            "groups": {},
        }
    out = {
        "valid": res["valid"],
        "error": res["error"],
        "dp": res.get("dp"),
        "edp": res.get("edp"),
        "etp": res.get("etp"),
        "groups": {},
    }
    if not res["valid"]:
        return out
    for r in ranks:
        key = str(r)
        if key in out["groups"]:
            continue
        if not (0 <= r < world):
            out["groups"][key] = None
        elif r == first:
            out["groups"][key] = res["own_groups"]
        elif strict:
            res_r, _ = _run_one(case, r, record=False)
            out["groups"][key] = res_r.get("own_groups")
        else:
            out["groups"][key] = recorder.groups_of(r)
    return out


class _ModelCaseError(Exception):
    """The case's model dict itself is unusable (not a megatron verdict)."""


def _config_kwargs(case: dict) -> dict:
    model = dict(case["model"])
    unknown = sorted(k for k in model if k not in _CONFIG_FIELDS)
    if unknown:
        raise _ModelCaseError(f"not TransformerConfig fields: {', '.join(unknown)}")
    sized = sorted(k for k in model if k in _SIZE_FIELDS)
    if sized:
        raise _ModelCaseError(f"give the sizes as the case's tp/pp/cp/ep/etp, not in the model: {', '.join(sized)}")
    pp = int(case.get("pp", 1))
    kwargs = {k: v for k, v in model.items()}
    kwargs.setdefault("virtual_pipeline_model_parallel_size", _opt_int(case.get("vpp")))
    kwargs.update(
        tensor_model_parallel_size=int(case.get("tp", 1)),
        pipeline_model_parallel_size=pp,
        context_parallel_size=int(case.get("cp", 1)),
        expert_model_parallel_size=int(case.get("ep", 1)),
        expert_tensor_parallel_size=_opt_int(case.get("etp")),
    )
    if pp > 1:  # as Megatron-Bridge / verl fill them (bf16 training)
        kwargs.setdefault("pipeline_dtype", torch.bfloat16)
        kwargs.setdefault("bf16", True)
    return kwargs


def _model(case: dict) -> dict:
    """TransformerConfig -> get_num_layers_to_build per stage -> BaseMoELayer's expert split."""
    out = {"config_valid": None, "config_error": None, "layers_per_stage": None}
    if not case.get("model"):
        return out
    try:
        kwargs = _config_kwargs(case)
    except _ModelCaseError as exc:
        out.update(config_valid=False, config_error=f"OracleError: {exc}")
        return out
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = TransformerConfig(**kwargs)
        pp = config.pipeline_model_parallel_size
        vpp = config.virtual_pipeline_model_parallel_size
        if vpp is not None and pp == 1:
            # No interleaving without pipeline stages: initialize_model_parallel rejects VPP with PP 1,
            # so megatron-core never builds this model and its split is undefined (get_num_layers_to_build
            # would still count the embedding/loss per virtual stage that does not exist).
            stages = None
            out["layers_note"] = "VPP with PP 1: no layer split (initialize_model_parallel rejects it)"
        else:
            chunks = range(vpp) if vpp is not None else [None]
            stages = [sum(get_num_layers_to_build(config, vp_stage=v, pp_rank=r) for v in chunks) for r in range(pp)]
        experts, ep = config.num_moe_experts, config.expert_model_parallel_size
        if experts is not None and experts % ep != 0:
            # megatron/core/transformer/moe/moe_layer.py BaseMoELayer.__init__:
            #     assert self.config.num_moe_experts % ep_size == 0      (no message)
            raise AssertionError(f"num_moe_experts % ep_size == 0 ({experts} % {ep}; BaseMoELayer.__init__)")
    except Exception as exc:  # noqa: BLE001 — the oracle's answer: whatever megatron-core raises is the verdict
        out.update(config_valid=False, config_error=_format_error(exc))
        return out
    out.update(config_valid=True, layers_per_stage=stages)
    return out


def run_case(case: dict, strict: bool = False) -> dict:
    out = _parallel_state(case, strict)
    try:
        out.update(_model(case))
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - oracle-side failure
        out.update(config_valid=False, config_error="OracleError: " + _format_error(exc), layers_per_stage=None)
    out["megatron_version"] = MEGATRON_VERSION
    return out


def _worker(args):
    case, strict = args
    return run_case(case, strict)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument(
        "--strict", action="store_true", default=os.environ.get("SHARDCHECK_ORACLE_STRICT", "") not in ("", "0")
    )
    ap.add_argument("--timing", action="store_true", help="add 'seconds' to each result")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    os.environ["TORCH_DIST_INIT_BARRIER"] = "0"  # no store barrier per new_group

    cases = json.load(sys.stdin)
    if not isinstance(cases, list):
        raise SystemExit("input must be a JSON list of cases")

    jobs = args.jobs
    if jobs is None:
        env = os.environ.get("SHARDCHECK_ORACLE_JOBS")
        if env:
            jobs = int(env)
        else:
            try:
                ncpu = len(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover
                ncpu = os.cpu_count() or 1
            jobs = min(ncpu, 8) if len(cases) >= 16 else 1
    jobs = max(1, min(jobs, len(cases) or 1))

    work = [(c, args.strict) for c in cases]
    if args.timing:
        import time

        def timed(a):
            t = time.perf_counter()
            r = _worker(a)
            r["seconds"] = time.perf_counter() - t
            return r

        fn = timed
    else:
        fn = _worker

    if jobs == 1:
        results = [fn(a) for a in work]
    else:
        import multiprocessing as mp

        # A forked child inherits fn; the pool pickles only _pool_call (by module and name) and the
        # cases, so this works both as `python -m shardcheck.verify.worker` and from a runpy shim.
        global _POOL_FN
        _POOL_FN = fn
        with mp.get_context("fork").Pool(jobs) as pool:
            results = list(pool.imap(_pool_call, work, chunksize=1))

    if _REAL_STDOUT_FD is not None:
        with os.fdopen(_REAL_STDOUT_FD, "w") as out:
            json.dump(results, out)
            out.write("\n")
    else:
        json.dump(results, sys.stdout)
        sys.stdout.write("\n")
    return 0


_POOL_FN = None


def _pool_call(a):
    return _POOL_FN(a)


if __name__ == "__main__":
    sys.exit(main())
