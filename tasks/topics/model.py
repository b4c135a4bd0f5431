"""The topic model: topics fit on the baseline window's questions, stored, and a new day's questions assigned to them.

Why spherical k-means with k chosen by silhouette (``metrics.topics``): a team reads a bounded number of named
topics (``min_topics``..``max_topics``), the same questions and seed give the same topics in every process, and the
cost is bounded by embedding a sample of at most ``max_fit_questions`` baseline questions; the encoder's unit
vectors make the cosine the natural distance. Density clustering (HDBSCAN) finds its own number of clusters and a
noise class, but needs a dependency, a minimum cluster size that is as arbitrary as k, and gives no centroid to
assign tomorrow's questions to; its noise class is played here by each topic's radius.

Language: the multilingual encoder places a question near other questions of its language before questions of its
subject (templated baselines of three subjects in three languages fall into nine clusters). Subtracting each
language's mean embedding before clustering removes most of that (Libovický, Rosa and Fraser, "On the Language
Neutrality of Pre-trained Multilingual Representations", Findings of EMNLP 2020), and the same three subjects come
out as three topics holding all three languages. The means are part of the model: a new day's question is
centred by its language's baseline mean, or the baseline's overall mean (``*``) for a language the baseline had too
few questions of.

Stability: a day is never refit implicitly. Its questions go to the nearest topic centroid when within that
topic's radius (the ``distance_quantile``, 95% by default, of its members' distances at fit: by construction 5%
of the baseline's own questions fall outside, so a day far above that is asking something new); the rest are
clustered among themselves as candidates for new topics. A refit (asked for, or when the topics are older than
``refit_after_days``) keeps a topic's id when most of a new cluster's members fell in that old topic; other
clusters get new ids.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from ragpulse.metrics._vectors import unit_rows
from ragpulse.metrics.topics import choose_clustering, class_tf_idf, nearest
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.terms import terms_of
from ragpulse.tasks.warehouse import TOPICS_SCHEMA

__all__ = [
    "ANY_LANGUAGE",
    "MODEL_VERSION",
    "UNASSIGNED",
    "Assignment",
    "Topic",
    "TopicModel",
    "cluster_candidates",
    "fit_model",
    "language_of",
]

MODEL_VERSION = "1.0.0"
"""Version of the clustering, radius and naming; a change that moves assignments bumps the major."""
UNASSIGNED = -1
ANY_LANGUAGE = "*"
"""The key of the baseline's overall mean embedding, for questions of a language the baseline had few of."""
_NAME_TERMS = 3
_KEPT_TERMS = 10


def language_of(tag: str | None) -> str:
    """The primary subtag of a BCP 47 tag (``zh-Hant`` is ``zh``), or ``*`` when there is none."""
    return tag.split("-", 1)[0].strip().lower() or ANY_LANGUAGE if tag else ANY_LANGUAGE


@dataclass(frozen=True)
class Topic:
    topic_id: int
    name: str
    terms: tuple[str, ...]
    size: int
    threshold: float
    centroid: NDArray[np.float64]
    created_date: dt.date


@dataclass(frozen=True)
class Assignment:
    """Per question: its topic id (``UNASSIGNED`` beyond every radius) and the distance to the nearest centroid."""

    topic_ids: NDArray[np.int64]
    distances: NDArray[np.float64]


