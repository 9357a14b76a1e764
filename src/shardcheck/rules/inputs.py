"""Rules about the inputs themselves: script lines, Hydra overrides, verl keys, values, the model.

Their evidence is gathered while reading and resolving: typed problems in ``Job.notes``
(:mod:`shardcheck.problems`). Each rule here names the kinds it reports (``notes=``) and renders
one problem as its message and fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shardcheck.frameworks.value_kinds import is_invalid
from shardcheck.job import Job
from shardcheck.problems import Kind, Problem
from shardcheck.rules.base import Finding, Message, finding, rule
from shardcheck.rules.causes import settling_option


def _did_you_mean(p: Problem) -> str | None:
    return f"did you mean `{p['suggestion']}`?" if p.args.get("suggestion") else None


@rule(
    "SHELL-PARSE",
    "warning",
    "A script line the shell parser does not understand",
    notes=(Kind.SHELL_PARSE,),
    certain=True,
)
def shell_parse(p: Problem) -> Message:
    """
    tree-sitter-bash could not parse a line. shardcheck reads the rest of the script; values set
    on that line are unknown rather than guessed.

    Why:
    A value that silently came from a misread line would make every later verdict wrong.

    Fix:
    Check the line with `bash -n script.sh`; simplify it if bash accepts it.

    Source:
    shardcheck's reader (tree-sitter-bash 0.25).
    """
    return f"line not understood by the shell parser: {p['line']!r}; values set there are unknown", None


@rule(
    "SHELL-SYNTAX",
    "error",
    "A word bash itself would reject",
    notes=(Kind.SHELL_SYNTAX, Kind.SHELL_PLACEHOLDER),
    certain=True,
)
def shell_syntax(p: Problem) -> Message:
    """
    An unterminated quote, `${...}` or `$(...)`: bash stops with a syntax error before launching. A
    `<placeholder>` left in a script reads as redirections: a syntax error at the end of the command,
    else an input file that does not exist; either way the command never runs.

    Why:
    The script never reaches the launch command.

    Fix:
    Close the quote or expansion; `bash -n script.sh` shows the same error.

    Source:
    bash(1), QUOTING and EXPANSION.
    """
    if p.kind is Kind.SHELL_PLACEHOLDER:
        return f"{p['what']}; a placeholder left in the script: write the value", None
    return f"{p['reason']}; bash would reject this line", None


@rule(
    "SHELL-CONTINUATION",
    "warning",
    "A backslash that escapes a space instead of the line end",
    notes=(Kind.SHELL_CONTINUATION,),
    certain=True,
)
def shell_continuation(p: Problem) -> Message:
    """
    `\\ ` followed by a comment (`  key=v \\ # note`) escapes the space: bash passes the word `' '` to
    the command and the command ends at the comment, so the lines below it become commands of their own.
    A blank line after a line-ending `\\` ends the command the same way: the line below the blank one
    runs as a command of its own.

    Why:
    Hydra rejects the `' '` word (`LexerNoViableAltException`) and every override on the lines below
    is lost (bash runs them as commands that do not exist).

    Fix:
    Move the comment off the continued line; nothing may follow the backslash. Remove the blank line
    (or the backslash before it).

    Source:
    bash(1), QUOTING (a backslash preserves the literal value of the next character) and COMMENTS.
    """
    if p.args.get("blank"):
        return (
            f"a blank line follows this `\\`: it ends the command here, and bash runs line {p['next_line']} "
            "as a command of its own; the lines below are not part of it",
            "remove the blank line",
        )
    return (
        "`\\ ` escapes a space, not the line end: bash passes the word ' ' and ends the command here; the lines "
        "below are not part of it",
        None,
    )


@rule("SHELL-SOURCE", "info", "A `source FILE` shardcheck cannot follow", notes=(Kind.SHELL_SOURCE,), certain=True)
def shell_source(p: Problem) -> Message:
    """
    shardcheck reads `source FILE` / `. FILE` when FILE is known statically (literal, variables,
    `$(dirname "$0")`-style directories) and exists, relative to the sourcing file. When the path is
    unknown, the file is missing, or it sources itself, the file is not read: variables it would set
    are unknown where they are used (never guessed).

    Why:
    A value from a file that was not read cannot be known.

    Fix:
    Give the variables the path is built from with `--env`, or the values the launch needs.

    Source:
    bash(1), `source`.
    """
    return f"`{p['command']} {p['target']}` is not followed: {p['why']}; variables it would set are unknown", None


@rule("SHELL-EVAL", "info", "An `eval` of a string not known statically", notes=(Kind.SHELL_EVAL,), certain=True)
def shell_eval(p: Problem) -> Message:
    """
    `eval` runs text as code. shardcheck never executes anything from its input: a string known
    statically (`CMD="torchrun ... pretrain_gpt.py ..."; eval $CMD`) is read as the commands it holds, the
    way bash joins the arguments with spaces; a string built by command substitution, or from a value not
    given, cannot be read.

    Why:
    Whatever such an eval'd text sets or runs is unknown; a launch inside it is not judged.

    Fix:
    Give the values the string is built from with `--env`, or run the command without `eval`.

    Source:
    bash(1), `eval`.
    """
    return "`eval` of a string not known statically: what it would set or run is unknown", None


@rule("SHELL-ARITH", "error", "Invalid bash arithmetic", notes=(Kind.SHELL_ARITH,), certain=True)
def shell_arith(p: Problem) -> Message:
    """
    A `$((...))` expression bash cannot evaluate (syntax error, division by zero).

    Why:
    bash stops with an error at that line.

    Fix:
    Correct the expression.

    Source:
    bash(1), ARITHMETIC EVALUATION.
    """
    return f"$(({p['expression']})): {p['reason']}", None


@rule("SHELL-BOUND", "warning", "A value past shardcheck's reading bounds", notes=(Kind.SHELL_BOUND,), certain=True)
def shell_bound(p: Problem) -> Message:
    """
    A value that would grow past what a static reading evaluates: arithmetic outside bash's 64-bit
    integers or a shift by a negative count, a value of more than 1 MiB, an array index past 65,536, a
    printf width past 4,096, a pattern strip that would take millions of steps, expansions or
    statements nested past their bound, more than 10,000 function calls. The value is unknown, with
    this reason at its line; nothing is guessed, and the reading stays fast and small.

    Why:
    A launch script's values are short; one that grows without bound is a mistake (or an attack on the
    tool reading it), and bash itself would wrap the number or spend the memory.

    Fix:
    Write the value the launch needs; give it with `--env NAME=VALUE` when it comes from outside.

    Source:
    bash(1), ARITHMETIC EVALUATION (fixed-width integers, no overflow check); shardcheck's reader bounds
    (shardcheck/inputs/bounds.py).
    """
    return p["text"], "write the value the launch needs, or give it with --env NAME=VALUE"


@rule(
    "HYDRA-OVERRIDE", "error", "An override Hydra rejects", notes=(Kind.HYDRA_PARSE, Kind.HYDRA_REJECTED), certain=True
)
def hydra_override(p: Problem) -> Message:
    """
    Hydra parses every `key=value` word with its override grammar and applies it to the composed
    config; a word it cannot parse, `+key` on an existing key, or `~key` on a missing one stops the
    launch before verl runs.

    Why:
    `hydra.errors.OverrideParseException` / `ConfigCompositionException` at start.

    Fix:
    Follow Hydra's message: quote the value, drop or double the `+`.

    Source:
    hydra-core 1.3: hydra/core/override_parser, hydra/_internal/config_loader_impl.py _apply_overrides_to_config.
    """
    if p.kind is Kind.HYDRA_PARSE:
        return (
            f"{p['text']}: Hydra cannot parse this override ({p['reason']})",
            "quote the value for Hydra, e.g. key='\"value\"'",
        )
    return f"{p['text']}: {p['reason']}", _did_you_mean(p)


@rule(
    "VERL-CFG-UNKNOWN-KEY",
    "error",
    "An override of a key verl's config does not have",
    notes=(Kind.CONFIG_UNKNOWN_KEY,),
    certain=True,
)
def unknown_key(p: Problem) -> Message:
    """
    verl's config is in Hydra's struct mode: `key=value` for a key that does not exist fails.

    When another bundled verl release has the key, the finding names them; when the key was renamed,
    it names the key's name in the judged release and the release that renamed it. Renames are
    derived from the catalogue, not listed by hand: a key that leaves at release R while one key with
    the same last part, and the same default, arrives at R, its removed siblings arriving too
    (`critic.model.fsdp_config.*` → `critic.fsdp.*` at verl 0.8.0, `ray_init.*` → `ray_kwargs.*` at
    0.6.0). A rename to a key the script already sets is not offered.

    Why:
    `Could not override 'key'. To append to your config use +key=value` at start.

    Fix:
    Use the key shardcheck suggests; add `+` only for keys verl reads but does not declare.

    Source:
    hydra/_internal/config_loader_impl.py (struct mode); verl/trainer/config/_generated_*.yaml (each
    bundled release, 0.4.0 … 0.9.1 and main).
    """
    message = f"{p['text']}: {p['reason']}"
    rename = p.args.get("renamed")
    if rename:
        way, other, at = rename
        if way == "to":
            fix = f"use `{other}` (its name since verl {at}), or run on a verl that has `{p['key']}` ({p['having']})"
            note = f"renamed to {other} in verl {at}"
        else:
            fix = f"use `{other}` (its name before verl {at}), or run on a verl that has `{p['key']}` ({p['having']})"
            note = f"named {other} before verl {at}"
        return f"{message} (absent from verl {p['version']}: {note}{p['elsewhere']})", fix
    if p["megatron_section_missing"]:
        fix = "the megatron section exists with --config-name=ppo_megatron_trainer or model_engine=megatron"
    elif p.args.get("elsewhere"):
        fix = f"run on a verl that has it ({p['having']}), or remove it for verl {p['version']}"
        if p.args.get("suggestion"):
            fix += f"; or {_did_you_mean(p)}"
    else:
        fix = _did_you_mean(p) or f"prefix it with `+` only if verl reads `{p['key']}`; otherwise remove it"
    if p.args.get("elsewhere"):
        message += f" (absent from verl {p['version']}{p['elsewhere']})"
    return message, fix


@rule(
    "VERL-CFG-ADDED-KEY",
    "warning",
    "A `+key` that is a near-miss of a key verl has",
    notes=(Kind.CONFIG_ADDED_KEY,),
    certain=True,
)
def added_key(p: Problem) -> Message:
    """
    `+key=value` adds a key Hydra accepts; when it is a near-miss of an existing sibling key (a
    likely typo), nothing reads it and the setting has no effect. New keys that are not near-misses
    are not reported: verl reads many free-form keys (`*_kwargs`, `override_*`, `.get(...)`).

    Why:
    A typo hidden behind `+` silently keeps the default.

    Fix:
    Use the existing key shardcheck suggests.

    Source:
    verl/trainer/config/_generated_*.yaml (verl 0.9.1).
    """
    return f"{p['text']}: {p['reason']}", _did_you_mean(p)


@rule(
    "VERL-CONFIG-CUSTOM",
    "warning",
    "A config shardcheck cannot read",
    notes=(Kind.CONFIG_CUSTOM_GROUP, Kind.CONFIG_CUSTOM),
    certain=True,
)
def custom_config(p: Problem) -> Message:
    """
    The launch uses a config other than verl main_ppo's own (a recipe's config, another
    `--config-path` or `--config-name`) that shardcheck cannot read: its directory is not found near
    the script, or Hydra cannot compose it over verl's config tree (a group of verl's tree the
    catalogue does not hold). A config that is found is composed and judged like verl's own; here
    only the keys set on the command line are known; every other value is reported unknown, and keys
    are not checked against it.

    Why:
    Defaults assumed from another config could make a wrong verdict.

    Fix:
    Set the parallel sizes on the command line so they are read.

    Source:
    verl/trainer/main_ppo.py (@hydra.main config_path="config", config_name="ppo_trainer").
    """
    if p.kind is Kind.CONFIG_CUSTOM_GROUP:
        said = (
            f"{p['option']} selects a config group option shardcheck does not read "
            f"(it reads {', '.join(p['readable'])})"
        )
    else:
        said = f"config {p['config']} is not one of verl {p['entry']}'s own configs"
        if p.args.get("why"):
            said += f" and cannot be read ({p['why']})"
    return (
        f"{said}; only the keys set on the command line are known, the rest are unknown, and keys are not checked",
        None,
    )


@rule(
    "VALUE-BAD-SIZE",
    "error",
    "A parallel size that is not a positive integer",
    notes=(Kind.NOT_POSITIVE, Kind.FLAG_NOT_A_NUMBER, Kind.FLAG_WITHOUT_VALUE),
)
def bad_size(p: Problem) -> Message:
    """
    Parallel sizes and node counts are positive integers.

    Why:
    Megatron-Core divides by them; verl multiplies them.

    Fix:
    Give a whole number ≥ 1.

    Source:
    megatron/core/parallel_state.py initialize_model_parallel (megatron-core 0.16.1).
    """
    if p.kind is Kind.NOT_POSITIVE:
        bound = f" (at most {p['at_most']})" if p.args.get("at_most") else ""
        why = f": {p.args['why']}" if p.args.get("why") else ""
        return (
            f"{p['name']} must be a positive integer{bound}, got {p['value']}{why}",
            f"set {p['name']} to a whole number ≥ 1",
        )
    flag = p["flag"]
    if p.kind is Kind.FLAG_WITHOUT_VALUE:
        return f'{flag}: argparse stops ("argument {flag}: expected one argument")', f"give {flag} a value"
    text, kind = p["text"], p["type"]
    return (
        f"{flag} {text}: argparse rejects it (\"argument {flag}: invalid {kind} value: '{text}'\")",
        f"give {flag} a {'whole number' if kind == 'int' else 'number'}",
    )


@rule(
    "VALUE-BAD-TYPE",
    "error",
    "A setting of the wrong type",
    notes=(Kind.VALUE_BAD_TYPE, Kind.FLAG_WITHOUT_VALUES),
    certain=True,
)
def bad_type(p: Problem) -> Message:
    """
    A value a rule or the memory estimate reads has the wrong type: a fraction where a whole number
    belongs, a word where a number belongs, a list where a string belongs. The value is reported at its
    line and treated as unknown, so nothing is computed from it.

    Why:
    verl and Megatron-LM fail at start (or later, in the middle of a step) on such a value:
    `range()` of a float, arithmetic on a string.

    Fix:
    Give the value the type the message names.

    Source:
    verl 0.9.1's config dataclasses (verl/workers/config/*.py); megatron/training/arguments.py (argparse types).
    """
    if p.kind is Kind.FLAG_WITHOUT_VALUES:
        flag = p["flag"]
        return f'{flag}: argparse stops ("argument {flag}: expected at least one argument")', f"give {flag} its values"
    return _bad_value(p)


def _bad_value(p: Problem) -> Message:
    why = f"{p.args['why']}; " if p.args.get("why") else ""  # inf, NaN or past 2^40: said, not only the range
    if p.args.get("flag"):  # a Megatron-LM / slime flag
        return f"{p['key']} {p['value']}: {why}must be {p['what']}", f"give {p['key']} {p['what']}"
    return f"{p['key']} = {p['value']}: {why}must be {p['what']}", f"set {p['key']} to {p['what']}"


@rule(
    "VALUE-BAD-RANGE", "error", "A number outside the range it must lie in", notes=(Kind.VALUE_BAD_RANGE,), certain=True
)
def bad_range(p: Problem) -> Message:
    """
    A number a rule or the memory estimate reads lies outside its range: a batch size, length or size
    below 1, a fraction outside 0…1, an infinite or NaN value (`1e400`), or a count past 2^40. The value
    is reported at its line and treated as unknown.

    Why:
    Batch sizes and lengths are divided by and multiplied with; 0 or a negative value makes verl or
    Megatron-LM fail at start or divide by zero in a step.

    Fix:
    Give a value inside the range the message names.

    Source:
    verl 0.9.1's config dataclasses (verl/workers/config/*.py); megatron/training/arguments.py validate_args.
    """
    return _bad_value(p)


UNKNOWN_FIX = "give the value with --env NAME=VALUE, or set it literally in the script"


@rule(
    "VALUE-UNKNOWN",
    "warning",
    "A value a rule needs is not known statically",
    certain=True,
    notes=(
        Kind.UNKNOWN_ARGUMENT,
        Kind.UNKNOWN_FLAG_ARGUMENT,
        Kind.UNKNOWN_MODEL_FLAG,
        Kind.UNKNOWN_VALUE,
        Kind.UNKNOWN_CAUSE,
    ),
)
def value_unknown(p: Problem) -> Message:
    """
    A value came from something shardcheck does not run (command substitution, a loop, a function,
    an environment variable not given): it is reported as unknown, never guessed, and the rules
    that need it are not checked. Values unknown for one cause (one unset variable, one `case` on an
    unknown subject) are one finding at the cause's first line, naming each value and the rules it
    stops; the fix names the one option that settles it (`--env NAME=...`, `-- ARGS`).

    Why:
    A verdict built on a guessed value is worse than none.

    Fix:
    Give the value with `--env NAME=VALUE` (or the script's arguments after `--`), or set it
    literally in the script.

    Source:
    shardcheck's reader.
    """
    if p.kind is Kind.UNKNOWN_ARGUMENT:
        return (
            f"argument {p['text']} is unknown ({p['reason']}); it may set any key, so the verdict is undecided",
            settling_option(p["reason"]) or "give the values it is built from with --env NAME=VALUE",
        )
    if p.kind is Kind.UNKNOWN_FLAG_ARGUMENT:
        return (
            "an argument of unknown content stands where a flag would; it may set any flag, so the verdict is "
            "undecided",
            "give the values it is built from with --env NAME=VALUE",
        )
    if p.kind is Kind.UNKNOWN_MODEL_FLAG:
        return (
            f"{p['flag']} is unknown ({p['reason']}); the model rules are not checked",
            "give the value with --env NAME=VALUE",
        )
    if p.kind is Kind.UNKNOWN_CAUSE:
        through = f"{_and(['$' + v for v in p['through']])} depend on " if p["through"] else ""
        rules = p["rules"]
        stops = f"; {_and(rules)} {'is' if len(rules) == 1 else 'are'} not checked" if rules else ""
        may = "; an argument of unknown content may set any key" if p["arguments"] else ""
        cause = re.sub(r"; (give it with|pass) --env.*$", "", p["cause"])
        return (
            f"{through}{cause}, so {_and(p['names'])} are unknown{stops}{may}",
            p["fix"] or UNKNOWN_FIX,
        )
    stops = f"; {p['rule']} is not checked" if p.args.get("rule") else ""
    return f"{p['name']} is unknown: {p['reason']}{stops}", settling_option(p["reason"]) or UNKNOWN_FIX


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def unknown_sizes(job: Job) -> Iterator[Problem]:
    """The sizes every layout rule needs that are unknown (a bad size is VALUE-BAD-SIZE's, not this)."""
    nodes_key, devices_key, _ = job.cluster_keys
    needed = [(nodes_key, job.cluster.nnodes, None), (devices_key, job.cluster.devices_per_node, None)]
    for e in job.layouts:
        needed += [
            (f"{e.key_prefix}.tensor_model_parallel_size", e.tp, e.role),
            (f"{e.key_prefix}.pipeline_model_parallel_size", e.pp, e.role),
            (f"{e.key_prefix}.context_parallel_size", e.cp, e.role),
            (f"{e.key_prefix}.expert_model_parallel_size", e.ep, e.role),
            (f"{e.key_prefix}.expert_tensor_parallel_size", e.etp_setting, e.role),
        ]
    for name, traced, role in needed:
        if (
            not traced.known
            and "not a positive integer" not in (traced.unknown or "")
            and not is_invalid(traced.unknown)
        ):
            where = traced.origin.first_script_line() or traced.origin
            yield Problem(
                Kind.UNKNOWN_VALUE, where, {"name": name, "reason": traced.unknown, "rule": None, "role": role}
            )


@rule("MODEL-NOT-FOUND", "info", "No model facts: model rules skipped", certain=True)
def model_not_found(job: Job) -> Iterator[Finding]:
    """
    Without the model's architecture (a local `config.json`, `--model-config FILE`, the Hugging Face
    cache of this machine, a built-in preset matched by the model path's last component, the bundled
    catalogue of open models' config.json facts matched by HF id or by the path's last component, or the
    Hub with `--online`) the rules that need layer, head and expert counts cannot run; they are listed
    as skipped. A last component that names two catalogued models is ambiguous: the candidates are named.
    A corrupt cache or catalogue entry, or a failing Hub request, is said in the message.

    Why:
    Heads % TP, experts % EP and the pipeline split depend on the model.

    Fix:
    Pass `--model-config`.

    Source:
    verl/workers/config/model.py HFModelConfig (AutoConfig.from_pretrained on model.path).
    """
    if job.model is None and job.model_problem:
        yield finding(
            "MODEL-NOT-FOUND",
            job.model_problem,
            job.model_path.origin.first_script_line() or job.model_path.origin,
            fix="pass --model-config path/to/config.json",
        )


@rule(
    "SHELL-ENV-UNUSED",
    "warning",
    "An `--env NAME=VALUE` the script never reads",
    notes=(Kind.ENV_UNUSED,),
    certain=True,
)
def env_unused(p: Problem) -> Message:
    """
    `--env` gives a value the script reads from its environment (`$NNODES`, `${NNODES:-2}`). A name
    the script (and the files it sources) never reads changes nothing; usually its spelling differs
    from the script's variable.

    Why:
    `--env nnodes=4` for a script that reads `$NNODES` leaves the world size at the script's default:
    the verdict is for a cluster other than the one meant.

    Fix:
    Use the name the script reads (the message suggests the closest).

    Source:
    shardcheck's reader: every `$NAME` the script expands without assigning it first.
    """
    read = (
        f"; it reads {', '.join('$' + n for n in p['wanted'][:6])}"
        if p["wanted"]
        else "; it reads no environment variable"
    )
    return (
        f"--env {p['name']}: {p['path']} never reads ${p['name']}, so the value changes nothing{read}",
        f"did you mean --env {p['close']}=...?" if p["close"] else "remove it, or use the name the script reads",
    )


@rule(
    "INPUT-NO-LAUNCH",
    "info",
    "A file without a launch command shardcheck recognises: skipped",
    notes=(Kind.INPUT_NO_LAUNCH,),
)
def no_launch(p: Problem) -> Message:
    """
    The file was read but holds no verl (`python3 -m verl.trainer.main_ppo`), Megatron-LM
    (`pretrain_gpt.py`) or slime (`train.py`) launch: a helper script, a data preparation step. It is
    skipped; the other files' results stand, and the exit status does not change.

    Why:
    A folder of scripts or a pre-commit hook over many files should judge the launch scripts and
    pass over the rest, as linters pass over files with nothing to check.

    Fix:
    Nothing, unless the file is a launch script written in a way shardcheck does not recognise; then
    report it.

    Source:
    shardcheck's launch finder (inputs/launch.py).
    """
    return p["message"], None


@rule(
    "INPUT-UNREADABLE",
    "error",
    "A path that cannot be read: missing, a directory, no permission",
    notes=(Kind.INPUT_UNREADABLE,),
)
def unreadable(p: Problem) -> Message:
    """
    The path given does not name a readable file. The other inputs are judged; the exit status is 1,
    or 2 when no input at all could be read.

    Why:
    A misspelt path in a CI job would otherwise pass without judging anything.

    Fix:
    Give the path of a launch script (a directory is searched for `*.sh` launch scripts).

    Source:
    shardcheck's command line.
    """
    return p["message"], None


@rule("INPUT-UNUSABLE", "error", "A launch script shardcheck cannot use as a whole", notes=(Kind.INPUT_UNUSABLE,))
def unusable(p: Problem) -> Message:
    """
    The file was read but cannot be judged: a line bash itself would reject before the launch, a
    launch of a verl entry point shardcheck does not model yet, a model config that cannot be read.
    The message names `file:line` and what to do.

    Why:
    A verdict on a script read only in part would be a guess.

    Fix:
    As the message says.

    Source:
    shardcheck's reader and resolvers.
    """
    return p["message"], None


@rule(
    "INTERNAL-ERROR",
    "error",
    "shardcheck failed while judging this script (a bug of shardcheck, not a verdict)",
    notes=(Kind.INTERNAL_ERROR,),
)
def internal_error(p: Problem) -> Message:
    """
    An internal error of shardcheck while judging this script, or while one rule judged it: the
    message names the exception, its one-line text and the file:line it was raised at. The other
    scripts of the batch (and the other rules) are still judged; the exit status is 4 at the end,
    as ruff does for a panic. It is not a verdict on the script either way.

    Why:
    One bug must not lose the verdicts on every other file of a batch, nor pass as "valid".

    Fix:
    Report the script to shardcheck's maintainers; `--debug` prints the traceback.

    Source:
    shardcheck itself.
    """
    from shardcheck.guard import REPORT_HINT

    return p["message"], REPORT_HINT


@rule(
    "SUPPRESS-UNKNOWN-ID",
    "warning",
    "A rule id in a disable comment or a setting that names no rule",
    notes=(Kind.UNKNOWN_RULE_ID,),
)
def unknown_id(p: Problem) -> Message:
    """
    `# shardcheck: disable=ID`, `select`, `ignore` and `per-file-ignores` name rule ids (or, in the
    settings, id prefixes such as `MCORE-`). An id in a disable comment that names no rule has no
    effect: the finding it was meant for is still reported. In the settings and in `--select` /
    `--ignore` such an id is a usage error (exit 2, with "did you mean"), as a `select` that names
    nothing would silently check nothing. Renamed ids are applied as their new id and reported;
    removed ids are reported with what replaced them.

    Why:
    `ignore = ["MCORE-TC-HEAD-TP"]` (for MCORE-TC-HEADS-TP) would otherwise be accepted without a word.

    Fix:
    Use the id the message suggests; `shardcheck rules` lists every id.

    Source:
    shardcheck's rule registry (rules/registry.py RENAMED, REMOVED).
    """
    return p["message"], p["fix"]
