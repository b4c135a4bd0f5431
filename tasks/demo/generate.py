"""Seeded generator of realistic demo RAG traces for ``ragpulse demo``.

Traces are built from the shipped corpora (:mod:`ragpulse.tasks.demo.corpora`), so the demo needs no network:
three English apps replay ARES questions and answers; a Japanese (JSQuAD) and a Chinese (CMRC 2018) app simulate
their model's answers from the annotated spans, so language-aware answer metrics have exact, reworded, partial and
wrong answers to tell apart.
Output is deterministic for a seed and never reads the wall clock, so demo runs and tests are reproducible.
No Prefect import: the module is usable from tests and scripts alone.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import random
import re
import string
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragpulse.tasks.demo.corpora import (
    CORPUS_PATH,
    QA_CORPUS_PATHS,
    CorpusRow,
    QaRow,
    deterministic_gzip,
    load_demo_corpus,
    load_qa_corpus,
)

__all__ = [
    "APPS",
    "DRIFT_APP",
    "GZIP_FILE",
    "JSONL_FILE",
    "MALFORMED_KINDS",
    "PARQUET_FILE",
    "DemoSettings",
    "generate_demo_traces",
]

MALFORMED_KINDS = ("truncated_json", "missing_question", "contexts_not_list", "bad_timestamp", "duplicate_trace_id")
"""Kinds of deliberately broken lines, used in this order round-robin across the days."""

JSONL_FILE = "traces-00.jsonl"
GZIP_FILE = "traces-01.jsonl.gz"
PARQUET_FILE = "traces-02.parquet"

_REFUSALS = (
    "I couldn't find that in the available documents.",
    "Sorry, I don't have enough information to answer that.",
    "The provided context does not mention this.",
)
_STOPWORD_TEXT = (
    "the and for was were what who whom whose which when where why how did does with from that "
    "this are his her its their has have had been into than then also not but can could would "
    "about after before there they them she him one two name named"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+")
_CJK_RUN = re.compile(r"[\u3005\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")  # kana, CJK ideographs, 々
_HIRAGANA_ONLY = re.compile(r"^[\u3040-\u309f]+$")
_ANSWER_PREFIX = re.compile(r"^\s*(?:the answer is\s*:?|answer\s*:)\s*", re.IGNORECASE)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b\s*", re.IGNORECASE)
_HOURLY_TRAFFIC = (1, 1, 1, 1, 1, 2, 3, 5, 8, 10, 10, 9, 8, 9, 10, 10, 9, 7, 5, 4, 3, 2, 2, 1)
_FULL_WIDTH = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in string.ascii_letters + string.digits})
_SENTENCE_END = re.compile(r"[。！？!?\n]")


@dataclasses.dataclass(frozen=True)
class _Phrasing:
    """How a simulated model words an answer and a refusal in one language; ``{answer}`` is the span."""

    sentences: tuple[str, ...]
    refusals: tuple[str, ...]


_PHRASINGS = {
    "ja": _Phrasing(
        sentences=("{answer}です。", "答えは{answer}です。", "本文によると、{answer}です。", "「{answer}」です。"),
        refusals=(
            "提供された資料には、その情報は見つかりませんでした。",
            "申し訳ありませんが、この文書からはお答えできません。",
            "資料に記載がないため、判断できません。",
        ),
    ),
    "zh": _Phrasing(
        sentences=("{answer}。", "答案是{answer}。", "根据资料，答案是{answer}。", "是“{answer}”。"),
        refusals=("抱歉，资料中没有找到相关信息。", "提供的文档没有提到这一点。", "根据现有资料，无法回答这个问题。"),
    ),
}
_QA_KINDS = ("exact", "sentence", "partial", "wrong", "refusal")
_QA_KIND_WEIGHTS = (0.33, 0.30, 0.17, 0.14, 0.06)


@dataclasses.dataclass(frozen=True)
class _AppProfile:
    """How one simulated application retrieves and logs; differences make per-app slices meaningful."""

    name: str
    weight: float
    sources: tuple[tuple[str, float], ...]  # corpus source and its share of the app's questions
    language: str | None  # logged on every trace; None: the app does not log it (staging detects it)
    models: tuple[str, ...]
    tenants: tuple[str, ...]
    hit_rate: float
    rank_weights: tuple[float, ...]
    duplicate_rate: float
    null_score_rate: float
    logs_latency: bool
    logs_operations: bool  # span times, token usage and span statuses (canonical latency breakdown, usage, errors)
    retrieval_ms: float  # median retrieval time; generation scales with the tokens read and written


_PROFILES = (
    _AppProfile(
        name="support-bot",
        weight=0.27,
        sources=(("nq", 0.85), ("hotpotqa", 0.15)),
        language=None,
        models=("gpt-4o-mini", "llama-3.1-8b"),
        tenants=("acme", "globex"),
        hit_rate=0.93,
        rank_weights=(0.60, 0.20, 0.10, 0.05, 0.03, 0.02),
        duplicate_rate=0.0,
        null_score_rate=0.0,
        logs_latency=True,
        logs_operations=True,
        retrieval_ms=90.0,
    ),
    _AppProfile(
        name="docs-search",
        weight=0.25,
        sources=(("nq", 0.50), ("hotpotqa", 0.50)),
        language=None,
        models=("gpt-4o-mini",),
        tenants=("acme", "globex", "initech"),
        hit_rate=0.90,
        rank_weights=(0.50, 0.22, 0.12, 0.08, 0.05, 0.03),
        duplicate_rate=0.12,
        null_score_rate=0.0,
        logs_latency=False,
        logs_operations=True,
        retrieval_ms=140.0,
    ),
    _AppProfile(
        name="research-assistant",
        weight=0.18,
        sources=(("nq", 0.15), ("hotpotqa", 0.85)),
        language=None,
        models=("llama-3.1-8b", "mistral-small-24b"),
        tenants=("initech",),
        hit_rate=0.85,
        rank_weights=(0.45, 0.22, 0.13, 0.09, 0.06, 0.05),
        duplicate_rate=0.03,
        null_score_rate=0.15,
        logs_latency=False,
        logs_operations=False,
        retrieval_ms=260.0,
    ),
    _AppProfile(
        name="jsquad-faq",
        weight=0.15,
        sources=(("jsquad", 1.0),),
        language="ja",
        models=("gpt-4o-mini", "llm-jp-3-13b"),
        tenants=("acme", "hooli"),
        hit_rate=0.90,
        rank_weights=(0.55, 0.22, 0.11, 0.06, 0.04, 0.02),
        duplicate_rate=0.0,
        null_score_rate=0.0,
        logs_latency=False,
        logs_operations=True,
        retrieval_ms=110.0,
    ),
    _AppProfile(
        name="cmrc-faq",
        weight=0.15,
        sources=(("cmrc2018", 1.0),),
        language="zh",
        models=("qwen2.5-7b", "deepseek-v3"),
        tenants=("globex", "hooli"),
        hit_rate=0.88,
        rank_weights=(0.50, 0.22, 0.12, 0.08, 0.05, 0.03),
        duplicate_rate=0.0,
        null_score_rate=0.0,
        logs_latency=False,
        logs_operations=True,
        retrieval_ms=120.0,
    ),
)
DRIFT_APP = "docs-search"
"""The app whose retrieval gets worse on the last generated day: the answering passage is missed more
often and ranked lower, and its index answers three times slower (retrieval and end-to-end latency), so drift
detection on the demo data has something to find."""
_DRIFTED = {
    p.name: dataclasses.replace(
        p, hit_rate=0.80, rank_weights=(0.28, 0.24, 0.18, 0.13, 0.10, 0.07), retrieval_ms=p.retrieval_ms * 3
    )
    for p in _PROFILES
    if p.name == DRIFT_APP
}
APPS = tuple(p.name for p in _PROFILES)


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """What ``ragpulse demo`` generated a folder's traces with, recorded in ``<folder>/demo.json``: a demo run
    again with other ``--days``/``--traces-per-day`` then knows that its traces are not the data asked for."""

    days: int
    traces_per_day: int

    FILE = "demo.json"

    @classmethod
    def recorded(cls, directory: str | os.PathLike[str]) -> DemoSettings | None:
        """The settings recorded in ``directory``; None without a record or with one this class cannot read."""
        try:
            return cls(**json.loads((Path(directory) / cls.FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def record(self, directory: str | os.PathLike[str]) -> None:
        (Path(directory) / self.FILE).write_text(json.dumps(dataclasses.asdict(self)) + "\n", encoding="utf-8")


def generate_demo_traces(
    root: str | os.PathLike[str],
    *,
    start: datetime.date,
    days: int = 7,
    traces_per_day: int = 300,
    seed: int = 7,
    malformed_per_day: int = 3,
) -> list[datetime.date]:
    """Write ``days`` Hive-style partitions ``<root>/dt=YYYY-MM-DD/`` of demo traces; return their dates.

    Each day holds ``traces_per_day`` valid traces split over ``traces-00.jsonl`` and
    ``traces-01.jsonl.gz`` (plus ``traces-02.parquet`` on the middle day) and ``malformed_per_day``
    deliberately broken lines in the JSONL files. Day ``i`` uses ``random.Random(seed + i)``.
    """
    if isinstance(start, datetime.datetime):
        start = start.date()
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if traces_per_day < 3:
        raise ValueError(f"traces_per_day must be >= 3 (one per file), got {traces_per_day}")
    if malformed_per_day < 0:
        raise ValueError(f"malformed_per_day must be >= 0, got {malformed_per_day}")
    world = _world(str(CORPUS_PATH), tuple(str(p) for p in QA_CORPUS_PATHS))
    parquet_day = days // 2
    written: list[datetime.date] = []
    for offset in range(days):
        day = start + datetime.timedelta(days=offset)
        rng = random.Random(seed + offset)
        partition = Path(root) / f"dt={day.isoformat()}"
        partition.mkdir(parents=True, exist_ok=True)
        for name in (JSONL_FILE, GZIP_FILE, PARQUET_FILE):  # idempotent re-runs
            (partition / name).unlink(missing_ok=True)
        with_parquet = offset == parquet_day
        drifted = offset == days - 1 and days > 1
        files = _day_traces(world, rng, day, traces_per_day, with_parquet=with_parquet, drifted=drifted)
        first_kind = offset * malformed_per_day
        kinds = [MALFORMED_KINDS[(first_kind + i) % len(MALFORMED_KINDS)] for i in range(malformed_per_day)]
        lines = {name: [_dumps(t) for t in files[name]] for name in (JSONL_FILE, GZIP_FILE)}
        _inject_malformed(world, rng, day, kinds, files, lines, drifted=drifted)
        (partition / JSONL_FILE).write_bytes("".join(lines[JSONL_FILE]).encode("utf-8"))
        (partition / GZIP_FILE).write_bytes(deterministic_gzip("".join(lines[GZIP_FILE]).encode("utf-8")))
        if with_parquet:
            _write_parquet(partition / PARQUET_FILE, files[PARQUET_FILE])
        written.append(day)
    return written


@dataclasses.dataclass(frozen=True)
class _World:
    """The corpora indexed for fast, deterministic distractor choice."""

    rows: dict[str, tuple[CorpusRow | QaRow, ...]]  # by source
    passages: dict[str, str]  # passage id -> text
    ids_by_source: dict[str, tuple[str, ...]]
    neighbours: dict[tuple[str, str], tuple[str, ...]]  # (source, question) -> lexically similar passage ids
    references: dict[tuple[str, str], str]  # (source, question) -> ARES answer labelled faithful and relevant
    answers_by_passage: dict[str, tuple[tuple[str, ...], ...]]  # QA passage id -> answers of its questions


@functools.lru_cache(maxsize=2)
def _world(ares_path: str, qa_paths: tuple[str, ...]) -> _World:
    corpus: list[CorpusRow | QaRow] = list(load_demo_corpus(ares_path))
    for path in qa_paths:
        corpus.extend(load_qa_corpus(path))
    passages = {r.passage_id: r.passage for r in corpus}
    sources = sorted({r.source for r in corpus})
    ids_by_source = {s: tuple(sorted({r.passage_id for r in corpus if r.source == s})) for s in sources}
    words = {pid: _words(text) for pid, text in passages.items()}
    neighbours: dict[tuple[str, str], tuple[str, ...]] = {}
    for r in corpus:
        if (r.source, r.question) in neighbours:
            continue
        q = _words(r.question)
        pool = [pid for pid in ids_by_source[r.source] if pid != r.passage_id]
        ranked = sorted(pool, key=lambda pid: (-len(q & words[pid]), pid))
        neighbours[(r.source, r.question)] = tuple(ranked[:16])
    references = {
        (r.source, r.question): r.answer
        for r in corpus
        if isinstance(r, CorpusRow)
        and r.answer is not None
        and r.context_relevant
        and r.answer_faithful
        and r.answer_relevant
    }
    answers: dict[str, list[tuple[str, ...]]] = {}
    for r in corpus:
        if isinstance(r, QaRow) and r.answers:
            answers.setdefault(r.passage_id, []).append(r.answers)
    rows = {s: tuple(r for r in corpus if r.source == s) for s in sources}
    answers_by_passage = {pid: tuple(a) for pid, a in answers.items()}
    return _World(rows, passages, ids_by_source, neighbours, references, answers_by_passage)


def _words(text: str) -> frozenset[str]:
    """English content words, plus character bigrams of CJK text (which has no spaces to split on).

    Bigrams of hiragana alone are mostly Japanese grammar (``した``, ``ている``) and are left out.
    """
    lower = text.lower()
    words = {w for w in _WORD.findall(lower) if len(w) > 2 and w not in _STOPWORDS}
    for run in _CJK_RUN.findall(lower):
        words.update(b for i in range(len(run) - 1) if not _HIRAGANA_ONLY.match(b := run[i : i + 2]))
    return frozenset(words)


def _day_traces(
    world: _World, rng: random.Random, day: datetime.date, n: int, *, with_parquet: bool, drifted: bool
) -> dict[str, list[dict[str, Any]]]:
    """The day's valid traces in time order, cut into contiguous per-file chunks like rotated logs."""
    seconds = sorted(_second_of_day(rng) for _ in range(n))
    shares = (0.4, 0.3, 0.3) if with_parquet else (0.5, 0.5)
    bounds = [0]
    for share in shares[:-1]:
        bounds.append(bounds[-1] + max(1, round(n * share)))
    bounds.append(n)
    names = (JSONL_FILE, GZIP_FILE, PARQUET_FILE)[: len(shares)]
    files: dict[str, list[dict[str, Any]]] = {name: [] for name in (JSONL_FILE, GZIP_FILE, PARQUET_FILE)}
    used: set[str] = set()
    for i, name in enumerate(names):
        for second in seconds[bounds[i] : bounds[i + 1]]:
            trace = _trace(world, rng, day, second, used, graded=name != PARQUET_FILE, drifted=drifted)
            files[name].append(trace)
    return files


