"""Prefect tasks and the libraries they call, one concern per sub-package (room), each with the same floor plan:
its Prefect tasks in ``tasks.py``, the group of run settings it reads in ``config.py``, every other module plain
library (importable and testable without Prefect's engine).

- config (a module): the run configuration, assembled from the rooms' groups, loaded from TOML, env and options;
- core: run types, errors, object storage, secrets and their redaction, artifacts, the work dir, fingerprints;
- ingest: list, slice and stage a day of traces, read staged batches back, quarantine, the tracing tools' adapters;
- embeddings: the local embedding and cross-encoder models of the semantic metrics;
- judge: the LLM judge whole: its settings and secrets, checks, plan, the judge-metric task, the HTTP client, its
  call cache, usage ledger and rate limits;
- scoring: the retrieval and answer metrics on staged batches, and a partition's scores assembled;
- quality: the Great Expectations suites on traces and scores;
- warehouse: score tables in DuckDB, PostgreSQL or an Iceberg lake, and the publish task;
- calibration: human labels, the judge's agreement with them, prediction-powered estimates, label samples;
- monitoring: drift detection and alerts;
- reporting: run summaries, the HTML report and the Grafana dashboard;
- planning: what a run will do (checked configuration, judge plan, configuration hash) and what a backfill needs;
- demo: the demo traces generator and its corpora.

Rooms import core and metrics, and each other only where one concern builds on another: never in a cycle, module by
module or room by room. A task module imports libraries and core, never another task module, and the types that
tasks hand each other live in core.types (tests/tasks/test_layout.py checks all of this)."""

__all__: list[str] = []
