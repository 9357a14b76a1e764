"""Run Megatron-LM's own ``parse_args`` + ``validate_args`` on a batch of command lines.

Usage: python tests/oracle/megatron_lm_validate_oracle.py TRAINING_DIR < cases.json

TRAINING_DIR holds ``megatron/training`` and ``megatron/legacy`` of one Megatron-LM tag (git archive); the
installed megatron-core is the one they run with. stdin: a JSON list of argument lists (the words after
``pretrain_gpt.py``); stdout: a JSON list of pairs ``[validate_args, scheduler]``, each ``null`` (accepted) or
``"<ExceptionType>: <text>"``; the scheduler's is ``null`` also when it is not reached (validate_args refused, or
``setup_model_and_optimizer`` builds no optimizer), ``"skipped"`` for a sample-based run with a batch-size rampup.

The scheduler stage runs the tag's own ``get_optimizer_param_scheduler`` and ``update_train_iters``
(megatron/training/training.py, taken out of the file with ``ast``: the module itself imports the training
loop) on the arguments validate_args left, with the installed megatron-core's ``OptimizerParamScheduler``
and an optimizer of one empty parameter group (Transformer Engine's or apex's FusedAdam takes any lr, so the
scheduler is the first to see it). Whether the optimizer is built with ``--skip-train`` is read from the
tag's ``setup_model_and_optimizer``: it skips it when it reads ``skip_train`` (RL steps are not launched here).
A sample-based run with ``--rampup-batch-size`` needs the microbatch calculator set up: ``"skipped"``.

Bypassed, and only this: ``megatron/training/__init__.py`` (it imports the training loop, which needs triton
and GPU kernels); ``megatron.training`` is made a bare package over the same folder with the ``get_*`` accessors
of its ``global_vars`` module, which is all ``arguments.py`` and ``utils.py`` take from it. parse_args and
validate_args run as they are, world size and rank from the environment (WORLD_SIZE=8, RANK=0); the one device
question validate_args asks (``get_device_arch_version``) is answered 9 (Hopper), with CUDA_DEVICE_MAX_CONNECTIONS=1.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
import sys
import types
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
os.environ.update(RANK="0", WORLD_SIZE="8", LOCAL_RANK="0")
import megatron  # noqa: E402,F401  (a namespace package: the installed megatron-core plus TRAINING_DIR)

package = types.ModuleType("megatron.training")
package.__path__ = [os.path.join(sys.argv[1], "megatron", "training")]
sys.modules["megatron.training"] = package
global_vars = importlib.import_module("megatron.training.global_vars")
for name in dir(global_vars):
    if name.startswith("get_"):
        setattr(package, name, getattr(global_vars, name))
arguments = importlib.import_module("megatron.training.arguments")
# The device: validate_args asks the GPU's architecture when TP or CP > 1 (then wants CUDA_DEVICE_MAX_CONNECTIONS=1
# before Blackwell). There is no GPU here: a Hopper (9) with that variable set, as on the launches judged.
arguments.get_device_arch_version = lambda: 9
os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"


_training = os.path.join(sys.argv[1], "megatron", "training", "training.py")
with open(_training) as f:
    _tree = ast.parse(f.read())
_functions = {n.name: n for n in _tree.body if isinstance(n, ast.FunctionDef)}
# --skip-train builds no optimizer where setup_model_and_optimizer reads it (core_v0.16.0 on)
SKIP_TRAIN_SKIPS = "skip_train" in ast.unparse(_functions["setup_model_and_optimizer"])
_scheduler_module = ast.Module(
    body=[_functions["get_optimizer_param_scheduler"], _functions["update_train_iters"]], type_ignores=[]
)


class _Optimizer:
    def __init__(self) -> None:
        self.param_groups = [{}]


def _verdict(call) -> str | None:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            call()
        except SystemExit as e:
            return f"SystemExit: {e}"
        except Exception as e:  # the verdict is the exception: reported, not raised
            return f"{type(e).__name__}: {e}"
    return None


def _scheduler(args) -> None:
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    space = {"get_args": lambda: args, "OptimizerParamScheduler": OptimizerParamScheduler, "print_rank_0": print}
    exec(compile(_scheduler_module, _training, "exec"), space)  # Megatron-LM's own code, not the input's
    space["get_optimizer_param_scheduler"](_Optimizer())


def run(words: list[str]) -> list[str | None]:
    sys.argv = ["pretrain_gpt.py", *words]
    holder = {}

    def validate() -> None:
        holder["args"] = args = arguments.parse_args()
        arguments.validate_args(args, {})

    checked = _verdict(validate)
    args = holder.get("args")
    if checked is not None or (SKIP_TRAIN_SKIPS and args.skip_train):
        return [checked, None]
    if args.rampup_batch_size is not None and not args.train_iters:
        return [checked, "skipped"]
    return [checked, _verdict(lambda: _scheduler(args))]


cases = json.load(sys.stdin)
results = [run(words) for words in cases]
sys.stdout.write(json.dumps(results))
