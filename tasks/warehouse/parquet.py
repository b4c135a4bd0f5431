"""A Hive-partitioned Parquet lake on S3 (or an S3-compatible store) or a local directory.

Layout under the root URL, with the default table names::

    scores/dt=2026-11-01/<run>-<random>.parquet       the partition's live files, one per table and publish
    quarantine/dt=2026-11-01/<run>-<random>.parquet
    traces/dt=2026-11-01/<run>-<random>.parquet
    runs/dt=2026-11-01/<run>-<random>-<n>.parquet     appended, one per publish
    validations/dt=2026-11-01/<run>-<random>.parquet  appended
    drift/dt=2026-11-01/<run>-<random>.parquet        replaced as a whole by publish_drift
    alerts/dt=2026-11-01/<run>-<random>.parquet       appended
    _ragpulse_schema/schema.json                      {"version": 4}
    _ragpulse_schema/commits/dt=2026-11-01/00000000000000000007.json   the partition's manifests

Commit protocol: a publish writes its data files under new names, then commits by *creating* the partition's
next manifest (generation g+1) with a create-if-absent write: S3's ``If-None-Match: *`` or ``link(2)`` on a
local disk. The manifest names every live file of the partition in every table and the newest generation is
the partition's state; creating one object is atomic, so a reader that follows the newest manifest sees the
whole previous partition or the whole new one. When g+1 already exists another publisher won: this one
re-reads the manifest, redoes what depends on it (metrics it keeps, the appended runs list) and tries g+2,
so concurrent publishers of one partition serialise without a lock service and exactly one replacement ends
up live. After the commit, the files the new manifest no longer names are deleted; older manifests and files
no manifest names (a crashed publisher's) go once older than ``orphan_grace``, which must exceed the longest
publish: younger ones may belong to a publish in flight. A publish that fails deletes its files, unless the
manifest write itself failed: that PUT may still land. Its generation is then read back: our manifest there
means the commit happened (the reply was lost, or a client retry of the PUT found it); another one means it
cannot land any more; an empty slot is fenced by creating that generation with the unchanged previous state,
after which it cannot land either. Only when that read-back fails too are the files left to the sweep.

Every read lists afresh: another process may have republished since this one last listed (fsspec caches
listings per filesystem instance, and a file absent from a cached listing reads as missing).

Readers that glob instead (``read_parquet('scores/*/*.parquet', hive_partitioning=true)``, Athena, Spark)
see no manifest: while a publish runs, from its first upload to its deletions, they can see the old and the
new files of a partition together, and a crashed publisher's files until a later publish sweeps them.
``ParquetLake.live_files`` lists exactly the committed files. Hive-style readers skip ``_`` folders.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import os
import posixpath
import random
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.errors import ConfigError, WarehouseError
from ragpulse.tasks.core.storage import filesystem, redact_url
from ragpulse.tasks.warehouse import Publication, TableNames
from ragpulse.tasks.warehouse._schema import (
    PUBLISHED_AT,
    SCHEMA_VERSION,
    TABLES,
    AddColumn,
    Query,
    TableSpec,
    check_partition,
    conform,
    conform_rows,
    pending_migrations,
    violation,
)

__all__ = ["ParquetLake"]

_log = logging.getLogger(__name__)

_GENERATION = re.compile(r"^(\d{20})\.json$")
_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")
_MAX_ATTEMPTS = 50
# Arrow bytes gathered into one row group of a data file: batches of a few thousand rows make row groups too small
# to read well, a whole table would be the whole partition in memory.
_ROW_GROUP_BYTES = 64 * 2**20
# A read lists a partition's files, then a commit may delete them: list again, this many times at most.
_READ_ATTEMPTS = 5

# (files per table, metrics covered, files written for this attempt only)
_Change = tuple[dict[str, list[str]], list[str], list[str]]


@dataclass(frozen=True)
class _Manifest:
    """A partition's state: its live files (paths relative to the root) per table, and the metrics they hold."""

    generation: int
    files: dict[str, list[str]]
    metrics: list[str]

    def live(self) -> set[str]:
        return {path for paths in self.files.values() for path in paths}

    def to_json(self, day: dt.date) -> bytes:
        return json.dumps(
            {
                "format": 1,
                "partition_date": day.isoformat(),
                "generation": self.generation,
                "committed_at": dt.datetime.now(dt.UTC).isoformat(),
                "metrics": self.metrics,
                "files": self.files,
            },
            indent=1,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> _Manifest:
        doc = json.loads(data)
        files = {key: list(doc["files"].get(key, [])) for key in TABLES}
        return cls(int(doc["generation"]), files, list(doc["metrics"]))


class ParquetLake:
    """``s3://bucket/prefix``, ``file:///directory`` or a plain directory path; credentials from the environment."""

    def __init__(
        self,
        url: str,
        *,
        tables: TableNames | None = None,
        orphan_grace: dt.timedelta = dt.timedelta(hours=1),
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.url = redact_url(url)
        self.tables = tables or TableNames()
        self.orphan_grace = orphan_grace
        self._fs, self._root = filesystem(url, storage_options)
        self._local = isinstance(self._fs, LocalFileSystem)
        if not self._local and "s3" not in self._fs.protocol:
            # Commits need an atomic create-if-absent; other stores can be added once theirs is verified.
            raise ConfigError(f"warehouse URL {self.url!r}: a Parquet lake lives on s3:// or a local directory")
        self._meta = f"_{self.tables.meta}"
        self._schema_checked = False

    def publish(self, publication: Publication) -> None:
        """Write the partition's new files, commit them with its next manifest, then delete what they replace."""
        day = publication.partition_date
        tx = _transaction_id(publication.run)
        written: list[str] = []
        with self._errors(f"publishing dt={day}"):
            self._ensure_schema()
            try:
                # Scores and traces stream from their row sources into their files, a batch at a time.
                scores, quarantine, traces, validations = (
                    self._write(key, day, tx, rows, written)
                    for key, rows in (
                        ("scores", conform_rows(TABLES["scores"], publication.scores, day).batches()),
                        ("quarantine", conform(TABLES["quarantine"], publication.quarantine).to_batches()),
                        ("traces", conform_rows(TABLES["traces"], publication.traces, day).batches()),
                        ("validations", conform(TABLES["validations"], publication.validations).to_batches()),
                    )
                )
                run = conform(TABLES["runs"], publication.run)

                def change(base: _Manifest, attempt: int) -> _Change:
                    kept = [m for m in base.metrics if m not in publication.metrics]
                    # Stamped per attempt: a publisher that lost a race commits, and so publishes, later.
                    now = pa.array([dt.datetime.now(dt.UTC)] * run.num_rows, pa.timestamp("us", tz="UTC"))
                    stamped = run.append_column(PUBLISHED_AT, now).to_batches()
                    runs = self._write("runs", day, f"{tx}-{attempt}", stamped, written)
                    kept_scores = self._carry_over(base, day, kept, f"{tx}-kept{attempt}", written)
                    files = {
                        **base.files,
                        "scores": scores + kept_scores,
                        "quarantine": quarantine,
                        "traces": traces,
                        "runs": base.files["runs"] + runs,
                        "validations": base.files["validations"] + validations,
                    }
                    return files, sorted({*publication.metrics, *kept}), runs + kept_scores

                replaced = self._commit(day, change, written)
            except BaseException:
                self._discard(written)
                raise
        self._clean_up(day, replaced)

    def record_validations(self, validations: pa.Table) -> None:
        """Append validation rows, one commit per partition they belong to."""
        self._append("validations", validations, "recording validations")

    def record_alerts(self, alerts: pa.Table) -> None:
        """Append alert ledger rows, one commit per partition they belong to."""
        self._append("alerts", alerts, "recording alerts")

    def publish_drift(self, partition_date: dt.date, drift: pa.Table) -> None:
        """Replace the partition's drift files with one new file, in one manifest commit."""
        rows = conform(TABLES["drift"], drift)
        check_partition(TABLES["drift"], rows, partition_date)
        written: list[str] = []
        with self._errors(f"publishing drift of dt={partition_date}"):
            self._ensure_schema()
            try:
                new = self._write("drift", partition_date, _transaction_id(rows), rows.to_batches(), written)

                def change(base: _Manifest, _attempt: int) -> _Change:
                    return {**base.files, "drift": new}, base.metrics, []

                replaced = self._commit(partition_date, change, written)
            except BaseException:
                self._discard(written)
                raise
        self._clean_up(partition_date, replaced)

    def read(
        self,
        table: str,
        *,
        start: dt.date | None = None,
        end: dt.date | None = None,
        columns: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> pa.Table:
        """The committed rows: only the manifests of partitions in range are read, and the filter is pushed into
        the Parquet reader. Creates nothing, so a lake that does not exist yet reads as empty."""
        query = Query.of(table, start=start, end=end, columns=columns, metrics=metrics)
        with self._errors(f"reading {table}", writes=False):
            for _ in range(_READ_ATTEMPTS - 1):
                # A commit replaced files we had listed: read the new state.
                with suppress(FileNotFoundError):
                    return self._read(query)
            return self._read(query)

    def _read(self, query: Query) -> pa.Table:
        # Each attempt: the listings cached by an earlier publish or read may predate another process's commit.
        self._fs.invalidate_cache()
        paths = [
            self._abs(path)
            for day in self.partitions()
            if query.covers(day)
            for path in self._manifest(day).files[query.spec.key]
        ]
        if not paths:
            return query.empty()
        rows = pq.read_table(
            paths,
            filesystem=self._fs,
            schema=query.spec.schema,
            columns=list(query.columns),
            filters=query.filter(),
            partitioning=None,
        )
        return rows.cast(query.schema)

    def _append(self, key: str, table: pa.Table, action: str) -> None:
        """Append rows to ``key``, one commit per partition they belong to."""
        rows = conform(TABLES[key], table)
        with self._errors(action):
            self._ensure_schema()
            for day in sorted(set(rows["partition_date"].to_pylist())):
                written: list[str] = []
                try:
                    part = rows.filter(pc.equal(rows["partition_date"], day))
                    new = self._write(key, day, _transaction_id(part), part.to_batches(), written)

                    def change(base: _Manifest, _attempt: int, new: list[str] = new) -> _Change:
                        return {**base.files, key: base.files[key] + new}, base.metrics, []

                    replaced = self._commit(day, change, written)
                except BaseException:
                    self._discard(written)
                    raise
                self._clean_up(day, replaced)

    def live_files(self, table: str) -> list[str]:
        """URLs of the committed files of ``table`` (``scores``, ``runs``...): what a consistent reader reads, e.g.
        ``duckdb.sql(f"SELECT * FROM read_parquet({lake.live_files('scores')}, hive_partitioning=true)")``.
        """
        return [self._url(path) for day in self.partitions() for path in self._manifest(day).files[table]]

    def partitions(self) -> list[dt.date]:
        """Every partition that has a manifest, sorted."""
        names = [posixpath.basename(e["name"].rstrip("/")) for e in self._ls(f"{self._meta}/commits")]
        return sorted(dt.date.fromisoformat(m[1]) for name in names if (m := _PARTITION.match(name)))

    # -- data files ---------------------------------------------------------------------------------------

    def _write(
        self, key: str, day: dt.date, name: str, batches: Iterable[pa.RecordBatch], written: list[str]
    ) -> list[str]:
        """Write the rows of ``batches`` into one new file (none if there are none), each batch checked (every
        stored column) as SQL constraints would before it is written. They stream through a Parquet writer into a
        temporary file, in row groups of about ``_ROW_GROUP_BYTES``, so memory holds one row group; a bad batch or
        a failing source leaves no file."""
        spec = TABLES[key]
        groups = _row_groups(_checked(key, spec, day, batches), spec.schema)
        first = next(groups, None)
        if first is None:
            return []
        path = f"{getattr(self.tables, key)}/dt={day.isoformat()}/{name}.parquet"

        def write(handle: BinaryIO) -> None:
            with pq.ParquetWriter(handle, spec.schema) as writer:
                for group in itertools.chain([first], groups):
                    writer.write_table(group, row_group_size=group.num_rows)

        written.append(path)
        self._put_file(path, write)
        return [path]

    def _carry_over(
        self, base: _Manifest, day: dt.date, metrics: list[str], name: str, written: list[str]
    ) -> list[str]:
        """The live score rows of metrics this publish leaves alone, streamed into one new file."""
        if not metrics or not base.files["scores"]:
            return []
        schema = TABLES["scores"].schema
        live = [self._abs(path) for path in base.files["scores"]]
        kept = ds.dataset(live, schema=schema, format="parquet", filesystem=self._fs)
        return self._write("scores", day, name, kept.to_batches(filter=pc.field("metric").isin(metrics)), written)

    # -- manifests ----------------------------------------------------------------------------------------

    def _commit(self, day: dt.date, change: Callable[[_Manifest, int], _Change], written: list[str]) -> list[str]:
        """Create the next manifest from the newest one, retrying on conflict; returns the files it replaced."""
        for attempt in range(_MAX_ATTEMPTS):
            base = self._manifest(day)
            files, metrics, own = change(base, attempt)
            manifest = _Manifest(base.generation + 1, files, metrics)
            path, data = self._manifest_path(day, manifest.generation), manifest.to_json(day)
            try:
                # Taken by this very manifest: a client retry of a PUT whose reply was lost.
                created = self._create(path, data) or self._read_back(path) == data
            except Exception as exc:
                committed = self._resolve_commit(day, manifest, data, base)
                if committed is None:
                    # The PUT may still land: keep the files it names for the orphan sweep.
                    written.clear()
                    raise WarehouseError(
                        f"publishing dt={day} on {self.url}: the manifest write failed "
                        f"({_one_line(exc)}) and the store cannot tell yet whether it "
                        "committed; re-run the date once the store answers (a re-run replaces its rows either way)"
                    ) from exc
                if not committed:
                    raise WarehouseError(
                        f"publishing dt={day} on {self.url} failed, previous rows kept: the manifest write failed "
                        f"({_one_line(exc)}) and it did not commit; re-run the date"
                    ) from exc
                _log.warning(
                    "dt=%s: the reply to the manifest write on %s was lost (%s); it is committed",
                    day, self.url, _one_line(exc),
                )  # fmt: skip
                created = True
            if created:
                return sorted(base.live() - manifest.live())
            _log.debug("dt=%s: generation %d taken by another publisher, retrying", day, manifest.generation)
            self._remove(own)
            written[:] = [p for p in written if p not in own]
            time.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        raise WarehouseError(f"dt={day}: {_MAX_ATTEMPTS} other publishers committed first; try again")

    def _read_back(self, path: str) -> bytes | None:
        """The object at ``path`` as stored now, or None."""
        self._fs.invalidate_cache(self._abs(path))
        try:
            return bytes(self._fs.cat_file(self._abs(path)))
        except FileNotFoundError:
            return None

    def _resolve_commit(self, day: dt.date, manifest: _Manifest, data: bytes, base: _Manifest) -> bool | None:
        """Whether the manifest write that failed on our side committed: True if ours holds its generation, False
        if it provably cannot land any more (another manifest holds it, or the fence we put in the empty slot:
        the previous state unchanged), None if the store cannot tell now (the PUT may still land)."""
        path = self._manifest_path(day, manifest.generation)
        try:
            stored = self._read_back(path)
            if stored is None:
                fence = _Manifest(manifest.generation, base.files, base.metrics).to_json(day)
                stored = fence if self._create(path, fence) else self._read_back(path)
        except Exception:
            return None
        return stored == data

    def _manifest(self, day: dt.date) -> _Manifest:
        generations = self._generations(day)
        if not generations:
            return _Manifest(0, {key: [] for key in TABLES}, [])
        return _Manifest.from_json(self._fs.cat_file(self._abs(self._manifest_path(day, generations[-1][0]))))

    def _generations(self, day: dt.date) -> list[tuple[int, dict[str, Any]]]:
        """The partition's manifests, oldest first, with their listing entries."""
        entries = self._ls(f"{self._meta}/commits/dt={day.isoformat()}")
        found = [(m, e) for e in entries if (m := _GENERATION.match(posixpath.basename(e["name"])))]
        return sorted(((int(m[1]), entry) for m, entry in found), key=lambda item: item[0])

    def _manifest_path(self, day: dt.date, generation: int) -> str:
        return f"{self._meta}/commits/dt={day.isoformat()}/{generation:020d}.json"

    def _clean_up(self, day: dt.date, replaced: list[str]) -> None:
        """After a commit: drop replaced files, then manifests and unnamed files older than ``orphan_grace``.

        The grace protects a publish in flight: its files are not named yet, and had its base manifest gone, it
        could create that generation again. Clean-up never fails a committed publish; the next one retries it.
        """
        try:
            self._remove(replaced)
            grace = self.orphan_grace.total_seconds()
            generations = self._generations(day)
            self._remove([self._manifest_path(day, g) for g, entry in generations[:-1] if _age_seconds(entry) >= grace])
            live = self._manifest(day).live()
            orphans = [
                path
                for key in TABLES
                for entry in self._ls(f"{getattr(self.tables, key)}/dt={day.isoformat()}")
                if entry.get("type") == "file"
                and (path := self._relative(entry["name"])) not in live
                and _age_seconds(entry) >= grace
            ]
            if orphans:
                _log.info("dt=%s: removed %d orphaned file(s) from %s", day, len(orphans), self.url)
                self._remove(orphans)
        except Exception as exc:
            _log.warning(
                "dt=%s: clean-up on %s failed, next publish retries it: %s", day, self.url, redact_url(str(exc))
            )

    # -- schema -------------------------------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        """Create a new lake's schema file, proving the store honours create-if-absent; migrate an older lake."""
        # Cached listings and object versions may predate another process's publish.
        self._fs.invalidate_cache()
        if self._schema_checked:
            return
        path = f"{self._meta}/schema.json"
        current = json.dumps({"version": SCHEMA_VERSION}).encode()
        try:
            version = int(json.loads(self._fs.cat_file(self._abs(path)))["version"])
        except FileNotFoundError:
            if self._create(path, current) and self._create(path, current):
                raise ConfigError(
                    f"the store behind {self.url} ignores conditional writes (If-None-Match), which commits "
                    "rely on; use AWS S3, MinIO or a local directory"
                ) from None
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            for migration in pending_migrations(version):
                # A new table needs nothing: manifests without it list no files for it.
                if isinstance(migration, AddColumn):
                    for day in self.partitions():
                        self._migrate(day, migration)
                _log.info("migrated warehouse %s to schema version %d", self.url, migration.version)
            self._put(path, current)
        self._schema_checked = True

    def _migrate(self, day: dt.date, migration: AddColumn) -> None:
        """Rewrite the partition's live files that lack the new column, NULL in every existing row."""
        spec = TABLES[migration.table]
        written: list[str] = []

        def change(base: _Manifest, attempt: int) -> _Change:
            files, own = dict(base.files), []
            # A partition committed before the table existed lists none of its files.
            for i, path in enumerate(base.files.get(migration.table, [])):
                with self._fs.open(self._abs(path), "rb") as handle:
                    if migration.column in pq.read_schema(handle).names:
                        continue
                old = pq.read_table(self._abs(path), filesystem=self._fs)
                upgraded = pa.table(
                    [
                        old[f.name] if f.name in old.column_names else pa.nulls(old.num_rows, f.type)
                        for f in spec.schema
                    ],
                    schema=spec.schema,
                )
                stem = posixpath.splitext(posixpath.basename(path))[0]
                name = f"{stem}-v{migration.version}-{attempt}"
                own += self._write(migration.table, day, name, upgraded.to_batches(), written)
                files[migration.table] = [*files[migration.table][:i], own[-1], *files[migration.table][i + 1 :]]
            return files, base.metrics, own

        try:
            replaced = self._commit(day, change, written)
        except BaseException:
            self._discard(written)
            raise
        self._clean_up(day, replaced)

    # -- storage ------------------------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        return f"{self._root}/{path}"

    def _relative(self, name: str) -> str:
        return name.removeprefix(f"{self._root}/")

    def _url(self, path: str) -> str:
        return self._abs(path) if self._local else self._fs.unstrip_protocol(self._abs(path))

    def _ls(self, path: str) -> list[dict[str, Any]]:
        directory = self._abs(path)
        self._fs.invalidate_cache(directory)
        try:
            entries: list[dict[str, Any]] = self._fs.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        return entries

    def _put(self, path: str, data: bytes) -> None:
        """Replace an object whole: S3 PUTs are atomic; locally a temporary file is renamed over it."""
        if not self._local:
            self._fs.pipe_file(self._abs(path), data)
            return
        with self._local_temp(path, lambda handle: handle.write(data)) as temp:
            os.replace(temp, self._abs(path))

    def _put_file(self, path: str, write: Callable[[BinaryIO], object]) -> None:
        """Put the object that ``write`` writes, whole or not at all, never holding it in memory: written to a
        local temporary file first, then uploaded (s3fs sends a large one in parts) or renamed into place."""
        if self._local:
            with self._local_temp(path, write) as temp:
                os.replace(temp, self._abs(path))
            return
        with tempfile.TemporaryDirectory(prefix="ragpulse-lake-") as directory:
            temp = f"{directory}/{posixpath.basename(path)}"
            with open(temp, "wb") as handle:
                write(handle)
            self._fs.put_file(temp, self._abs(path))

    def _create(self, path: str, data: bytes) -> bool:
        """Create an object only if absent, atomically and whole; False if it exists."""
        if not self._local:
            try:
                self._fs.pipe_file(self._abs(path), data, mode="create")
            except FileExistsError:
                return False
            return True
        with self._local_temp(path, lambda handle: handle.write(data)) as temp:
            try:
                os.link(temp, self._abs(path))
            except FileExistsError:
                return False
            return True

    @contextmanager
    def _local_temp(self, path: str, write: Callable[[BinaryIO], object]) -> Iterator[str]:
        """A durable temporary file next to ``path``, written by ``write``; dot-named, so globbing readers skip
        it."""
        directory = posixpath.dirname(self._abs(path))
        os.makedirs(directory, exist_ok=True)
        temp = f"{directory}/.{uuid.uuid4().hex}.tmp"
        try:
            with open(temp, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            yield temp
        finally:
            with suppress(FileNotFoundError):
                os.unlink(temp)

    def _remove(self, paths: list[str]) -> None:
        if paths:
            with suppress(FileNotFoundError):
                self._fs.rm([self._abs(p) for p in paths])

    def _discard(self, paths: list[str]) -> None:
        """Delete a failed publish's files, best effort: the store may be what failed, and its error, not this
        one, is the publish's; what stays is swept as orphans later."""
        try:
            self._remove(paths)
        except Exception as exc:
            _log.warning(
                "%d file(s) of a failed publish left on %s for the orphan sweep: %s",
                len(paths),
                self.url,
                _one_line(exc),
            )

    @contextmanager
    def _errors(self, action: str, *, writes: bool = True) -> Iterator[None]:
        """Any failure before the commit leaves the previous manifest, hence the previous rows, in place."""
        try:
            yield
        except RagpulseError:
            raise
        except Exception as exc:
            detail = _one_line(exc)
            kept = ", previous rows kept" if writes else ""
            raise WarehouseError(f"{action} on {self.url} failed{kept}: {detail}") from exc


def _one_line(exc: BaseException) -> str:
    """The client's own words, redacted, on one line."""
    return " ".join(redact_url(str(exc) or type(exc).__name__).split())


def _checked(key: str, spec: TableSpec, day: dt.date, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The non-empty ``batches`` cast to the stored schema, each refused (ValueError) if it breaks a constraint or
    belongs to another partition."""
    for batch in batches:
        if not batch.num_rows:
            continue
        stored = batch.cast(spec.schema)
        problem = violation(spec, stored)
        if problem is None and not pc.all(pc.equal(stored["partition_date"], pa.scalar(day, pa.date32()))).as_py():
            problem = f"{key} rows of another partition than dt={day}"
        if problem:
            raise ValueError(problem)
        yield stored


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


def _transaction_id(rows: pa.Table) -> str:
    """The run id (made path-safe) and a random suffix: every attempt writes names nobody else uses."""
    run_id = rows["run_id"][0].as_py() if rows.num_rows and "run_id" in rows.column_names else "run"
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', str(run_id))[:64]}-{uuid.uuid4().hex[:12]}"


def _age_seconds(entry: dict[str, Any]) -> float:
    modified = entry.get("LastModified", entry.get("mtime"))
    if isinstance(modified, dt.datetime):
        return time.time() - modified.timestamp()
    return time.time() - float(modified) if modified is not None else 0.0
