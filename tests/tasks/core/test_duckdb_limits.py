"""Every DuckDB database ragpulse opens runs under ragpulse's memory limit, not DuckDB's 80 % of the machine."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ragpulse.tasks.core.duckdb_limits import MEMORY_LIMIT, connect_duckdb
from ragpulse.tasks.warehouse import open_warehouse
from ragpulse.tasks.warehouse.duckdb import DuckDBWarehouse


def _limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    text = con.execute("SELECT current_setting('memory_limit')").fetchone()
    assert text is not None
    number, unit = text[0].split()
    return int(float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit])


def _expected_bytes() -> int:
    return int(MEMORY_LIMIT.removesuffix("MB")) * 10**6


def test_an_in_memory_database_has_the_limit_and_spills_under_the_temp_dir() -> None:
    default = duckdb.connect()
    with connect_duckdb() as con:
        assert abs(_limit_bytes(con) - _expected_bytes()) < 2**20
        assert _limit_bytes(default) > 4 * _expected_bytes()  # DuckDB's own default is far larger here
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()
        assert spill is not None and spill[0].endswith("ragpulse-duckdb")
    default.close()


def test_the_warehouse_file_is_opened_under_the_limit(tmp_path: Path) -> None:
    warehouse = open_warehouse(f"duckdb:///{tmp_path / 'wh.duckdb'}")
    assert isinstance(warehouse, DuckDBWarehouse)
    con = warehouse.connect()
    try:
        assert abs(_limit_bytes(con) - _expected_bytes()) < 2**20
    finally:
        con.close()
