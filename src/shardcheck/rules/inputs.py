"""Rules about the inputs themselves: script lines, Hydra overrides, verl keys, values, the model.

Their evidence is gathered while reading and resolving (``Job.notes``); each rule here owns its id,
severity and documentation and reports the notes that carry its id.
"""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.rules.registry import Finding, finding, rule


def _notes(job: Job, rule_id: str) -> Iterator[Finding]:
    for note in job.notes:
        if note.rule == rule_id:
            yield finding(rule_id, note.message, note.origin, fix=note.fix, severity=note.severity)


def _note_rule(rule_id: str, severity: str, title: str, doc: str) -> None:
    def check(job: Job) -> Iterator[Finding]:
        return _notes(job, rule_id)

    check.__doc__ = doc
    check.__name__ = rule_id.lower().replace("-", "_")
    rule(rule_id, severity, title)(check)


_note_rule("SHELL-PARSE", "warning", "A script line the shell parser does not understand", """
    tree-sitter-bash could not parse a line. shardcheck reads the rest of the script; values set
    on that line are unknown rather than guessed.

    Why:
    A value that silently came from a misread line would make every later verdict wrong.

    Bad:
    `X=${Y:-$(((a + b) * 2))` (an unbalanced expansion).

    Good:
    `X=$(( (a + b) * 2 ))`.

    Fix:
    Check the line with `bash -n script.sh`; simplify it if bash accepts it.

    Source:
    shardcheck's reader (tree-sitter-bash 0.25).
""")
_note_rule("SHELL-SYNTAX", "error", "A word bash itself would reject", """
    An unterminated quote, `${...}` or `$(...)`: bash stops with a syntax error before launching. A
    `<placeholder>` left in a script reads as redirections: a syntax error at the end of the command,
    else an input file that does not exist; either way the command never runs.

    Why:
    The script never reaches the launch command.

    Bad:
    `MODEL="/models/qwen`

    Good:
    `MODEL="/models/qwen"`

    Fix:
    Close the quote or expansion; `bash -n script.sh` shows the same error.

    Source:
    bash(1), QUOTING and EXPANSION.
""")
_note_rule("SHELL-CONTINUATION", "warning", "A backslash that escapes a space instead of the line end", """
    `\\ ` followed by a comment (`  key=v \\ # note`) escapes the space: bash passes the word `' '` to
    the command and the command ends at the comment, so the lines below it become commands of their own.

    Why:
    Hydra rejects the `' '` word (`LexerNoViableAltException`) and every override on the lines below
    is lost (bash runs them as commands that do not exist).

    Bad:
    `  trainer.nnodes=1 \\ # one node`

    Good:
    `  trainer.nnodes=1 \\` with the comment on a line of its own above.

    Fix:
    Move the comment off the continued line; nothing may follow the backslash.

    Source:
    bash(1), QUOTING (a backslash preserves the literal value of the next character) and COMMENTS.
""")
_note_rule("SHELL-SOURCE", "info", "A `source FILE` shardcheck cannot follow", """
    shardcheck reads `source FILE` / `. FILE` when FILE is known statically (literal, variables,
    `$(dirname "$0")`-style directories) and exists, relative to the sourcing file. When the path is
    unknown, the file is missing, or it sources itself, the file is not read: variables it would set
    are unknown where they are used (never guessed).

    Why:
    A value from a file that was not read cannot be known.

    Bad:
    `source "$CONFIG_DIR/model.sh"` with `$CONFIG_DIR` unknown, and then `--num-layers $NUM_LAYERS`.

    Good:
    `source "$(dirname "$0")/model.sh"` with the file next to the script.

    Fix:
    Give the variables the path is built from with `--env`, or the values the launch needs.

    Source:
    bash(1), `source`.
""")
_note_rule("SHELL-EVAL", "info", "`eval` is never run", """
    `eval` would run text as code; shardcheck never executes anything from its input.

    Why:
    Whatever the eval'd text sets is unknown.

    Bad:
    `eval "export $SETTINGS"`

    Good:
    Plain assignments.

    Fix:
    Replace `eval` with assignments, or give values with `--env`.

    Source:
    bash(1), `eval`.
""")
_note_rule("SHELL-ARITH", "error", "Invalid bash arithmetic", """
    A `$((...))` expression bash cannot evaluate (syntax error, division by zero).

    Why:
    bash stops with an error at that line.

    Bad:
    `$((NNODES * ))`

    Good:
    `$((NNODES * 8))`

    Fix:
    Correct the expression.

    Source:
    bash(1), ARITHMETIC EVALUATION.
""")
_note_rule("HYDRA-OVERRIDE", "error", "An override Hydra rejects", """
    Hydra parses every `key=value` word with its override grammar and applies it to the composed
    config; a word it cannot parse, `+key` on an existing key, or `~key` on a missing one stops the
    launch before verl runs.

    Why:
    `hydra.errors.OverrideParseException` / `ConfigCompositionException` at start.

    Bad:
    `actor_rollout_ref.model.path=~/models/x` (an unquoted `~` inside a value).

    Good:
    `actor_rollout_ref.model.path=$HOME/models/x`

    Fix:
    Follow Hydra's message: quote the value, drop or double the `+`.

    Source:
    hydra-core 1.3: hydra/core/override_parser, hydra/_internal/config_loader_impl.py _apply_overrides_to_config.
""")
_note_rule("VERL-CFG-UNKNOWN-KEY", "error", "An override of a key verl's config does not have", """
    verl's config is in Hydra's struct mode: `key=value` for a key that does not exist fails.

    Why:
    `Could not override 'key'. To append to your config use +key=value` at start.

    Bad:
    `actor_rollout_ref.actor.megatron.tensor_parallel_size=4`

    Good:
    `actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4`

    Fix:
    Use the key shardcheck suggests; add `+` only for keys verl reads but does not declare.

    Source:
    hydra/_internal/config_loader_impl.py (struct mode); verl/trainer/config/_generated_*.yaml (verl 0.9.1).
""")
_note_rule("VERL-CFG-ADDED-KEY", "warning", "A `+key` that is a near-miss of a key verl has", """
    `+key=value` adds a key Hydra accepts; when it is a near-miss of an existing sibling key (a
    likely typo), nothing reads it and the setting has no effect. New keys that are not near-misses
    are not reported: verl reads many free-form keys (`*_kwargs`, `override_*`, `.get(...)`).

    Why:
    A typo hidden behind `+` silently keeps the default.

    Bad:
    `+trainer.n_gpu_per_node=8`

    Good:
    `trainer.n_gpus_per_node=8`

    Fix:
    Use the existing key shardcheck suggests.

    Source:
    verl/trainer/config/_generated_*.yaml (verl 0.9.1).
""")
_note_rule("VERL-CONFIG-CUSTOM", "warning", "A config shardcheck cannot read", """
    The launch uses a config other than verl main_ppo's own (a recipe's config, another
    `--config-path` or `--config-name`): only the keys set on the command line are known; every
    other value is reported unknown, and keys are not checked against it.

    Why:
    Defaults assumed from another config could make a wrong verdict.

    Bad:
    `--config-path=/my/configs --config-name=my_trainer`

    Good:
    verl's `ppo_trainer` or `ppo_megatron_trainer` with overrides.

    Fix:
    Set the parallel sizes on the command line so they are read.

    Source:
    verl/trainer/main_ppo.py (@hydra.main config_path="config", config_name="ppo_trainer").
""")
_note_rule("VALUE-BAD-SIZE", "error", "A parallel size that is not a positive integer", """
    Parallel sizes and node counts are positive integers.

    Why:
    Megatron-Core divides by them; verl multiplies them.

    Bad:
    `actor_rollout_ref.actor.megatron.tensor_model_parallel_size=two`

    Good:
    `actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2`

    Fix:
    Give a whole number ≥ 1.

    Source:
    megatron/core/parallel_state.py initialize_model_parallel (megatron-core 0.16.1).
""")


