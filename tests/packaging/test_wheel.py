"""The wheel, used the way a Prefect user uses it.

Before the single ``ragpulse`` root, the wheel installed top-level ``flows``, ``tasks`` and ``metrics``, which a
Prefect project's own ``flows.py``/``tasks.py``/``tasks/`` shadowed (workers put the project folder on sys.path)
or were shadowed by. These tests build the wheel from a clean copy of the work tree, install it alone into a
throwaway virtualenv and run a user's project next to it; they also check that building leaves nothing behind.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.packaging.layout import PACKAGES, copy_sources, data_globs, data_matches, package_data_files, packaged_files

pytestmark = pytest.mark.slow

DAY = dt.date(2026, 11, 28)
DEPENDENCIES_PTH = "ragpulse_test_dependencies.pth"
DEV_VENV = Path(sys.prefix)
PROVISIONED_DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "dashboards" / "ragpulse.json"


def _run(args: list[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, failing with its output (not just its exit code) when it fails."""
    done = subprocess.run([str(arg) for arg in args], capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        command = " ".join(str(arg) for arg in args)
        command = command if len(command) < 300 else f"{command[:300]}..."
        pytest.fail(f"{command}\nexited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}", pytrace=False)
    return done


def _git_copy(dest: Path) -> Path:
    """A committed git repository of the work tree's tracked and new files, so that anything a build leaves in
    it shows in ``git status``, and the real work tree (edited by others meanwhile) is never touched."""
    copy_sources(dest)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]
    _run([*git, "init", "-q"], cwd=dest)
    _run([*git, "add", "-A"], cwd=dest)
    _run([*git, "commit", "-q", "--no-verify", "-m", "copy"], cwd=dest)
    return dest


def _status(repo: Path, *options: str) -> list[str]:
    return _run(["git", "status", "--porcelain", *options], cwd=repo).stdout.splitlines()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _git_copy(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make wheel``: pip wheel --no-deps --no-build-isolation on a fresh copy of the tracked and new files."""
    out = tmp_path_factory.mktemp("wheelhouse")
    _run(["make", "--no-print-directory", "wheel", f"VENV={DEV_VENV}", f"WHEEL_DIR={out}"], cwd=source)
    (built,) = out.glob("ragpulse-*.whl")
    return built


def test_make_wheel_leaves_the_tree_as_it_was(source: Path, wheel: Path) -> None:
    """Not even ignored files: setuptools' build/ and ragpulse.egg-info stay in make's temporary copy."""
    assert _status(source, "--ignored") == []


def test_plain_pip_wheel_leaves_only_ignored_files(tmp_path: Path) -> None:
    """``pip wheel .`` in a checkout writes build/ and ragpulse.egg-info into it (setuptools has no per-build
    temporary build directory); .gitignore must keep them out of ``git status`` and so out of commits."""
    repo = _git_copy(tmp_path / "repo")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "out", "."],
        cwd=repo,
    )
    assert list((tmp_path / "out").glob("ragpulse-*.whl"))
    assert _status(repo) == []


def test_wheel_ships_only_ragpulse_with_its_data(source: Path, wheel: Path) -> None:
    """One top-level name, and exactly the package sources and declared data (suites, corpus, templates)."""
    with zipfile.ZipFile(wheel) as archive:
        names = [name for name in archive.namelist() if not name.endswith("/")]
        (dist_info,) = {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    assert top_level == ["ragpulse"]
    assert {name.split("/")[0] for name in names} == {"ragpulse", dist_info}
    assert "ragpulse = ragpulse.cli:app" in entry_points

    data = package_data_files(source)
    sources = packaged_files(source)
    expected = {inside for path, inside in sources.items() if path.suffix == ".py" or path in data}
    shipped = {name for name in names if name.startswith("ragpulse/")}
    assert sorted(expected - shipped) == [], "source files missing from the wheel"
    assert sorted(shipped - expected) == [], "files in the wheel that are not package sources or package data"
    for package in PACKAGES:
        assert "/".join([*package.split("."), "__init__.py"]) in shipped
    for package, pattern in data_globs():
        matched = {sources[path] for path in data_matches(package, pattern, source)}
        assert matched, f"package-data {package!r}: {pattern!r} matches no file"
        assert matched <= shipped, f"package-data {package!r}: {pattern!r} files missing from the wheel"
    assert any(name.startswith("ragpulse/tasks/quality/suites/") and name.endswith(".json") for name in shipped)
    assert any(name.startswith("ragpulse/tasks/demo/corpus/") for name in shipped)


@dataclass(frozen=True)
class Venv:
    root: Path
    python: Path
    site_packages: Path

    def script(self, name: str) -> Path:
        return self.root / "bin" / name


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh virtualenv with the wheel alone (no index, no dependencies); the dependencies come from the dev
    venv's site-packages through a .pth line. A directory a .pth line adds gets no .pth processing of its own,
    so the dev venv's editable-install hook (a .pth) stays off and ``ragpulse`` can only be the wheel's."""
    root = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", root])
    python = root / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    dev_paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / DEPENDENCIES_PTH).write_text("".join(f"{path}\n" for path in dev_paths))
    return Venv(root, python, site)


