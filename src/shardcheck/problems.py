"""Problems the lower layers find, typed: a kind and its arguments, never a rule id or a message.

The reader (``inputs``), the resolvers (``frameworks``) and the rank grid (``mesh``) report what they
found as a :class:`Problem` (or return one, for the grid and the layer split). The rule layer maps
each kind to the rule that reports it and renders its message and fix (``shardcheck.rules``); a
test checks that every kind belongs to exactly one registered rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from shardcheck.origin import Origin


class Kind(Enum):
    """What was found. The value is a short name for logs and reports, not a rule id."""

    # the shell reader (inputs/bash.py)
    SHELL_PARSE = "shell-parse"  # line: the text tree-sitter-bash did not parse
    SHELL_SYNTAX = "shell-syntax"  # reason: what bash would reject
    SHELL_PLACEHOLDER = "shell-placeholder"  # what: a `<placeholder>` bash reads as redirections
    SHELL_CONTINUATION = "shell-continuation"  # a `\ ` that escapes a space instead of the line end
    SHELL_SOURCE = "shell-source"  # command, target, why
    SHELL_EVAL = "shell-eval"
    SHELL_ARITH = "shell-arith"  # expression, reason
    SHELL_BOUND = "shell-bound"  # text: the value the reading stopped at, the bound, and what became unknown
    # Hydra and verl's config (frameworks/verl)
    HYDRA_PARSE = "hydra-parse"  # text, reason: Hydra's override grammar rejects the word
    HYDRA_REJECTED = "hydra-rejected"  # text, reason: Hydra refuses to apply the override
    CONFIG_UNKNOWN_KEY = "config-unknown-key"  # text, reason, key, suggestion, megatron_section_missing
    CONFIG_ADDED_KEY = "config-added-key"  # text, reason, suggestion
    CONFIG_CUSTOM_GROUP = "config-custom-group"  # option, readable: the group options read
    ENTRY_ABSENT = "entry-absent"  # module, version, having: verl's entry point is not in the version judged
    CONFIG_CUSTOM = "config-custom"  # config, entry, why: a config other than the entry's own, unread and why
    # values (frameworks/*)
    NOT_POSITIVE = "not-positive"  # name, value (as shown), at_most (a bound, or None), why (inf, NaN, past 2^40)
    FLAG_NOT_A_NUMBER = "flag-not-a-number"  # flag, text, type ("int" | "float")
    FLAG_WITHOUT_VALUE = "flag-without-value"  # flag
    FLAG_WITHOUT_VALUES = "flag-without-values"  # flag: a list flag (nargs="+") given no value
    FLAG_UNKNOWN = "flag-unknown"  # flag, meant, close (True: a near-miss; False: not a Megatron-LM flag)
    VALUE_BAD_TYPE = "value-bad-type"  # key, value (as shown), what (the type it must have)
    VALUE_BAD_RANGE = "value-bad-range"  # key, value (as shown), what (its range), why (inf, NaN, past 2^40)
    UNKNOWN_ARGUMENT = "unknown-argument"  # text, reason: a word of unknown content among the overrides
    UNKNOWN_FLAG_ARGUMENT = "unknown-flag-argument"  # a word of unknown content among the flags
    UNKNOWN_MODEL_FLAG = "unknown-model-flag"  # flag, reason: an architecture flag is unknown
    UNKNOWN_VALUE = "unknown-value"  # name, reason, rule (the rule it stops, or None): a needed value is unknown
    # cause, names, rules, through (the variables that pass it on), fix (or None), arguments (bool):
    # several values unknown for one reason (rules/causes.py)
    UNKNOWN_CAUSE = "unknown-cause"
    # the command line and the files given (api.py)
    ENV_UNUSED = "env-unused"  # name, path, wanted (the names the script reads), close (the closest, or None)
    INPUT_NO_LAUNCH = "input-no-launch"  # message: the one line that says why the file is skipped
    INPUT_UNREADABLE = "input-unreadable"  # message
    INPUT_UNUSABLE = "input-unusable"  # message
    INTERNAL_ERROR = "internal-error"  # message: a bug of shardcheck while judging the input (or one rule)
    UNKNOWN_RULE_ID = "unknown-rule-id"  # message, fix: an id in a disable comment or setting that names no rule
    # judged, differs: [(span, "starts" | "fails", why)] (api.py): other accepted verl releases judge otherwise
    VERSIONS_DIFFER = "versions-differ"
    # Megatron-Core's rank grid (mesh/grid.py); quote: megatron-core's own error text
    GRID_WORLD = "grid-world"
    GRID_VPP_PP = "grid-vpp-pp"
    GRID_ORDER_TOKEN = "grid-order-token"
    GRID_EXPERT_FOLD = "grid-expert-fold"
    GRID_ORDER_PPLAST = "grid-order-pplast"
    GRID_PP_GROUPS = "grid-pp-groups"
    # Megatron-Core's layer split (frameworks/megatron/pipeline.py); quote: megatron-core's text
    SPLIT_UNEVEN_POS = "split-uneven-pos"
    SPLIT_UNEVEN_MIDDLE = "split-uneven-middle"
    SPLIT_UNEVEN_VPP = "split-uneven-vpp"
    SPLIT_UNEVEN_ACCOUNT = "split-uneven-account"
    SPLIT_NEGATIVE_STAGE = "split-negative-stage"
    SPLIT_ACCOUNT = "split-account"
    SPLIT_LAYERS_PP = "split-layers-pp"
    SPLIT_VPP = "split-vpp"


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem found while reading or resolving an input, at ``origin``; ``args`` by kind (above)."""

    kind: Kind
    origin: Origin
    args: dict = field(default_factory=dict, compare=False, hash=False)
    severity: str | None = None  # overrides the rule's default severity when set

    def __getitem__(self, name: str):
        return self.args[name]
