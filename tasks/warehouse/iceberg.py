"""An Apache Iceberg lake: every score table an Iceberg table, partitioned by ``partition_date``, with its data and
metadata on S3 (or an S3-compatible store) or a local folder and its commits made through a SQL catalog. Its URL
(``s3://bucket/prefix?catalog=...``) is ``lake_url``'s; the locks beside its catalog are ``_locks``'s.

Tables live at ``<root>/<namespace>/<table>``. Publishing a date takes the date's lock (a PostgreSQL advisory lock
in the catalog's database, or an ``flock`` beside a SQLite catalog), writes every table's new Parquet files (each
row checked as SQL constraints would, before anything is committed), then commits table by table, ``runs`` last:
each commit replaces the date's files of one table in one Iceberg snapshot, so a reader of a table sees the whole
previous date or the whole new one. A commit that fails restores the tables already committed to their previous
files before the error is raised. Publishers of different dates commit concurrently (Iceberg retries a commit that
lost a race, which cannot conflict); publishers of one date queue on its lock.

The schema version is the namespace property ``ragpulse.schema-version.<meta>``; migrations add columns and tables
with Iceberg's own schema evolution, so files written before read a new column as NULL.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import os
import posixpath
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlalchemy as sa
from fsspec.implementations.local import LocalFileSystem
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThanOrEqual,
    In,
    LessThanOrEqual,
)
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.utils.config import Config

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.exceptions import ConfigError, WarehouseError
from ragpulse.tasks.core.storage import filesystem, redacted_line
from ragpulse.tasks.warehouse._locks import NamedLocks, catalog_locks
from ragpulse.tasks.warehouse._schema import (
    PUBLISHED_AT,
    SCHEMA_VERSION,
    TABLES,
    AddColumn,
    AddTable,
    Query,
    TableSpec,
    check_partition,
    conform,
    conform_partition,
    conform_rows,
    pending_migrations,
    violation,
)
from ragpulse.tasks.warehouse.lake_url import LakeUrl
from ragpulse.tasks.warehouse.protocol import STREAMED, Publication, TableNames

__all__ = ["IcebergLake", "schema_version_property"]

_log = logging.getLogger(__name__)

# A file no snapshot names is deleted only once this old: younger, it may be a publish's in flight.
_ORPHAN_GRACE = dt.timedelta(hours=1)
# Written on every snapshot a publish commits: which publish made it, to recognise a commit whose reply was lost.
_PUBLISH_PROPERTY = "ragpulse.publish-id"
_CATALOG_NAME = "ragpulse"
_FSSPEC_IO = "pyiceberg.io.fsspec.FsspecFileIO"
_TABLE_PROPERTIES = {
    "format-version": "2",
    # Each commit writes a metadata file; keep the last 100, not every one since the table began.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
    # Publishers of other dates commit to the same tables; a lost race is retried on the new state.
    "commit.retry.num-retries": "20",
    # A replace conflicts only if the files it replaces changed meanwhile; files another date's publish added do
    # not conflict (serializable isolation would refuse any added file). Publishers of one date queue on its lock.
    "write.update.isolation-level": "snapshot",
    "write.delete.isolation-level": "snapshot",
    "commit.retry.min-wait-ms": "20",
    "commit.retry.max-wait-ms": "2000",
}
# The tables a publish replaces the date's rows of: those of scores only for the publication's metrics.
_BY_METRIC = ("scores", "step_scores", "conversation_scores")
_REPLACED = (*_BY_METRIC, "quarantine", "traces", "steps")
# Arrow bytes gathered into one row group: a whole table would be the whole day in memory.
_ROW_GROUP_BYTES = 64 * 2**20


class IcebergLake:
    """Score tables as Iceberg tables; see the module docstring for the commit protocol, ``LakeUrl`` for the URL."""

    def __init__(
        self,
        url: str,
        *,
        tables: TableNames | None = None,
        storage_options: dict[str, Any] | None = None,
        migrating: bool = False,
    ) -> None:
        """``migrating``: ``ragpulse migrate-lake`` is importing a manifest-layout lake, perhaps from this very root,
        which otherwise is refused with the command to run."""
        self.location = LakeUrl.parse(url)
        self._migrating = migrating
        self.url = self.location.shown
        self.tables = tables or TableNames()
        self._storage_options = dict(storage_options or {})
        self._fs, self._root = filesystem(self.location.root, self._storage_options)
        self._local = isinstance(self._fs, LocalFileSystem)
        self._catalog: Catalog | None = None
        self._locks: NamedLocks | None = None
        self._schema_checked = False

    # -- the Warehouse interface ---------------------------------------------------------------------------

    def publish(self, publication: Publication) -> None:
        """Replace the date's scores, step scores and conversation scores of the publication's metrics, its
        quarantine, traces and steps, and append its run and validations: every file written and checked first, then
        one commit per table, ``runs`` last."""
        day = publication.partition_date
        publish_id = uuid.uuid4().hex
        with self._errors(f"publishing dt={day}"), self._date_lock(day) as tables:
            with self._uncommitted() as written:
                sources = {
                    **{key: conform_rows(TABLES[key], getattr(publication, key), day).batches() for key in STREAMED},
                    "quarantine": conform(TABLES["quarantine"], publication.quarantine).to_batches(),
                    "conversation_scores": conform(
                        TABLES["conversation_scores"], publication.conversation_scores
                    ).to_batches(),
                    "validations": conform(TABLES["validations"], publication.validations).to_batches(),
                }
                new = {key: self._write(tables[key], day, rows, written) for key, rows in sources.items()}
                for key in _BY_METRIC:
                    new[key] += self._carry_over(tables[key], day, publication.metrics, written)
                run = conform(TABLES["runs"], publication.run)
                # Stamped under the date's lock, just before the commits: orders the date's publishes by commit.
                now = pa.array([dt.datetime.now(dt.UTC)] * run.num_rows, pa.timestamp("us", tz="UTC"))
                runs = self._write(tables["runs"], day, run.append_column(PUBLISHED_AT, now).to_batches(), written)
            self._commit_all(
                day,
                publish_id,
                [
                    *(_Change(tables[key], new[key], replace=True) for key in _REPLACED),
                    _Change(tables["validations"], new["validations"], replace=False),
                    _Change(tables["runs"], runs, replace=False),
                ],
                written,
            )
        self._expire(tables.values())

    def publish_drift(self, partition_date: dt.date, drift: pa.Table) -> None:
        """Replace the date's drift rows as a whole, in one commit."""
        rows = conform_partition({"drift": drift}, partition_date)
        self.replace_partition(partition_date, rows, action=f"publishing drift of dt={partition_date}")

    def publish_topics(self, partition_date: dt.date, trace_topics: pa.Table, topics: pa.Table | None = None) -> None:
        """Replace the date's trace topics, and with ``topics`` its fitted topics: one commit each, under the date's
        lock."""
        tables = {"trace_topics": trace_topics} if topics is None else {"topics": topics, "trace_topics": trace_topics}
        rows = conform_partition(tables, partition_date)
        self.replace_partition(partition_date, rows, action=f"publishing topics of dt={partition_date}")

    def publish_calibration(self, partition_date: dt.date, calibrations: pa.Table, estimates: pa.Table) -> None:
        """Replace the date's calibrations and estimates: one commit each, under the date's lock."""
        rows = conform_partition({"calibrations": calibrations, "estimates": estimates}, partition_date)
        self.replace_partition(partition_date, rows, action=f"publishing calibration of dt={partition_date}")

    def record_validations(self, validations: pa.Table) -> None:
        """Append validation rows, one commit per date they belong to."""
        self._append("validations", validations, "recording validations")

    def record_alerts(self, alerts: pa.Table) -> None:
        """Append alert ledger rows, one commit per date they belong to."""
        self._append("alerts", alerts, "recording alerts")

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table:
        """The committed rows of the table's current snapshot; Iceberg prunes by partition and column statistics.
        Creates nothing: a lake or table that does not exist yet reads as empty."""
        query = Query.of(table, start=start, end=end, columns=columns, metrics=metrics)
        with self._errors(f"reading {table}", writes=False):
            iceberg = self._existing_table(query.spec.key)
            if iceberg is None:
                return query.empty()
            present = [name for name in query.columns if name in iceberg.schema().column_names]
            rows = iceberg.scan(row_filter=_row_filter(query), selected_fields=tuple(present) or ("partition_date",))
            found = rows.to_arrow()
            return pa.table(
                [found[name] if name in present else pa.nulls(found.num_rows) for name in query.columns],
                names=list(query.columns),
            ).cast(query.schema)

    # -- for readers and the migration from the manifest lake -----------------------------------------------

    def data_files(self, table: str) -> list[str]:
        """URLs of the files of the table's current snapshot: what an engine without an Iceberg reader reads, e.g.
        ``duckdb.sql(f"SELECT * FROM read_parquet({lake.data_files('scores')})")``."""
        iceberg = self._existing_table(table)
        if iceberg is None:
            return []
        return [task.file.file_path for task in iceberg.scan().plan_files()]

    def table(self, table: str) -> Table | None:
        """The pyiceberg table behind ``table`` (``scores``, ``runs``...), or None before the first publish."""
        return self._existing_table(table)

    def replace_partition(self, day: dt.date, rows: dict[str, pa.Table], *, action: str | None = None) -> None:
        """Replace the date's rows of each table in ``rows`` (stored columns, ``published_at`` included) with them:
        the drift publish, and the import of a date from the manifest lake."""
        with self._errors(action or f"replacing dt={day}"), self._date_lock(day) as tables:
            with self._uncommitted() as written:
                changes = []
                for key, table in rows.items():
                    stored = table.select(TABLES[key].schema.names).cast(TABLES[key].schema)
                    changes.append(
                        _Change(tables[key], self._write(tables[key], day, stored.to_batches(), written), True)
                    )
            self._commit_all(day, uuid.uuid4().hex, changes, written)
        self._expire(change.table for change in changes)

    def expire_snapshots(self, *, now: dt.datetime | None = None) -> None:
        """Expire every table's snapshots older than ``retention_days`` before ``now`` and delete the files only
        they named, as each publish does for the tables it touched."""
        tables = [table for key in TABLES if (table := self._existing_table(key)) is not None]
        self._expire(tables, now)

    def check_writable(self) -> None:
        """Reach the catalog, creating nothing, and refuse a lake in the manifest layout: what a publish would find
        first, checked before any work."""
        catalog = self._open_catalog(create=False)
        if catalog is None or self._version(catalog) == 0:
            self._refuse_legacy()

    def legacy_layout(self) -> bool:
        """Whether the root holds a lake in the manifest layout of ragpulse before Iceberg (``_<meta>/``)."""
        self._fs.invalidate_cache()
        return bool(self._fs.exists(f"{self._root}/_{self.tables.meta}/schema.json"))

    # -- writing --------------------------------------------------------------------------------------------

    def _append(self, key: str, rows: pa.Table, action: str) -> None:
        conformed = conform(TABLES[key], rows)
        with self._errors(action):
            for day in sorted(set(conformed["partition_date"].to_pylist())):
                part = conformed.filter(pc.equal(conformed["partition_date"], pa.scalar(day, pa.date32())))
                with self._date_lock(day) as tables:
                    with self._uncommitted() as written:
                        files = self._write(tables[key], day, part.to_batches(), written)
                    self._commit_all(day, uuid.uuid4().hex, [_Change(tables[key], files, replace=False)], written)

    def _write(
        self, table: Table, day: dt.date, batches: Iterable[pa.RecordBatch], written: list[str]
    ) -> list[DataFile]:
        """The rows of ``batches`` in one new data file of ``table`` (none if there are none), each batch checked
        (every stored column) as SQL constraints would. They stream through a Parquet writer into a temporary
        file, in row groups of about ``_ROW_GROUP_BYTES``, carrying the table's field ids; a bad batch or a failing
        source leaves no file."""
        spec = TABLES[self._key_of(table)]
        target = schema_to_pyarrow(table.schema())
        groups = _row_groups(_checked(spec, day, batches, target), target)
        first = next(groups, None)
        if first is None:
            return []
        url = f"{table.location()}/data/partition_date={day.isoformat()}/{uuid.uuid4().hex}.parquet"
        footer: list[pq.FileMetaData] = []

        def write(handle: BinaryIO) -> None:
            with pq.ParquetWriter(handle, target, compression="zstd") as writer:
                for group in itertools.chain([first], groups):
                    writer.write_table(group, row_group_size=group.num_rows)
            footer.append(writer.writer.metadata)

        written.append(url)
        size = self._put_file(url, write)
        return [_data_file(table, url, footer[0], size)]

    def _carry_over(self, scores: Table, day: dt.date, replaced: Sequence[str], written: list[str]) -> list[DataFile]:
        """The date's rows of a table of scores (``_BY_METRIC``) of metrics this publish does not replace, in a new
        file: a date's scores are replaced file by file."""
        present = scores.scan(row_filter=_on(day), selected_fields=("metric",))
        kept = sorted(set(pc.unique(present.to_arrow()["metric"]).to_pylist()) - set(replaced))
        if not kept:
            return []
        rows = scores.scan(row_filter=_all(_on(day), _term(In, "metric", kept))).to_arrow()
        return self._write(scores, day, rows.to_batches(), written)

    def _commit_all(self, day: dt.date, publish_id: str, changes: list[_Change], written: list[str]) -> None:
        """Commit ``changes`` in order. When one fails, the tables committed before it get their previous files
        back, so the date reads as before; the error says whether that worked. Files no commit names are deleted."""
        done: list[tuple[_Change, list[DataFile]]] = []
        for position, change in enumerate(changes):
            # The tables were loaded under the date's lock, and only its holder changes the date's files.
            removed = self._current_files(change.table, day) if change.replace else []
            try:
                # ``removed`` (the date's files, for a replace) out and the new files in.
                self._swap(change.table, removed, change.files, {_PUBLISH_PROPERTY: publish_id})
            except BaseException as exc:
                if self._landed(change, publish_id):
                    _log.warning(
                        "dt=%s: the reply to the %s commit on %s was lost (%s); it is committed",
                        day, self._key_of(change.table), self.url, redacted_line(exc),
                    )  # fmt: skip
                    done.append((change, removed))
                    continue
                uncommitted = {f.file_path for c in changes[position:] for f in c.files}
                self._discard([url for url in written if url in uncommitted])
                if done and not self._restore(done, day):
                    committed = ", ".join(self._key_of(c.table) for c, _ in done)
                    raise WarehouseError(
                        f"publishing dt={day} on {self.url} failed after committing {committed} "
                        f"({redacted_line(exc)}), and restoring them failed too: re-run the date, which replaces every "
                        "table"
                    ) from exc
                raise
            done.append((change, removed))

    @staticmethod
    def _swap(table: Table, out: list[DataFile], into: list[DataFile], properties: dict[str, str]) -> None:
        """One snapshot that takes the files ``out`` out of ``table`` and puts ``into`` in (an append when nothing
        goes out); none when there is nothing to change."""
        if not out and not into:
            return
        with table.transaction() as tx:
            update = tx.update_snapshot(snapshot_properties=properties)
            with update.overwrite() if out else update.fast_append() as snapshot:
                for data_file in out:
                    snapshot.delete_data_file(data_file)
                for data_file in into:
                    snapshot.append_data_file(data_file)

    def _landed(self, change: _Change, publish_id: str) -> bool:
        """Whether a commit of ``publish_id`` is in the table's history."""
        try:
            change.table.refresh()
        except Exception:
            return False
        return any(
            s.summary is not None and s.summary.get(_PUBLISH_PROPERTY) == publish_id for s in change.table.snapshots()
        )

    def _restore(self, done: list[tuple[_Change, list[DataFile]]], day: dt.date) -> bool:
        """Put the files each committed change took out back, and take its own out: the date reads as before."""
        try:
            for change, removed in reversed(done):
                table = change.table
                table.refresh()
                current = {f.file_path: f for f in self._current_files(table, day)}
                ours = [current[f.file_path] for f in change.files if f.file_path in current]
                if not ours and not removed:
                    continue
                self._swap(table, ours, removed, {})
                _log.warning("dt=%s: %s restored to its files before the failed publish", day, self._key_of(table))
        except Exception as exc:
            _log.error(
                "dt=%s: restoring the tables of a failed publish on %s failed: %s", day, self.url, redacted_line(exc)
            )
            return False
        return True

    def _expire(self, tables: Iterable[Table], now: dt.datetime | None = None) -> None:
        """Expire the snapshots of ``tables`` older than the retention (never a table's current one, nor one replaced
        within ``_ORPHAN_GRACE``), then delete the data and manifest files that no remaining snapshot names and that
        are older than ``_ORPHAN_GRACE``: the replaced files of old publishes and the files of publishers that died
        before their commit. Does something once a table has snapshots past the retention, so about once a day per
        table; it never fails a publish."""
        now = now or dt.datetime.now(dt.UTC)
        cutoff = now - self.location.retention
        for table in tables:
            try:
                # Current: loaded under the date's lock and updated by this publish's own commits.
                expired = _expirable(table, cutoff, now - _ORPHAN_GRACE)
                if not expired:
                    continue
                table.maintenance.expire_snapshots().by_ids(expired).commit()
                table.refresh()
                removed = self._remove_unnamed(table, now - _ORPHAN_GRACE)
                _log.info("%s on %s: snapshots before %s expired, %d file(s) deleted",
                          self._key_of(table), self.url, f"{cutoff:%Y-%m-%d %H:%M}", removed)  # fmt: skip
            except Exception as exc:
                _log.warning("expiring old snapshots of %s on %s failed, the next publish retries: %s",
                             self._key_of(table), self.url, redacted_line(exc))  # fmt: skip
        self._release()

    def _remove_unnamed(self, table: Table, before: dt.datetime) -> int:
        """Delete the files under the table's data and metadata folders that no snapshot names, modified before
        ``before``; metadata JSON files are Iceberg's own to delete (``write.metadata.delete-after-commit``)."""
        named: set[str] = set()
        seen_manifests: set[str] = set()
        for snapshot in table.snapshots():
            named.add(snapshot.manifest_list)
            for manifest in snapshot.manifests(table.io):
                if manifest.manifest_path in seen_manifests:
                    continue
                seen_manifests.add(manifest.manifest_path)
                named.add(manifest.manifest_path)
                named.update(entry.data_file.file_path for entry in manifest.fetch_manifest_entry(table.io))
        named_paths = {self._fs._strip_protocol(url) for url in named}
        unnamed = []
        for folder in ("data", "metadata"):
            directory = self._fs._strip_protocol(f"{table.location()}/{folder}")
            self._fs.invalidate_cache(directory)
            if not self._fs.exists(directory):
                continue
            for path, info in self._fs.find(directory, detail=True).items():
                if path in named_paths or path.endswith(".metadata.json") or info.get("type") == "directory":
                    continue
                if _modified(info) < before:
                    unnamed.append(path)
        if unnamed:
            self._fs.rm(unnamed)
        return len(unnamed)

    @staticmethod
    def _current_files(table: Table, day: dt.date) -> list[DataFile]:
        """The data files of the date in the table's current snapshot (its partition, as tables are partitioned by
        date)."""
        return [task.file for task in table.scan(row_filter=_on(day)).plan_files()]

    # -- catalog, schema and locks --------------------------------------------------------------------------

    @contextmanager
    def _date_lock(self, day: dt.date) -> Iterator[dict[str, Table]]:
        """The date's lock held, the schema current, and every table loaded once the lock is held: a publisher of
        the same date that held it before has committed by then."""
        catalog = self._writable_catalog()
        self._ensure_schema(catalog)
        assert self._locks is not None
        with self._locks.hold(self._lock_name(f"dt={day.isoformat()}"), f"dt={day}"):
            yield {key: catalog.load_table((self.location.namespace, getattr(self.tables, key))) for key in TABLES}

    def _writable_catalog(self) -> Catalog:
        if self._locks is None:
            catalog = self._catalog or self._open_catalog(create=True)
            assert isinstance(catalog, SqlCatalog)
            locks = catalog_locks(catalog.engine, self.location.lock_timeout, self.location.shown)
            if not _has_catalog_tables(catalog):
                # Two first publishers must not both create them (SQLAlchemy checks, then creates).
                with locks.hold(self._lock_name("catalog"), "creating the catalog"):
                    catalog.create_tables()
            self._catalog, self._locks = catalog, locks
        assert self._catalog is not None
        return self._catalog

    def _open_catalog(self, *, create: bool) -> Catalog | None:
        """The catalog, its tables not created yet; None when reading (``create`` false) a catalog that has none."""
        properties = {
            "py-io-impl": _FSSPEC_IO,
            "init_catalog_tables": "false",
            # A connection the network dropped is replaced, not reused: the check after a failed commit needs one.
            "pool_pre_ping": "true",
            **_io_properties(self._storage_options),
        }
        url = self.location.sql_catalog
        if url is None:
            # The configuration as it is now: pyiceberg reads its environment variables once, at import.
            configured = Config().get_catalog_config(self.location.catalog) or {}
            catalog = load_catalog(self.location.catalog, **{**configured, **properties})  # type: ignore[arg-type]
            if not isinstance(catalog, SqlCatalog):
                raise ConfigError(
                    f"catalog {self.location.catalog!r} is of type {type(catalog).__name__}: ragpulse serialises the "
                    "publishers of a date with a lock in the catalog's database, so it needs a SQL catalog"
                )
        else:
            if url.get_backend_name() == "sqlite" and url.database:
                if not create and not Path(url.database).exists():
                    return None
                Path(url.database).parent.mkdir(parents=True, exist_ok=True)
            uri = url.render_as_string(hide_password=False)
            catalog = SqlCatalog(_CATALOG_NAME, uri=uri, warehouse=self.location.root, **properties)
        if not create and not _has_catalog_tables(catalog):
            return None
        return catalog

    def _existing_table(self, key: str) -> Table | None:
        if self._catalog is None:
            # Kept once it exists: a reader reads several tables, each through the same catalog.
            self._catalog = self._open_catalog(create=False)
        catalog = self._catalog
        if catalog is None:
            self._refuse_legacy()
            return None
        try:
            return catalog.load_table((self.location.namespace, getattr(self.tables, key)))
        except (NoSuchTableError, NoSuchNamespaceError):
            self._refuse_legacy()
            return None

    def _refuse_legacy(self) -> None:
        if not self._migrating and self.legacy_layout():
            raise WarehouseError(
                f"{self.url} holds a lake in ragpulse's manifest layout, which Iceberg readers cannot read: move it "
                f"into Iceberg tables once with `ragpulse migrate-lake --from {self.location.root} --to '{self.url}'`"
            )

    def _ensure_schema(self, catalog: Catalog) -> None:
        """Every table, created at the current version on a new lake or migrated from an older one, under the
        schema lock: two first publishers must not both create or migrate."""
        if self._schema_checked:
            return
        namespace = self.location.namespace
        names = {key: getattr(self.tables, key) for key in TABLES}
        assert self._locks is not None
        with self._locks.hold(self._lock_name("schema"), "the schema"):
            catalog.create_namespace_if_not_exists(namespace)
            version = self._version(catalog)
            if version == 0:
                self._refuse_legacy()
                for key, name in names.items():
                    self._create_table(catalog, key, name)
            elif version != SCHEMA_VERSION:
                for migration in pending_migrations(version):
                    if isinstance(migration, AddTable):
                        self._create_table(catalog, migration.table, names[migration.table])
                    elif isinstance(migration, AddColumn):
                        table = catalog.load_table((namespace, names[migration.table]))
                        if migration.column not in table.schema().column_names:
                            with table.update_schema() as update:
                                update.union_by_name(pa.schema([migration.field]))
                    # Nothing to do for views, JSON or checks: the lake has no views and checks rows in Python.
                    _log.info("migrated warehouse %s to schema version %d", self.url, migration.version)
            if version != SCHEMA_VERSION:
                catalog.update_namespace_properties(
                    namespace, updates={schema_version_property(self.tables): str(SCHEMA_VERSION)}
                )
        self._schema_checked = True

    def _version(self, catalog: Catalog) -> int:
        """The schema version of these tables in the namespace; 0 before the first publish."""
        try:
            properties = catalog.load_namespace_properties(self.location.namespace)
        except NoSuchNamespaceError:
            return 0
        return int(properties.get(schema_version_property(self.tables), 0))

    def _create_table(self, catalog: Catalog, key: str, name: str) -> None:
        identifier = (self.location.namespace, name)
        if catalog.table_exists(identifier):
            return
        location = f"{self.location.root}/{self.location.namespace}/{name}"
        with (
            catalog.create_table_transaction(
                identifier, schema=TABLES[key].schema, location=location, properties=_TABLE_PROPERTIES
            ) as tx,
            tx.update_spec() as spec,
        ):
            spec.add_identity("partition_date")

    def _lock_name(self, what: str) -> str:
        """The name of a lock of these tables (``dt=<date>``, ``schema``, ``catalog``): one per namespace and set."""
        return f"{self.location.namespace}.{self.tables.meta}/{what}"

    def _key_of(self, table: Table) -> str:
        name = table.name()[-1]
        return next(key for key in TABLES if getattr(self.tables, key) == name)

    # -- storage --------------------------------------------------------------------------------------------

    def _put_file(self, url: str, write: Callable[[BinaryIO], object]) -> int:
        """Put the object that ``write`` writes, whole or not at all, never holding it in memory: written to a
        local temporary file first, then uploaded (s3fs sends a large one in parts) or renamed into place. Returns
        its size in bytes."""
        path = self._fs._strip_protocol(url)
        if self._local:
            os.makedirs(posixpath.dirname(path), exist_ok=True)
            temp = f"{posixpath.dirname(path)}/.{uuid.uuid4().hex}.tmp"
            try:
                with open(temp, "wb") as handle:
                    write(handle)
                size = os.path.getsize(temp)
                os.replace(temp, path)
            finally:
                with suppress(FileNotFoundError):
                    os.unlink(temp)
            return size
        with tempfile.TemporaryDirectory(prefix="ragpulse-lake-") as directory:
            temp = f"{directory}/{posixpath.basename(path)}"
            with open(temp, "wb") as handle:
                write(handle)
            self._fs.put_file(temp, path)
            return os.path.getsize(temp)

    @contextmanager
    def _uncommitted(self) -> Iterator[list[str]]:
        """A list for the URLs of the files written before their commit, which are deleted if writing fails: a bad
        row or a failing source leaves nothing behind. ``_commit_all`` then takes over the list."""
        written: list[str] = []
        try:
            yield written
        except BaseException:
            self._discard(written)
            raise

    def _discard(self, urls: list[str]) -> None:
        """Delete files no commit names, best effort: the store may be what failed, and its error, not this one, is
        the publish's."""
        if not urls:
            return
        try:
            with suppress(FileNotFoundError):
                self._fs.rm([self._fs._strip_protocol(url) for url in urls])
        except Exception as exc:
            _log.warning("%d uncommitted file(s) may be left on %s (deleting them failed: %s); snapshot expiry "
                         "deletes them later", len(urls), self.url, redacted_line(exc))  # fmt: skip

    @contextmanager
    def _errors(self, action: str, *, writes: bool = True) -> Iterator[None]:
        """A failure before the first commit, or one whose commits were restored, leaves the previous rows."""
        try:
            yield
        except RagpulseError:
            raise
        except Exception as exc:
            kept = ", previous rows kept" if writes else ""
            raise WarehouseError(f"{action} on {self.url} failed{kept}: {redacted_line(exc)}") from exc
        finally:
            self._release()

    def _release(self) -> None:
        """No idle connection to the catalog's database outlives a call (a served flow opens lakes every day)."""
        if isinstance(self._catalog, SqlCatalog):
            self._catalog.engine.dispose()


