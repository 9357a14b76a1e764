"""One interface per framework: what each framework package under ``frameworks/`` answers.

Each framework (verl, Megatron-LM, slime) is a package with the same entry points, found by
:func:`framework` from ``Job.framework``:

- ``resolve.detect(launch)``: whether a launch command is this framework's;
- ``resolve.resolve(launch, reading, path, model_config=)``: the Job it would build from the launch;
- ``rollout.sglang_server(job)``: the SGLang server it starts for its rollout (None: none);
- ``memory_settings``: the memory estimate's settings for its jobs;
- its key tables and provider defaults (``verl.provider``, ``megatron_lm.flags``, ``slime.flags``).

The rules ask through here instead of testing ``job.framework``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The frameworks shardcheck resolves, in the order a launch is matched (slime's train.py before Megatron-LM's).
PACKAGES = {
    "verl": "verl",
    "verl-sft": "verl.sft",
    "verl-gen": "verl.gen",
    "slime": "slime",
    "megatron-lm": "megatron_lm",
}
MEMORY_FRAMEWORKS = ("verl", "megatron-lm", "slime")  # those with a memory_settings module


def framework_module(framework: str, part: str) -> ModuleType | None:
    """The module ``part`` of a framework's package (None: the framework has none, e.g. no rollout)."""
    package = PACKAGES.get(framework)
    if package is None:
        return None
    try:
        return importlib.import_module(f"shardcheck.frameworks.{package}.{part}")
    except ModuleNotFoundError as exc:
        if exc.name == f"shardcheck.frameworks.{package}.{part}":
            return None
        raise


def detect(launch) -> str | None:
    """The framework whose launch ``launch`` is (the first that recognises it), or None."""
    return next((name for name in PACKAGES if framework_module(name, "resolve").detect(launch)), None)


def resolve(framework: str, launch, reading, path: str, *, model_config: str | None = None, **options):
    """The Job ``framework`` would build from ``launch`` (``reading``: the script as read, for its exports).

    ``options``: what only that framework reads (verl: ``verl_version``, ``pinned``, ``memo``)."""
    return framework_module(framework, "resolve").resolve(launch, reading, path, model_config=model_config, **options)


def memory_fix_keys(job):
    """The settings the job's framework names in memory findings (None: the estimate does not read it)."""
    module = framework_module(job.framework, "memory_settings")
    return module.fix_keys(job) if module is not None else None


def sglang_server(job):
    """The SGLang server the job's framework starts for its rollout, or None."""
    module = framework_module(job.framework, "rollout")
    return module.sglang_server(job) if module is not None else None
