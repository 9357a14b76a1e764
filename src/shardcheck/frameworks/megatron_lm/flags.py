"""Megatron-LM's command-line flags that shardcheck reads, and an argparse-like reader for them.

The table mirrors the subset of ``megatron/training/arguments.py`` (NVIDIA/Megatron-LM main, with
the ``ArgumentGroupFactory`` flags generated from ``ModelParallelConfig`` / ``TransformerConfig``
fields, megatron/core/model_parallel_config.py and transformer_config.py) that the rules and the
layout read: name, type and default. Flags not in the table are skipped with their values (Megatron-LM
has hundreds); one that is a near-miss of a table flag is reported. argparse semantics: the last of a
repeated flag wins, ``--flag=value`` and ``--flag value`` are the same, ``store_true`` flags take no
value.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from shardcheck.frameworks.value_kinds import INVALID, ValueKind, shown
from shardcheck.inputs.shell_values import Field
from shardcheck.origin import Origin, Traced
from shardcheck.problems import Kind, Problem


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    kind: str  # "int" | "float" | "str" | "true" (store_true) | "false" (store_false) | "list" (nargs='+')
    default: object = None
    dest: str | None = None  # the args attribute when it is not the name's (store_false flags)
    low: float | None = None  # the least value that makes sense (int flags: 1 unless said); inclusive
    high: float | None = None

    @property
    def value_kind(self) -> ValueKind:
        """What a value of this flag must be (checked where it is read, ``_typed``)."""
        if self.kind == "int":
            return ValueKind("int", low=1 if self.low is None else self.low, high=self.high)
        return ValueKind("real", low=self.low, high=self.high)


def _table(kind: str, default, *names: str) -> list[Flag]:
    return [Flag(n, kind, default) for n in names]


# megatron/training/arguments.py (main) and the dataclass fields it turns into flags.
MEGATRON_LM_FLAGS: dict[str, Flag] = {
    f.name: f
    for f in [
        *_table(
            "int",
            1,
            "--tensor-model-parallel-size",
            "--pipeline-model-parallel-size",
            "--context-parallel-size",
            "--expert-model-parallel-size",
        ),
        Flag("--decoder-first-pipeline-num-layers", "int", None, low=0),
        Flag("--decoder-last-pipeline-num-layers", "int", None, low=0),
        *_table(
            "int",
            None,
            "--expert-tensor-parallel-size",
            "--num-layers-per-virtual-pipeline-stage",
            "--num-virtual-stages-per-pipeline-rank",
            "--num-layers",
            "--hidden-size",
            "--ffn-hidden-size",
            "--num-attention-heads",
            "--num-query-groups",
            "--kv-channels",
            "--num-experts",
            "--moe-ffn-hidden-size",
            "--vocab-size",
            "--seq-length",
            "--max-position-embeddings",
            "--decoder-seq-length",
            "--global-batch-size",
            "--recompute-num-layers",
            "--moe-router-topk",
            "--moe-shared-expert-intermediate-size",
            "--q-lora-rank",
        ),
        # megatron/training/arguments.py _add_network_size_args / _add_mla_args (defaults of the flags, which
        # override MLATransformerConfig's kv_lora_rank 512 with 32).
        Flag("--make-vocab-size-divisible-by", "int", 128),
        Flag("--kv-lora-rank", "int", 32),
        Flag("--qk-head-dim", "int", 128),
        Flag("--qk-pos-emb-head-dim", "int", 64),
        Flag("--v-head-dim", "int", 128),
        Flag("--optimizer-offload-fraction", "float", 1.0, low=0, high=1),
        # TransformerConfig fields as flags (argument_utils.ArgumentGroupFactory: a bool field defaulting to
        # True becomes --no-X / --disable-X; add_bias_linear names its own --disable-bias-linear).
        Flag("--normalization", "str", "LayerNorm"),
        Flag("--disable-bias-linear", "false", True, dest="add_bias_linear"),
        Flag("--position-embedding-type", "str", "learned_absolute"),
        Flag("--optimizer", "str", "adam"),
        Flag("--main-grads-dtype", "str", "fp32"),
        Flag("--exp-avg-dtype", "str", "fp32"),
        Flag("--exp-avg-sq-dtype", "str", "fp32"),
        Flag("--recompute-modules", "list", None),
        Flag("--micro-batch-size", "int", None),
        *_table(
            "str",
            None,
            "--pipeline-model-parallel-layout",
            "--recompute-granularity",
            "--recompute-method",
            "--moe-layer-freq",
            "--moe-token-dispatcher-type",
            "--hf-checkpoint",
            "--tokenizer-model",
            "--load",
            "--hierarchical-context-parallel-sizes",
        ),
        *_table(
            "true",
            False,
            "--sequence-parallel",
            "--use-tp-pp-dp-mapping",
            "--group-query-attention",
            "--untie-embeddings-and-output-weights",
            "--account-for-embedding-in-pipeline-split",
            "--account-for-loss-in-pipeline-split",
            "--recompute-activations",
            "--optimizer-cpu-offload",
            "--use-distributed-optimizer",
            "--multi-latent-attention",
            "--swiglu",
            "--overlap-param-gather",
            "--overlap-grad-reduce",
            "--add-qkv-bias",
            "--qk-layernorm",
            "--moe-shared-expert-gate",
            "--bf16",
            "--fp16",
            "--use-precision-aware-optimizer",
            "--accumulate-allreduce-grads-in-fp32",
            "--grad-reduce-in-bf16",
        ),
        Flag("--no-overlap-p2p-communication", "false", True, dest="overlap_p2p_comm"),
        # Read by the memory estimate (shardcheck/memory): kernels and dropout (TransformerConfig fields:
        # hidden_dropout / attention_dropout 0.1, attention_backend auto, transformer_impl transformer_engine),
        # MTP depth, fine-grained activation offload, Megatron-FSDP (arguments.py: --data-parallel-sharding-strategy
        # default optim_grads_params) and fp8 parameters.
        Flag("--hidden-dropout", "float", 0.1),
        Flag("--attention-dropout", "float", 0.1),
        Flag("--attention-backend", "str", "auto"),
        Flag("--transformer-impl", "str", "transformer_engine"),
        Flag("--mtp-num-layers", "int", None),
        Flag("--offload-modules", "list", None),
        Flag("--data-parallel-sharding-strategy", "str", "optim_grads_params"),
        Flag("--fp8-format", "str", None),
        Flag("--cross-entropy-fusion-impl", "str", "native"),
        Flag("--microbatch-group-size-per-virtual-pipeline-stage", "int", None),
        *_table(
            "true",
            False,
            "--fine-grained-activation-offloading",
            "--use-megatron-fsdp",
            "--fp8-param-gather",
            "--use-flash-attn",
            "--cross-entropy-loss-fusion",
        ),
        # TransformerConfig MoE fields (megatron-core 0.16.1 defaults) and DistributedDataParallelConfig's
        # num_distributed_optimizer_instances (megatron/core/distributed/distributed_data_parallel_config.py).
        Flag("--moe-expert-capacity-factor", "float", None),
        Flag("--moe-router-load-balancing-type", "list", ["aux_loss"]),
        Flag("--moe-pad-expert-input-to-capacity", "true", False),
        Flag("--num-distributed-optimizer-instances", "int", 1),
    ]
}
# Layer counts are expanded per layer (the MoE layer pattern, the pipeline split): bounded far above any model.
MAX_LAYERS = 100_000
MEGATRON_LM_FLAGS["--num-layers"] = Flag("--num-layers", "int", None, high=MAX_LAYERS)
# Flags that are not Megatron-LM's (any more): what argparse does with them, and the flag meant.
NOT_FLAGS = {
    "--virtual-pipeline-model-parallel-size": "--num-virtual-stages-per-pipeline-rank",
}


@dataclass
class FlagReading:
    """The flags of one command line: each known flag's value traced to its word, with notes."""

    values: dict[str, Traced] = field(default_factory=dict)
    given: set[str] = field(default_factory=set)
    notes: list[Problem] = field(default_factory=list)
    open_arguments: list[Origin] = field(default_factory=list)  # words of unknown content in flag position
    unknown_flags: list[tuple[str, Origin]] = field(default_factory=list)

    def get(self, name: str) -> Traced:
        return self.values[name]


