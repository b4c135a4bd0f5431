"""The demo's corpus: a compact sample of the ARES synthetic-query data, shipped in ``tasks/demo/corpus/``.

The demo must run on a fresh clone with no network, so it reads only the shipped file (see its ATTRIBUTION.md
and docs/demo.md); :func:`build_demo_corpus` keeps the one-off selection from the ARES TSVs reproducible, byte
for byte. No Prefect import: the module is usable from tests and scripts alone.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import gzip
import hashlib
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CORPUS_PATH", "CorpusRow", "build_demo_corpus", "deterministic_gzip", "load_demo_corpus"]

CORPUS_PATH = Path(__file__).with_name("corpus") / "ares_sample.jsonl.gz"
"""The shipped sample: one JSON object per line, fields as in :class:`CorpusRow`."""

_MAX_PASSAGE_CHARS = 1500


@dataclasses.dataclass(frozen=True)
class CorpusRow:
    """One ARES (question, passage, answer) example with its human-style labels.

    ``answer`` is None for rows whose passage does not answer the question (ARES gives none);
    their answer labels are then False.
    """

    source: str
    passage_id: str
    passage: str
    question: str
    answer: str | None
    context_relevant: bool
    answer_faithful: bool
    answer_relevant: bool


def load_demo_corpus(path: str | os.PathLike[str] = CORPUS_PATH) -> tuple[CorpusRow, ...]:
    """Read the shipped sample (cached: the generator calls this once per run)."""
    return _load_corpus(str(path))


@functools.lru_cache(maxsize=4)
def _load_corpus(path: str) -> tuple[CorpusRow, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return tuple(CorpusRow(**json.loads(line)) for line in fh if line.strip())


def build_demo_corpus(
    nq_tsv: str | os.PathLike[str],
    hotpotqa_tsv: str | os.PathLike[str],
    out: str | os.PathLike[str] = CORPUS_PATH,
    *,
    per_source: int = 400,
) -> int:
    """One-off: select the shipped sample from the ARES TSVs and write it; returns bytes written.

    Kept here so the selection is reproducible; the demo itself only reads the shipped file.
    """
    rows: list[CorpusRow] = []
    for source, path in (("nq", nq_tsv), ("hotpotqa", hotpotqa_tsv)):
        rows.extend(_select(source, _read_ares_tsv(path), per_source))
    # Twins (same question and passage) next to each other so gzip stores the passage once.
    rows.sort(key=lambda r: (r.source, int(r.passage_id.split("-")[1]), r.question, not r.answer_faithful))
    text = "".join(json.dumps(r.__dict__, ensure_ascii=False) + "\n" for r in rows)
    data = deterministic_gzip(text.encode("utf-8"))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(data)
    return len(data)


def _read_ares_tsv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # ARES passages exceed csv's 128 KiB default
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _select(source: str, raw: Sequence[Mapping[str, str]], n: int) -> list[CorpusRow]:
    """Deterministic stratified pick: 60% correct answers, 20% their wrong-answer twins, 20% off-topic.

    Order is by a SHA-256 of (source, document_index, query), so it does not depend on file order.
    Passages over 1,500 characters and passages whose text is already used under another id are
    skipped; off-topic rows are kept only if their question has no answering passage in ARES at all.
    """
    n_good, n_bad = n * 3 // 5, n // 5
    n_neg = n - n_good - n_bad

    def key(r: Mapping[str, str]) -> str:
        return hashlib.sha256(f"{source}\t{r['document_index']}\t{r['synthetic_query']}".encode()).hexdigest()

    ordered = sorted(raw, key=key)
    owner: dict[str, str] = {}  # passage text -> passage id
    chosen: list[CorpusRow] = []

    def take(r: Mapping[str, str]) -> bool:
        pid, text = f"{source}-{r['document_index']}", r["document"]
        if not text.strip() or len(text) > _MAX_PASSAGE_CHARS or owner.get(text, pid) != pid:
            return False
        owner[text] = pid
        chosen.append(
            CorpusRow(
                source=source,
                passage_id=pid,
                passage=text,
                question=r["synthetic_query"],
                answer=r["generated_answer"] or None,
                context_relevant=r["Context_Relevance_Label"] == "Yes",
                answer_faithful=r["Answer_Faithfulness_Label"] == "Yes",
                answer_relevant=r["Answer_Relevance_Label"] == "Yes",
            )
        )
        return True

    def labels(r: Mapping[str, str]) -> tuple[str, str, str]:
        return r["Context_Relevance_Label"], r["Answer_Faithfulness_Label"], r["Answer_Relevance_Label"]

    good: dict[str, str] = {}  # question -> passage id
    for r in ordered:
        fresh = r["synthetic_query"] not in good
        if len(good) < n_good and labels(r) == ("Yes", "Yes", "Yes") and fresh and take(r):
            good[r["synthetic_query"]] = f"{source}-{r['document_index']}"
    bad = 0
    for r in ordered:
        twin = good.get(r["synthetic_query"]) == f"{source}-{r['document_index']}"
        if bad < n_bad and labels(r) == ("Yes", "No", "No") and twin and take(r):
            bad += 1
    answerable = {r["synthetic_query"] for r in raw if r["Context_Relevance_Label"] == "Yes"}
    neg: set[str] = set()
    for r in ordered:
        q = r["synthetic_query"]
        if len(neg) < n_neg and labels(r)[0] == "No" and q not in answerable and q not in neg and take(r):
            neg.add(q)
    if (len(good), bad, len(neg)) != (n_good, n_bad, n_neg):
        raise ValueError(f"{source}: only {len(good)}/{bad}/{len(neg)} eligible rows for {n_good}/{n_bad}/{n_neg}")
    return chosen


def deterministic_gzip(data: bytes) -> bytes:
    """Gzip with no file name and mtime 0, so equal input gives byte-identical output."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as fh:
        fh.write(data)
    return buffer.getvalue()
