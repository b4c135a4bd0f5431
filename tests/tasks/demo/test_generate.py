"""Tests of the demo trace generator: the trace contract, determinism, malformed lines, injected drift and the
Japanese and Chinese apps.

Only the corpus shipped in the repo is used: users (and so the demo) have no access to /work/shared.
"""

from __future__ import annotations

import collections
import datetime
import gzip
import json
import re
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ragpulse.tasks.demo import corpora as sample
from ragpulse.tasks.demo import generate as demo_data

START = datetime.date(2024, 3, 11)
DAYS = 7
PER_DAY = 300
MALFORMED = 3
REQUIRED = {
    "trace_id",
    "timestamp",
    "question",
    "answer",
    "contexts",
    "reference",
    "reference_answers",
    "relevant_context_ids",
    "metadata",
}
OPTIONAL = {"language"}  # canonical, logged by the Japanese and Chinese apps only
EXTRA = {"latency_ms", "retrieval_latency_ms", "generation_latency_ms", "usage", "errors"}  # operations
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
PASSAGE_ID = re.compile(r"^(?:(nq|hotpotqa)-\d+|jsquad-a\d+p\d+|cmrc2018-DEV_\d+)$")
LANGUAGE_OF_APP = {"jsquad-faq": "ja", "cmrc-faq": "zh"}
KANA = re.compile(r"[\u3040-\u30ff]")
HAN = re.compile(r"[\u4e00-\u9fff]")
FULL_WIDTH_ALNUM = re.compile(r"[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]")


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    written = demo_data.generate_demo_traces(root, start=START, days=DAYS, traces_per_day=PER_DAY, seed=7)
    assert written == [START + datetime.timedelta(days=i) for i in range(DAYS)]
    return root


@pytest.fixture(scope="module")
def parsed(demo_root: Path) -> dict[datetime.date, dict[str, list[dict[str, Any]]]]:
    """Per day: valid records and the malformed kinds found, each line classified once."""
    return {day: classify_day(demo_root / f"dt={day.isoformat()}", day) for day in days()}


def days() -> list[datetime.date]:
    return [START + datetime.timedelta(days=i) for i in range(DAYS)]


# ------------------------------------------------------------------------------------------- checker


def contract_problems(record: Mapping[str, Any], day: datetime.date, *, parquet: bool = False) -> list[str]:
    """Everything wrong with one record against the documented trace format (empty when valid)."""
    problems: list[str] = []
    if missing := REQUIRED - record.keys():
        problems.append(f"missing {sorted(missing)}")
    if unknown := record.keys() - REQUIRED - OPTIONAL - EXTRA:
        problems.append(f"unknown fields {sorted(unknown)}")
    if problems:
        return problems
    if not isinstance(record["trace_id"], str) or not record["trace_id"]:
        problems.append("trace_id")
    stamp = record["timestamp"]
    if not isinstance(stamp, str) or not ISO_Z.match(stamp):
        problems.append(f"timestamp {stamp!r}")
    elif datetime.datetime.fromisoformat(stamp[:-1]).date() != day:
        problems.append(f"timestamp {stamp} outside {day}")
    if not isinstance(record["question"], str) or not record["question"].strip():
        problems.append("question")
    if record["answer"] is not None and not isinstance(record["answer"], str):
        problems.append("answer")
    problems.extend(context_problems(record["contexts"]))
    if record["reference"] is not None and not isinstance(record["reference"], str):
        problems.append("reference")
    answers = record["reference_answers"]
    if answers is not None and (not answers or not all(isinstance(a, str) and a for a in answers)):
        problems.append("reference_answers")
    problems.extend(relevance_problems(record["relevant_context_ids"], parquet=parquet))
    metadata = record["metadata"]
    well_formed = isinstance(metadata, dict) and set(metadata) == {"app", "model", "tenant"}
    if (
        not well_formed
        or metadata["app"] not in demo_data.APPS
        or not all(isinstance(v, str) and v for v in metadata.values())
    ):
        problems.append(f"metadata {metadata!r}")
    if well_formed and record.get("language") != LANGUAGE_OF_APP.get(metadata["app"]):
        problems.append(f"language {record.get('language')!r} for app {metadata['app']!r}")
    if "language" in record and record["language"] is None and not parquet:
        problems.append("language null in JSON")
    latency = record.get("latency_ms")
    if latency is not None and (not isinstance(latency, int) or latency <= 0):
        problems.append("latency_ms")
    if "latency_ms" in record and latency is None and not parquet:
        problems.append("latency_ms null in JSON")
    return problems