# The user's own modules: a Prefect flow that runs ragpulse's evaluate flow as a sub-flow, and names that the
# old wheel also installed.
USER_FLOWS = '''
"""The user's flows: a nightly flow that scores a day of traces with ragpulse."""

import datetime as dt

from prefect import flow

from ragpulse.flows import OutputConfig, SourceConfig, evaluate_partition

OWNER = "user"


@flow(name="user-nightly")
def nightly(root: str, warehouse: str = "") -> None:
    evaluate_partition(
        date=dt.date(2026, 11, 28),
        source=SourceConfig(url=f"{root}/traces"),
        output=OutputConfig(warehouse=warehouse or f"duckdb:///{root}/w.duckdb", work_dir=f"{root}/work"),
    )
'''
USER_MODULE = 'OWNER = "user"\n'
LAYOUTS = {
    # a tasks.py module and a metrics/ package
    "modules": {"flows.py": USER_FLOWS, "tasks.py": USER_MODULE, "metrics/__init__.py": USER_MODULE},
    # a tasks/ package with a sub-module
    "packages": {
        "flows.py": USER_FLOWS,
        "tasks/__init__.py": USER_MODULE,
        "tasks/load.py": USER_MODULE,
        "metrics/__init__.py": USER_MODULE,
    },
}

PROBE = """
import importlib, json, pkgutil, sys
import flows, tasks, metrics
user = ["flows", "tasks", "metrics"] + (["tasks.load"] if hasattr(tasks, "__path__") else [])
for name in user:
    importlib.import_module(name)
import ragpulse, ragpulse.flows.evaluate
walked = [info.name for info in pkgutil.walk_packages(ragpulse.__path__, "ragpulse.") if info.ispkg]
print(json.dumps({
    "user": {name: [sys.modules[name].OWNER, sys.modules[name].__file__] for name in user},
    "ragpulse": [ragpulse.__file__, ragpulse.flows.evaluate.__file__, ragpulse.__version__],
    "walked": walked,
}))
"""


def _project(root: Path, layout: str) -> Path:
    project = root / "project"
    for name, text in LAYOUTS[layout].items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(text).lstrip())
    return project


