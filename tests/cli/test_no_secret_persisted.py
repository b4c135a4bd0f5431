"""Fault 3 of issue 16: no secret is persisted anywhere. A warehouse password, a judge API key and a webhook token
are planted; ``ragpulse evaluate`` and ``ragpulse monitor`` (drift and an alert) run through the real CLI against
the session's Prefect server, real PostgreSQL and DuckDB, the scripted judge and the webhook receiver; then every
table and column, every file the runs wrote, and the Prefect API's flow-run parameters, logs, artifacts and events
are searched for each secret."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures
from tests.doubles.judge_server import JudgeServer
from tests.doubles.webhook_receiver import SECRET_PATH, WebhookReceiver

pytestmark = pytest.mark.slow  # whole runs on Prefect's own server, PostgreSQL

runner = CliRunner()
BASELINE, DROP = dt.date(2026, 5, 1), dt.date(2026, 5, 2)
PER_DAY = 40
METRICS = "document_mrr,context_recall"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(autouse=True)
def _restore_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The CLI sets Prefect defaults in os.environ and filters Prefect's console handler: undo both."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    for name in ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        monkeypatch.setenv(name, os.environ.get(name, "false"))
    monkeypatch.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    yield
    quiet_run_failures(False)


def _write_day(root: Path, day: dt.date, *, hit: bool) -> None:
    """Traces whose relevant document is ranked first (``hit``) or not retrieved: document_mrr 1, then 0."""
    lines = []
    for i in range(PER_DAY):
        relevant = f"doc-{i}"
        contexts = [{"id": relevant if hit else f"other-{i}", "text": "the sky is blue", "score": 0.9}]
        lines.append(
            {"trace_id": f"{day}-{i}", "timestamp": f"{day}T10:00:00Z", "question": f"what colour is sky {i}?",
             "answer": "blue", "contexts": contexts, "reference": "blue", "relevant_context_ids": {relevant: 1},
             "metadata": {"app": "support"}}
        )  # fmt: skip
    partition = root / f"dt={day.isoformat()}"
    partition.mkdir(parents=True, exist_ok=True)
    (partition / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _recall(body: dict[str, Any]) -> dict[str, Any]:
    return {"claims": [{"claim": "the sky is blue", "reason": "context 1", "attributed": 1}]}


@pytest.fixture
def pg_schema() -> Iterator[str]:
    schema = f"t16_d_{uuid.uuid4().hex[:8]}"
    yield schema
    engine = sa.create_engine(PG_ADMIN)
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def _pg_text(schema: str) -> tuple[str, tuple[int, int], list[str]]:
    """Every row of every table of the schema as text, the score rows (all, distinct) and the runs' warehouses."""
    engine = sa.create_engine(PG_ADMIN)
    with engine.connect() as conn:
        tables = conn.execute(
            sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"), {"s": schema}
        ).scalars()
        text = "\n".join(
            str(row) for table in tables for row in conn.execute(sa.text(f'SELECT t::text FROM "{schema}"."{table}" t'))
        )
        n_scores = conn.execute(
            sa.text(f'SELECT count(*), count(DISTINCT (partition_date, trace_id, metric)) FROM "{schema}".scores')
        ).one()
        configs = conn.execute(sa.text(f'SELECT config FROM "{schema}".runs')).scalars()
        warehouses = [json.loads(config)["output"]["warehouse"] for config in configs]
    engine.dispose()
    return text, (n_scores[0], n_scores[1]), warehouses


def _duckdb_text(path: Path) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [name for (name,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{table}"').fetchall()) for table in tables)


def _file_texts(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Every file below ``root`` as bytes; gzip decompressed and Parquet decoded, so compression hides nothing."""
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        elif data[:4] == b"PAR1":
            data = str(pq.read_table(path).to_pylist()).encode()
        yield path, data


def _prefect_text(since: dt.datetime) -> tuple[str, int]:
    """The flow runs started since ``since``: parameters, logs, artifacts, task-run names; and the events."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterStartTime,
        LogFilter,
        LogFilterFlowRunId,
    )

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=since)))
        ids = [run.id for run in runs]
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)))
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=ids)))
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": ids}))
        events = client.request("POST", "/events/filter", json={"filter": {"occurred": {"since": since.isoformat()}}})
    parts = [json.dumps(run.parameters, default=str) + run.name for run in runs]
    parts += [log.message for log in logs]
    parts += [json.dumps(artifact.data, default=str) + str(artifact.description) for artifact in artifacts]
    parts += [task.name for task in tasks]
    parts.append(events.text)
    assert logs and artifacts, "the runs reached the Prefect API"
    return "\n".join(parts), len(runs)


