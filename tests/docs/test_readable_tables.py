"""docs/warehouses.md names what ``Warehouse.read`` reads and what it refuses: kept equal to the schema's tables and
views, so a table added later cannot go missing from the list again (issue 29 found it out of date)."""

from __future__ import annotations

import re
from pathlib import Path

from ragpulse.tasks.warehouse import TableNames
from ragpulse.tasks.warehouse._schema import TABLES
from ragpulse.tasks.warehouse._views import DUCKDB, view_definitions

DOC = Path(__file__).parents[2] / "docs" / "warehouses.md"


def test_the_readable_tables_and_the_views_in_the_docs_are_the_schemas() -> None:
    paragraph = re.search(r"returns a `pyarrow\.Table` of the\s+rows of `table` \((.*?)\) with", DOC.read_text(), re.S)
    assert paragraph, "the read() paragraph of docs/warehouses.md moved: update this test with it"
    readable, _, refused = paragraph[1].partition("anything else")
    assert set(re.findall(r"`(\w+)`", readable)) == set(TABLES)
    assert set(re.findall(r"`(\w+)`", refused)) - {"ConfigError"} == set(view_definitions(TableNames(), DUCKDB))
