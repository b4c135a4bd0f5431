"""The compose stack's Grafana half where no Docker engine runs: infra/postgres/init-databases.sh run as the postgres
image runs it, on a PostgreSQL cluster of its own; ragpulse publishing as its role into the schema of
infra/.env.example's warehouse URL; and Grafana's role reading every view there and changing nothing. The
provisioning files agree with compose, the init script and the dashboard."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml

from ragpulse.tasks.reporting.grafana import DATASOURCE_TYPE, DATASOURCE_UID, dashboard_json
from ragpulse.tasks.warehouse import TableNames, open_warehouse
from tests.conftest import free_port
from tests.infra.test_infra_files import COMPOSE, INFRA, env_example, service_env
from tests.tasks.warehouse.test_warehouse_contract import DAY, publication

pytestmark = pytest.mark.slow  # a PostgreSQL cluster of its own

PG_BIN = Path("/usr/lib/postgresql")
INIT = INFRA / "postgres" / "init-databases.sh"
PASSWORDS = {
    "POSTGRES_PREFECT_PASSWORD": "prefect-pw",
    "POSTGRES_RAGPULSE_PASSWORD": "ragpulse-pw",
    "POSTGRES_GRAFANA_PASSWORD": "grafana-pw",
}
VIEWS = ("daily_scores", "drift_segments", "latest_alerts", "worst_traces")


def _bin(name: str) -> Path:
    found = sorted(PG_BIN.glob(f"*/bin/{name}"))
    if not found or shutil.which("runuser") is None:
        pytest.skip(f"needs PostgreSQL's {name} and runuser")
    return found[-1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[int]:
    """A fresh cluster owned by the postgres system user, as the image's entrypoint makes one; its port. Outside
    pytest's temporary folders, which only root may enter."""
    root = Path(tempfile.mkdtemp(prefix="ragpulse-pg-"))
    root.chmod(0o777)
    data, port = root / "data", free_port()
    as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_postgres, _bin("initdb"), "-D", data, "-U", "postgres", "-A", "trust"], check=True,
                   capture_output=True)  # fmt: skip
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    subprocess.run([*as_postgres, _bin("pg_ctl"), "-D", data, "-o", options, "-w", "start", "-l", root / "log"],
                   check=True, capture_output=True)  # fmt: skip
    try:
        env = {**os.environ, **PASSWORDS, "POSTGRES_USER": "postgres", "PGHOST": "127.0.0.1", "PGPORT": str(port)}
        subprocess.run(["bash", INIT], check=True, env=env, capture_output=True)
        yield port
    finally:
        subprocess.run([*as_postgres, _bin("pg_ctl"), "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_grafanas_role_reads_every_view_ragpulse_creates_and_writes_nothing(cluster: int) -> None:
    active, _ = env_example()
    warehouse_url = active["RAGPULSE_WAREHOUSE"].replace("@postgres:5432", f"@127.0.0.1:{cluster}")
    os.environ["PGPASSWORD"] = PASSWORDS["POSTGRES_RAGPULSE_PASSWORD"]
    try:
        open_warehouse(warehouse_url).publish(publication(DAY, "r1"))
    finally:
        del os.environ["PGPASSWORD"]
    datasource = yaml.safe_load((INFRA / "grafana/provisioning/datasources/ragpulse.yaml").read_text())
    (source,) = datasource["datasources"]
    dsn = f"host=127.0.0.1 port={cluster} dbname={source['jsonData']['database']} user={source['user']}"
    with psycopg.connect(dsn, password=PASSWORDS["POSTGRES_GRAFANA_PASSWORD"], autocommit=True) as con:
        for view in VIEWS:
            assert con.execute(f"SELECT count(*) FROM ragpulse.{view}").fetchone() is not None  # type: ignore[arg-type]
        summary = con.execute(
            "SELECT metric, segment_value, n FROM ragpulse.daily_scores "
            "WHERE segment_key = 'metadata.app' ORDER BY 1, 2"
        ).fetchall()
        assert summary == [(m, app, 3) for m in ("m1", "m2") for app in ("search", "support-bot")]
        for statement in (
            "DELETE FROM ragpulse.scores",
            "CREATE TABLE ragpulse.mine (x int)",
            "DROP VIEW ragpulse.daily_scores",
        ):
            with pytest.raises(psycopg.errors.Error, match=r"read-only transaction|permission denied|must be owner"):
                con.execute(statement)  # type: ignore[arg-type]
        # Read-only sessions are only the first guard: a session can turn them off, and then the grants hold.
        con.execute("SET default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("DELETE FROM ragpulse.scores")
        assert con.execute("SELECT count(*) FROM ragpulse.scores").fetchone() == (12,)


def test_the_provisioning_files_agree_with_compose_the_init_script_and_the_dashboard() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    grafana = spec["services"]["grafana"]
    mounts = dict(mount.rsplit(":", 2)[:2] for mount in grafana["volumes"] if mount.startswith("./"))
    assert mounts == {"./grafana/provisioning": "/etc/grafana/provisioning", "./grafana/dashboards":
                      "/var/lib/grafana/dashboards"}  # fmt: skip
    (source,) = yaml.safe_load((INFRA / "grafana/provisioning/datasources/ragpulse.yaml").read_text())["datasources"]
    assert (source["type"], source["uid"]) == (DATASOURCE_TYPE, DATASOURCE_UID)
    assert source["url"] == "postgres:5432" and "postgres" in spec["services"]
    assert source["secureJsonData"]["password"] == "$GRAFANA_WAREHOUSE_PASSWORD"
    assert service_env(grafana)["GRAFANA_WAREHOUSE_PASSWORD"] == (
        "${POSTGRES_GRAFANA_PASSWORD:?set POSTGRES_GRAFANA_PASSWORD in infra/.env}"
    )
    assert "POSTGRES_GRAFANA_PASSWORD" in service_env(spec["services"]["postgres"])
    init = INIT.read_text()
    assert f"CREATE ROLE {source['user']} LOGIN" in init and f"CREATE DATABASE {source['jsonData']['database']}" in init
    active, _ = env_example()
    assert "?schema=ragpulse" in active["RAGPULSE_WAREHOUSE"] and "CREATE SCHEMA ragpulse" in init
    (provider,) = yaml.safe_load((INFRA / "grafana/provisioning/dashboards/ragpulse.yaml").read_text())["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    provisioned = json.loads((INFRA / "grafana/dashboards/ragpulse.json").read_text())
    assert provisioned == dashboard_json(TableNames(), schema="ragpulse")