def _where(word: Field, start: int = 0) -> Origin:
    origin = word.value_origin(start)
    return origin.first_script_line() or origin


def _typed(flag: Flag, text: str | None, word: Field, start: int, unknown: str | None, notes: list) -> Traced:
    at = _where(word, start)
    origin = Origin(
        kind="script",
        path=at.path,
        line=at.line,
        column=at.column,
        text=f"{flag.name} {text if text is not None else '⟨?⟩'}",
        via=(word.origin,),
    )
    if unknown is not None:
        return Traced(None, origin, unknown)
    if flag.kind in ("int", "float"):
        kind = int if flag.kind == "int" else float
        try:
            value = kind(text)
        except ValueError:
            notes.append(Problem(Kind.FLAG_NOT_A_NUMBER, origin, {"flag": flag.name, "text": text, "type": flag.kind}))
            return Traced(
                None, origin, f"{flag.name} {text!r} is not {'an integer' if flag.kind == 'int' else 'a number'}"
            )
        expected = flag.value_kind
        bad = expected.problem(value)
        if bad is not None:  # argparse takes it; Megatron-LM or slime would divide by it or fail later
            notes.append(
                Problem(bad, origin, {"key": flag.name, "value": shown(value), "what": expected.what, "flag": True})
            )
            return Traced(None, origin, f"{INVALID}{flag.name} {shown(value)} is not {expected.what}")
        return Traced(value, origin)
    return Traced(text, origin)


