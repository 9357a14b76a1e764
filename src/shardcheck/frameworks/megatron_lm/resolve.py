"""Resolve a Megatron-LM launch (``torchrun ... pretrain_gpt.py --tensor-model-parallel-size 8 ...``)
into the same :class:`~shardcheck.job.Job` a verl launch gives, so the Megatron-Core rules judge it.

Megatron-LM main, megatron/training/arguments.py ``validate_args``: the world is the launcher's
(torchrun ``--nnodes`` × ``--nproc-per-node``, or their ``PET_NNODES`` / ``PET_NPROC_PER_NODE``
environment variables, torch/distributed/run.py); ``--expert-tensor-parallel-size`` unset means
ETP = TP; ``--num-layers-per-virtual-pipeline-stage`` k gives VPP = (L+e+l)/PP/k and
``--num-virtual-stages-per-pipeline-rank`` VPP itself (1 means no VPP); ``--sequence-parallel`` is
turned off with TP 1; ``--use-tp-pp-dp-mapping`` selects the rank order ``tp-cp-ep-pp-dp``
(megatron/training/initialize.py ``_initialize_distributed``); ``--decoder-first/last-pipeline-num-layers``
become ``num_layers_in_first/last_pipeline_stage`` (core_transformer_config_from_args).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from shardcheck.frameworks.megatron_lm.flags import (
    DEFAULT_MINOR,
    FlagReading,
    megatron_lm_flags,
    megatron_lm_source,
    read_flags,
)
from shardcheck.frameworks.megatron_lm.forks import find_fork
from shardcheck.frameworks.torchrun import exported_values, torchrun_cluster
from shardcheck.frameworks.value_kinds import is_invalid
from shardcheck.inputs.launch import Launch
from shardcheck.job import Job, MegatronLayout, ModelFacts
from shardcheck.models.facts import load_model
from shardcheck.models.flag_architecture import MARKER, NOT_COUNTED
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Kind, Problem

MEGATRON_LM_SCRIPTS = frozenset(
    {
        "pretrain_gpt.py",
        "pretrain_mamba.py",
        "pretrain_hybrid.py",  # Megatron-LM main of 2026-08: pretrain_mamba.py became a wrapper around it
        "pretrain_bert.py",
        "pretrain_t5.py",
        "pretrain_vlm.py",
        "pretrain_retro.py",
        "pretrain_ict.py",
    }
)
HYBRID_SCRIPTS = frozenset({"pretrain_mamba.py", "pretrain_hybrid.py"})
KEY_PREFIX = "args"  # Megatron-LM's namespace: args.tensor_model_parallel_size, ...


# Flags only Megatron-LM's argument parser (megatron/training/arguments.py) and its forks take: a pretrain*.py
# entry script of another name (pretrain_qwen.py, pretrain_mcore_*.py in Pai-Megatron-Patch, MindSpeed-LLM, ...)
# given at least LIKE_MEGATRON of them, one a parallel size, is judged as Megatron-LM (and says so).
_PARALLEL_FLAGS = frozenset(
    {
        "--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--expert-model-parallel-size",
        "--context-parallel-size",
    }
)
_MEGATRON_FLAGS = _PARALLEL_FLAGS | {
    "--num-layers",
    "--hidden-size",
    "--num-attention-heads",
    "--ffn-hidden-size",
    "--micro-batch-size",
    "--global-batch-size",
    "--seq-length",
    "--max-position-embeddings",
    "--sequence-parallel",
    "--use-distributed-optimizer",
    "--expert-tensor-parallel-size",
    "--num-layers-per-virtual-pipeline-stage",
    "--tokenizer-type",
}
LIKE_MEGATRON = 3
# Flags without a default that Megatron-LM needs (MLM-TRAIN-LENGTH, MLM-LR-NEEDED): a fork's script may derive them.
_FORK_MAY_SET = ("--train-iters", "--train-samples", "--lr")


def megatron_like_flags(launch: Launch) -> list[str]:
    """The Megatron-LM flags a script of another name is given (empty when too few to judge it as Megatron-LM)."""
    name = (launch.script or "").rsplit("/", 1)[-1]
    if not (name.startswith("pretrain") and name.endswith(".py")):
        return []  # evaluate_*.py, generate_text_*.py ... take the flags too but do not train: not judged
    seen = list(dict.fromkeys(w.text.split("=", 1)[0] for w in launch.args if w.text and w.text.startswith("--")))
    found = [f for f in seen if f in _MEGATRON_FLAGS]
    return found if len(found) >= LIKE_MEGATRON and any(f in _PARALLEL_FLAGS for f in found) else []


def is_megatron_lm_entry(launch: Launch) -> bool:
    if launch.script is not None:
        return launch.script.rsplit("/", 1)[-1] in MEGATRON_LM_SCRIPTS or bool(megatron_like_flags(launch))
    return bool(launch.module) and launch.module.split(".")[0] == "megatron"


def _like(launch: Launch) -> str:
    """For an entry script that is not Megatron-LM's own: why it is judged as Megatron-LM."""
    script = (launch.script or "").rsplit("/", 1)[-1]
    if not launch.script or script in MEGATRON_LM_SCRIPTS:
        return ""
    flags = megatron_like_flags(launch)
    return (
        f"; {script} is not a script of Megatron-LM's: judged as Megatron-LM because it takes Megatron-LM's flags "
        f"({', '.join(flags[:4])}{', …' if len(flags) > 4 else ''}); flags of its own are not judged"
    )