@rule("VALUE-UNKNOWN", "warning", "A value a rule needs is not known statically")
def value_unknown(job: Job) -> Iterator[Finding]:
    """
    A value came from something shardcheck does not run (command substitution, a loop, a function,
    an environment variable not given): it is reported as unknown, never guessed, and the rules
    that need it are not checked.

    Why:
    A verdict built on a guessed value is worse than none.

    Bad:
    `NNODES=$(scontrol show hostnames | wc -l)` then `trainer.nnodes=$NNODES`.

    Good:
    `shardcheck check run.sh --env NNODES=32`.

    Fix:
    Give the value with `--env NAME=VALUE`, or set it literally in the script.

    Source:
    shardcheck's reader.
    """
    nodes_key, devices_key, _ = job.cluster_keys
    needed = [(nodes_key, job.cluster.nnodes, None), (devices_key, job.cluster.devices_per_node, None)]
    for e in job.layouts:
        needed += [(f"{e.key_prefix}.tensor_model_parallel_size", e.tp, e.role),
                   (f"{e.key_prefix}.pipeline_model_parallel_size", e.pp, e.role),
                   (f"{e.key_prefix}.context_parallel_size", e.cp, e.role),
                   (f"{e.key_prefix}.expert_model_parallel_size", e.ep, e.role),
                   (f"{e.key_prefix}.expert_tensor_parallel_size", e.etp_setting, e.role)]
    yield from _notes(job, "VALUE-UNKNOWN")
    for name, traced, role in needed:
        if not traced.known and "not a positive integer" not in (traced.unknown or ""):
            where = traced.origin.first_script_line() or traced.origin
            yield finding("VALUE-UNKNOWN", f"{name} is unknown: {traced.unknown}", where,
                          fix="give the value with --env NAME=VALUE, or set it literally in the script", role=role)