def read_flags(words: tuple[Field, ...], table: dict[str, Flag], default_of: dict[str, str]) -> FlagReading:
    """Read ``words`` the way argparse reads them against ``table``; ``default_of`` names whose
    default each flag is (e.g. ``{"--rollout-batch-size": "slime"}``, else Megatron-LM)."""
    out = FlagReading()
    for flag in table.values():
        owner = default_of.get(flag.name, "Megatron-LM")
        out.values[flag.name] = Traced(
            flag.default, Origin(kind="default", text=f"default of {owner}: {flag.name} = {flag.default}")
        )
    i = 0
    n = len(words)
    while i < n:
        word = words[i]
        text = word.text
        shown = word.render("")
        if text is None and not (shown.startswith("--") and "=" in shown):
            out.open_arguments.append(_where(word))
            i += 1
            continue
        if text is None:
            text = shown
        if not text.startswith("--") or text == "--":
            i += 1
            continue
        name, eq, inline = text.partition("=")
        flag = table.get(name)
        if flag is None:
            _unknown_flag(name, word, table, out)
            i += 1
            while i < n and not (words[i].text or words[i].render("")).startswith("-") and not eq:
                i += 1  # its values (unknown words among them stay its values)
            continue
        out.given.add(name)
        if flag.kind in ("true", "false"):
            out.values[name] = _typed(flag, None, word, 0, None, out.notes)
            out.values[name] = Traced(flag.kind == "true", out.values[name].origin)
            i += 1
            continue
        if eq:
            start = len(name) + 1
            value_unknown = next((s.unknown for s in word.unknowns), None)
            out.values[name] = _typed(flag, None if value_unknown else inline, word, start, value_unknown, out.notes)
            i += 1
            continue
        if i + 1 >= n or (words[i + 1].text or "").startswith("--"):
            out.notes.append(Problem(Kind.FLAG_WITHOUT_VALUE, _where(word), {"flag": name}))
            out.values[name] = Traced(None, _where(word), f"{name} has no value")
            i += 1
            continue
        if flag.kind == "list":
            j = i + 1
            while j < n and not (words[j].text or "-").startswith("-"):
                j += 1
            items = words[i + 1 : j]
            if not items:  # the next word is an option (or of unknown content): argparse's nargs='+' stops
                out.notes.append(Problem(Kind.FLAG_WITHOUT_VALUES, _where(word), {"flag": name}))
                out.values[name] = Traced(None, _where(word), f"{INVALID}{name} has no values")
                i += 1
                continue
            unknown = next((s.unknown for w in items for s in w.unknowns), None)
            out.values[name] = Traced(None if unknown else [w.text for w in items], _where(items[0]), unknown)
            i = j
            continue
        value = words[i + 1]
        out.values[name] = _typed(
            flag, value.text, value, 0, value.unknowns[0].unknown if value.unknowns else None, out.notes
        )
        i += 2
    return out


def _unknown_flag(name: str, word: Field, table: dict[str, Flag], out: FlagReading) -> None:
    out.unknown_flags.append((name, _where(word)))
    meant = NOT_FLAGS.get(name)
    close = meant is None
    if close:
        found = difflib.get_close_matches(name, list(table), n=1, cutoff=0.92)
        meant = found[0] if found and abs(len(found[0]) - len(name)) <= 2 else None
        if meant is None:
            return
    out.notes.append(Problem(Kind.FLAG_UNKNOWN, _where(word), {"flag": name, "meant": meant, "close": close}))