@dataclass(frozen=True)
class _Change:
    """One table's part of a publish: new files, replacing the date's files (``replace``) or added to them."""

    table: Table
    files: list[DataFile]
    replace: bool


def _data_file(table: Table, url: str, footer: pq.FileMetaData, size: int) -> DataFile:
    """The manifest entry of a data file just written, from its writer's footer: column statistics and the partition
    as Iceberg's own writer records them, without reading the file back."""
    schema = table.schema()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, table.metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=url,
        file_format=FileFormat.PARQUET,
        partition=statistics.partition(table.metadata.spec(), schema),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=table.metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


def _expirable(table: Table, cutoff: dt.datetime, superseded_before: dt.datetime) -> list[int]:
    """Snapshots made before ``cutoff`` that stopped being current before ``superseded_before``. The second bound
    keeps the state a publish in flight may restore (the one its first commit just replaced, however old) and the
    files only it names."""
    log = table.metadata.snapshot_log
    superseded = {entry.snapshot_id: after.timestamp_ms for entry, after in itertools.pairwise(log)}
    current = table.metadata.current_snapshot_id
    return [
        snapshot.snapshot_id
        for snapshot in table.snapshots()
        if snapshot.snapshot_id != current
        and snapshot.timestamp_ms < cutoff.timestamp() * 1000
        and superseded.get(snapshot.snapshot_id, snapshot.timestamp_ms) < superseded_before.timestamp() * 1000
    ]