def test_no_secret_is_persisted_by_evaluate_and_monitor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge_server: JudgeServer, webhook: WebhookReceiver,
    pg_schema: str,
) -> None:  # fmt: skip
    from prefect.settings import get_current_settings

    password, api_key = f"PW-t16d-{uuid.uuid4().hex}", f"sk-t16d-{uuid.uuid4().hex}"
    token = SECRET_PATH.rsplit("/", 1)[-1]
    secrets = {"warehouse password": password, "judge API key": api_key, "webhook token": token}
    judge_server.api_key, judge_server.responder = api_key, _recall
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", api_key)
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-t16")
    monkeypatch.setenv("RAGPULSE_ALERT_WEBHOOK_URL", webhook.url)
    webhook.fail(503, 1)  # a failed attempt is logged and retried: its error must not quote the URL either
    traces = tmp_path / "traces"
    _write_day(traces, BASELINE, hit=True)
    _write_day(traces, DROP, hit=False)
    since = dt.datetime.now(dt.UTC)
    pg_url = f"postgresql://postgres:{password}@127.0.0.1:5432/test?schema={pg_schema}"
    common = ["--source", str(traces), "--metrics", METRICS, "--judge-base-url", judge_server.base_url]
    drift = ["--min-baseline-partitions", "1", "--drift-min-samples", "10", "--alert-backoff-seconds", "0"]
    runs = {
        "pg evaluate": ["evaluate", "--date", str(BASELINE), "--warehouse", pg_url, "--work-dir", str(tmp_path / "w")],
        "pg monitor": ["monitor", "--date", str(DROP), "--warehouse", pg_url, "--work-dir", str(tmp_path / "w"),
                       *drift],
        "duckdb evaluate": ["evaluate", "--date", str(BASELINE), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb",
                            "--work-dir", str(tmp_path / "w-duckdb")],
    }  # fmt: skip
    printed = []
    for name, args in runs.items():
        result = runner.invoke(app, [*args, *common])
        assert result.exit_code == 0, f"{name}: {result.output}"
        printed.append(result.output)

    # The runs worked: every score row present, once, judge scores included; the drop alerted, once.
    pg_rows, n_scores, warehouses = _pg_text(pg_schema)
    assert n_scores == (2 * PER_DAY * len(METRICS.split(",")),) * 2  # 160 rows expected, present, none duplicated
    assert judge_server.calls > 0 and len(webhook.messages) == 1 and webhook.attempts == 2
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT (trace_id, metric)) FROM scores").fetchone() == (80, 80)
    prefect_text, n_runs = _prefect_text(since)
    assert n_runs >= len(runs)

    places = {"PostgreSQL tables": pg_rows, "DuckDB tables": _duckdb_text(tmp_path / "w.duckdb")}
    places |= {"Prefect API (parameters, logs, artifacts, events)": prefect_text, "CLI output": "\n".join(printed)}
    results_dir = Path(get_current_settings().results.local_storage_path)
    files = [*_file_texts(tmp_path), *_file_texts(results_dir)]
    assert any(path.is_relative_to(tmp_path / "w") for path, _ in files), "the work dir has files"
    for what, secret in secrets.items():
        found = [place for place, text in places.items() if secret in text]
        found += [str(path) for path, data in files if secret.encode() in data]
        assert not found, f"{what} persisted in {found}"
    # The one place the warehouse URL is kept, the runs rows, has it masked.
    assert warehouses == [pg_url.replace(password, "***")] * 2


def _prefect_database() -> bytes:
    """The Prefect server's own SQLite database (and its write-ahead log), as bytes."""
    from prefect.settings import get_current_settings

    setting = get_current_settings().server.database.connection_url
    url = setting.get_secret_value() if hasattr(setting, "get_secret_value") else str(setting)
    path = Path(str(sa.make_url(url).database))
    return b"".join(part.read_bytes() for part in path.parent.glob(f"{path.name}*"))


