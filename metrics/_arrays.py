"""Turn a batch's ragged contexts and labels into dense gain matrices for the ranking kernels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat
from typing import TypeGuard

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics.batch import RelevanceLabels, TraceBatch

__all__ = ["NO_CONTEXT_ID", "NO_CONTEXT_TEXT", "NO_LABELS", "NO_RELEVANT", "RankingArrays", "ranking_arrays"]

NO_LABELS = "no_relevance_labels"
NO_RELEVANT = "no_relevant_context_labelled"
NO_CONTEXT_TEXT = "no_context_text"
"""Contexts logged with ids but no text (e.g. OTel GenAI retrieval spans): text-based metrics do not apply."""
NO_CONTEXT_ID = "no_context_id"
"""Contexts logged with text but no id, and labels by id only: id-based ranking cannot be computed."""


@dataclass(frozen=True)
class RankingArrays:
    """Dense per-rank gains of one batch.

    - ``gains[i, r]``: graded relevance of the context at rank ``r + 1`` of trace ``i``; 0 for a
      non-relevant context, a padding cell, or a repeat of a context already seen higher up
      (a duplicate retrieval is credited once).
    - ``ideal[i, j]``: trace ``i``'s positive label gains sorted descending (0-padded).
    - ``n_relevant[i]``: distinct contexts labelled relevant (gain > 0).
    - ``inapplicable[i]``: why ranking metrics do not apply to trace ``i`` (None when they do).
    """

    gains: NDArray[np.float64]
    ideal: NDArray[np.float64]
    n_relevant: NDArray[np.int64]
    inapplicable: NDArray[np.object_]


def ranking_arrays(batch: TraceBatch) -> RankingArrays:
    """Match each retrieved context to the trace's labels: by id, else by text where only text labels exist
    or where some context was logged without an id."""
    n = len(batch)
    keys: list[Sequence[str]] = []
    labels: list[RelevanceLabels] = []
    inapplicable = np.full(n, None, dtype=object)
    rows = zip(batch.context_ids, batch.context_texts, batch.relevant_ids, batch.relevant_texts, strict=True)
    for i, (ids, texts, by_id, by_text) in enumerate(rows):
        if by_id is not None and _all_logged(ids):
            keys.append(ids)
            labels.append(by_id)
        elif by_id is not None and by_text is None:
            keys.append(())  # id labels cannot be matched to contexts logged without an id
            labels.append({})
            inapplicable[i] = NO_CONTEXT_ID
        elif by_text is not None and _all_logged(texts):
            keys.append(texts)
            labels.append(by_text)
        elif by_text is not None:
            keys.append(())  # text labels cannot be matched to contexts logged without text
            labels.append({})
            inapplicable[i] = NO_CONTEXT_TEXT
        else:
            keys.append(())
            labels.append({})
            inapplicable[i] = NO_LABELS
    label_trace, label_keys, label_gains = _flat_labels(labels)
    gains = _retrieved_gains(keys, label_trace, label_keys, label_gains)
    ideal, n_relevant = _ideal_gains(n, label_trace, label_gains)
    inapplicable[(n_relevant == 0) & np.equal(inapplicable, np.array(None))] = NO_RELEVANT
    return RankingArrays(gains, ideal, n_relevant, inapplicable)


def _all_logged(keys: Sequence[str | None]) -> TypeGuard[Sequence[str]]:
    """Whether every context of a trace was logged with this key (id or text)."""
    return None not in keys


def _flat_labels(labels: Sequence[RelevanceLabels]) -> tuple[NDArray[np.int64], list[str], NDArray[np.float64]]:
    """All labels of the batch as flat (trace index, key, gain) columns."""
    counts = np.fromiter(map(len, labels), dtype=np.int64, count=len(labels))
    total = int(counts.sum())
    keys = list(chain.from_iterable(labels))
    gains = np.fromiter(chain.from_iterable(label.values() for label in labels), dtype=np.float64, count=total)
    return np.repeat(np.arange(len(labels), dtype=np.int64), counts), keys, gains


def _retrieved_gains(
    keys: Sequence[Sequence[str]],
    label_trace: NDArray[np.int64],
    label_keys: Sequence[str],
    label_gains: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Gain per (trace, rank), crediting only the first occurrence of each key within a trace."""
    n = len(keys)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    width = int(lengths.max(initial=0))
    gains = np.zeros((n, width), dtype=np.float64)
    total = int(lengths.sum())
    if total == 0:
        return gains
    # Factorise keys per batch, so that duplicate detection and label look-up work on integers: a key's
    # code is the flat position of its first occurrence in the batch (unique per key, < total; found in
    # one pass of dict.setdefault), and (trace, key) becomes the single integer trace * total + code.
    vocabulary: dict[str, int] = {}
    codes = np.fromiter(map(vocabulary.setdefault, chain.from_iterable(keys), count()), dtype=np.int64, count=total)
    trace_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
    pairs, first = np.unique(trace_of * total + codes, return_index=True)  # first occurrences, pairs sorted
    label_codes = np.fromiter(map(vocabulary.get, label_keys, repeat(-1)), dtype=np.int64, count=len(label_keys))
    retrieved = label_codes >= 0  # a label whose key was never retrieved in the batch cannot match
    label_pairs = label_trace[retrieved] * total + label_codes[retrieved]
    at = np.searchsorted(pairs, label_pairs)  # a label pair is among the pairs only if its own trace retrieved it
    matched = pairs[np.minimum(at, len(pairs) - 1)] == label_pairs
    flat_gains = np.zeros(total, dtype=np.float64)
    flat_gains[first[at[matched]]] = label_gains[retrieved][matched]
    rank_of = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    gains[trace_of, rank_of] = flat_gains
    return gains


def _ideal_gains(
    n: int, label_trace: NDArray[np.int64], label_gains: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each trace's positive label gains sorted descending, 0-padded, and how many there are."""
    positive = label_gains > 0
    trace, values = label_trace[positive], label_gains[positive]
    n_relevant = np.bincount(trace, minlength=n).astype(np.int64)
    order = np.lexsort((-values, trace))
    trace, values = trace[order], values[order]
    column = np.arange(len(values), dtype=np.int64) - (np.cumsum(n_relevant) - n_relevant)[trace]
    ideal = np.zeros((n, int(n_relevant.max(initial=0))), dtype=np.float64)
    ideal[trace, column] = values
    return ideal, n_relevant