def _second_of_day(rng: random.Random) -> float:
    hour = rng.choices(range(24), weights=_HOURLY_TRAFFIC)[0]
    return hour * 3600 + rng.random() * 3600


def _timestamp(day: datetime.date, second: float) -> str:
    ms = min(int(second * 1000), 86_399_999)
    t = datetime.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
    return f"{day.isoformat()}T{t.isoformat(timespec='milliseconds')}Z"


def _trace_id(rng: random.Random, used: set[str]) -> str:
    while True:
        trace_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if trace_id not in used:
            used.add(trace_id)
            return trace_id


def _trace(
    world: _World,
    rng: random.Random,
    day: datetime.date,
    second: float,
    used: set[str],
    *,
    graded: bool,
    drifted: bool,
) -> dict[str, Any]:
    """One valid trace: a corpus question run through a simulated retriever and generator."""
    profile = rng.choices(_PROFILES, weights=[p.weight for p in _PROFILES])[0]
    if drifted:
        profile = _DRIFTED.get(profile.name, profile)
    hit_rate, rank_weights = profile.hit_rate, profile.rank_weights
    sources = [s for s, _ in profile.sources]
    source = rng.choices(sources, weights=[w for _, w in profile.sources])[0]
    row = rng.choice(world.rows[source])
    k = rng.randint(3, 8)

    # Retrieval: the answering passage lands at a skewed random rank, or is missed.
    gold = row.passage_id if row.context_relevant else None
    if gold is not None:
        rank = rng.choices(range(1, len(rank_weights) + 1), weights=rank_weights)[0]
        gold_rank = rank if rng.random() < hit_rate and rank <= k else None
    else:  # the off-topic (ARES) or non-answering (SQuAD v2) passage is what the pipeline retrieved
        gold_rank = None
    distractors = _distractors(world, rng, row, k - (gold_rank is not None) - (gold is None), sources)
    ids = list(distractors)
    if gold_rank is not None:
        ids.insert(gold_rank - 1, row.passage_id)
    if gold is None:
        ids.insert(rng.randint(0, 1), row.passage_id)
    if rng.random() < profile.duplicate_rate:  # a hybrid retriever returns one passage twice
        first = rng.randrange(len(ids) - 1)
        lower = [j for j in range(first + 1, len(ids)) if ids[j] != row.passage_id]
        if lower:
            ids[rng.choice(lower)] = ids[first]
    contexts = [
        {"id": pid, "text": world.passages[pid], "score": s} for pid, s in zip(ids, _scores(rng, len(ids)), strict=True)
    ]
    if rng.random() < profile.null_score_rate:  # a reranker that does not expose scores
        for c in contexts:
            c["score"] = None

    if isinstance(row, QaRow):
        answer = _qa_answer(world, rng, row, gold_hit=gold_rank is not None)
        reference, reference_answers = _qa_references(rng, row)
    else:
        answer = _answer(world, rng, row, gold_hit=gold_rank is not None)
        reference, reference_answers = _references(world, rng, row)
    trace: dict[str, Any] = {
        "trace_id": _trace_id(rng, used),
        "timestamp": _timestamp(day, second),
        "question": row.question,
        "answer": answer,
        "contexts": contexts,
        "reference": reference,
        "reference_answers": reference_answers,
        "relevant_context_ids": _relevance(rng, gold, contexts, graded=graded),
        "metadata": {"app": profile.name, "model": rng.choice(profile.models), "tenant": rng.choice(profile.tenants)},
    }
    if profile.language is not None:
        trace["language"] = profile.language
    if profile.logs_latency:  # an SDK version that logs the turn's latency (canonical `latency_ms`)
        trace["latency_ms"] = int(rng.lognormvariate(6.8, 0.35))
    if profile.logs_operations:
        trace.update(_operations(trace, profile))
    return trace