@rule("MODEL-NOT-FOUND", "info", "No model facts: model rules skipped")
def model_not_found(job: Job) -> Iterator[Finding]:
    """
    Without the model's architecture (a local `config.json`, `--model-config FILE`, or a built-in
    preset matched by the model path's last component) the rules that need layer, head and expert
    counts cannot run; they are listed as skipped.

    Why:
    Heads % TP, experts % EP and the pipeline split depend on the model.

    Bad:
    `actor_rollout_ref.model.path=/data/my-finetune` with no config.json there.

    Good:
    `shardcheck check run.sh --model-config /data/my-finetune/config.json`.

    Fix:
    Pass `--model-config`.

    Source:
    verl/workers/config/model.py HFModelConfig (AutoConfig.from_pretrained on model.path).
    """
    if job.model is None and job.model_problem:
        yield finding("MODEL-NOT-FOUND", job.model_problem, job.model_path.origin.first_script_line() or job.model_path.origin,
                      fix="pass --model-config path/to/config.json")


_note_rule("SHELL-ENV-UNUSED", "warning", "An `--env NAME=VALUE` the script never reads", """
    `--env` gives a value the script reads from its environment (`$NNODES`, `${NNODES:-2}`). A name
    the script (and the files it sources) never reads changes nothing; usually its spelling differs
    from the script's variable.

    Why:
    `--env nnodes=4` for a script that reads `$NNODES` leaves the world size at the script's default:
    the verdict is for a cluster other than the one meant.

    Bad:
    `shardcheck check run.sh --env nnodes=4` with `NNODES=${NNODES:-2}` in run.sh.

    Good:
    `shardcheck check run.sh --env NNODES=4`.

    Fix:
    Use the name the script reads (the message suggests the closest).

    Source:
    shardcheck's reader: every `$NAME` the script expands without assigning it first.
""")
_note_rule("INPUT-NO-LAUNCH", "info", "A file without a launch command shardcheck recognises: skipped", """
    The file was read but holds no verl (`python3 -m verl.trainer.main_ppo`), Megatron-LM
    (`pretrain_gpt.py`) or slime (`train.py`) launch: a helper script, a data preparation step. It is
    skipped; the other files' results stand, and the exit status does not change.

    Why:
    A folder of scripts or a pre-commit hook over many files should judge the launch scripts and
    pass over the rest, as linters pass over files with nothing to check.

    Bad:
    `prepare_data.sh` holding only `python3 examples/data_preprocess/gsm8k.py`.

    Good:
    A launch script: `python3 -m verl.trainer.main_ppo ...`.

    Fix:
    Nothing, unless the file is a launch script written in a way shardcheck does not recognise; then
    report it.

    Source:
    shardcheck's launch finder (inputs/launch.py).
""")
_note_rule("INPUT-UNREADABLE", "error", "A path that cannot be read: missing, a directory, no permission", """
    The path given does not name a readable file. The other inputs are judged; the exit status is 1,
    or 2 when no input at all could be read.

    Why:
    A misspelt path in a CI job would otherwise pass without judging anything.

    Bad:
    `shardcheck check run_qwen.sh` when the file is `run_qwen3.sh`.

    Good:
    `shardcheck check run_qwen3.sh`.

    Fix:
    Give the path of a launch script (a directory is searched for `*.sh` launch scripts).

    Source:
    shardcheck's command line.
""")
_note_rule("INPUT-UNUSABLE", "error", "A launch script shardcheck cannot use as a whole", """
    The file was read but cannot be judged: a line bash itself would reject before the launch, a
    launch of a verl entry point shardcheck does not model yet, a model config that cannot be read.
    The message names `file:line` and what to do.

    Why:
    A verdict on a script read only in part would be a guess.

    Bad:
    `X="unterminated` before the launch command.

    Good:
    `X="terminated"`.

    Fix:
    As the message says.

    Source:
    shardcheck's reader and resolvers.
""")
_note_rule("SUPPRESS-UNKNOWN-ID", "warning", "A rule id in a disable comment or a setting that names no rule", """
    `# shardcheck: disable=ID`, `select`, `ignore` and `per-file-ignores` name rule ids (or, in the
    settings, id prefixes such as `MCORE-`). An id that names no rule has no effect: the finding it
    was meant for is still reported, or a `select` silently checks nothing. Renamed ids are applied
    as their new id and reported; removed ids are reported with what replaced them.

    Why:
    `ignore = ["MCORE-TC-HEAD-TP"]` (for MCORE-TC-HEADS-TP) would otherwise be accepted without a word.

    Bad:
    `# shardcheck: disable=MCORE-TC-HEAD-TP`

    Good:
    `# shardcheck: disable=MCORE-TC-HEADS-TP`

    Fix:
    Use the id the message suggests; `shardcheck rules` lists every id.

    Source:
    shardcheck's rule registry (rules/registry.py RENAMED, REMOVED).
""")
