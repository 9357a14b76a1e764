"""Megatron-Core oracle for shardcheck's differential tests: a shim over ``shardcheck.verify.worker``.

Usage (unchanged)::

    python tests/oracle/megatron_oracle.py [--jobs N] [--strict] [--timing] < cases.json > results.json

The runner itself -- the JSON protocol, the fake-process-group initialisation of
``megatron.core.parallel_state`` and its speed-ups, the ``TransformerConfig`` / layer-split checks
of a case's ``"model"`` -- lives in the package as ``src/shardcheck/verify/worker.py`` (run it as
``python -m shardcheck.verify.worker``); see its docstring.  This file runs that module as
``__main__``, so stdout carries only the JSON, exactly as before.
"""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    # alter_sys: the worker's process pool pickles its functions by reference to __main__.
    runpy.run_module("shardcheck.verify.worker", run_name="__main__", alter_sys=True)