_SPAN_OVERHEAD_MS = 35.0
"""Median time of a turn outside retrieval and generation (routing, prompt building, network)."""


def _operations(trace: Mapping[str, Any], profile: _AppProfile) -> dict[str, Any]:
    """What a traced SDK logs of one turn: latencies (retrieval lognormal around the app's median; generation
    ~0.4 s plus 20 ms per output and 0.05 ms per input token), one model call's tokens (about four characters per
    token, one per CJK character) and a failed LLM span where the generation timed out (no answer). Drawn from the
    trace id, not the day's stream, so the traces themselves are those of before. A latency already logged (an
    older SDK's ``latency_ms``) is kept, and the breakdown scaled into it."""
    rng = random.Random(trace["trace_id"])
    answer = trace["answer"]
    prompt = trace["question"] + "".join(c["text"] for c in trace["contexts"])
    input_tokens = 120 + _token_estimate(prompt)
    output_tokens = _token_estimate(answer) if answer is not None else 0
    retrieval = profile.retrieval_ms * rng.lognormvariate(0.0, 0.35)
    generation = (400.0 + 20.0 * output_tokens + 0.05 * input_tokens) * rng.lognormvariate(0.0, 0.25)
    if answer is None:  # the generation timed out
        generation = 30_000.0
    total = retrieval + generation + _SPAN_OVERHEAD_MS * rng.lognormvariate(0.0, 0.5)
    if "latency_ms" in trace:
        scale = trace["latency_ms"] / total
        retrieval, generation, total = retrieval * scale, generation * scale, float(trace["latency_ms"])
    errors = (
        [
            {"kind": "llm", "name": "chat", "message": "Request timed out."},
            {"kind": "root", "name": "rag-turn", "message": "generation failed"},
        ]
        if answer is None
        else []
    )
    usage = {"model": trace["metadata"]["model"], "input_tokens": input_tokens, "output_tokens": output_tokens}
    return {
        "latency_ms": round(total),
        "retrieval_latency_ms": round(retrieval, 1),
        "generation_latency_ms": round(generation, 1),
        "usage": [usage],
        "errors": errors,
    }


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]")