def context_problems(contexts: object) -> list[str]:
    if not isinstance(contexts, list) or not 3 <= len(contexts) <= 8:
        return [f"contexts {type(contexts).__name__} of bad length"]
    problems = []
    for context in contexts:
        if not isinstance(context, dict) or set(context) != {"id", "text", "score"}:
            problems.append(f"context {context!r}")
        elif not PASSAGE_ID.match(str(context["id"])) or not isinstance(context["text"], str) or not context["text"]:
            problems.append(f"context id/text {context['id']!r}")
        elif context["score"] is not None and (
            isinstance(context["score"], bool) or not isinstance(context["score"], float)
        ):
            problems.append(f"score {context['score']!r}")
    if problems:
        return problems
    scores = [c["score"] for c in contexts if c["score"] is not None]
    if scores != sorted(scores, reverse=True):
        problems.append(f"scores not descending {scores}")
    return problems


def relevance_problems(labels: object, *, parquet: bool) -> list[str]:
    if labels is None:
        return []
    if isinstance(labels, list):
        ok = all(isinstance(i, str) and PASSAGE_ID.match(i) for i in labels) and len(set(labels)) == len(labels)
        return [] if ok else [f"relevant_context_ids {labels!r}"]
    if isinstance(labels, dict) and not parquet:
        ok = bool(labels) and all(PASSAGE_ID.match(k) and type(v) is int and 1 <= v <= 3 for k, v in labels.items())
        return [] if ok else [f"relevant_context_ids {labels!r}"]
    return [f"relevant_context_ids {type(labels).__name__}"]


def classify_day(partition: Path, day: datetime.date) -> dict[str, list[dict[str, Any]]]:
    """Read a partition in file and line order; sort every line into valid or one malformed kind."""
    valid: list[dict[str, Any]] = []
    malformed: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in sorted(partition.iterdir()):
        parquet = path.suffix == ".parquet"
        for line in read_lines(path):
            kind, record = classify_line(line, seen)
            if kind is None:
                problems = contract_problems(record, day, parquet=parquet)
                assert not problems, f"{path.name}: {problems}"
                seen.add(record["trace_id"])
                valid.append(dict(record, _file=path.name))
            else:
                malformed.append({"kind": kind, "_file": path.name})
    return {"valid": valid, "malformed": malformed}


def classify_line(line: str | dict[str, Any], seen: set[str]) -> tuple[str | None, dict[str, Any]]:
    if isinstance(line, dict):
        record = line
    else:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return "truncated_json", {}
    if "question" not in record:
        return "missing_question", record
    if not isinstance(record.get("contexts"), list):
        return "contexts_not_list", record
    if not isinstance(record.get("timestamp"), str) or not ISO_Z.match(record["timestamp"]):
        return "bad_timestamp", record
    if record.get("trace_id") in seen:
        return "duplicate_trace_id", record
    return None, record


def read_lines(path: Path) -> Iterator[str | dict[str, Any]]:
    if path.suffix == ".parquet":
        yield from pq.read_table(path).to_pylist()
        return
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        yield from fh


def gold_rank(record: Mapping[str, Any]) -> int | None:
    """Rank of the best-labelled passage (None when not retrieved); only for traces with a relevant label."""
    labels = record["relevant_context_ids"]
    gold = max(labels, key=lambda i: labels[i]) if isinstance(labels, dict) else labels[0]
    ids = [c["id"] for c in record["contexts"]]
    return ids.index(gold) + 1 if gold in ids else None


# --------------------------------------------------------------------------------------------- tests


