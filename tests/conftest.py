"""Run-wide fixtures: a clean environment, a Prefect test server and a real S3 endpoint (moto's server mode) on
loopback; the tests that use either server are marked ``slow``."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest_plugins = ["tests.doubles.judge_server", "tests.doubles.webhook_receiver", "tests.doubles.tcp_proxy"]

_PREFIXES = ("AWS_", "RAGPULSE_", "FSSPEC_S3_", "OPENAI_")

# The persistent embedding store of the session (tasks/embeddings/store.py), never the developer's ~/.cache: set in
# os.environ at import, so the CLI runs and Prefect workers the tests start inherit it too.
_CACHE_DIR = tempfile.mkdtemp(prefix="ragpulse-test-cache-")
os.environ["RAGPULSE_CACHE_DIR"] = _CACHE_DIR


def pytest_sessionfinish() -> None:
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials, endpoints or ragpulse settings leak in from the developer's shell; the embedding store is
    the session's."""
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGPULSE_CACHE_DIR", _CACHE_DIR)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Prefect test server for the session (start-up takes 20-30 s here; 120 s allowed), with results
    in a temporary folder so cached results never leak between test runs."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, get_current_settings, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    results = tmp_path_factory.mktemp("prefect-results")
    with (
        temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: results}),
        prefect_test_harness(server_startup_timeout=120),
    ):
        yield str(get_current_settings().api.url)


@dataclass(frozen=True)
class S3Endpoint:
    url: str

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.url}

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing-secret-do-not-log",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": self.url,
        }


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """A real S3 HTTP API on 127.0.0.1, reached through s3fs exactly as production reaches AWS."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Endpoint(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture
def s3(s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Any]:
    """An s3fs filesystem on a fresh bucket named after the test; credentials only in the environment."""
    import s3fs

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    fs = s3fs.S3FileSystem(endpoint_url=s3_server.url, skip_instance_cache=True)
    bucket = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    fs.mkdir(bucket)
    fs.invalidate_cache()
    yield S3Bucket(fs, bucket, s3_server)
    fs.rm(bucket, recursive=True)


@dataclass(frozen=True)
class S3Bucket:
    fs: Any
    name: str
    endpoint: S3Endpoint

    @property
    def url(self) -> str:
        return f"s3://{self.name}"


# The session's servers above: a test that uses one, directly or through another fixture, is slow.
SERVER_FIXTURES = frozenset({"prefect_api", "s3_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that needs the Prefect test server or the S3 endpoint, so that ``make test-fast``
    (``-m "not slow"``) never starts them; modules and tests slow for other reasons carry the mark themselves."""
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# A test that runs longer than this without the mark is named at the end of the run, to be marked or made faster.
SLOW_SECONDS = 2.0
_unmarked_slow: list[pytest.TestReport] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration > SLOW_SECONDS and "slow" not in report.keywords:
        _unmarked_slow.append(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _unmarked_slow:
        terminalreporter.write_sep("=", f"took more than {SLOW_SECONDS:g} s without the slow mark")
        for report in _unmarked_slow:
            terminalreporter.write_line(f"{report.duration:6.1f}s {report.nodeid}")
