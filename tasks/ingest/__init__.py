"""Reading a day of traces: listing files, staging validated records as Parquet batches, quarantine,
the canonical record format and the tracing tools' adapters."""

__all__: list[str] = []