def _lake_text(url: str, namespace: str) -> tuple[str, list[str]]:
    """Every row of every lake table read back through pyiceberg, its catalog rows, and the runs' warehouses."""
    from ragpulse.tasks.warehouse import open_warehouse
    from ragpulse.tasks.warehouse._schema import TABLES

    lake = open_warehouse(url)
    tables = {key: lake.read(key) for key in TABLES}
    assert tables["scores"].num_rows > 0, "the runs published to the lake"
    engine = sa.create_engine(PG_ADMIN)
    with engine.connect() as conn:
        catalog = conn.execute(
            sa.text("SELECT t::text FROM iceberg_tables t WHERE table_namespace = :n"), {"n": namespace}
        ).scalars()
        text = "\n".join([*catalog, *(str(table.to_pylist()) for table in tables.values())])
    engine.dispose()
    warehouses = [json.loads(config)["output"]["warehouse"] for config in tables["runs"].column("config").to_pylist()]
    return text, warehouses


@pytest.fixture
def lake_namespace() -> Iterator[str]:
    """A namespace of its own in the PostgreSQL Iceberg catalog; its catalog rows deleted afterwards."""
    name = f"t29_{uuid.uuid4().hex[:10]}"
    yield name
    engine = sa.create_engine(PG_ADMIN)
    with engine.begin() as conn:
        for table, column in (("iceberg_tables", "table_namespace"), ("iceberg_namespace_properties", "namespace")):
            if conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar() is not None:
                conn.execute(sa.text(f"DELETE FROM {table} WHERE {column} = :n"), {"n": name})
    engine.dispose()


def test_a_percent_encoded_catalog_password_is_never_persisted(
    tmp_path: Path, lake_namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 29, item 2: the lake decodes ``?catalog=`` (percent-encoded once) and SQLAlchemy the password in it
    (encoded again, as ``/``, ``@`` and ``:`` in it require): no form of it may reach the lake's tables, the Prefect
    server's database or the output, nor the ``error:`` line when the catalog is unreachable. The password's hex
    part survives every encoding, so it is what is searched for."""
    from urllib.parse import quote

    from tests.conftest import free_port

    marker = uuid.uuid4().hex
    password = f"p/w@{marker}:x y"
    traces = tmp_path / "traces"
    _write_day(traces, BASELINE, hit=True)
    _write_day(traces, DROP, hit=False)

    def lake(port: int) -> str:
        catalog = f"postgresql://postgres:{quote(password, safe='')}@127.0.0.1:{port}/test"
        return f"file://{tmp_path}/lake?catalog={quote(catalog, safe='')}&namespace={lake_namespace}"

    common = ["--source", str(traces), "--metrics", "document_mrr", "--work-dir", str(tmp_path / "w")]
    drift = ["--min-baseline-partitions", "1", "--drift-min-samples", "10"]
    printed = []
    for args in (["evaluate", "--date", str(BASELINE)], ["monitor", "--date", str(DROP), *drift]):
        result = runner.invoke(app, [*args, "--warehouse", lake(5432), *common])
        assert result.exit_code == 0, result.output
        printed.append(result.output)
    unreachable = runner.invoke(app, ["evaluate", "--date", str(BASELINE), "--warehouse", lake(free_port()), *common])
    assert unreachable.exit_code == 2, unreachable.output
    error = unreachable.output.strip().splitlines()[-1]
    assert error.startswith("error: warehouse file://") and "127.0.0.1" in error, error
    captured = capfd.readouterr()

    lake_rows, warehouses = _lake_text(lake(5432), lake_namespace)
    prefect_database = _prefect_database().decode("utf-8", "replace")
    assert lake_namespace in prefect_database, "the runs' parameters are in the Prefect database searched"
    places = {
        "lake tables and catalog": lake_rows,
        "Prefect database": prefect_database,
        "CLI output": "\n".join(printed) + captured.out + captured.err,
        "the unreachable catalog's error": unreachable.output,
    }
    found = [place for place, text in places.items() if marker in text]
    found += [str(path) for path, data in _file_texts(tmp_path) if marker.encode() in data]
    assert not found, f"the catalog password persisted in {found}"
    # Masked where it stood, in its encoding; the rest of the URL as it was.
    masked = f"file://{tmp_path}/lake?catalog=postgresql%3A%2F%2Fpostgres%3A***%40127.0.0.1%3A5432%2Ftest"
    assert warehouses == [f"{masked}&namespace={lake_namespace}"] * 2