def test_partition_layout_and_file_kinds(demo_root: Path) -> None:
    partitions = sorted(p.name for p in demo_root.iterdir())
    assert partitions == [f"dt={d.isoformat()}" for d in days()]
    with_parquet = []
    for day in days():
        names = sorted(p.name for p in (demo_root / f"dt={day.isoformat()}").iterdir())
        assert names[:2] == ["traces-00.jsonl", "traces-01.jsonl.gz"]
        if names[2:]:
            assert names[2:] == ["traces-02.parquet"]
            with_parquet.append(day)
    assert with_parquet == [days()[DAYS // 2]]
    gz = demo_root / f"dt={START.isoformat()}" / "traces-01.jsonl.gz"
    assert gz.read_bytes()[:2] == b"\x1f\x8b"


def test_parquet_columns(demo_root: Path) -> None:
    path = demo_root / f"dt={days()[DAYS // 2].isoformat()}" / "traces-02.parquet"
    schema = pq.read_schema(path)
    assert set(schema.names) == REQUIRED | OPTIONAL | EXTRA
    assert str(schema.field("language").type) == "string"
    assert str(schema.field("contexts").type) == "list<element: struct<id: string, text: string, score: double>>"
    assert str(schema.field("relevant_context_ids").type) == "list<element: string>"
    assert str(schema.field("metadata").type) == "struct<app: string, model: string, tenant: string>"
    assert pq.read_metadata(path).num_rows > 0


def test_counts_per_day(parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]]) -> None:
    for day, found in parsed.items():
        assert len(found["valid"]) == PER_DAY, day
        assert len(found["malformed"]) == MALFORMED, day
        assert all(m["_file"].endswith((".jsonl", ".jsonl.gz")) for m in found["malformed"])


def test_all_malformed_kinds_present(parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]]) -> None:
    kinds = collections.Counter(m["kind"] for found in parsed.values() for m in found["malformed"])
    assert set(kinds) == set(demo_data.MALFORMED_KINDS)
    assert sum(kinds.values()) == DAYS * MALFORMED


def test_valid_traces_look_realistic(parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]]) -> None:
    traces = [t for found in parsed.values() for t in found["valid"]]
    n = len(traces)
    unlabelled = sum(t["relevant_context_ids"] is None for t in traces) / n
    assert 0.18 < unlabelled < 0.32
    assert 0 < sum(t["answer"] is None for t in traces) < 0.05 * n
    assert any(isinstance(t["relevant_context_ids"], dict) for t in traces)
    assert any(t["relevant_context_ids"] == [] for t in traces)  # labelled, but nothing relevant exists
    assert any(len({c["id"] for c in t["contexts"]}) < len(t["contexts"]) for t in traces)  # hybrid duplicates
    assert any(all(c["score"] is None for c in t["contexts"]) for t in traces)
    assert any(t["reference_answers"] and len(t["reference_answers"]) > 1 for t in traces)
    assert any("latency_ms" in t for t in traces) and not all("latency_ms" in t for t in traces)
    assert {t["metadata"]["app"] for t in traces} == set(demo_data.APPS)
    labelled = [t for t in traces if t["relevant_context_ids"]]
    ranks = [gold_rank(t) for t in labelled]
    assert sum(r is not None for r in ranks) / len(ranks) > 0.75  # the gold passage is usually retrieved
    assert len({r for r in ranks if r is not None}) >= 4  # at varied ranks
    for found in parsed.values():  # each file holds a contiguous time range, like a rotated log
        by_file = collections.defaultdict(list)
        for t in found["valid"]:
            by_file[t["_file"]].append(t["timestamp"])
        assert all(stamps == sorted(stamps) for stamps in by_file.values())
        assert max(by_file["traces-00.jsonl"]) <= min(by_file["traces-01.jsonl.gz"])


def test_last_day_retrieval_drop_for_drift_app(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]],
) -> None:
    def stats(app: str, chosen: list[datetime.date]) -> tuple[float, float]:
        """(mean reciprocal gold rank with 0 when missed, mean gold rank where retrieved)."""
        ranks = [
            gold_rank(t)
            for day in chosen
            for t in parsed[day]["valid"]
            if t["metadata"]["app"] == app and t["relevant_context_ids"]
        ]
        mrr = statistics.fmean(1 / r if r else 0.0 for r in ranks)
        return mrr, statistics.fmean(r for r in ranks if r)

    before, last = days()[:-1], days()[-1:]
    drops = {}
    for app in demo_data.APPS:
        (mrr_before, rank_before), (mrr_last, rank_last) = stats(app, before), stats(app, last)
        drops[app] = mrr_before - mrr_last
        if app == demo_data.DRIFT_APP:
            assert rank_last > rank_before + 0.3
            assert mrr_last < mrr_before - 0.1
    assert max(drops, key=drops.__getitem__) == demo_data.DRIFT_APP
    assert all(drop < 0.1 for app, drop in drops.items() if app != demo_data.DRIFT_APP)


