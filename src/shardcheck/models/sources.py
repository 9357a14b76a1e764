"""Where a model's config.json is looked for after a local path: the Hugging Face cache, the bundled
catalogue, and the Hub when asked (``--online``). Each answer names its source in the facts."""

from __future__ import annotations

from shardcheck.errors import InputError
from shardcheck.inputs import files
from shardcheck.job import ModelFacts
from shardcheck.models import hf_cache, hub
from shardcheck.origin import Origin

Found = tuple[ModelFacts | None, str | None]  # (facts, the one-line problem): load_model's answer


def from_cache(text: str) -> Found | None:
    """The model in this machine's Hugging Face cache (hf_cache.py); a corrupt entry is a problem naming it."""
    from shardcheck.models.facts import read_config_json

    try:
        found = hf_cache.find(text)
    except (OSError, RuntimeError):  # a cache folder that cannot be listed; no HOME
        return None
    if found is None:
        return None
    shown = hf_cache.shown_id(found.entry)
    if found.config is None:
        return None, f"the Hugging Face cache entry {found.entry} ({shown}) is unusable: {found.problem}"
    try:
        source = f"the Hugging Face cache ({shown}, {found.config.parent.name[:12]})"
        facts = read_config_json(found.config, source=source, name=shown)
    except (InputError, files.UnreadableFile) as exc:
        return None, f"the Hugging Face cache entry {found.entry} ({shown}) is unusable: {exc}"
    return facts, None


def from_catalogue(text: str) -> Found | None:
    """The bundled catalogue of public models' architecture facts (models/catalogue.py), named by its source and
    revision; an ambiguous name or a corrupt entry is one line naming it."""
    from shardcheck.models import catalogue

    try:
        found = catalogue.lookup(text)
    except catalogue.Ambiguous as exc:
        return None, f"no config.json at {text} and no built-in preset; {exc}: pass --model-config config.json"
    except catalogue.CorruptEntry as exc:
        return None, f"no config.json at {text}; {exc}"
    return None if found is None else (found, None)


def from_hub(text: str) -> Found | None:
    """The config.json of the Hub repository ``text`` names, only under ``--online``; a failure is one line."""
    from shardcheck.models.facts import facts_from_config, parse_config

    repo = hf_cache.repo_id(text)
    if repo is None or not hub.is_online():
        return None
    try:
        body, url = hub.fetch_config(repo)
        config = parse_config(body, url)
    except hub.HubError as exc:
        return None, f"{repo}: {exc}"
    except InputError as exc:
        return None, f"{repo}: the Hub's config.json is not usable: {exc}"
    name = config.get("_name_or_path") or repo
    origin = Origin(kind="model", path=url, line=1, text=f"config.json of {repo} from the Hub")
    return facts_from_config(config, str(name), f"the Hugging Face Hub ({url})", origin), None


def hub_hint(text: str) -> str:
    """What the not-found line adds about the Hub: that it was not asked, when the name is a repository id."""
    if hf_cache.repo_id(text) is None or hub.is_online():
        return ""
    return " (the Hub is asked only with --online)"


__all__ = ["from_cache", "from_catalogue", "from_hub", "hub_hint"]