@dataclass(frozen=True)
class TopicModel:
    """The topics of one fit, made for ``fit_date`` on the partitions ``baseline_start``..``baseline_end``."""

    fit_date: dt.date
    baseline_start: dt.date
    baseline_end: dt.date
    embedding_model: str
    topics: tuple[Topic, ...]
    language_means: dict[str, NDArray[np.float64]]

    def center(self, embeddings: NDArray[np.float64], languages: Sequence[str | None]) -> NDArray[np.float64]:
        """Encoder rows less their language's baseline mean, as unit rows: the space the topics live in."""
        if not len(embeddings):
            return embeddings
        means = [self.language_means.get(language_of(tag), self.language_means[ANY_LANGUAGE]) for tag in languages]
        return unit_rows(embeddings - np.stack(means))

    def assign(self, embeddings: NDArray[np.float64]) -> Assignment:
        """Each centred unit row's nearest topic, or ``UNASSIGNED`` when it lies beyond that topic's radius."""
        if not len(embeddings):
            return Assignment(np.empty(0, np.int64), np.empty(0, np.float64))
        centroids = np.stack([topic.centroid for topic in self.topics])
        index, distances = nearest(embeddings, centroids)
        ids = np.array([topic.topic_id for topic in self.topics], dtype=np.int64)[index]
        thresholds = np.array([topic.threshold for topic in self.topics])[index]
        return Assignment(np.where(distances <= thresholds, ids, UNASSIGNED), np.clip(distances, 0.0, None))

    def to_table(self, run_id: str, computed_at: dt.datetime) -> pa.Table:
        """The ``topics`` rows of this fit (each carries the fit's language means, the model being its rows)."""
        means = json.dumps({key: _floats(mean) for key, mean in sorted(self.language_means.items())})
        rows = [
            {
                "partition_date": self.fit_date,
                "topic_id": topic.topic_id,
                "name": topic.name,
                "terms": json.dumps(list(topic.terms), ensure_ascii=False),
                "size": topic.size,
                "threshold": topic.threshold,
                "centroid": json.dumps(_floats(topic.centroid)),
                "created_date": topic.created_date,
                "baseline_start": self.baseline_start,
                "baseline_end": self.baseline_end,
                "model_version": MODEL_VERSION,
                "embedding_model": self.embedding_model,
                "language_means": means,
                "run_id": run_id,
                "computed_at": computed_at,
            }
            for topic in self.topics
        ]
        return pa.Table.from_pylist(rows, schema=TOPICS_SCHEMA)

    @classmethod
    def latest(cls, table: pa.Table, day: dt.date) -> TopicModel | None:
        """The newest fit among ``topics`` rows made for ``day`` or before it, or None when there is none."""
        before = table.filter(pc.less_equal(table["partition_date"], pa.scalar(day, pa.date32())))
        if not before.num_rows:
            return None
        fit_date = pc.max(before["partition_date"]).as_py()
        rows = sorted(
            before.filter(pc.equal(before["partition_date"], pa.scalar(fit_date, pa.date32()))).to_pylist(),
            key=lambda row: row["topic_id"],
        )
        topics = tuple(
            Topic(
                topic_id=row["topic_id"],
                name=row["name"],
                terms=tuple(json.loads(row["terms"])),
                size=row["size"],
                threshold=row["threshold"],
                centroid=np.asarray(json.loads(row["centroid"]), dtype=np.float64),
                created_date=row["created_date"],
            )
            for row in rows
        )
        first = rows[0]
        means = {key: np.asarray(mean, dtype=np.float64) for key, mean in json.loads(first["language_means"]).items()}
        return cls(fit_date, first["baseline_start"], first["baseline_end"], first["embedding_model"], topics, means)


def _floats(vector: NDArray[np.float64]) -> list[float]:
    """A vector as JSON numbers at float32 precision (the encoder's), which round-trip exactly."""
    return [float(x) for x in vector.astype(np.float32)]


def _names(questions: Sequence[str], labels: NDArray[np.int64]) -> dict[int, list[str]]:
    named: dict[int, list[str]] = class_tf_idf(
        [terms_of(q) for q in questions], [int(label) for label in labels], top=_KEPT_TERMS
    )
    return named


def _name(terms: Sequence[str]) -> str:
    return " · ".join(terms[:_NAME_TERMS]) or "(no terms)"


def _kept_ids(
    labels: NDArray[np.int64], kept: list[int], old: NDArray[np.int64] | None, previous: TopicModel | None
) -> dict[int, tuple[int, dt.date | None]]:
    """Each kept cluster's topic id and creation date: an old topic's when most of the cluster's members fall in it
    under the previous model (``old``: each question's topic there; greedy by that share, one cluster per old
    topic), else a new id."""
    if previous is None or old is None:
        return {cluster: (number, None) for number, cluster in enumerate(kept)}
    created = {topic.topic_id: topic.created_date for topic in previous.topics}
    pairs = []
    for cluster in kept:
        members = old[labels == cluster]
        for topic_id, count in Counter(int(t) for t in members if t != UNASSIGNED).items():
            share = count / len(members)
            if share > 0.5:
                pairs.append((share, cluster, topic_id))
    mapped: dict[int, tuple[int, dt.date | None]] = {}
    taken: set[int] = set()
    for _, cluster, topic_id in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])):
        if cluster not in mapped and topic_id not in taken:
            mapped[cluster] = (topic_id, created[topic_id])
            taken.add(topic_id)
    next_id = max(created) + 1
    for cluster in kept:
        if cluster not in mapped:
            mapped[cluster] = (next_id, None)
            next_id += 1
    return mapped


