"""Prefect tasks and the libraries they call, one concern per sub-package (room):

- config (a module): the run configuration, one pydantic model in groups, that flows and rooms take;
- core: run types, errors, object storage, secrets, the work dir, fingerprints, retries;
- ingest: list and stage a day of traces, canonical records and the tracing tools' adapters;
- scoring: the scoring tasks (metrics, judge metrics), embeddings, assembling a partition's scores;
- judge: the OpenAI-compatible judge client, its settings, call cache, usage ledger and rate limits;
- quality: the Great Expectations suites on traces and scores;
- warehouse: score tables in DuckDB, PostgreSQL or a Parquet lake, and the publish task;
- planning: what a run or a backfill will do (configuration hash, partitions still to run);
- monitoring: drift detection and alerts;
- reporting: run summaries and artifacts, the HTML report;
- demo: the demo traces generator and its corpus.

Rooms import core and metrics, and each other only where one concern builds on another (no cycles). In a room, the
modules with Prefect tasks only wire Prefect (caching, retries, logging, artifacts) around library modules beside
them; a task module imports libraries and core, never another task module, and the types that tasks hand each other
live in core.types (tests/tasks/test_layout.py checks this)."""

__all__: list[str] = []
