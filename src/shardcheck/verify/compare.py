"""What ``--verify`` asks megatron-core, what shardcheck expects, and how the two are compared.

Pure Python (no torch, no megatron): :func:`plan_engine` turns one engine of a :class:`~shardcheck.job.Job`
into a worker case (``shardcheck.verify.worker``'s JSON protocol) and shardcheck's own
:class:`Expectation` for it; :func:`compare` lists where the worker's result and the expectation differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shardcheck.job import Job, MegatronLayout
from shardcheck.mesh.grid import Grid, build_grid
from shardcheck.rules.registry import rule_id

GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "etp", "edp")
MAX_GROUP_LINES = 12  # group disagreements listed per engine; the rest are counted

# megatron-core's model-build errors (TransformerConfig.__post_init__, get_num_layers_to_build,
# BaseMoELayer.__init__; texts after "Type: ", whitespace collapsed) -> the shardcheck rule mirroring it.
CONFIG_RULE_OF_ERROR: tuple[tuple[str, re.Pattern], ...] = tuple(
    (rule, re.compile(pattern))
    for rule, pattern in (
        ("MCORE-TC-HEADS-TP", r"^num_attention_heads \(\d+\) must be a multiple of tensor_model_parallel_size"),
        ("MCORE-TC-QG-TP", r"^num_query_groups \(\d+\) must be a multiple (or divisor )?of tensor_model_parallel_size"),
        ("MCORE-TC-MOE-EP-NOEXP", r"^num_moe_experts must be non None to use expert-parallel"),
        ("MCORE-TC-UNEVEN-POS", r"^num_layers_in_(first|last)_pipeline_stage must be larger than 0"),
        ("MCORE-TC-UNEVEN-VPP", r"^number of layers at (first|last) stage: "),
        ("MCORE-TC-UNEVEN-VPP", r"^Uneven number of layer not compatible with interleaved pipeline schedule"),
        ("MCORE-TC-UNEVEN-VPP", r"^number of layers on each middle pipeline rank:"),
        ("MCORE-TC-UNEVEN-MIDDLE", r"^Mismatch: -?\d+ middle layers remaining"),
        ("MCORE-TC-UNEVEN-MIDDLE", r"^number of layers at middle stage: "),
        ("MCORE-TC-UNEVEN-MIDDLE", r"^With uneven pipelineing the left over layers"),
        ("MCORE-TC-UNEVEN-MIDDLE", r"^Not enough layers in the (first|last) virtual pipeline stage"),
        ("MCORE-TC-UNEVEN-ACCOUNT", r"^Does not support standalone embedding stage"),
        (
            "MCORE-TC-UNEVEN-ACCOUNT",
            r"^num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be",
        ),
        ("MCORE-TC-ACCOUNT-SPLIT", r"^number of middle layers: \d+ must be divisible"),
        ("MCORE-TC-ACCOUNT-SPLIT", r"^num_layers: \d+ after enable"),
        ("MCORE-TC-ACCOUNT-SPLIT", r"^number of layers on each pipeline rank: "),
        ("MCORE-BUILD-LAYERS-PP", r"^num_layers should be divisible by pipeline_model_parallel_size"),
        ("MCORE-BUILD-LAYERS-PP", r"^num_layers=\d+ should be divisible by config\.pipeline_model_parallel_size="),
        ("MCORE-BUILD-VPP", r"^num_layers_per_pipeline_rank (\d+ )?should be divisible by vp_size"),
        ("MCORE-TC-ACCOUNT-SPLIT", r"^TransformerConfig\.__init__\(\) got an unexpected keyword argument 'account_"),
        ("MCORE-TC-RECOMPUTE", r"^When using recompute_granuarlity: "),
        ("MCORE-TC-RECOMPUTE", r"^recompute_method: .* must be \"block\" or \"uniform\""),
        ("MCORE-TC-RECOMPUTE", r"^Using recompute_granularity: "),
        ("MCORE-TC-RECOMPUTE", r"^When using recompute_granularity: "),
        ("MCORE-TC-MOE-DISPATCH", r"^Token dispatcher type: \w+ does not support variable sequence length"),
        ("MCORE-TC-MOE-DISPATCH", r"^DeepEP backend is only supported with flex token dispatcher"),
        ("MCORE-BUILD-EXPERTS-EP", r"^num_moe_experts % ep_size == 0"),
        ("MCORE-TC-MOE-A2A-OVERLAP", r"^If enabling EP A2A overlap, virtual_pipeline_model_parallel_size"),
        ("MCORE-TC-MOE-A2A-OVERLAP", r"^overlap_moe_expert_parallel_comm is "),
        ("MCORE-TC-MOE-A2A-OVERLAP", r"^disable full recomputation when enabling overlap_moe"),
    )
)
CONFIG_RULE_PREFIXES = ("MCORE-TC-", "MCORE-BUILD-")
LAYOUT_RULE_PREFIX = "MCORE-PS-"
# megatron's text as a finding quotes it: `megatron-core: "TEXT"` up to the last quote before ")" or the end
# (TEXT itself may hold quotes: recompute_method must be "block" or "uniform").
QUOTED = re.compile(r'megatron-core: "(.*)"(?=\)|\s*$|\s—)')

# What --verify passes to TransformerConfig besides the model's own sizes, and why.
ASSUMPTIONS = (
    (
        "add_bias_linear=False: the HF Qwen / Llama / Mixtral-style models verl trains have no bias on their "
        "linear layers (Megatron-Bridge maps that to add_bias_linear=False)"
    ),
    "sequence_parallel as configured, and False at TP 1 (verl's McoreEngineConfig turns it off there)",
    "ffn_hidden_size and moe_ffn_hidden_size: megatron-core's defaults (no check on them depends on the value)",
    (
        "other override_transformer_config keys are not passed (only the recompute, uneven-pipeline, "
        "account-for, dispatcher, DeepEP and EP all-to-all overlap keys, which shardcheck's rules read; with the "
        "overlap also bf16=True, which it needs)"
    ),
)


@dataclass
class Expectation:
    """shardcheck's verdict on one engine, in the worker's terms.

    ``valid`` / ``errors``: the MCORE-PS-* rules (errors as (rule, message)); ``grid_valid``: build_grid's
    verdict; ``groups``: rank -> kind -> members from build_grid (None when the grid is invalid);
    ``config_valid`` / ``config_errors``: the MCORE-TC-* / MCORE-BUILD-* rules (None: not compared);
    ``layers_per_stage``: ``shardcheck.rules.megatron_model.layer_split`` (None: not compared).
    """

    role: str
    valid: bool
    errors: list[tuple[str, str]] = field(default_factory=list)
    grid_valid: bool | None = None
    grid_error: str | None = None
    dp: int | None = None
    edp: int | None = None
    groups: dict[int, dict[str, list[int]]] | None = None
    config_valid: bool | None = None
    config_errors: list[tuple[str, str]] = field(default_factory=list)
    layers_per_stage: list[int] | None = None

    def to_dict(self) -> dict:
        return {
            "role": self.role,
            "valid": self.valid,
            "errors": [list(e) for e in self.errors],
            "grid_valid": self.grid_valid,
            "grid_error": self.grid_error,
            "dp": self.dp,
            "edp": self.edp,
            "config_valid": self.config_valid,
            "config_errors": [list(e) for e in self.config_errors],
            "layers_per_stage": self.layers_per_stage,
        }


@dataclass
class EnginePlan:
    """One engine to verify: the worker case, shardcheck's expectation, what is not compared and why."""

    role: str
    case: dict | None  # None: a size is unknown, nothing can be asked
    expected: Expectation | None
    ranks: list[int] = field(default_factory=list)
    rank_selection: str = ""
    unverified: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _norm(text: str) -> str:
    return " ".join(text.split())


