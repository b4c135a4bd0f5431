"""What every ragpulse artifact shares: its key, values escaped for markdown, and links only where they open.

**Keys** are ``ragpulse-<kind>-<date>-<deployment>-<warehouse>``, such as
``ragpulse-run-2026-03-01-monitor-daily-3f9a0c12``: Prefect keeps the latest artifact per key, so a run of one date
into another warehouse, or from another deployment, must not replace this one's. ``<deployment>`` is the run's
deployment name slugified (lower-case letters, digits and dashes, all Prefect allows in a key), ``local`` for a run
from no deployment (the CLI, a library call); ``<warehouse>`` is 8 hex digits of SHA-256 over the warehouse URL as
configured, without its password. docs/report.md lists the artifacts.

**Values** read from traces and tables are data, not markup: ``md`` makes any of them literal markdown text.
**Links** are links only when the reader of the artifact, in the Prefect UI, can open them: a ``file://`` URL or a
path names a file on the worker that ran the flow, so it is shown as plain text.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import html
import re
import unicodedata
from typing import Literal
from urllib.parse import quote, unquote, urlsplit
from uuid import UUID

from ragpulse.tasks.core.storage import redact_url

__all__ = [
    "LOCAL_DEPLOYMENT",
    "ArtifactKind",
    "artifact_key",
    "deployment_slug",
    "followable",
    "md",
    "md_link",
    "shown_url",
    "warehouse_tag",
    "worker_path",
]

ArtifactKind = Literal["run", "summary", "rejected", "drift"]
LOCAL_DEPLOYMENT = "local"

# Markdown punctuation that can start or end emphasis, code, links, strikethrough, headings or a table cell.
_SPECIALS = re.compile(r"([\\`*_\[\]|~#])")
# A value opening with a list marker ("- x", "+ x", "1. x", "2) x") would nest a list in the item it is put in.
_LIST_MARKER = re.compile(r"^(\s*\d*)([-+.)])")
_FOLLOWABLE = frozenset({"http", "https"})
# What stays unencoded in a link destination: URL syntax and existing %-escapes; spaces, <, >, |, ` go.
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"


def shown_url(url: str) -> str:
    """``url`` with its password masked, in the userinfo and in query parameters (``redact_url``): for display
    and tags."""
    return redact_url(url)


def warehouse_tag(url: str) -> str:
    """8 hex digits naming a warehouse URL: the same URL always gets the same tag. Its password is masked first (and
    the user's dropped), so rotating it, or moving it to ``PGPASSWORD``, changes nothing, and the tag gives none of
    it away."""
    return hashlib.sha256(shown_url(url).replace(":***@", "@", 1).encode()).hexdigest()[:8]


def _slug(name: str) -> str:
    """``name`` in lower-case ASCII letters, digits and single dashes; a name with none of those (e.g. all CJK)
    becomes 8 hex digits of its SHA-256, so two such names still get two slugs."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug or hashlib.sha256(name.encode()).hexdigest()[:8]


@functools.lru_cache(maxsize=256)
def _ancestor_deployment(flow_run_id: str) -> str | None:
    """The deployment of the nearest flow run from ``flow_run_id`` up to its root that has one. Prefect records
    the deployment on the run it started, not on that run's subflow runs, and only newer Prefect versions pass
    it down to them in the run context. A run's ancestry never changes, hence the cache."""
    from prefect import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(flow_run_id))
        while run.deployment_id is None and run.parent_task_run_id is not None:
            parent = client.read_task_run(run.parent_task_run_id).flow_run_id
            if parent is None:
                return None
            run = client.read_flow_run(parent)
        return client.read_deployment(run.deployment_id).name if run.deployment_id is not None else None


def deployment_slug() -> str:
    """The slug of the deployment the current run belongs to (its own or an ancestor's), else ``local``."""
    from prefect.runtime import deployment, flow_run

    name = deployment.name
    if not name and (run_id := flow_run.id):
        name = _ancestor_deployment(str(run_id))
    return _slug(str(name)) if name else LOCAL_DEPLOYMENT


def artifact_key(kind: ArtifactKind, day: dt.date, warehouse_url: str) -> str:
    """The key of a ragpulse artifact: ``ragpulse-<kind>-<date>-<deployment>-<warehouse tag>``."""
    return f"ragpulse-{kind}-{day.isoformat()}-{deployment_slug()}-{warehouse_tag(warehouse_url)}"


def md(value: object) -> str:
    """``value`` as literal markdown text: ``<>&`` HTML-escaped (``<record>`` would vanish as a tag), markdown
    punctuation backslash-escaped (``|`` would split a table cell, ``*x*`` turn bold), a leading list marker
    escaped, and line breaks as spaces (a value stays on its table row or list item)."""
    text = " ".join(str(value).splitlines())
    text = _SPECIALS.sub(r"\\\1", html.escape(text, quote=False))
    return _LIST_MARKER.sub(r"\1\\\2", text)


def followable(url: str) -> bool:
    """Whether a reader of the artifact, in the Prefect UI, can open ``url``: http(s) only. A browser opens no
    ``s3://`` link, and a ``file://`` URL or a path names a file on the worker, not on the reader's disk."""
    return urlsplit(url).scheme.lower() in _FOLLOWABLE


def worker_path(url: str) -> str:
    """The local path a ``file://`` URL names; anything else (a plain path) as it is."""
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme.lower() == "file" else url


def md_link(text: str, url: str) -> str:
    """``[text](url)`` with ``url`` percent-encoded where markdown would cut it (spaces, ``<>``, ``|``); callers
    link only what is ``followable``."""
    return f"[{md(text)}](<{quote(url, safe=_URL_SAFE)}>)"
