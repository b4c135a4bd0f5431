"""Every flow test runs against the session's throwaway Prefect API server (tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _flows_use_prefect_api(prefect_api: str) -> str:
    return prefect_api