def strip_type(error: str) -> str:
    """'RuntimeError: text' -> 'text'."""
    head, sep, rest = error.partition(": ")
    return rest if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head) else error


def config_rule_of(error: str) -> str | None:
    text = _norm(strip_type(error))
    return next((rule for rule, pat in CONFIG_RULE_OF_ERROR if pat.match(text)), None)


def _quotes(message: str) -> list[str]:
    return [_norm(q) for q in QUOTED.findall(message)]


# ---------------------------------------------------------------------------------------------------
# ranks


def select_ranks(world: int, grid: Grid | None, devices_per_node: int | None, limit: int) -> tuple[list[int], str]:
    """Every rank when ``world <= limit``; else representatives of every position a group can take."""
    if world <= limit:
        return list(range(world)), f"all {world} ranks (world {world} <= {limit})"
    picked: dict[int, None] = {}

    def add(*ranks: int) -> None:
        for r in ranks:
            if 0 <= r < world:
                picked.setdefault(r, None)

    why = ["rank 0 and the last rank"]
    add(0, world - 1)
    if grid is not None:
        # the first and the last rank of every pipeline stage: the pp groups of rank 0 and of the last rank
        add(*grid.group_of("pp", 0), *grid.group_of("pp", world - 1))
        why.append("the first and last rank of each of the PP stages")
        # one step and the far end along every dimension of both generators (TP, CP, DP, EP, ETP, EDP...)
        for gen in (grid.dense, grid.expert):
            stride = 1
            for size in gen.sizes:
                if size > 1:
                    add(stride, (size - 1) * stride)
                stride *= size
        why.append("one step and the last step along each parallel dimension (dense and expert grids)")
    g = devices_per_node or 0
    if 0 < g < world and world % g == 0:
        nnodes = world // g
        step = max(1, (nnodes - 1 + 31) // 32)  # at most ~32 boundaries
        boundaries = list(range(1, nnodes, step))
        for n in boundaries:
            add(n * g - 1, n * g)
        shown = "each node boundary" if step == 1 else f"every {step}th node boundary"
        why.append(f"both sides of {shown} ({g} devices per node)")
    ranks = sorted(picked)
    return ranks, f"{len(ranks)} representative ranks of {world} (world > {limit}): " + ", ".join(why)


# ---------------------------------------------------------------------------------------------------
# planning


def _value(traced, name: str, missing: list[str]):
    if not traced.known:
        missing.append(f"{name} ({traced.unknown})")
        return None
    return traced.value


def model_dict(job: Job, e: MegatronLayout) -> tuple[dict | None, list[str], list[str]]:
    """The worker's "model" for engine ``e``: (dict or None, notes, unverified).

    No model (or one without layer / head counts, or a pipeline layout string) leaves the model out of the
    comparison: a note, as shardcheck's own model rules are skipped then. A value of the script that is
    unknown leaves it unverified (``VerifyReport.agrees`` is False), as it leaves shardcheck undecided."""
    m = job.model
    if m is None:
        return (
            None,
            [
                (
                    f"[{e.role}] no model ({job.model_problem or 'none found'}): TransformerConfig and layers "
                    "per stage not compared"
                )
            ],
            [],
        )
    notes: list[str] = []
    missing: list[str] = []
    layers, heads = m.num_hidden_layers, m.num_attention_heads
    if not layers or not heads:
        return None, [f"[{e.role}] {m.name}: layer or head count unknown: TransformerConfig not compared"], []
    if e.layout_string.known and e.layout_string.value:
        return (
            None,
            [
                (
                    f"[{e.role}] pipeline_model_parallel_layout is set: TransformerConfig and layers per "
                    "stage not compared (--verify does not model layout strings)"
                )
            ],
            [],
        )
    hidden = m.hidden_size
    if not hidden:
        hidden = heads * 128
        notes.append(f"hidden_size unknown: {hidden} (128 per head) given to TransformerConfig; no check depends on it")
    if m.mla:
        notes.append(
            f"{m.name} uses multi-latent attention: checked with the plain TransformerConfig "
            "(MLATransformerConfig adds no parallel-size check)"
        )
    model: dict = {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_query_groups": m.num_key_value_heads,
        "num_moe_experts": m.num_experts or None,
        "add_bias_linear": False,
        "num_layers_in_first_pipeline_stage": _value(
            e.first_stage_layers, "num_layers_in_first_pipeline_stage", missing
        ),
        "num_layers_in_last_pipeline_stage": _value(e.last_stage_layers, "num_layers_in_last_pipeline_stage", missing),
        "virtual_pipeline_model_parallel_size": _value(e.vpp, "virtual_pipeline_model_parallel_size", missing),
        "account_for_embedding_in_pipeline_split": bool(
            _value(e.account_for_embedding, "account_for_embedding_in_pipeline_split", missing)
        ),
        "account_for_loss_in_pipeline_split": bool(
            _value(e.account_for_loss, "account_for_loss_in_pipeline_split", missing)
        ),
    }
    tp = e.tp.value if e.tp.known else None
    sp = _value(e.sequence_parallel, "sequence_parallel", missing)
    model["sequence_parallel"] = bool(sp) and bool(tp and tp > 1)
    ov = e.transformer_overrides
    for name in ("recompute_granularity", "recompute_method", "recompute_num_layers"):
        if name in ov:
            model[name] = _value(ov[name], f"override_transformer_config.{name}", missing)
    if job.framework == "verl":
        from shardcheck.frameworks.verl.provider import PROVIDER_DEFAULTS

        for name, default in PROVIDER_DEFAULTS.items():
            model[name] = _value(ov[name], f"override_transformer_config.{name}", missing) if name in ov else default
    elif "moe_token_dispatcher_type" in ov or "variable_seq_lengths" in ov:
        for name in ("moe_token_dispatcher_type", "variable_seq_lengths", "moe_enable_deepep"):
            if name in ov:
                model[name] = _value(ov[name], f"override_transformer_config.{name}", missing)
    overlap = job.value(
        "actor_rollout_ref.actor.megatron.override_transformer_config.overlap_moe_expert_parallel_comm"
        if job.framework == "verl"
        else "--overlap-moe-expert-parallel-comm"
    )
    if e.role == "actor" and overlap.known and overlap.value:
        # the EP all-to-all overlap (MCORE-TC-MOE-A2A-OVERLAP) with the launch's bf16 and dispatcher
        model["overlap_moe_expert_parallel_comm"] = True
        model["bf16"] = True
        if job.framework != "verl":
            model["moe_token_dispatcher_type"] = _value(
                job.value("--moe-token-dispatcher-type"), "moe_token_dispatcher_type", missing
            )
    if missing:
        return None, notes, [f"[{e.role}] TransformerConfig not verified: unknown {', '.join(missing)}"]
    return model, notes, []


def plan_engine(job: Job, e: MegatronLayout, findings: list, *, all_ranks_limit: int = 64) -> EnginePlan:
    """The worker case for engine ``e`` of ``job`` and shardcheck's expectation for it."""
    from shardcheck.frameworks.megatron.pipeline import Split
    from shardcheck.rules.megatron_model import layer_split

    plan = EnginePlan(role=e.role, case=None, expected=None)
    missing: list[str] = []
    world = _value(job.cluster.world, "world size", missing)
    sizes = {k: _value(getattr(e, k), k.upper(), missing) for k in ("tp", "pp", "cp", "ep")}
    etp = _value(e.etp_setting, "ETP", missing)
    vpp = _value(e.vpp, "VPP", missing)
    if missing:
        plan.unverified.append(f"[{e.role}] not verified: unknown {', '.join(missing)}")
        return plan
    mine = [f for f in findings if f.severity == "error" and (f.role in (None, e.role))]
    ps_errors = [(f.rule, f.message) for f in mine if f.rule.startswith(LAYOUT_RULE_PREFIX)]
    grid = build_grid(world=world, etp=etp, vpp=vpp, order=e.order, **sizes)
    grid_ok = isinstance(grid, Grid)
    dpn = job.cluster.devices_per_node.value if job.cluster.devices_per_node.known else None
    ranks, why = select_ranks(world, grid if grid_ok else None, dpn, all_ranks_limit)
    if not grid_ok:
        ranks, why = [0], "rank 0 (shardcheck finds the layout invalid: no groups to compare)"
    expected = Expectation(
        role=e.role,
        valid=not ps_errors,
        errors=ps_errors,
        grid_valid=grid_ok,
        grid_error=None if grid_ok else f"{rule_id(grid.kind)}: {grid.message}",
        dp=grid.dp if grid_ok else None,
        edp=grid.edp if grid_ok else None,
        groups={r: {k: grid.group_of(k, r) for k in GROUP_KINDS} for r in ranks} if grid_ok else None,
    )
    case = {"world": world, **sizes, "etp": etp, "vpp": vpp, "order": e.order, "ranks": ranks}
    model, notes, unverified = model_dict(job, e)
    plan.notes.extend(notes)
    plan.unverified.extend(unverified)
    if model is not None:
        case["model"] = model
        tc = [(f.rule, f.message) for f in mine if f.rule.startswith(CONFIG_RULE_PREFIXES)]
        expected.config_valid = not tc
        expected.config_errors = tc
        split = layer_split(e, job.model.num_hidden_layers)
        expected.layers_per_stage = list(split.stages) if isinstance(split, Split) else None
    plan.case, plan.expected, plan.ranks, plan.rank_selection = case, expected, ranks, why
    return plan


# ---------------------------------------------------------------------------------------------------
# comparing


def _short(ranks) -> str:
    if not isinstance(ranks, list) or len(ranks) <= 10 or not all(isinstance(r, int) for r in ranks):
        return str(ranks)
    return f"[{', '.join(map(str, ranks[:6]))}, ..., {', '.join(map(str, ranks[-2:]))}] ({len(ranks)} ranks)"


# shardcheck's own checks of things megatron-core accepts silently (compared by their evidence instead).
BEYOND_MEGATRON = frozenset({"MCORE-BUILD-NEGATIVE-STAGE"})


def compare(case: dict, result: dict, expected: Expectation) -> list[str]:
    """Where megatron-core's ``result`` for ``case`` and shardcheck's ``expected`` differ (empty: they agree)."""
    tag = f"[{expected.role}]"
    out: list[str] = []
    error = result.get("error") or ""
    if error.startswith("OracleError"):
        return [f"{tag} the megatron-core worker failed: {error}"]
    # -- parallel state: verdict, first error, DP/EDP, groups
    valid = result.get("valid")
    if valid is not None:
        if valid != expected.valid:
            out.append(
                f"{tag} parallel state: megatron-core {'initialises' if valid else 'raises'} "
                f"({error or 'no error'}); shardcheck says {'valid' if expected.valid else 'invalid'} "
                f"({'; '.join(f'{r}: {m}' for r, m in expected.errors) or 'no MCORE-PS error'})"
            )
        elif not valid:
            text = _norm(strip_type(error))
            if not any(text in _quotes(m) for _, m in expected.errors):
                out.append(
                    f"{tag} parallel state: both invalid, but no shardcheck MCORE-PS error quotes "
                    f"megatron-core's first error {error!r} (shardcheck: "
                    f"{'; '.join(f'{r}: {m}' for r, m in expected.errors)})"
                )
        if expected.grid_valid is not None and valid != expected.grid_valid:
            out.append(
                f"{tag} rank grid: megatron-core {'valid' if valid else 'invalid'} ({error or 'no error'}), "
                f"shardcheck build_grid {'valid' if expected.grid_valid else expected.grid_error}"
            )
        if valid and expected.grid_valid:
            for k in ("dp", "edp"):
                if result.get(k) != getattr(expected, k):
                    out.append(f"{tag} {k.upper()}: megatron-core {result.get(k)} != shardcheck {getattr(expected, k)}")
            out.extend(_compare_groups(tag, result.get("groups") or {}, expected.groups or {}))
    # -- model: TransformerConfig verdict, first error, layers per stage
    if case.get("model") and expected.config_valid is not None:
        cvalid, cerror = result.get("config_valid"), result.get("config_error") or ""
        beyond = expected.config_errors and all(r in BEYOND_MEGATRON for r, _ in expected.config_errors)
        if cerror.startswith("OracleError"):
            out.append(f"{tag} the megatron-core worker could not build the model config: {cerror}")
        elif cvalid and beyond and any(n < 0 for n in result.get("layers_per_stage") or []):
            pass  # megatron-core builds negative stages without a word; shardcheck reports it (its own check)
        elif cvalid != expected.config_valid:
            out.append(
                f"{tag} model build: megatron-core {'accepts' if cvalid else 'raises'} "
                f"({cerror or 'TransformerConfig and get_num_layers_to_build pass'}); shardcheck says "
                f"{'valid' if expected.config_valid else 'invalid'} "
                f"({'; '.join(f'{r}: {m}' for r, m in expected.config_errors) or 'no MCORE-TC/BUILD error'})"
            )
        elif not cvalid:
            why = _config_first_error(cerror, expected.config_errors)
            if why:
                out.append(f"{tag} model build: {why}")
        elif (
            expected.layers_per_stage is not None
            and result.get("layers_per_stage") is not None
            and result.get("layers_per_stage") != expected.layers_per_stage
        ):
            out.append(
                f"{tag} layers per stage: megatron-core {result.get('layers_per_stage')} != shardcheck "
                f"{expected.layers_per_stage}"
            )
    return out


def _config_first_error(error: str, errors: list[tuple[str, str]]) -> str | None:
    """None when shardcheck reports megatron-core's first model-build error with the rule that mirrors it."""
    rule = config_rule_of(error)
    listed = "; ".join(f"{r}: {m}" for r, m in errors)
    if rule is None:
        return f"megatron-core raised a check shardcheck has no rule for: {error!r} (shardcheck: {listed})"
    same = [m for r, m in errors if r == rule]
    if not same:
        return f"megatron-core's first error {error!r} is {rule}'s check, but shardcheck reports {listed}"
    text = _norm(strip_type(error))
    quoted = [q for m in same for q in _quotes(m)]
    if quoted and not any(text.startswith(q) for q in quoted):
        return f"{rule}: megatron-core says {text!r}, shardcheck quotes {' / '.join(repr(q) for q in quoted)}"
    return None


def _compare_groups(tag: str, got: dict, want: dict[int, dict[str, list[int]]]) -> list[str]:
    lines: list[str] = []
    count = 0
    for rank, kinds in want.items():
        theirs = got.get(str(rank))
        if theirs is None:
            count += 1
            if len(lines) < MAX_GROUP_LINES:
                lines.append(f"{tag} rank {rank}: megatron-core returned no groups")
            continue
        for kind in GROUP_KINDS:
            if theirs.get(kind) != kinds.get(kind):
                count += 1
                if len(lines) < MAX_GROUP_LINES:
                    lines.append(
                        f"{tag} rank {rank} {kind} group: megatron-core {_short(theirs.get(kind))} != "
                        f"shardcheck {_short(kinds.get(kind))}"
                    )
    if count > len(lines):
        lines.append(f"{tag} ... {count - len(lines)} more group differences")
    return lines
