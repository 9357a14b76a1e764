"""What other verl releases that accept the script would say: one note per script (api.py judges them)."""

from __future__ import annotations

from shardcheck.problems import Kind, Problem
from shardcheck.rules.base import Message, rule


@rule(
    "VERL-VERSIONS-DIFFER",
    "info",
    "Other verl releases that accept the script judge it otherwise",
    notes=(Kind.VERSIONS_DIFFER,),
    certain=True,
)
def versions_differ(p: Problem) -> Message:
    """
    The verdict is that of the verl version judged (`--verl-version`, a pin near the script, an
    installed verl, else the newest release that accepts every key). When no version was given or
    pinned, other releases that accept the same keys are judged too, and where their verdict differs
    one note per script says so: on which releases the script starts or fails, and the value that
    makes the difference there. It never changes the verdict.

    Why:
    A default that changed between releases (verl 0.6.0 set `expert_tensor_parallel_size` to 1, the
    others leave it unset, so megatron-core uses ETP = TP) decides whether the job starts: the user
    who runs an older release should know, without the error of the judged release becoming a warning.

    Fix:
    Pin the verl version you run (`--verl-version`, `verl-version` in `[tool.shardcheck]`, or a
    requirement next to the script); `shardcheck check --versions` lists the verdict of every release.

    Source:
    shardcheck's verl catalogue (frameworks/verl/versions.py): the defaults of each release's config.
    """
    parts = []
    for versions, how, why in p["differs"]:
        said = "this starts" if how == "starts" else "this does not start"
        parts.append(f"on verl {versions} {said}" + (f": {why}" if why else ""))
    return f"{'; '.join(parts)} (judged: verl {p['judged']}); `--versions` shows all", None