def _positive(t: Traced, name: str, notes: list[Problem], *, allow_none: bool = False) -> Traced:
    if not t.known or (t.value is None and allow_none):
        return t
    if t.value is None or t.value < 1:
        where = t.origin.first_script_line() or t.origin
        notes.append(Problem(Kind.NOT_POSITIVE, where, {"name": name, "value": repr(t.value)}))
        return Traced(None, t.origin, f"{name} is not a positive integer ({t.value!r})")
    return t


def _default(value, text: str) -> Traced:
    return Traced(value, Origin(kind="default", text=text))


def _vpp(flags: FlagReading, pp: Traced, num_layers: Traced, emb: Traced, loss: Traced) -> Traced:
    """VPP as validate_args derives it (None = no interleaved schedule)."""
    stages = flags.get("--num-virtual-stages-per-pipeline-rank")
    per_stage = flags.get("--num-layers-per-virtual-pipeline-stage")
    layout = flags.get("--pipeline-model-parallel-layout")
    if layout.known and layout.value is not None:
        return Traced(
            None, layout.origin, "VPP follows --pipeline-model-parallel-layout, which shardcheck does not split"
        )
    if stages.known and stages.value is not None:
        return stages if stages.value != 1 else Traced(None, stages.origin)
    if not stages.known:
        return stages
    if not per_stage.known or per_stage.value is None:
        return per_stage
    total = Traced.derived(
        None, "(L+e+l) / PP / --num-layers-per-virtual-pipeline-stage", num_layers, pp, per_stage, emb, loss
    )
    if not total.known:
        return total
    if num_layers.value is None or pp.value is None:  # the model comes from --hf-checkpoint, say: no count here
        return Traced(None, total.origin, "VPP from --num-layers-per-virtual-pipeline-stage needs --num-layers")
    layers = num_layers.value + int(bool(emb.value)) + int(bool(loss.value))
    if pp.value < 1 or per_stage.value < 1 or layers % pp.value or (layers // pp.value) % per_stage.value:
        return Traced(None, total.origin, "VPP cannot be derived: MLM-VPP-LAYERS")
    vpp = layers // pp.value // per_stage.value
    return Traced(vpp if vpp != 1 else None, total.origin)


def _stage_layers(flags: FlagReading, pp: Traced) -> dict[str, Traced]:
    """The first and last stage's layer counts: ``--decoder-first/last-pipeline-num-layers``, or MindSpeed-LLM's
    ``--num-layer-list a,b,...`` (one count per pipeline stage; mindspeed_llm/features_manager/pipeline_parallel/
    num_layer_list.py: its length must be PP, and get_num_layers_to_build builds ``num_layer_list[pp_stage]``
    layers). A list whose middle stages are equal is that first / middle / last split; any other is unknown."""
    first, last = flags.get("--decoder-first-pipeline-num-layers"), flags.get("--decoder-last-pipeline-num-layers")
    listed = flags.values.get("--num-layer-list")
    if listed is None or "--num-layer-list" not in flags.given or (listed.known and listed.value is None):
        return {"first_stage_layers": first, "last_stage_layers": last}
    if not listed.known or not pp.known:
        unknown = Traced(None, listed.origin, listed.unknown or pp.unknown)
        return {"first_stage_layers": unknown, "last_stage_layers": unknown}
    try:
        counts = [int(x) for x in str(listed.value).split(",")]
    except ValueError:
        counts = []
    if pp.value is not None and len(counts) == pp.value >= 2 and len(set(counts[1:-1])) <= 1:
        via = Origin(kind="derived", text=f"--num-layer-list {listed.value}", via=(listed.origin,))
        return {"first_stage_layers": Traced(counts[0], via), "last_stage_layers": Traced(counts[-1], via)}
    why = f"--num-layer-list {listed.value} with PP {pp.value}: a per-stage split shardcheck does not model"
    unknown = Traced(None, listed.origin, why)
    return {"first_stage_layers": unknown, "last_stage_layers": unknown}


def megatron_layout(flags: FlagReading, notes: list[Problem]) -> MegatronLayout:
    """The trainer's Megatron-Core layout from Megatron-LM flags."""
    g = flags.get
    tp = _positive(g("--tensor-model-parallel-size"), "--tensor-model-parallel-size", notes)
    pp = _positive(g("--pipeline-model-parallel-size"), "--pipeline-model-parallel-size", notes)
    emb, loss = g("--account-for-embedding-in-pipeline-split"), g("--account-for-loss-in-pipeline-split")
    sp = g("--sequence-parallel")
    if tp.known and tp.value == 1 and sp.known and sp.value:
        sp = Traced(
            False,
            Origin(kind="default", text="validate_args turns --sequence-parallel off with TP 1", via=(sp.origin,)),
        )
    overrides: dict[str, Traced] = {}
    gran = g("--recompute-granularity")
    if g("--recompute-activations").value is True and not (gran.known and gran.value is not None):
        gran = Traced("selective", g("--recompute-activations").origin)
    if not gran.known or gran.value is not None:
        overrides = {
            "recompute_granularity": gran,
            "recompute_method": g("--recompute-method"),
            "recompute_num_layers": g("--recompute-num-layers"),
        }
    use_map = g("--use-tp-pp-dp-mapping")
    return MegatronLayout(
        role="actor",
        key_prefix=KEY_PREFIX,
        tp=tp,
        pp=pp,
        cp=_positive(g("--context-parallel-size"), "--context-parallel-size", notes),
        ep=_positive(g("--expert-model-parallel-size"), "--expert-model-parallel-size", notes),
        etp_setting=_positive(
            g("--expert-tensor-parallel-size"), "--expert-tensor-parallel-size", notes, allow_none=True
        ),
        vpp=_vpp(flags, pp, g("--num-layers"), emb, loss),
        **_stage_layers(flags, pp),
        account_for_embedding=emb,
        account_for_loss=loss,
        layout_string=g("--pipeline-model-parallel-layout"),
        sequence_parallel=sp,
        transformer_overrides=overrides,
        order="tp-cp-ep-pp-dp" if use_map.value is True else "tp-cp-ep-dp-pp",
    )


_ARCH = ("--num-layers", "--num-attention-heads")


def model_from_flags(
    flags: FlagReading, path: str, notes: list[Problem], *, model_config: str | None = None
) -> tuple[ModelFacts | None, str | None, Traced]:
    """The model the flags describe; the ``--hf-checkpoint`` / ``--tokenizer-model`` path names a
    preset when the architecture is not given as flags."""
    g = flags.get
    named = next(
        (g(k) for k in ("--hf-checkpoint", "--tokenizer-model", "--load") if k in flags.given),
        Traced(None, Origin(kind="default", text="no --hf-checkpoint"), "no --hf-checkpoint is given"),
    )
    if model_config is None and any(k in flags.given for k in _ARCH):
        missing = [k for k in _ARCH if not g(k).known]
        if missing:
            t = g(missing[0])
            if not is_invalid(t.unknown):  # an invalid value is a VALUE-BAD-* finding already
                notes.append(
                    Problem(
                        Kind.UNKNOWN_MODEL_FLAG,
                        t.origin.first_script_line() or t.origin,
                        {"flag": missing[0], "reason": t.unknown},
                    )
                )
            return None, f"{missing[0]} is unknown", named
        if all(g(k).value is not None for k in _ARCH):
            heads = g("--num-attention-heads").value
            gqa = g("--group-query-attention").value is True
            groups = g("--num-query-groups").value if gqa and g("--num-query-groups").known else None
            origin = g("--num-layers").origin
            return (
                ModelFacts(
                    name="the model given by the flags",
                    source=f"Megatron-LM flags at {origin.location or path}",
                    origin=origin,
                    num_hidden_layers=g("--num-layers").value,
                    num_attention_heads=heads,
                    # Megatron-LM: --num-query-groups counts only with --group-query-attention
                    # (core_transformer_config_from_args); else every head has its own KV.
                    num_key_value_heads=groups if groups else heads,
                    hidden_size=g("--hidden-size").value if g("--hidden-size").known else None,
                    num_experts=g("--num-experts").value if g("--num-experts").known else None,
                    num_experts_per_tok=g("--moe-router-topk").value if g("--moe-router-topk").known else None,
                    vocab_size=g("--vocab-size").value if g("--vocab-size").known else None,
                    max_position_embeddings=(
                        g("--max-position-embeddings").value if g("--max-position-embeddings").known else None
                    ),
                    mla=g("--multi-latent-attention").value is True,
                    config=_flag_config(flags, named, path),
                ),
                None,
                named,
            )
    raw = named.value if named.known else None
    model, problem = load_model(raw, named.known, model_config, base=Path(path).parent)
    return model, problem, named


def _flag_config(flags: FlagReading, named: Traced, path: str) -> dict:
    """What models/architecture.py reads for a model given as flags: the flags' values under MARKER and
    the vocab (``--vocab-size``, else the ``--hf-checkpoint`` preset's; the tokenizer's otherwise)."""
    vocab = flags.get("--vocab-size")
    config: dict = {MARKER: dict(flags.values)}
    if "--vocab-size" in flags.given:
        config["vocab_size"] = vocab.value if vocab.known else None
        config["vocab_source"] = f"--vocab-size is unknown ({vocab.unknown})" if not vocab.known else "--vocab-size"
        return config
    preset, _ = load_model(named.value, True, base=Path(path).parent) if named.known and named.value else (None, None)
    if preset is not None and preset.vocab_size:
        config["vocab_size"] = preset.vocab_size
        config["vocab_source"] = preset.source
    else:
        config["vocab_source"] = "no --vocab-size, and the tokenizer's size is not known"
    return config


def flag_notes(flags: FlagReading) -> list[Problem]:
    notes = list(flags.notes)
    for origin in flags.open_arguments:
        notes.append(Problem(Kind.UNKNOWN_FLAG_ARGUMENT, origin))
    return notes


def resolve_megatron_lm(
    launch: Launch,
    path: str,
    exported: dict[str, Traced],
    *,
    model_config: str | None = None,
    megatron_core: str | None = None,
    script_file: Path | None = None,
) -> Job:
    """``megatron_core``: the megatron-core minor whose Megatron-LM flags the launch is read against
    (the one chosen by the caller; else DEFAULT_MINOR); ``script_file``: the script on disk, whose repository
    may carry a fork's code and flags (forks.py)."""
    minor = megatron_core or DEFAULT_MINOR
    script = launch.script.rsplit("/", 1)[-1] if launch.script is not None else None
    # A module entry (python -m megatron...) may add flags of its own: only near-misses are reported there.
    complete = f"Megatron-LM core_v{minor}" if script in MEGATRON_LM_SCRIPTS else None
    table = megatron_lm_flags(minor, script)
    fork = find_fork(script_file)
    if fork is not None:  # the fork's own flags, read from its code in the repository (forks.py)
        table = {**table, **{n: f for n, f in fork.flags.items() if n not in table or table[n].absent is not None}}
        complete = None if fork.missing else f"{fork.name} (its code at {fork.root}) with Megatron-LM core_v{minor}"
    flags = read_flags(launch.args, table, {}, complete=complete)
    if script not in MEGATRON_LM_SCRIPTS and launch.script is not None:
        # a fork's entry (Pai-Megatron-Patch's pretrain_mcore_qwen.py derives --train-iters from its own --epochs):
        # what Megatron-LM requires and the script leaves out, the fork's code may set; unknown, never an error
        for name in _FORK_MAY_SET:
            if name not in flags.given and name in flags.values:
                why = f"{script} is not Megatron-LM's own script and may set {name} itself (flags of its own)"
                flags.values[name] = Traced(None, launch.origin, why)
    notes = flag_notes(flags)
    if fork is not None and fork.missing and flags.unknown_flags:
        notes = [n for n in notes if n.kind is not Kind.FLAG_UNKNOWN]
        names = list(dict.fromkeys(name for name, _ in flags.unknown_flags))
        notes.append(
            Problem(
                Kind.FLAG_UNKNOWN,
                flags.unknown_flags[0][1],
                {
                    "flag": names[0],
                    "meant": None,
                    "close": False,
                    "program": fork.name,
                    "fork": names,
                    "missing": fork.missing,
                },
                severity="info",
            )
        )
    layout = megatron_layout(flags, notes)
    model, problem, named = model_from_flags(flags, path, notes, model_config=model_config)
    if model is not None and script in HYBRID_SCRIPTS and MARKER in model.config:
        # Mamba / hybrid stacks (--hybrid-override-pattern: Mamba, attention, MLP and MoE layers in any order):
        # the layout rules hold, but the flags' model is not a GPT stack whose layers shardcheck counts.
        model = replace(model, config={**model.config, NOT_COUNTED: f"{script} builds a hybrid Mamba model"})
    return Job(
        path=path,
        framework="megatron-lm",
        framework_version=megatron_lm_source(minor),
        entry=launch.entry,
        config_name="-",
        config_source=f"Megatron-LM flags (megatron/training/arguments.py, {megatron_lm_source(minor)})"
        + _like(launch),
        cluster=torchrun_cluster(launch, exported, notes),
        strategy=_default("megatron", "Megatron-LM"),
        layouts=(layout,),
        ref_used=_default(False, "Megatron-LM trains one model"),
        model_path=named,
        model=model,
        model_problem=problem,
        notes=tuple(notes),
        open_arguments=tuple(flags.open_arguments),
        values=dict(flags.values),
    )


# -- the framework interface (frameworks/interface.py) ------------------------------------------


def detect(launch: Launch) -> bool:
    """Whether ``launch`` runs Megatron-LM's pretrain_*.py (or ``python -m megatron...``)."""
    return is_megatron_lm_entry(launch)


def resolve(
    launch: Launch,
    reading,
    path: str,
    *,
    model_config: str | None = None,
    megatron_core: str | None = None,
    script_file: Path | None = None,
) -> Job:
    """The Job Megatron-LM would build from the launch's flags and the variables the script exports."""
    return resolve_megatron_lm(
        launch,
        path,
        exported_values(reading, launch),
        model_config=model_config,
        megatron_core=megatron_core,
        script_file=script_file,
    )