def _token_estimate(text: str) -> int:
    """Tokens of ``text`` as a BPE tokenizer roughly counts them: one per CJK character, one per 4 other characters."""
    cjk = len(_CJK.findall(text))
    return max(1, cjk + (len(text) - cjk + 3) // 4)


def _distractors(
    world: _World, rng: random.Random, row: CorpusRow | QaRow, m: int, sources: Sequence[str]
) -> list[str]:
    """Other corpus passages: mostly lexically close ones from the same source, some random ones.

    Random ones come 10% of the time from another of the app's ``sources`` (its index), never from a
    corpus in another language.
    """
    near = list(world.neighbours[(row.source, row.question)])
    picked: list[str] = []
    while len(picked) < m:
        if near and rng.random() < 0.8:
            pid = near.pop(min(int(rng.expovariate(0.5)), len(near) - 1))
        else:
            source = row.source if rng.random() < 0.9 else rng.choice(sorted(sources))
            pid = rng.choice(world.ids_by_source[source])
        if pid != row.passage_id and pid not in picked:
            picked.append(pid)
    return picked


def _scores(rng: random.Random, n: int) -> list[float]:
    score = rng.uniform(0.55, 0.93)
    out = []
    for _ in range(n):
        out.append(round(score, 4))
        score -= rng.uniform(0.005, 0.08)
    return out


def _answer(world: _World, rng: random.Random, row: CorpusRow, *, gold_hit: bool) -> str | None:
    """Mostly the ARES answer; refusals or a hallucinated answer when nothing useful was retrieved."""
    if rng.random() < 0.02:  # generation timed out
        return None
    if row.answer is None or (not gold_hit and rng.random() < 0.5):
        if rng.random() < 0.75:
            return rng.choice(_REFUSALS)
        other = rng.choice(world.rows[row.source])  # an ARES row: ARES sources hold no QA rows
        return other.answer if isinstance(other, CorpusRow) and other.answer else rng.choice(_REFUSALS)
    return row.answer


def _references(world: _World, rng: random.Random, row: CorpusRow) -> tuple[str | None, list[str] | None]:
    """Ground truth only where ARES has a faithful and relevant answer to the question, sometimes as variants."""
    truth = world.references.get((row.source, row.question))
    if truth is None or rng.random() < 0.25:
        return None, None
    core = _core_answer(truth)
    reference = truth if rng.random() < 0.6 else core
    if len(core.split()) <= 6 and rng.random() < 0.5:  # alias lists are written for short answers
        variants = list(dict.fromkeys([core, core.lower(), " ".join(_ARTICLES.sub(" ", core).split())]))
        return reference, [v for v in variants if v]
    return reference, None


def _core_answer(text: str) -> str:
    """'The answer is: "The Googleplex".' -> 'The Googleplex': how a labeller would write it."""
    core = _ANSWER_PREFIX.sub("", text).strip().rstrip(".").strip()
    if len(core) > 1 and core[0] == core[-1] == '"':
        core = core[1:-1].strip()
    return core or text.strip()


def _qa_answer(world: _World, rng: random.Random, row: QaRow, *, gold_hit: bool) -> str | None:
    """A simulated model answer: the span, the span in a sentence, part of it, a wrong span, or a refusal.

    Spans written in full-width digits and letters (``１９０３年``) test width normalisation; refusals and
    hallucinations take over half the time the answering passage was missed, as for ARES rows.
    """
    phrasing = _PHRASINGS[row.language]
    if rng.random() < 0.02:  # generation timed out
        return None
    if not row.answers or (not gold_hit and rng.random() < 0.5):
        if rng.random() < 0.75:
            return rng.choice(phrasing.refusals)
        return _wrap(rng, phrasing, _wrong_answer(world, rng, row, same_passage=False))
    kind = rng.choices(_QA_KINDS, weights=_QA_KIND_WEIGHTS)[0]
    span = row.answers[0] if rng.random() < 0.7 else rng.choice(row.answers)
    if kind == "refusal":  # an over-cautious model
        return rng.choice(phrasing.refusals)
    if kind == "partial":
        return _partial(rng, span, row.passage) or _wrap(rng, phrasing, span, always=True)
    if kind == "wrong":  # another question's answer from the same passage: fluent, grounded and wrong
        return _wrap(rng, phrasing, _wrong_answer(world, rng, row, same_passage=True))
    if rng.random() < 0.3:
        span = span.translate(_FULL_WIDTH)
    return span if kind == "exact" else _wrap(rng, phrasing, span, always=True)


def _wrap(rng: random.Random, phrasing: _Phrasing, span: str, *, always: bool = False) -> str:
    """The span in one of the language's answer sentences (half the time unless ``always``)."""
    if always or rng.random() < 0.5:
        return rng.choice(phrasing.sentences).format(answer=span)
    return span


def _wrong_answer(world: _World, rng: random.Random, row: QaRow, *, same_passage: bool) -> str:
    """The first answer of another question that shares no answer with ``row``.

    From the same passage when ``same_passage`` and it has such a question (a grounded mistake), else
    from anywhere in the corpus (a hallucination).
    """
    own = set(row.answers)
    pool = world.answers_by_passage.get(row.passage_id, ()) if same_passage else ()
    candidates = [a[0] for a in pool if not own.intersection(a)]
    if not candidates:
        others = (r.answers for r in world.rows[row.source] if isinstance(r, QaRow) and r.answers)
        candidates = [a[0] for a in others if not own.intersection(a)]
    return rng.choice(candidates)


def _partial(rng: random.Random, span: str, passage: str) -> str | None:
    """A span overlapping the answer without being it: run on into the passage, or cut short.

    None when neither applies (a one-character span at a sentence end, or not in the passage).
    """
    start = passage.find(span)
    if start >= 0 and (len(span) < 4 or rng.random() < 0.5):
        end = start + len(span)
        run_on = _SENTENCE_END.split(passage[end : end + rng.randint(3, 10)])[0]
        if run_on:
            return span + run_on
    if len(span) < 2:
        return None
    keep = rng.randint(max(1, len(span) // 3), len(span) - 1)
    return span[:keep] if rng.random() < 0.5 else span[-keep:]


def _qa_references(rng: random.Random, row: QaRow) -> tuple[str | None, list[str] | None]:
    """The first annotator's answer as reference; all distinct answers as accepted variants (80%) when they differ.

    25% are left without ground truth, as for ARES rows; unanswerable questions never have one.
    """
    if not row.answers or rng.random() < 0.25:
        return None, None
    variants = list(row.answers) if len(row.answers) > 1 and rng.random() < 0.8 else None
    return row.answers[0], variants


def _relevance(
    rng: random.Random, gold: str | None, contexts: Sequence[Mapping[str, Any]], *, graded: bool
) -> list[str] | dict[str, int] | None:
    """~25% unlabelled; else the answering passage as a list or a graded map (3 best, 1 partial)."""
    if rng.random() < 0.25:
        return None
    if gold is None:
        return []
    if not graded or rng.random() < 0.55:
        return [gold]
    labels = {gold: rng.choice((2, 3, 3))}
    others = [c["id"] for c in contexts if c["id"] != gold]
    if others and rng.random() < 0.3:
        labels[others[0]] = 1
    return labels


def _inject_malformed(
    world: _World,
    rng: random.Random,
    day: datetime.date,
    kinds: Iterable[str],
    files: Mapping[str, list[dict[str, Any]]],
    lines: dict[str, list[str]],
    *,
    drifted: bool,
) -> None:
    """Insert one broken line per kind at a random place in a random JSONL file."""
    used = {t["trace_id"] for traces in files.values() for t in traces}
    valid = {line for name in lines for line in lines[name]}
    for kind in kinds:
        name = rng.choice((JSONL_FILE, GZIP_FILE))
        trace = _trace(world, rng, day, rng.random() * 86_400, used, graded=True, drifted=drifted)
        position = rng.randint(0, len(lines[name]))
        if kind == "truncated_json":  # a writer killed mid-line
            text = _dumps(trace)
            line = text[: rng.randint(20, len(text) - 10)] + "\n"
        elif kind == "missing_question":
            del trace["question"]
            line = _dumps(trace)
        elif kind == "contexts_not_list":  # contexts JSON-encoded twice by a buggy client
            trace["contexts"] = json.dumps(trace["contexts"], ensure_ascii=False)
            line = _dumps(trace)
        elif kind == "bad_timestamp":
            stamp = datetime.datetime.fromisoformat(trace["timestamp"][:-1])
            trace["timestamp"] = stamp.strftime("%d/%m/%Y %H:%M:%S")
            line = _dumps(trace)
        elif kind == "duplicate_trace_id":  # another trace reusing an earlier line's id
            candidates = [i for i, text in enumerate(lines[name]) if text in valid]
            if not candidates:
                name = GZIP_FILE if name == JSONL_FILE else JSONL_FILE
                candidates = [i for i, text in enumerate(lines[name]) if text in valid]
            original = rng.choice(candidates)
            trace["trace_id"] = json.loads(lines[name][original])["trace_id"]
            position = rng.randint(original + 1, len(lines[name]))
            line = _dumps(trace)
        else:
            raise ValueError(f"unknown malformed kind {kind!r}")
        lines[name].insert(position, line)


def _dumps(trace: Mapping[str, Any]) -> str:
    return json.dumps(trace, ensure_ascii=False) + "\n"


def _write_parquet(path: Path, traces: Sequence[Mapping[str, Any]]) -> None:
    """Same columns as the JSON lines; labels are id lists only and metadata a struct (see docs/demo.md)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("trace_id", pa.string()),
            ("timestamp", pa.string()),
            ("question", pa.string()),
            ("answer", pa.string()),
            (
                "contexts",
                pa.list_(pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())])),
            ),
            ("reference", pa.string()),
            ("reference_answers", pa.list_(pa.string())),
            ("relevant_context_ids", pa.list_(pa.string())),
            ("metadata", pa.struct([("app", pa.string()), ("model", pa.string()), ("tenant", pa.string())])),
            ("language", pa.string()),
            ("latency_ms", pa.int64()),
            ("retrieval_latency_ms", pa.float64()),
            ("generation_latency_ms", pa.float64()),
            (
                "usage",
                pa.list_(
                    pa.struct([("model", pa.string()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64())])
                ),
            ),
            ("errors", pa.list_(pa.struct([("kind", pa.string()), ("name", pa.string()), ("message", pa.string())]))),
        ]
    )
    pq.write_table(pa.Table.from_pylist(list(traces), schema=schema), path)
