"""The mathematics of topics (docs/metrics.md, "Topics"): spherical k-means over unit embeddings, the number of
topics chosen by silhouette, class-based TF-IDF for naming, and the two-proportion test of a topic's share.

Pure numpy: embeddings come in as unit rows, terms as lists of strings; ``tasks/topics`` does the encoding and
the storage.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._vectors import unit_rows

__all__ = [
    "Clustering",
    "ShareTest",
    "choose_clustering",
    "class_tf_idf",
    "nearest",
    "share_test",
    "silhouette",
    "spherical_kmeans",
]


@dataclass(frozen=True)
class Clustering:
    """Unit centroids (k x d), each row's cluster, and the mean silhouette the k was chosen by (NaN for k = 1)."""

    centroids: NDArray[np.float64]
    labels: NDArray[np.int64]
    silhouette: float


def nearest(
    points: NDArray[np.float64], centroids: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Each unit row's nearest unit centroid and its cosine distance (1 - cosine similarity).

    >>> labels, distances = nearest(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> labels.tolist(), distances.round(6).tolist()
    ([1, 0], [0.0, 0.0])
    """
    similarity = points @ centroids.T
    labels = similarity.argmax(axis=1)
    return labels.astype(np.int64), 1.0 - similarity[np.arange(len(points)), labels]


def spherical_kmeans(
    points: NDArray[np.float64], k: int, *, seed: int, n_init: int = 4, max_iter: int = 100
) -> Clustering:
    """k unit centroids maximising the summed cosine of each row to its centroid (Dhillon and Modha, 2001).

    k-means++ seeding on cosine distance from ``np.random.default_rng(seed)``, ``n_init`` restarts, the best kept:
    the same rows and seed give the same clusters in every process. An emptied cluster takes the row farthest
    from its centroid.
    """
    if not 1 <= k <= len(points):
        raise ValueError(f"k must lie in [1, {len(points)}], got {k}")
    rng = np.random.default_rng(seed)
    best: tuple[float, NDArray[np.float64], NDArray[np.int64]] | None = None
    for _ in range(n_init):
        centroids = _plus_plus(points, k, rng)
        labels = np.full(len(points), -1, dtype=np.int64)
        for _ in range(max_iter):
            new_labels, _ = nearest(points, centroids)
            if np.array_equal(new_labels, labels):
                break
            labels = new_labels
            sums = np.zeros_like(centroids)
            np.add.at(sums, labels, points)
            for empty in np.flatnonzero(np.bincount(labels, minlength=k) == 0):
                far = int(np.argmin((points * centroids[labels]).sum(axis=1)))
                sums[empty] = points[far]
                labels[far] = empty
            centroids = unit_rows(sums)
        cohesion = float((points * centroids[labels]).sum())
        if best is None or cohesion > best[0]:
            best = (cohesion, centroids, labels)
    assert best is not None  # n_init >= 1
    return Clustering(best[1], best[2], math.nan)


def _plus_plus(points: NDArray[np.float64], k: int, rng: np.random.Generator) -> NDArray[np.float64]:
    chosen = [int(rng.integers(len(points)))]
    distance = 1.0 - points @ points[chosen[0]]
    for _ in range(1, k):
        weights = np.clip(distance, 0.0, None) ** 2
        total = weights.sum()
        pick = int(rng.choice(len(points), p=weights / total)) if total > 0 else int(rng.integers(len(points)))
        chosen.append(pick)
        distance = np.minimum(distance, 1.0 - points @ points[pick])
    return points[chosen].copy()


def silhouette(points: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
    """Mean silhouette (Rousseeuw, 1987) under cosine distance; a row alone in its cluster scores 0.

    s_i = (b_i - a_i) / max(a_i, b_i), a_i the mean distance to the other members of its cluster, b_i the smallest
    mean distance to another cluster's members. O(n^2) memory: callers pass a sample.
    """
    clusters = np.unique(labels)
    if len(clusters) < 2:
        return math.nan
    distance = 1.0 - points @ points.T
    members = labels[None, :] == clusters[:, None]  # clusters x n
    sizes = members.sum(axis=1)
    sums = distance @ members.T  # n x clusters: summed distance of row i to cluster c
    own = np.searchsorted(clusters, labels)
    own_size = sizes[own]
    a = np.where(own_size > 1, sums[np.arange(len(points)), own] / np.maximum(own_size - 1, 1), 0.0)
    means = sums / sizes[None, :]
    means[np.arange(len(points)), own] = np.inf
    b = means.min(axis=1)
    s = np.where(own_size > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return float(s.mean())


def choose_clustering(
    points: NDArray[np.float64], ks: Sequence[int], *, seed: int, silhouette_sample: int = 2000
) -> Clustering:
    """Spherical k-means for each k in ``ks`` (those below the number of rows), the one of highest mean silhouette
    on a seeded sample of at most ``silhouette_sample`` rows kept; ties go to the smaller k."""
    usable = sorted({k for k in ks if 2 <= k < len(points)})
    if not usable:
        return spherical_kmeans(points, 1, seed=seed)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(len(points), size=min(silhouette_sample, len(points)), replace=False))
    best: Clustering | None = None
    for k in usable:
        fitted = spherical_kmeans(points, k, seed=seed)
        score = silhouette(points[sample], fitted.labels[sample])
        if best is None or score > best.silhouette:
            best = Clustering(fitted.centroids, fitted.labels, score)
    assert best is not None
    return best


def class_tf_idf(documents: Sequence[Sequence[str]], labels: Sequence[int], *, top: int = 3) -> dict[int, list[str]]:
    """Each class's ``top`` characteristic terms by class-based TF-IDF (Grootendorst, BERTopic, 2022).

    W_{t,c} = tf_{t,c} / |c| * log(1 + A / f_t): tf_{t,c} the count of term t in class c's documents joined, |c|
    the number of terms of c, A the mean number of terms per class, f_t the count of t over all classes. Ties
    go to the term first in code-point order, so a name does not depend on the order of the documents.

    >>> class_tf_idf([["refund", "order"], ["refund", "late"], ["password", "reset"]], [0, 0, 1], top=1)
    {0: ['refund'], 1: ['password']}
    """
    per_class: dict[int, Counter[str]] = {}
    for terms, label in zip(documents, labels, strict=True):
        per_class.setdefault(int(label), Counter()).update(terms)
    overall: Counter[str] = Counter()
    for counts in per_class.values():
        overall.update(counts)
    average = sum(overall.values()) / max(len(per_class), 1)
    named: dict[int, list[str]] = {}
    for label, counts in sorted(per_class.items()):
        size = sum(counts.values())
        weights = {term: n / size * math.log(1.0 + average / overall[term]) for term, n in counts.items()}
        named[label] = [term for term, _ in sorted(weights.items(), key=lambda item: (-item[1], item[0]))[:top]]
    return named


@dataclass(frozen=True)
class ShareTest:
    """A share of traffic then and now: the difference now - then with its Wald interval, and the two-sided
    p-value of the pooled two-proportion z-test."""

    baseline_share: float
    current_share: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float


def share_test(baseline_k: int, baseline_n: int, current_k: int, current_n: int, *, confidence: float) -> ShareTest:
    """Whether a topic's share of the traffic moved: ``k`` of ``n`` traces in the baseline window and on the day.

    z = (p1 - p0) / sqrt(p (1 - p) (1/n0 + 1/n1)), p the pooled share; the interval of p1 - p0 is
    +- z_(1 - alpha/2) sqrt(p0 (1 - p0) / n0 + p1 (1 - p1) / n1). Traces are the samples, which are independent.

    >>> result = share_test(100, 1000, 30, 100, confidence=0.95)
    >>> round(result.delta, 3), result.p_value < 1e-6
    (0.2, True)
    """
    if min(baseline_n, current_n) <= 0:
        raise ValueError("both sides need at least one trace")
    p0, p1 = baseline_k / baseline_n, current_k / current_n
    pooled = (baseline_k + current_k) / (baseline_n + current_n)
    spread = math.sqrt(pooled * (1.0 - pooled) * (1.0 / baseline_n + 1.0 / current_n))
    p_value = 1.0 if spread == 0.0 else math.erfc(abs(p1 - p0) / spread / math.sqrt(2.0))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half = z * math.sqrt(p0 * (1.0 - p0) / baseline_n + p1 * (1.0 - p1) / current_n)
    return ShareTest(p0, p1, p1 - p0, p1 - p0 - half, p1 - p0 + half, p_value)
