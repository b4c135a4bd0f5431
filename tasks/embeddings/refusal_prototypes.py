"""The prototypes of ``embedding_refusal``: the labelled development answers of ``tests/fixtures/refusal`` embedded
once with the default encoder, shipped as package data (``data/refusal_prototypes.npy``, float16 unit rows, and
``data/refusal_prototypes.json``: the encoder's identity, the labels, the answers' ids and the rule chosen on them).

Written by ``bench/make_refusal_prototypes.py``, never at run time: a run only reads them, and a run with another
encoder gets ``prototypes_for_other_encoder`` from the metric. The JSON records the SHA-256 of the array, checked on
load, so a half-copied or hand-edited file fails loudly instead of voting wrongly.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._vectors import unit_rows
from ragpulse.metrics.refusal import RefusalPrototypes
from ragpulse.tasks.core.exceptions import ConfigError

__all__ = [
    "PROTOTYPES_NAME",
    "load_refusal_prototypes",
    "prototypes_digest",
    "prototypes_metadata",
    "write_refusal_prototypes",
]

PROTOTYPES_NAME = "refusal_prototypes"
_PACKAGE = "ragpulse.tasks.embeddings"


def _data(suffix: str) -> Any:
    return resources.files(_PACKAGE).joinpath("data", PROTOTYPES_NAME + suffix)


@functools.cache
def prototypes_metadata() -> dict[str, Any]:
    """What refusal_prototypes.json records: encoder, SHA-256, rule, provenance (with the rule grid), ids, labels."""
    loaded: dict[str, Any] = json.loads(_data(".json").read_text(encoding="utf-8"))
    return loaded


def prototypes_digest() -> str:
    """The first 12 hex digits of the shipped array's SHA-256: published in the scores' prompt version and part of
    the judge task's cache key, so recomputed prototypes never share a cache entry or a baseline with old ones."""
    return str(prototypes_metadata()["sha256"])[:12]


@functools.cache
def load_refusal_prototypes() -> RefusalPrototypes:
    """The shipped prototypes (read once per process); ConfigError when the array is not the one the JSON names."""
    metadata = prototypes_metadata()
    raw = _data(".npy").read_bytes()
    if hashlib.sha256(raw).hexdigest() != metadata["sha256"]:
        raise ConfigError(f"{PROTOTYPES_NAME}.npy does not match its SHA-256 in {PROTOTYPES_NAME}.json: reinstall")
    vectors = np.load(io.BytesIO(raw), allow_pickle=False)
    rule = metadata["rule"]
    return RefusalPrototypes(
        vectors=vectors,
        labels=np.asarray(metadata["labels"], dtype=np.int8),
        encoder=str(metadata["encoder"]),
        k=int(rule["k"]),
        share=float(rule["share"]),
        digest=prototypes_digest(),
    )


def write_refusal_prototypes(
    folder: Path,
    vectors: NDArray[np.floating[Any]],
    labels: Sequence[int],
    ids: Sequence[str],
    *,
    encoder: str,
    k: int,
    share: float,
    provenance: dict[str, Any],
) -> Path:
    """Write the two files into ``folder`` (the package's ``data``): unit rows as float16, the metadata beside them.
    Returns the array's path."""
    rows = np.asarray(vectors, dtype=np.float64)
    rows = unit_rows(rows)
    buffer = io.BytesIO()
    np.save(buffer, rows.astype(np.float16), allow_pickle=False)
    raw = buffer.getvalue()
    folder.mkdir(parents=True, exist_ok=True)
    array = folder / f"{PROTOTYPES_NAME}.npy"
    array.write_bytes(raw)
    metadata = {
        "encoder": encoder,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "rule": {"k": k, "share": share},
        "provenance": provenance,
        "ids": list(ids),
        "labels": [int(label) for label in labels],
    }
    (folder / f"{PROTOTYPES_NAME}.json").write_text(json.dumps(metadata, ensure_ascii=False) + "\n", encoding="utf-8")
    return array
