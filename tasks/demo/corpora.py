"""The demo's corpora, shipped in ``tasks/demo/corpus/``: a compact sample of the ARES synthetic-query data
(English) and extracts of JSQuAD (Japanese) and CMRC 2018 (Chinese) in one row shape.

The demo must run on a fresh clone with no network, so it reads only the shipped files (see ATTRIBUTION.md
and docs/demo.md); :func:`build_demo_corpus` and :func:`build_qa_corpus` keep the one-off conversions from the
original files reproducible, byte for byte. No Prefect import: the module is usable from tests and scripts alone.
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
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "CMRC2018_PATH",
    "CORPUS_PATH",
    "JSQUAD_PATH",
    "QA_CORPUS_PATHS",
    "CorpusRow",
    "QaRow",
    "build_demo_corpus",
    "build_qa_corpus",
    "deterministic_gzip",
    "load_demo_corpus",
    "load_qa_corpus",
]

CORPUS_PATH = Path(__file__).with_name("corpus") / "ares_sample.jsonl.gz"
"""The shipped sample: one JSON object per line, fields as in :class:`CorpusRow`."""
JSQUAD_PATH = Path(__file__).with_name("corpus") / "jsquad_sample.jsonl.gz"
"""Japanese questions from JSQuAD, one JSON object per line, fields as in :class:`QaRow`."""
CMRC2018_PATH = Path(__file__).with_name("corpus") / "cmrc2018_sample.jsonl.gz"
"""Chinese questions from CMRC 2018, one JSON object per line, fields as in :class:`QaRow`."""
QA_CORPUS_PATHS = (JSQUAD_PATH, CMRC2018_PATH)

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


@dataclasses.dataclass(frozen=True)
class QaRow:
    """One extractive-QA question (SQuAD layout) with its passage and the annotators' answers.

    ``answers`` are the distinct answer texts in annotation order; the first is what a labeller would
    write as the reference. It is empty for a SQuAD v2 ``is_impossible`` question, whose passage is on
    topic but does not answer it.
    """

    source: str
    language: str
    passage_id: str
    passage: str
    question_id: str
    question: str
    answers: tuple[str, ...]

    @property
    def context_relevant(self) -> bool:
        """Whether the row's passage answers the question (named as on :class:`CorpusRow`)."""
        return bool(self.answers)


def load_qa_corpus(path: str | os.PathLike[str]) -> tuple[QaRow, ...]:
    """Read a shipped QA extract (cached: the generator calls this once per run)."""
    return _load_qa_corpus(str(path))


@functools.lru_cache(maxsize=4)
def _load_qa_corpus(path: str) -> tuple[QaRow, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh if line.strip())
        return tuple(QaRow(**{**r, "answers": tuple(r["answers"])}) for r in rows)


def build_qa_corpus(
    squad_json: str | os.PathLike[str], out: str | os.PathLike[str], *, source: str, language: str
) -> int:
    """One-off: convert a SQuAD-layout file (v1 or v2) into a shipped QA extract; returns bytes written.

    Every answerable or ``is_impossible`` question is kept, in file order. JGLUE writes a JSQuAD
    passage as ``"<title> [SEP] <text>"`` for its models; the marker becomes a line break, so the
    passage reads like a retrieved chunk under its heading and keeps the answers that are the title.
    Paragraph ids are CMRC's ``id``, else the question id without its ``q<n>`` suffix (JSQuAD's
    ``a10336p0q0`` -> ``a10336p0``).
    """
    with open(squad_json, encoding="utf-8") as fh:
        articles = json.load(fh)["data"]
    rows: list[QaRow] = []
    for article in articles:
        title = article.get("title", "")
        head = f"{title} [SEP] "
        for paragraph in article["paragraphs"]:
            if not paragraph["qas"]:
                continue
            context = paragraph["context"]
            passage = f"{title}\n{context[len(head) :]}" if title and context.startswith(head) else context
            paragraph_id = paragraph.get("id") or re.sub(r"q\d+$", "", paragraph["qas"][0]["id"])
            for qa in paragraph["qas"]:
                answers = tuple(dict.fromkeys(t for a in qa.get("answers", ()) if (t := a["text"].strip())))
                if not answers and not qa.get("is_impossible", False):
                    continue  # neither answered nor marked unanswerable: nothing to score against
                rows.append(
                    QaRow(
                        source=source,
                        language=language,
                        passage_id=f"{source}-{paragraph_id}",
                        passage=passage,
                        question_id=qa["id"],
                        question=qa["question"],
                        answers=() if qa.get("is_impossible", False) else answers,
                    )
                )
    text = "".join(json.dumps(dataclasses.asdict(r), ensure_ascii=False) + "\n" for r in rows)
    data = deterministic_gzip(text.encode("utf-8"))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(data)
    return len(data)


def deterministic_gzip(data: bytes) -> bytes:
    """Gzip with no file name and mtime 0, so equal input gives byte-identical output."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as fh:
        fh.write(data)
    return buffer.getvalue()
