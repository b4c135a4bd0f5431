"""Flow tests run against a throwaway Prefect API server, with results in a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Prefect test server for the session (start-up takes 20-30 s here; 120 s allowed)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, get_current_settings, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    results: Path = tmp_path_factory.mktemp("prefect-results")
    with (
        temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: results}),
        prefect_test_harness(server_startup_timeout=120),
    ):
        yield str(get_current_settings().api.url)
