"""Every DuckDB database ragpulse opens, with the memory it may take set by ragpulse rather than by DuckDB.

DuckDB's default buffer limit is 80 % of the machine's RAM, per database instance, and ragpulse opens several
(the warehouse file, in-memory ones for excerpts, drift and segments), possibly at once in threads of one process:
left at the default, each may cache what it reads or writes until the machine runs short (bench/README.md,
"Memory"). Under ``MEMORY_LIMIT`` DuckDB evicts what it cached and spills what it must keep to ``temp_directory``,
so the process's peak stays bounded by the work, not by the day.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import duckdb

__all__ = ["MEMORY_LIMIT", "connect_duckdb"]

MEMORY_LIMIT = "512MB"
"""Buffer manager limit of each DuckDB database ragpulse opens. A bare insert of 300k traces' excerpts grew the
process by 1 GB with DuckDB's default, and by about this much with it; queries larger than it spill to disk."""


def connect_duckdb(
    database: str | os.PathLike[str] = ":memory:", *, read_only: bool = False
) -> duckdb.DuckDBPyConnection:
    """A connection to ``database`` (a file, or a fresh in-memory database) under ``MEMORY_LIMIT``.

    The limit is SET on the connection, not passed as connect configuration: a file this process already has open
    (a notebook's connection beside a run) would refuse a second connection with another configuration. An
    in-memory database spills to a folder under the system's temporary directory (DuckDB's own choice, ``.tmp`` in
    the working directory, may not be writable where a deployment runs); a file database next to itself."""
    connection = duckdb.connect(str(database), read_only=read_only)
    connection.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    if str(database) == ":memory:":
        spill = Path(tempfile.gettempdir()) / "ragpulse-duckdb"
        connection.execute("SET temp_directory = $path", {"path": str(spill)})
    return connection
