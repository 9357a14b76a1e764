"""slime's own flags that change the layout or the batch (THUDM/slime, slime/utils/arguments.py
``add_cluster_arguments`` / batch-size arguments; the SGLang flags are SGLang's ``ServerArgs``
prefixed with ``--sglang-`` by slime/backends/sglang_utils/arguments.py ``add_sglang_arguments``,
defaults of SGLang's ServerArgs). slime parses Megatron-LM's arguments with
``ignore_unknown_args=True`` and these on top (slime/backends/megatron_utils/arguments.py
``megatron_parse_args``); ``--micro-batch-size`` defaults to 1 there (``reset_arg``).
"""

from __future__ import annotations

import functools

from shardcheck.frameworks.megatron_lm.flags import DEFAULT_MINOR, Flag, megatron_lm_flags

_SLIME = [
    Flag("--actor-num-nodes", "int", 1),
    Flag("--actor-num-gpus-per-node", "int", 8),
    Flag("--rollout-num-gpus", "int", None, low=0),
    Flag("--rollout-num-gpus-per-engine", "int", 1),
    Flag("--num-gpus-per-node", "int", 8),
    Flag("--colocate", "true", False),
    Flag("--rollout-batch-size", "int", None),
    Flag("--n-samples-per-prompt", "int", 1),
    Flag("--global-batch-size", "int", None),
    Flag("--num-steps-per-rollout", "int", None),
    Flag("--micro-batch-size", "int", 1),
    Flag("--use-dynamic-batch-size", "true", False),
    Flag("--max-tokens-per-gpu", "int", None),
    Flag("--debug-rollout-only", "true", False),
    Flag("--debug-train-only", "true", False),
    # slime/utils/arguments.py: the request length, colocation offload, the loss's log-probs and entropy.
    Flag("--rollout-max-context-len", "int", None),
    Flag("--rollout-max-prompt-len", "int", None),
    Flag("--rollout-max-response-len", "int", None),
    Flag("--offload", "true", False),
    Flag("--offload-train", "true", None),  # argparse.BooleanOptionalAction: None unless given
    Flag("--no-offload-train", "false", None, dest="offload_train"),
    Flag("--release-train", "true", False),
    Flag("--advantage-estimator", "str", "grpo"),
    Flag("--megatron-config-path", "str", None),
    Flag("--hf-checkpoint", "str", None),
    Flag("--entropy-coef", "float", 0.0),
    Flag("--log-probs-chunk-size", "int", -1, low=-1),  # -1: no chunking
    # The training length (slime's get_optimizer_param_scheduler: train_iters from the rollouts) and its --lr
    # default (reset_arg(parser, "--lr", type=float, default=1e-6)).
    Flag("--num-rollout", "int", None),
    Flag("--num-epoch", "int", None),
    Flag("--lr", "float", 1e-6),
]
_SGLANG = [
    Flag("--sglang-dp-size", "int", 1),
    Flag("--sglang-ep-size", "int", 1),
    Flag("--sglang-pp-size", "int", 1),
    Flag("--sglang-enable-dp-attention", "true", False),
    Flag("--sglang-mem-fraction-static", "float", None),  # None: SGLang derives it (server_args.py)
    Flag("--sglang-max-running-requests", "int", None),
    Flag("--sglang-context-length", "int", None),
]


@functools.cache
def slime_flags(minor: str = DEFAULT_MINOR) -> dict[str, Flag]:
    """Megatron-LM's flags at megatron-core ``minor`` with slime's and its SGLang flags on top."""
    return {**megatron_lm_flags(minor), **{f.name: f for f in _SLIME + _SGLANG}}


SLIME_FLAGS: dict[str, Flag] = slime_flags()
DEFAULT_OF = {**{f.name: "slime" for f in _SLIME}, **{f.name: "SGLang ServerArgs (via slime)" for f in _SGLANG}}