def _language_means(
    embeddings: NDArray[np.float64], languages: Sequence[str | None], least: int
) -> dict[str, NDArray[np.float64]]:
    keys = np.array([language_of(tag) for tag in languages])
    means = {ANY_LANGUAGE: _stored(embeddings.mean(axis=0))}
    for key in sorted(set(keys.tolist()) - {ANY_LANGUAGE}):
        if (keys == key).sum() >= least:
            means[key] = _stored(embeddings[keys == key].mean(axis=0))
    return means


def _stored(vector: NDArray[np.float64]) -> NDArray[np.float64]:
    """``vector`` at the float32 precision it is stored at, so that the fit's model assigns as the stored one does
    (a member at its topic's radius would otherwise fall either side)."""
    return vector.astype(np.float32).astype(np.float64)


def fit_model(
    questions: Sequence[str],
    embeddings: NDArray[np.float64],
    languages: Sequence[str | None],
    *,
    fit_date: dt.date,
    baseline: tuple[dt.date, dt.date],
    settings: TopicsConfig,
    previous: TopicModel | None = None,
) -> TopicModel:
    """Topics of the baseline questions (the encoder's unit ``embeddings`` and the BCP 47 ``languages``, one row
    per question): clusters of at least ``min_topic_size`` members of the language-centred rows, each with its
    radius and name; ids kept from ``previous`` where they overlap. Each language with ``min_topic_size`` questions
    gets its own mean."""
    means = _language_means(embeddings, languages, settings.min_topic_size)
    shell = TopicModel(fit_date, baseline[0], baseline[1], settings.embedding_model, (), means)
    old = previous.assign(previous.center(embeddings, languages)).topic_ids if previous and previous.topics else None
    embeddings = shell.center(embeddings, languages)
    ks = range(settings.min_topics, settings.max_topics + 1)
    clustering = choose_clustering(embeddings, ks, seed=settings.seed)
    sizes = np.bincount(clustering.labels, minlength=len(clustering.centroids))
    kept = [int(c) for c in np.flatnonzero(sizes >= settings.min_topic_size)]
    names = _names(questions, clustering.labels)
    ids = _kept_ids(clustering.labels, kept, old, previous)
    topics = []
    for cluster in kept:
        members = embeddings[clustering.labels == cluster]
        centroid = _stored(clustering.centroids[cluster])
        distances = 1.0 - members @ centroid
        topic_id, created = ids[cluster]
        topics.append(
            Topic(
                topic_id=topic_id,
                name=_name(names.get(cluster, [])),
                terms=tuple(names.get(cluster, [])),
                size=int(sizes[cluster]),
                threshold=float(np.quantile(distances, settings.distance_quantile)),
                centroid=centroid,
                created_date=created or fit_date,
            )
        )
    topics.sort(key=lambda topic: topic.topic_id)
    return dataclasses.replace(shell, topics=tuple(topics))


_CANDIDATE_SAMPLE = 2000


def cluster_candidates(embeddings: NDArray[np.float64], settings: TopicsConfig) -> NDArray[np.int64]:
    """Candidate numbers (0, 1, ...) for the day's unassigned questions, clustered among themselves with at most
    one candidate per ``min_topic_size`` questions; all ``UNASSIGNED`` when there are fewer than that. Numbered by
    size, largest first, so candidate 0 is the one closest to becoming a topic. Beyond 2000 questions the clusters
    are made on a seeded sample of 2000 and every question goes to the nearest (the cost of a fit, not more)."""
    if len(embeddings) < settings.min_topic_size:
        return np.full(len(embeddings), UNASSIGNED, dtype=np.int64)
    rng = np.random.default_rng(settings.seed)
    sample = np.sort(rng.choice(len(embeddings), size=min(_CANDIDATE_SAMPLE, len(embeddings)), replace=False))
    most = min(settings.max_topics, len(sample) // settings.min_topic_size)
    clustering = choose_clustering(embeddings[sample], range(2, most + 1), seed=settings.seed)
    labels, _ = nearest(embeddings, clustering.centroids)
    order = np.argsort(-np.bincount(labels), kind="stable")
    rank: NDArray[np.int64] = np.argsort(order, kind="stable")[labels].astype(np.int64)
    return rank
