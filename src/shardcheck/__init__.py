"""shardcheck: judge a large-model training launch before it runs.

    >>> import shardcheck
    >>> result = shardcheck.check("run.sh", env={"NNODES": "32"})
    >>> result.valid, result.layout_summary()["dp"], [f.rule for f in result.findings]

The API is imported lazily so that ``import shardcheck`` stays cheap.
"""

__all__ = ["Result", "check"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("check", "Result"):
        from shardcheck import api

        return getattr(api, name)
    raise AttributeError(f"module 'shardcheck' has no attribute {name!r}")
