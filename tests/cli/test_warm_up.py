"""The command line's warm-up: Prefect's ephemeral server is started early only when Prefect itself would start
it, on the instance the flow's client then finds running, and a failed start is raised as Prefect raised it; the
flow's module is imported either way."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, temporary_settings

from ragpulse.cli.startup import warm_up
from ragpulse.tasks.config import RunConfig, SourceConfig


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[SubprocessASGIServer]]:
    """The servers whose start was asked, without starting any."""
    started: list[SubprocessASGIServer] = []
    monkeypatch.setattr(SubprocessASGIServer, "start", lambda self, timeout=None: started.append(self))
    yield started


FLOW_MODULE = "ragpulse_warm_up_flow"  # stands for the flow's module, which other tests have imported already


def _config(runner: str = "thread") -> RunConfig:
    return RunConfig.model_validate({"source": SourceConfig(url="/nowhere"), "runner": {"kind": runner}})


@pytest.fixture(autouse=True)
def flow_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A module not imported yet that ``warm_up`` can import, dropped from sys.modules again afterwards."""
    (tmp_path / f"{FLOW_MODULE}.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop(FLOW_MODULE, None)


def test_no_server_is_started_when_an_api_url_is_set(starts: list[SubprocessASGIServer]) -> None:
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        warm_up(_config(), FLOW_MODULE)
    assert starts == []
    assert FLOW_MODULE in sys.modules


def test_no_server_is_started_when_ephemeral_mode_is_off(starts: list[SubprocessASGIServer]) -> None:
    with temporary_settings({PREFECT_SERVER_EPHEMERAL_ENABLED: False}, restore_defaults={PREFECT_API_URL}):
        warm_up(_config(), FLOW_MODULE)
    assert starts == []


@pytest.mark.parametrize("runner", ["thread", "dask"])
def test_the_process_wide_server_is_started_as_the_client_would(
    starts: list[SubprocessASGIServer], runner: str
) -> None:
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        warm_up(_config(runner), FLOW_MODULE)
    assert starts == [SubprocessASGIServer()]  # the instance Prefect's get_client() starts and then reuses
    assert FLOW_MODULE in sys.modules


def test_a_failed_start_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: SubprocessASGIServer, timeout: int | None = None) -> None:
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")

    monkeypatch.setattr(SubprocessASGIServer, "start", fail)
    with temporary_settings(restore_defaults={PREFECT_API_URL}), pytest.raises(RuntimeError, match="Timed out"):
        warm_up(_config(), FLOW_MODULE)
