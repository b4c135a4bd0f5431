"""Rows handed to a warehouse a batch at a time, so that publishing a day never holds the whole day in memory."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

__all__ = ["RowSource"]


@dataclass(frozen=True, eq=False)
class RowSource:
    """The rows of one table, produced on demand as record batches of ``schema``.

    ``batches()`` can be called again (a publish that retries reads the rows again); each call yields the same
    rows in the same order. ``num_rows`` is known before any batch is produced, for logs and row-count checks:
    ``size`` gives it, or a function that counts the rows when first asked (the steps of the staged traces are
    counted from their files, which a publication built but not yet published should not read).
    """

    schema: pa.Schema
    size: int | Callable[[], int]
    produce: Callable[[], Iterable[pa.RecordBatch]]
    compact: Callable[[Sequence[str]], pa.Table] | None = None
    """Where the producer can give whole columns cheaply (see ``columns``)."""

    @functools.cached_property
    def num_rows(self) -> int:
        return self.size if isinstance(self.size, int) else self.size()

    @classmethod
    def of(cls, table: pa.Table) -> RowSource:
        """A table already in memory (small tables, tests)."""
        return cls(table.schema, table.num_rows, table.to_batches)

    @classmethod
    def empty(cls, schema: pa.Schema) -> RowSource:
        return cls(schema, 0, list)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, batch by batch, each cast to ``schema`` (column order included)."""
        for batch in self.produce():
            if batch.num_rows:
                yield batch if batch.schema == self.schema else _cast(batch, self.schema)

    def reader(self) -> pa.RecordBatchReader:
        """A one-pass stream of the rows: what DuckDB and pyarrow's writers consume without materialising them."""
        return pa.RecordBatchReader.from_batches(self.schema, self.batches())

    def columns(self, names: Sequence[str]) -> pa.Table:
        """The ``names`` columns of every row at once, text columns dictionary-encoded (rows in any order): for a
        check that needs whole columns, such as a suite. A producer that knows the values' codes (``compact``)
        gives them without building the rows; otherwise they are read a batch at a time."""
        if self.compact is not None:
            return self.compact(names)
        table = self.to_table().select(list(names))
        return pa.table(
            {
                name: column.dictionary_encode() if pa.types.is_string(column.type) else column
                for name, column in zip(table.column_names, table.columns, strict=True)
            }
        )

    def to_table(self) -> pa.Table:
        """All rows in memory: for small tables and tests only."""
        return pa.Table.from_batches(list(self.batches()), schema=self.schema)


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([batch.column(name) for name in schema.names], names=schema.names).cast(schema)