def _env(venv: Venv, home: Path, project: Path | None = None, prefect_api: str | None = None) -> dict[str, str]:
    """The environment of a user's shell: the venv first on PATH, their project folder (if any) on PYTHONPATH as
    Prefect workers set it, and nothing of this test run's Python or Prefect settings."""
    inherited = ("PYTHON", "VIRTUAL_ENV", "PREFECT_")
    env = {name: value for name, value in os.environ.items() if not name.startswith(inherited)}
    env.update(
        PATH=f"{venv.root / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv.root),
        PREFECT_HOME=str(home / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    if project is not None:
        env["PYTHONPATH"] = str(project)
    if prefect_api is not None:
        env["PREFECT_API_URL"] = prefect_api
    return env


def test_venv_sees_only_the_wheels_ragpulse(venv: Venv, tmp_path: Path) -> None:
    """Nothing but ragpulse at the top of site-packages, and ragpulse imported from there (run outside the
    repository: a ``python -c`` in it would import the ragpulse/ folder of the work tree)."""
    entries = {path.name for path in venv.site_packages.iterdir()} - {"__pycache__", DEPENDENCIES_PTH}
    assert not {"flows", "tasks", "metrics", "flows.py", "tasks.py", "metrics.py"} & entries
    assert {entry for entry in entries if not entry.startswith("ragpulse")} == set()
    code = "import ragpulse.flows; print(ragpulse.__file__, ragpulse.flows.__file__)"
    done = _run([venv.python, "-c", code], cwd=tmp_path, env=_env(venv, tmp_path))
    for location in done.stdout.split():
        assert Path(location).is_relative_to(venv.site_packages), f"{location} is not the wheel's"


PROTOTYPES_PROBE = """
import json
from importlib import resources
from ragpulse.tasks.embeddings.refusal_prototypes import load_refusal_prototypes
prototypes = load_refusal_prototypes()
data = resources.files("ragpulse.tasks.embeddings") / "data" / "refusal_prototypes.npy"
print(json.dumps({"file": str(data), "rows": len(prototypes.labels), "encoder": prototypes.encoder}))
"""


def test_refusal_prototypes_load_from_the_installed_wheel(venv: Venv, tmp_path: Path) -> None:
    """embedding_refusal's prototypes are package data: read from the wheel's site-packages, their hash checked."""
    from ragpulse.tasks.embeddings.refusal_prototypes import load_refusal_prototypes

    found = json.loads(_run([venv.python, "-c", PROTOTYPES_PROBE], cwd=tmp_path, env=_env(venv, tmp_path)).stdout)
    assert Path(found["file"]).is_relative_to(venv.site_packages)
    shipped = load_refusal_prototypes()
    assert (found["rows"], found["encoder"]) == (len(shipped.labels), shipped.encoder)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_user_modules_and_ragpulse_coexist(venv: Venv, tmp_path: Path, layout: str) -> None:
    """The user's flows/tasks/metrics win their names; ragpulse's modules live under ragpulse only."""
    project = _project(tmp_path, layout)
    env = _env(venv, tmp_path, project)
    found = json.loads(_run([venv.python, "-c", PROBE], cwd=project, env=env).stdout)
    for name, (owner, location) in found["user"].items():
        assert owner == "user" and Path(location).is_relative_to(project), f"import {name} gave {location}"
    for location in found["ragpulse"][:2]:
        assert Path(location).is_relative_to(venv.site_packages), f"ragpulse came from {location}"
    # in the installed layout the plain walk from ragpulse.__path__ reaches every package
    assert sorted([*found["walked"], "ragpulse"]) == sorted(PACKAGES)

    cli = _run([venv.script("ragpulse"), "--help"], cwd=project, env=env)
    assert "evaluate" in cli.stdout
    # The installed wheel writes the dashboard the compose stack provisions.
    dashboard = _run([venv.script("ragpulse"), "dashboard"], cwd=project, env=env)
    assert json.loads(dashboard.stdout) == json.loads(PROVISIONED_DASHBOARD.read_text())


# Canonical traces of one day: (trace id, ranked context ids, graded labels), so that the reciprocal ranks differ:
# 1, 1/2, 1/3, 0 (relevant document not retrieved) and none (no context labelled relevant).
TRACES: list[tuple[str, list[str], dict[str, float]]] = [
    ("t-first", ["a", "b", "c"], {"a": 2, "b": 0}),
    ("t-second", ["a", "b", "c"], {"b": 1, "x": 1}),
    ("t-third", ["a", "b", "c"], {"c": 3, "a": 0}),
    ("t-missed", ["a", "b"], {"z": 1}),
    ("t-unlabelled", ["a"], {"a": 0}),
]


def _trace(trace_id: str, ranking: list[str], labels: dict[str, float], hour: int) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "timestamp": dt.datetime(DAY.year, DAY.month, DAY.day, hour, 15, tzinfo=dt.UTC).isoformat(),
        "question": f"Which document answers question {hour}?",
        "answer": f"Document {ranking[0]} answers it.",
        "contexts": [
            {"id": key, "text": f"Text of document {key}.", "score": round(1 - rank / 10, 2)}
            for rank, key in enumerate(ranking)
        ],
        "reference": f"Document {ranking[0]} answers it.",
        "relevant_context_ids": labels,
        "metadata": {},
    }


def _reciprocal_rank(trace: dict[str, Any]) -> float | None:
    """1 / rank of the first context graded > 0, 0 if none is retrieved, None without any relevant label."""
    grades: dict[str, float] = trace["relevant_context_ids"]
    if not any(grade > 0 for grade in grades.values()):
        return None
    ranks = [rank for rank, context in enumerate(trace["contexts"], 1) if grades.get(context["id"], 0) > 0]
    return 1 / ranks[0] if ranks else 0.0


def _write_traces(root: Path) -> list[dict[str, Any]]:
    """The day's traces as the user's app logged them, under ``root/traces/dt=<DAY>/``."""
    traces = [_trace(*spec, hour=hour) for hour, spec in enumerate(TRACES, start=8)]
    partition = root / "traces" / f"dt={DAY}"
    partition.mkdir(parents=True)
    (partition / "part.jsonl").write_text("".join(json.dumps(trace) + "\n" for trace in traces))
    return traces


def test_users_flow_runs_ragpulse_evaluate_into_duckdb(venv: Venv, tmp_path: Path, prefect_api: str) -> None:
    """A user's own Prefect flow (in their flows.py) runs evaluate_partition from the installed wheel."""
    traces = _write_traces(tmp_path)
    project = _project(tmp_path, "modules")
    env = _env(venv, tmp_path, project, prefect_api)

    code = "import sys, flows; assert flows.OWNER == 'user'; flows.nightly(sys.argv[1])"
    _run([venv.python, "-c", code, tmp_path], cwd=project, env=env, timeout=600)

    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        days = con.execute("SELECT DISTINCT partition_date FROM scores").fetchall()
        mrr = dict(
            con.execute(
                "SELECT trace_id, value FROM scores WHERE metric = 'document_mrr' AND partition_date = ?", [DAY]
            ).fetchall()
        )
    assert days == [(DAY,)]
    expected = {trace["trace_id"]: _reciprocal_rank(trace) for trace in traces}
    assert mrr.keys() == expected.keys()
    assert mrr == pytest.approx(expected)
    # The user's warehouse has the views too, over those scores.
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        summary = con.execute(
            "SELECT n, n_ok, mean FROM daily_scores WHERE metric = 'document_mrr' AND segment_key = 'all'"
        ).fetchall()
    ranks = [rank for rank in expected.values() if rank is not None]
    assert summary == [(len(expected), len(ranks), pytest.approx(sum(ranks) / len(ranks)))]


def test_users_flow_publishes_into_an_iceberg_lake_on_s3_and_migrate_lake_runs_from_the_wheel(
    venv: Venv, tmp_path: Path, prefect_api: str, s3: Any
) -> None:
    """The same flow with an Iceberg lake on S3 (moto) whose catalog is in PostgreSQL; the scores are read back with
    pyiceberg alone. Then the wheel's ``ragpulse migrate-lake`` moves a manifest-layout lake into the same catalog."""
    import psycopg
    from pyiceberg.catalog.sql import SqlCatalog

    traces = _write_traces(tmp_path)
    project = _project(tmp_path, "modules")
    env = _env(venv, tmp_path, project, prefect_api)
    namespace = f"wheel_{os.urandom(4).hex()}"
    catalog_url = "postgresql://postgres@127.0.0.1:5432/test"
    lake = f"{s3.url}/lake?catalog={catalog_url}&namespace={namespace}"
    try:
        code = "import sys, flows; flows.nightly(sys.argv[1], sys.argv[2])"
        _run([venv.python, "-c", code, tmp_path, lake], cwd=project, env=env, timeout=600)
        catalog = SqlCatalog(
            "ragpulse",
            uri="postgresql+psycopg://postgres@127.0.0.1:5432/test",
            **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
        )
        scores = catalog.load_table((namespace, "scores")).scan(row_filter="metric == 'document_mrr'").to_arrow()
        mrr = dict(zip(scores["trace_id"].to_pylist(), scores["value"].to_pylist(), strict=True))
        expected = {trace["trace_id"]: _reciprocal_rank(trace) for trace in traces}
        assert mrr == pytest.approx(expected)

        legacy = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_lake" / "lake"
        s3.fs.put(str(legacy), f"{s3.name}/old", recursive=True)
        target = f"{s3.url}/old?catalog={catalog_url}&namespace={namespace}_old"
        done = _run([venv.root / "bin" / "ragpulse", "migrate-lake", "--from", f"{s3.url}/old", "--to", target,
                     "--json"], cwd=tmp_path, env=env, timeout=300)  # fmt: skip
        assert json.loads(done.stdout)["rows"]["scores"] == 18
        migrated = catalog.load_table((f"{namespace}_old", "runs")).scan().to_arrow()["run_id"].to_pylist()
        assert sorted(migrated) == ["r1", "r2", "r3", "r4"]
    finally:
        with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres", autocommit=True) as con:
            for name in (namespace, f"{namespace}_old"):
                con.execute("DELETE FROM iceberg_tables WHERE table_namespace = %s", (name,))
                con.execute("DELETE FROM iceberg_namespace_properties WHERE namespace = %s", (name,))