def _has_catalog_tables(catalog: SqlCatalog) -> bool:
    inspector = sa.inspect(catalog.engine)
    return all(inspector.has_table(name) for name in ("iceberg_tables", "iceberg_namespace_properties"))


def schema_version_property(tables: TableNames) -> str:
    """The namespace property that holds the schema version of the tables named by ``tables`` (a namespace can hold
    several sets, by prefix)."""
    return f"ragpulse.schema-version.{tables.meta}"


def _io_properties(storage_options: dict[str, Any]) -> dict[str, str]:
    """pyiceberg's FileIO properties for the fsspec options ragpulse takes; credentials stay in the environment."""
    properties = {}
    endpoint = storage_options.get("endpoint_url") or storage_options.get("client_kwargs", {}).get("endpoint_url")
    if endpoint:
        properties["s3.endpoint"] = str(endpoint)
    return properties


def _row_filter(query: Query) -> BooleanExpression:
    conditions: list[BooleanExpression] = []
    if query.start is not None:
        conditions.append(_term(GreaterThanOrEqual, "partition_date", query.start.isoformat()))
    if query.end is not None:
        conditions.append(_term(LessThanOrEqual, "partition_date", query.end.isoformat()))
    if query.metrics is not None:
        conditions.append(_term(In, "metric", list(query.metrics)) if query.metrics else AlwaysFalse())
    return _all(*conditions)


