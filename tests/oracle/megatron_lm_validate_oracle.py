"""Run Megatron-LM's own ``parse_args`` + ``validate_args`` on a batch of command lines.

Usage: python tests/oracle/megatron_lm_validate_oracle.py TRAINING_DIR < cases.json

TRAINING_DIR holds ``megatron/training`` and ``megatron/legacy`` of one Megatron-LM tag (git archive); the
installed megatron-core is the one they run with. stdin: a JSON list of argument lists (the words after
``pretrain_gpt.py``); stdout: a JSON list of ``null`` (accepted) or ``"<ExceptionType>: <text>"``.

Bypassed, and only this: ``megatron/training/__init__.py`` (it imports the training loop, which needs triton
and GPU kernels); ``megatron.training`` is made a bare package over the same folder with the ``get_*`` accessors
of its ``global_vars`` module, which is all ``arguments.py`` and ``utils.py`` take from it. parse_args and
validate_args run as they are, world size and rank from the environment (WORLD_SIZE=8, RANK=0); the one device
question validate_args asks (``get_device_arch_version``) is answered 9 (Hopper), with CUDA_DEVICE_MAX_CONNECTIONS=1.
"""

from __future__ import annotations

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


def run(words: list[str]) -> str | None:
    sys.argv = ["pretrain_gpt.py", *words]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            args = arguments.parse_args()
            arguments.validate_args(args, {})
        except SystemExit as e:
            return f"SystemExit: {e}"
        except Exception as e:  # the verdict is the exception: reported, not raised
            return f"{type(e).__name__}: {e}"
    return None


cases = json.load(sys.stdin)
results = [run(words) for words in cases]
sys.stdout.write(json.dumps(results))
