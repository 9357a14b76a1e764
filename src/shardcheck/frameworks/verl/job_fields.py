"""The parts of a Job that every verl entry point (``main_ppo``, the SFT trainers, the generation entries) builds
the same way: the command line's own problems, the model its config names, the version and config fields."""

from __future__ import annotations

from pathlib import Path

from shardcheck.frameworks.value_kinds import NAME_OR_NULL, checked
from shardcheck.frameworks.verl.config_tree import VerlConfig, VerlDefaults
from shardcheck.frameworks.verl.versions import VersionChoice, span
from shardcheck.inputs.hydra_overrides import HydraCommandLine
from shardcheck.inputs.launch import Launch
from shardcheck.models.facts import load_model
from shardcheck.problems import Kind, Problem


def command_line_notes(hydra: HydraCommandLine) -> list[Problem]:
    """The words Hydra's grammar rejects, and the words that are not overrides at all."""
    notes = [Problem(Kind.HYDRA_PARSE, e.word, {"text": e.text, "reason": e.message}) for e in hydra.errors]
    notes += [Problem(Kind.UNKNOWN_ARGUMENT, w.word, {"text": w.text, "reason": w.reason}) for w in hydra.unknown_words]
    return notes


def entry_absent(launch: Launch, module: str, version: str, having: tuple[str, ...] | list[str]) -> Problem:
    """``module`` is not an entry point of verl ``version`` (``having``: the versions that have it)."""
    return Problem(
        Kind.ENTRY_ABSENT,
        launch.origin,
        {"module": module, "version": version, "having": span(having) if having else ""},
    )


def read_model(config: VerlConfig, key: str, notes: list[Problem], model_config: str | None, path: str):
    """(the model path as traced, its facts or None, a one-line problem or None): the model ``key`` names, or the
    ``--model-config`` given, relative paths read from the script's folder."""
    model_path = checked(key, config.get(key), NAME_OR_NULL, notes)
    from omegaconf.errors import OmegaConfBaseException

    try:
        raw_path = config.select(key)
    except OmegaConfBaseException:  # `${WORK_DIR}` left for Hydra to resolve: config.get said why
        if model_config is None:
            return model_path, None, f"{model_path.unknown}; pass --model-config config.json"
        raw_path = None
    model, problem = load_model(
        str(raw_path) if raw_path is not None else None, model_path.known, model_config, base=Path(path).parent
    )
    return model_path, model, problem


def job_fields(
    choice: VersionChoice,
    config: VerlConfig,
    defaults: VerlDefaults,
    hydra: HydraCommandLine,
    *,
    config_name: str,
    version: str | None = None,
) -> dict:
    """The Job's fields on which verl version judged it and why, which config, and what was left to defaults.

    ``version``: the version whose defaults were read, where it is not the chosen one (an entry point the chosen
    version lacks is judged with the newest that has it)."""
    return {
        "framework_version": version or choice.version,
        "version_source": choice.source,
        "accepted_versions": choice.accepted,
        "version_reason": choice.reason,
        "defaults_read": frozenset(k for k in config.read if config.setter(k) is None),
        "config_name": config_name,
        "config_source": defaults.source,
        "open_arguments": tuple(word.word for word in hydra.unknown_words),
    }