def test_operations_are_logged_per_app_and_the_drift_apps_index_slows_on_the_last_day(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]],
) -> None:
    """Span times, token usage and span errors as a traced SDK logs them: every app but research-assistant; a failed
    LLM span and root exactly where the generation timed out (no answer); the parts within the whole; and the drift
    app's retrieval about three times slower on the last day while the others' holds."""
    traces = [t for found in parsed.values() for t in found["valid"]]
    for t in traces:
        if t["metadata"]["app"] == "research-assistant":
            assert t.get("usage") is t.get("errors") is t.get("latency_ms") is None  # null in Parquet, absent in JSON
            continue
        assert t["retrieval_latency_ms"] + t["generation_latency_ms"] <= t["latency_ms"] + 1
        (call,) = t["usage"]
        assert call["model"] == t["metadata"]["model"] and call["input_tokens"] > 0
        assert (call["output_tokens"] == 0) == (t["answer"] is None)
        assert [e["kind"] for e in t["errors"]] == (["llm", "root"] if t["answer"] is None else [])

    def retrieval(app: str, chosen: list[datetime.date]) -> float:
        found = [
            t["retrieval_latency_ms"] for day in chosen for t in parsed[day]["valid"] if t["metadata"]["app"] == app
        ]
        return statistics.median(found)

    before, last = days()[:-1], days()[-1:]
    for app in set(demo_data.APPS) - {"research-assistant"}:
        ratio = retrieval(app, last) / retrieval(app, before)
        assert 2.2 < ratio < 4 if app == demo_data.DRIFT_APP else 0.7 < ratio < 1.4, (app, ratio)


def test_deterministic_for_a_seed(demo_root: Path, tmp_path: Path) -> None:
    demo_data.generate_demo_traces(tmp_path, start=START, days=DAYS, traces_per_day=PER_DAY, seed=7)
    for day in days():
        for name in ("traces-00.jsonl", "traces-01.jsonl.gz"):
            a = (demo_root / f"dt={day.isoformat()}" / name).read_bytes()
            b = (tmp_path / f"dt={day.isoformat()}" / name).read_bytes()
            assert a == b, (day, name)
    name = f"dt={days()[DAYS // 2].isoformat()}/traces-02.parquet"
    assert pq.read_table(demo_root / name).equals(pq.read_table(tmp_path / name))


def test_rerun_in_place_and_other_seed(tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {"start": START, "days": 3, "traces_per_day": 20, "malformed_per_day": 5}
    demo_data.generate_demo_traces(tmp_path / "a", seed=1, **kwargs)
    first = (tmp_path / "a" / f"dt={START.isoformat()}" / "traces-00.jsonl").read_bytes()
    demo_data.generate_demo_traces(tmp_path / "a", seed=1, **kwargs)
    assert (tmp_path / "a" / f"dt={START.isoformat()}" / "traces-00.jsonl").read_bytes() == first
    demo_data.generate_demo_traces(tmp_path / "b", seed=2, **kwargs)
    assert (tmp_path / "b" / f"dt={START.isoformat()}" / "traces-00.jsonl").read_bytes() != first
    found = classify_day(tmp_path / "a" / f"dt={START.isoformat()}", START)
    assert len(found["valid"]) == 20
    assert sorted(m["kind"] for m in found["malformed"]) == sorted(demo_data.MALFORMED_KINDS)


def test_small_and_clean_runs(tmp_path: Path) -> None:
    written = demo_data.generate_demo_traces(
        tmp_path, start=datetime.datetime(2024, 1, 31, 12), days=1, traces_per_day=3, malformed_per_day=0
    )
    assert written == [datetime.date(2024, 1, 31)]
    found = classify_day(tmp_path / "dt=2024-01-31", datetime.date(2024, 1, 31))
    assert len(found["valid"]) == 3 and not found["malformed"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"days": 0}, "days"), ({"traces_per_day": 2}, "traces_per_day"), ({"malformed_per_day": -1}, "malformed")],
)
def test_rejects_bad_arguments(tmp_path: Path, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        demo_data.generate_demo_traces(tmp_path, start=START, **kwargs)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.update(contexts=t["contexts"][:2]),
        lambda t: t.update(contexts=[dict(c, score=0.1 * i) for i, c in enumerate(t["contexts"])]),
        lambda t: t.update(relevant_context_ids={t["contexts"][0]["id"]: 4}),
        lambda t: t.update(timestamp="2024-03-12T00:00:00Z"),
        lambda t: t.update(metadata={"app": "unknown-app", "model": "m", "tenant": "t"}),
        lambda t: t.update(surprise=1),
        lambda t: t.update(language="zh" if t.get("language") == "ja" else "ja"),
        lambda t: t.pop("reference"),
    ],
)
def test_checker_rejects_contract_violations(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]], mutate: Any
) -> None:
    """Guards the guard: the checker used above must notice each kind of violation."""
    trace = {k: v for k, v in parsed[START]["valid"][0].items() if k != "_file"}
    assert contract_problems(trace, START) == []
    mutate(trace)
    assert contract_problems(trace, START)


