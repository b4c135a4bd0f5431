"""The judge's call-level cache: one small JSON file per judged request, on any fsspec URL.

The key is the SHA-256 of everything that can change a reply (model, the full request with its
prompt version, temperature, seed, response-format setting); the file ``<url>/<key[:2]>/<key>.json``
holds the replies and the token usage, never a key or a header. Local writes go to a temporary name
and are renamed into place; object stores (S3, GCS) write whole objects; so a crash never leaves half
a file, and concurrent writers of one key write the same content. Every task and process pointing
at the same URL shares the cache. The client stores only replies the metric's parser accepted, so a reply of the
wrong shape, like a failed call, is never served again: the next run asks for it anew.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse.metrics.judge import JudgeRequest
from ragpulse.tasks.core.storage import filesystem, redact_url, storage_errors

__all__ = ["CACHE_FORMAT", "CachedCall", "JudgeCache", "cache_key", "plain_json"]

CACHE_FORMAT = 1


def plain_json(value: Any) -> Any:
    """``value`` with every mapping as a dict and every tuple as a list (read-only schemas are mappingproxies)."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def cache_key(request: JudgeRequest, *, model: str, temperature: float, seed: int | None, response_format: str) -> str:
    """SHA-256 (hex) of what determines the replies; the endpoint URL and credentials are not part of it."""
    material = {
        "model": model,
        "request": plain_json(request.cache_material()),
        "temperature": temperature,
        "seed": seed,
        "response_format": response_format,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class CachedCall:
    """The replies of one request and what they cost when they were first fetched."""

    replies: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int


class JudgeCache:
    """Read and write cached calls under ``url``. Methods block: call them from a worker thread."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self._fs, self._root = filesystem(url, storage_options)
        protocols = self._fs.protocol if isinstance(self._fs.protocol, tuple) else (self._fs.protocol,)
        self._local = "file" in protocols or "local" in protocols

    def __repr__(self) -> str:
        return f"JudgeCache({redact_url(self.url)!r})"

    def path(self, key: str) -> str:
        return f"{self._root}/{key[:2]}/{key}.json"

    def get(self, key: str) -> CachedCall | None:
        """The cached call, or None when absent or unreadable (a damaged entry is a miss, not an error)."""
        path = self.path(key)
        try:
            with storage_errors(self.url):
                raw = self._fs.cat_file(path)
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(raw)
            replies = entry["replies"]
            usage = entry["usage"]
            if entry.get("key") != key or not all(isinstance(r, str) for r in replies):
                return None
            return CachedCall(tuple(replies), int(usage["prompt_tokens"]), int(usage["completion_tokens"]))
        except (ValueError, TypeError, KeyError):
            return None

    def discard(self, key: str) -> None:
        """Remove the entry of ``key`` if there is one."""
        with contextlib.suppress(FileNotFoundError), storage_errors(self.url):
            self._fs.rm_file(self.path(key))

    def put(self, key: str, call: CachedCall, *, request: JudgeRequest, model: str) -> None:
        """Store ``call`` atomically (a reader sees the old state or the whole new file)."""
        entry = {
            "format": CACHE_FORMAT,
            "key": key,
            "model": model,
            "metric": request.metric,
            "prompt_version": request.prompt_version,
            "step": request.step,
            "n": request.n,
            "replies": list(call.replies),
            "usage": {"prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens},
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        data = json.dumps(entry, ensure_ascii=False).encode()
        path = self.path(key)
        with storage_errors(self.url):
            if self._local:
                directory = os.path.dirname(path)
                os.makedirs(directory, exist_ok=True)
                temporary = os.path.join(directory, f".{key}.{uuid.uuid4().hex}.tmp")
                try:
                    with open(temporary, "wb") as handle:
                        handle.write(data)
                    os.replace(temporary, path)
                finally:
                    if os.path.exists(temporary):
                        os.remove(temporary)
            else:
                self._fs.pipe_file(path, data)
