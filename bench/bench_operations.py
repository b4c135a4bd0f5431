"""Operational metrics (issue 32): what the label-free defaults cost to compute, per 100k traces.

``compute()`` (metrics/registry.py) of the nine operational metrics and ``retrieval_steps`` on a seeded batch of
``--n`` traces shaped like an agent day: each with latencies, one to three model calls (a quarter of them of a model
the table does not price), span errors on 2% of turns, one to three retrieval steps of 0-8 documents, and an
answer of 5-60 words, half of them Japanese or Chinese. Each metric alone, best of ``--repeat``, in seconds per
100k traces, beside the same batch's labelled defaults (ranking and answer metrics) for scale.

Usage::

    python bench/bench_operations.py                       # -> bench/results/operations.json
    python bench/bench_operations.py --n 100000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import best, cpu_model
from ragpulse.metrics import REGISTRY, MetricRequest, Step, TraceBatch, compute, operations
from ragpulse.metrics.batch import Operations, SpanError, Usage
from ragpulse.metrics.prices import merged_prices

RESULTS = Path(__file__).resolve().parent / "results"
# The metrics metrics/operations.py scores, and the agent's retrieval steps, read from the same spans.
OPERATIONAL = (
    *(name for name, definition in REGISTRY.items() if definition.scorer.__module__ == operations.__name__),
    "retrieval_steps",
)
LABELLED = ("document_mrr", "document_ndcg@10", "recall@5", "answer_exact_match_normalized", "answer_f1")
MODELS = ("gpt-4o-mini", "gpt-4o-2024-08-06", "claude-3-5-haiku-20241022", "in-house-13b")
WORDS = {
    "en": [
        "the",
        "tower",
        "was",
        "built",
        "in",
        "nineteen",
        "fifty",
        "eight",
        "and",
        "is",
        "three",
        "hundred",
        "meters",
        "tall",
    ],
    "ja": list("東京タワーは一九五八年に建てられた高さ三三三メートルの電波塔です"),
    "zh": list("长城是中国古代的军事防御工程全长约两万一千公里"),
}


def _batch(n: int, seed: int) -> TraceBatch:
    rng = random.Random(seed)
    ops, steps, answers, ids, labels, references = [], [], [], [], [], []
    for i in range(n):
        calls = tuple(
            Usage(rng.choice(MODELS), rng.randint(200, 4000), rng.randint(5, 400)) for _ in range(rng.randint(1, 3))
        )
        errors = (SpanError("tool", "search", "HTTP 503"),) if rng.random() < 0.02 else ()
        ops.append(Operations(rng.uniform(200, 5000), rng.uniform(20, 600), rng.uniform(150, 4000), calls, errors))
        turn = []
        for s in range(rng.randint(1, 3)):
            docs = tuple(f"d{i}-{s}-{j}" for j in range(rng.choice((0, 3, 5, 8))))
            turn.append(Step(s, None, None, "retriever", "q", docs, docs))
        steps.append(turn)
        language = rng.choice(("en", "en", "ja", "zh"))
        joiner = " " if language == "en" else ""
        answers.append(joiner.join(rng.choices(WORDS[language], k=rng.randint(5, 60))))
        ids.append([d for step in turn for d in step.context_ids])
        labels.append({ids[-1][0]: 1.0} if ids[-1] else None)
        references.append([answers[-1]])
    return TraceBatch(
        trace_ids=[f"t{i}" for i in range(n)],
        context_ids=ids,
        context_texts=[[None] * len(c) for c in ids],
        relevant_ids=labels,
        relevant_texts=[None] * n,
        answers=answers,
        references=references,
        steps=steps,
        operations=ops,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batch = _batch(args.n, seed=0)
    prices = merged_prices()
    per_100k = 100_000 / args.n

    def timed(names: tuple[str, ...]) -> dict[str, float]:
        out = {}
        for name in names:
            wall, _ = best(lambda name=name: compute(batch, [MetricRequest.parse(name)], prices=prices), args.repeat)
            out[name] = round(wall * per_100k, 4)
        return out

    operational, labelled = timed(OPERATIONAL), timed(LABELLED)
    together, _ = best(
        lambda: compute(batch, [MetricRequest.parse(m) for m in OPERATIONAL], prices=prices), args.repeat
    )
    results = {
        "n_traces": args.n,
        "repeat": args.repeat,
        "seconds_per_100k_traces": {"operational": operational, "labelled_for_scale": labelled},
        "operational_together_seconds_per_100k": round(together * per_100k, 4),
        "cost_usd_ok_share": float(
            np.mean(compute(batch, [MetricRequest.parse("cost_usd")], prices=prices)["cost_usd"].status == 0)
        ),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu": cpu_model(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "operations.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