# ------------------------------------------------------------------------------- Japanese and Chinese


def qa_answers() -> dict[tuple[str, str], set[str]]:
    """(language, question) -> every annotated answer to it in the shipped JSQuAD and CMRC extracts."""
    answers: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for path in sample.QA_CORPUS_PATHS:
        for row in sample.load_qa_corpus(path):
            answers[(row.language, row.question)].update(row.answers)
    return answers


def cjk_traces(parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    return [t for found in parsed.values() for t in found["valid"] if t["metadata"]["app"] in LANGUAGE_OF_APP]


def test_japanese_and_chinese_apps_log_their_language(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]],
) -> None:
    for day, found in parsed.items():
        per_language = collections.Counter(t.get("language") for t in found["valid"])
        assert per_language["ja"] > 0.08 * PER_DAY and per_language["zh"] > 0.08 * PER_DAY, day
        assert per_language[None] > 0.5 * PER_DAY, day  # the English apps leave language to detection
    known = qa_answers()
    for trace in cjk_traces(parsed):
        language = trace["language"]
        assert (language, trace["question"]) in known
        prefix = "jsquad-" if language == "ja" else "cmrc2018-"
        assert all(c["id"].startswith(prefix) for c in trace["contexts"]), "distractors from the same corpus"
        if language == "ja":
            assert KANA.search(trace["question"] + trace["contexts"][0]["text"])
        else:
            assert HAN.search(trace["question"]) and not KANA.search(trace["question"])


def test_japanese_and_chinese_references_come_from_the_annotations(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]],
) -> None:
    known = qa_answers()
    traces = cjk_traces(parsed)
    with_reference = [t for t in traces if t["reference"] is not None]
    assert 0.65 < len(with_reference) / len(traces) < 0.85  # 25% have no ground truth
    variants = 0
    for trace in with_reference:
        annotated = known[(trace["language"], trace["question"])]
        assert trace["reference"] in annotated
        if trace["reference_answers"] is not None:
            assert trace["reference_answers"][0] == trace["reference"]
            assert set(trace["reference_answers"]) <= annotated and len(trace["reference_answers"]) > 1
            variants += 1
    assert variants > 0.15 * len(with_reference)


def test_japanese_and_chinese_answers_are_a_realistic_mix(
    parsed: Mapping[datetime.date, Mapping[str, list[dict[str, Any]]]],
) -> None:
    """Exact spans, spans in a sentence, full-width spans, partial spans and wrong answers or refusals, per language."""
    for language in ("ja", "zh"):
        scored = [
            t for t in cjk_traces(parsed) if t["language"] == language and t["reference"] and t["answer"] is not None
        ]
        kinds: collections.Counter[str] = collections.Counter()
        for trace in scored:
            answer, accepted = trace["answer"], set(trace["reference_answers"] or [trace["reference"]])
            if answer in accepted:
                kinds["exact"] += 1
            elif any(a in answer for a in accepted):
                kinds["contains"] += 1  # a sentence around the span, or the span run on
            elif FULL_WIDTH_ALNUM.search(answer):
                kinds["full_width"] += 1
            elif set(answer) & set("".join(accepted)):
                kinds["overlaps"] += 1  # cut short, or a related wrong span
            else:
                kinds["disjoint"] += 1  # wrong, or a refusal
        n = len(scored)
        assert 0.2 < kinds["exact"] / n < 0.5, (language, kinds)
        assert kinds["contains"] / n > 0.15, (language, kinds)
        assert kinds["full_width"] > 0, (language, kinds)
        assert kinds["overlaps"] / n > 0.05, (language, kinds)
        assert kinds["disjoint"] / n > 0.05, (language, kinds)
        sentence_end = "。"
        assert sum(t["answer"].endswith(sentence_end) for t in scored) / n > 0.15, language