def _on(day: dt.date) -> BooleanExpression:
    """The rows of one date: in a table partitioned by date, exactly its partition's files."""
    return _term(EqualTo, "partition_date", day.isoformat())


def _term(kind: type[BooleanExpression], column: str, value: object) -> BooleanExpression:
    """``kind(column, value)``: pyiceberg's documented positional form, which its pydantic signatures hide."""
    return kind(column, value)  # type: ignore[call-arg]


def _all(*conditions: BooleanExpression) -> BooleanExpression:
    expression: BooleanExpression = AlwaysTrue()
    for condition in conditions:
        expression = condition if isinstance(expression, AlwaysTrue) else And(expression, condition)
    return expression


def _checked(
    spec: TableSpec, day: dt.date, batches: Iterable[pa.RecordBatch], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The non-empty ``batches`` in the table's column order and types, each refused if it breaks a constraint
    (ValueError) or belongs to another partition (``check_partition``'s WarehouseError)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        stored = batch.cast(spec.schema) if batch.schema != spec.schema else batch
        problem = violation(spec, stored)
        if problem:
            raise ValueError(problem)
        check_partition(spec, stored, day)
        yield pa.RecordBatch.from_arrays(
            [stored.column(name).cast(field.type) for name, field in zip(target.names, target, strict=True)],
            schema=target,
        )


def _row_groups(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.Table]:
    """``batches`` gathered into tables of about ``_ROW_GROUP_BYTES`` (a batch larger than that on its own)."""
    group: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if group and size + batch.nbytes > _ROW_GROUP_BYTES:
            yield pa.Table.from_batches(group, schema=schema)
            group, size = [], 0
        group.append(batch)
        size += batch.nbytes
    if group:
        yield pa.Table.from_batches(group, schema=schema)


def _modified(info: dict[str, Any]) -> dt.datetime:
    """A listing entry's modification time (S3's LastModified, a local file's mtime), in UTC."""
    modified = info.get("LastModified", info.get("mtime"))
    if isinstance(modified, dt.datetime):
        return modified if modified.tzinfo else modified.replace(tzinfo=dt.UTC)
    return dt.datetime.fromtimestamp(float(modified or 0), dt.UTC)
