"""The bundled model catalogue: architecture facts of widely used open models, cut from their real config.json.

Built by ``tools/build_model_catalogue.py`` into ``data/model_catalogue.json.gz``; every entry names the public
copy it was read from (a repository, path and commit, or a Hugging Face page and revision). The file is read
only when a model is neither on disk nor a built-in preset (``lookup``), and only once a process.

A name finds an entry by its HF id (``Qwen/Qwen2.5-7B-Instruct``, also as the last two parts of a path:
``/data/Qwen/Qwen2.5-7B-Instruct``) or by the last part of a path alone (``$HOME/models/Qwen2.5-Math-7B``),
case-insensitively. A last part that two organisations' models share is ambiguous: no facts, the candidates
named (``Ambiguous``). An entry whose fields are not what a config.json holds is ``CorruptEntry``. An entry
mapped from a source that is not a config.json (litgpt's configs) lists the fields that source does not record
under ``unknown``: they are unknown to the rules (``ModelFacts.unknown``), never a default.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, replace
from pathlib import Path

from shardcheck.errors import InputError, ShardcheckError
from shardcheck.job import ModelFacts
from shardcheck.origin import Origin

DATA = Path(__file__).with_name("data") / "model_catalogue.json.gz"


class Ambiguous(ShardcheckError):
    """A name that more than one catalogue entry answers to."""

    def __init__(self, name: str, candidates: list[str]):
        self.candidates = candidates
        super().__init__(f"{name!r} names {len(candidates)} catalogued models ({', '.join(candidates)})")


class CorruptEntry(ShardcheckError):
    """A catalogue entry that is not a usable config (its id and why are the message)."""


@dataclass(frozen=True, slots=True)
class _Index:
    models: dict[str, dict]  # by HF id as written
    by_id: dict[str, str]  # lower-case HF id -> HF id
    by_tail: dict[str, list[str]]  # lower-case last part -> HF ids


_LOADED: dict[Path, _Index] = {}


def _index(path: Path | None = None) -> _Index:
    path = path or DATA
    if path not in _LOADED:
        try:
            data = json.loads(gzip.decompress(path.read_bytes()))
            models = data["models"]
            if not isinstance(models, dict):
                raise TypeError("models is not an object")
        except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
            raise CorruptEntry(f"the model catalogue {path} cannot be read ({exc}); reinstall shardcheck") from None
        by_tail: dict[str, list[str]] = {}
        for hf_id in models:
            by_tail.setdefault(hf_id.rsplit("/", 1)[-1].lower(), []).append(hf_id)
        _LOADED[path] = _Index(models, {k.lower(): k for k in models}, by_tail)
    return _LOADED[path]


def resolve(name: str, path: Path | None = None) -> str | None:
    """The HF id of the catalogue entry ``name`` names; None when none; Ambiguous when several."""
    parts = [p for p in name.strip().split("/") if p]
    if not parts:
        return None
    index = _index(path)
    if len(parts) >= 2:
        hit = index.by_id.get("/".join(parts[-2:]).lower())
        if hit:
            return hit
    hits = index.by_tail.get(parts[-1].lower(), [])
    if len(hits) > 1:
        raise Ambiguous(parts[-1], sorted(hits))
    return hits[0] if hits else None


def lookup(name: str, path: Path | None = None) -> ModelFacts | None:
    """The catalogued facts of the model ``name`` names (an HF id or a path), or None when it is not catalogued.

    Raises Ambiguous (the candidates named) and CorruptEntry (the entry named)."""
    hf_id = resolve(name, path)
    if hf_id is None:
        return None
    return facts(hf_id, _index(path).models[hf_id])


def source_text(source: object) -> str:
    """Where an entry was read: ``repo@commit`` (its path) or the page address at its revision."""
    if isinstance(source, dict) and source.get("repo"):
        return f"{source['repo']}@{str(source.get('commit', '?'))[:12]} ({source.get('path', '?')})"
    if isinstance(source, dict) and source.get("url"):
        return f"{source['url']} (revision {source.get('revision', '?')})"
    return "an unrecorded source"


def facts(hf_id: str, entry: object) -> ModelFacts:
    """An entry's facts, read by the same reader and checks as a config.json on disk."""
    from shardcheck.models.facts import check_config, facts_from_config

    config = entry.get("config") if isinstance(entry, dict) else None
    where = f"catalogue entry {hf_id}"
    if not isinstance(config, dict):
        raise CorruptEntry(f"{where} has no config object; pass --model-config config.json")
    try:
        check_config(config, json.dumps(config, indent=1), where)
    except InputError as exc:
        raise CorruptEntry(
            str(exc).replace("; give the model's config.json", "; pass --model-config config.json")
        ) from None
    unknown = entry.get("unknown") or []
    if not isinstance(unknown, list) or not all(isinstance(k, str) for k in unknown):
        raise CorruptEntry(f"{where}: its unknown is not a list of field names; pass --model-config config.json")
    source = f"catalogue: {hf_id}, from {source_text(entry.get('source'))}"
    if unknown:
        source += f"; not recorded there: {', '.join(unknown)}"
    origin = Origin(kind="model", text=source)
    return replace(facts_from_config(config, hf_id, source, origin), unknown=frozenset(unknown))


def names(path: Path | None = None) -> list[str]:
    """Every catalogued HF id."""
    return list(_index(path).models)
