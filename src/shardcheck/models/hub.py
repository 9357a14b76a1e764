"""A model's config.json from the Hugging Face Hub, only when asked (``--online``, the setting ``online``).

huggingface_hub is used when it is installed (imported here only, so the default install stays light),
else urllib: ``GET {HF_ENDPOINT}/{repo}/resolve/{revision}/config.json`` (huggingface_hub's
``constants.HUGGINGFACE_CO_URL_TEMPLATE``), with ``Authorization: Bearer $HF_TOKEN`` when set. ``HF_HUB_OFFLINE=1``
is honoured: nothing is fetched. Any failure is one line naming the request, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from pathlib import Path

from shardcheck.errors import ShardcheckError

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 10
LIMIT = 4 << 20  # a config.json larger than this is not one

_ONLINE: ContextVar[bool] = ContextVar("shardcheck_online", default=False)


class HubError(ShardcheckError):
    """A request to the Hub that did not give a config.json: the one line that says why."""


@contextlib.contextmanager
def online(enabled: bool):
    """Within this block, models may be read from the Hub (``check --online``)."""
    token = _ONLINE.set(bool(enabled))
    try:
        yield
    finally:
        _ONLINE.reset(token)


def is_online() -> bool:
    return _ONLINE.get()


def _offline(environ) -> bool:
    return str(environ.get("HF_HUB_OFFLINE", "")).strip().lower() in ("1", "on", "yes", "true")


def fetch_config(repo: str, revision: str = "main", environ=os.environ) -> tuple[str, str]:
    """(the config.json's text, the URL it came from); HubError otherwise."""
    if _offline(environ):
        raise HubError(f"HF_HUB_OFFLINE is set: {repo} is not fetched from the Hub (unset it, or drop --online)")
    endpoint = (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    url = f"{endpoint}/{repo}/resolve/{revision}/config.json"
    token = environ.get("HF_TOKEN") or None
    try:
        import huggingface_hub  # noqa: F401  (optional)
    except ImportError:
        return _urllib(url, token), url
    return _hub_library(repo, revision, token, url), url


def _hub_library(repo: str, revision: str, token: str | None, url: str) -> str:
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(repo, "config.json", revision=revision, token=token)
        return _read_limited(Path(path).read_bytes(), url)
    except Exception as exc:  # the library's errors are many; each becomes one line
        raise HubError(f"GET {url} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None


def _read_limited(raw: bytes, url: str) -> str:
    if len(raw) > LIMIT:
        raise HubError(f"GET {url}: the answer is larger than {LIMIT >> 20} MiB; not a config.json")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HubError(f"GET {url}: the answer is not UTF-8 text; not a config.json") from None


def _urllib(url: str, token: str | None) -> str:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": "shardcheck"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return _read_limited(answer.read(LIMIT + 1), url)
    except urllib.error.HTTPError as exc:
        hint = " (a gated or private model: set HF_TOKEN)" if exc.code in (401, 403) else ""
        raise HubError(f"GET {url} failed: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HubError(f"GET {url} failed: {reason}") from None
