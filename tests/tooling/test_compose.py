"""compose.yaml gives the PostgreSQL that the URL in its header comment points at."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def postgres(compose: dict[str, Any]) -> dict[str, Any]:
    service = compose["services"]["postgres"]
    assert isinstance(service, dict)
    return service


def environment(service: dict[str, Any]) -> dict[str, str]:
    """Compose allows a mapping or a list of KEY=VALUE strings."""
    env = service.get("environment", {})
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def host_port_for(service: dict[str, Any], container_port: int) -> int:
    for mapping in service.get("ports", []):
        *_, host, container = str(mapping).split(":")
        if int(container.split("/")[0]) == container_port:
            return int(host)
    raise AssertionError(f"port {container_port} is not published")


def test_postgres_16_image(postgres: dict[str, Any]) -> None:
    assert postgres["image"].startswith("postgres:16")


def test_healthcheck_asks_pg_isready_about_our_database(postgres: dict[str, Any]) -> None:
    check = postgres["healthcheck"]
    test = check["test"]
    command = test if isinstance(test, str) else " ".join(test)
    env = environment(postgres)
    assert "pg_isready" in command
    assert f"-U {env['POSTGRES_USER']}" in command
    assert f"-d {env['POSTGRES_DB']}" in command
    assert {"interval", "timeout", "retries"} <= check.keys()


def test_data_lives_in_the_named_volume(compose: dict[str, Any], postgres: dict[str, Any]) -> None:
    assert "mace-pgdata" in compose["volumes"]
    assert "mace-pgdata:/var/lib/postgresql/data" in postgres["volumes"]


def test_the_comment_url_matches_the_service(postgres: dict[str, Any]) -> None:
    found = re.search(r"MACE_STORE=(postgresql://\S+)", COMPOSE.read_text())
    assert found is not None, "compose.yaml should say which MACE_STORE URL matches it"
    url = urlsplit(found.group(1))
    env = environment(postgres)
    assert unquote(url.username or "") == env["POSTGRES_USER"]
    assert unquote(url.password or "") == env["POSTGRES_PASSWORD"]
    assert url.path.lstrip("/") == env["POSTGRES_DB"]
    assert url.hostname == "localhost"
    assert url.port == host_port_for(postgres, 5432)


@pytest.fixture(scope="module")
def mace(compose: dict[str, Any]) -> dict[str, Any]:
    service = compose["services"]["mace"]
    assert isinstance(service, dict)
    return service


def test_mace_is_built_from_the_project_and_serves(mace: dict[str, Any]) -> None:
    build = mace["build"]
    assert build["context"] == "."
    dockerfile = build["dockerfile_inline"]
    for package in ("domain", "projections", "infrastructure"):
        assert f"COPY {package} {package}" in dockerfile
        assert (COMPOSE.parent / package).is_dir()
    assert "pip install --no-cache-dir ." in dockerfile
    assert "USER mace" in dockerfile  # never serve as root
    assert '"mace", "serve", "--host", "0.0.0.0", "--port", "8000"' in dockerfile
    assert host_port_for(mace, 8000) == 8000


def test_mace_uses_the_compose_postgres(mace: dict[str, Any], postgres: dict[str, Any]) -> None:
    env = environment(mace)
    url = urlsplit(env["MACE_STORE"])
    pg = environment(postgres)
    assert url.scheme == "postgresql"
    assert url.hostname == "postgres"
    assert (unquote(url.username or ""), unquote(url.password or "")) == (
        pg["POSTGRES_USER"],
        pg["POSTGRES_PASSWORD"],
    )
    assert url.path.lstrip("/") == pg["POSTGRES_DB"]
    assert mace["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_mace_is_configured_for_production_from_the_environment(
    compose: dict[str, Any], mace: dict[str, Any]
) -> None:
    env = environment(mace)
    assert env["MACE_ENV"] == "production"
    # Keys come from the host and are required: compose refuses to start without them.
    assert env["MACE_SIGNING_KEYS"].startswith("${MACE_SIGNING_KEYS:?")
    assert env["MACE_ACTIVE_KEY_ID"].startswith("${MACE_ACTIVE_KEY_ID:?")
    assert env["MACE_TOKENS_FILE"] == "/run/secrets/mace_tokens"
    assert "mace_tokens" in mace["secrets"]
    assert compose["secrets"]["mace_tokens"]["file"] == "./mace-tokens.json"
    # Production refuses to start without a checkpoint key: it is a secret file like the tokens.
    assert env["MACE_CHECKPOINT_KEY"] == "/run/secrets/mace_checkpoint_key"
    assert "mace_checkpoint_key" in mace["secrets"]
    assert compose["secrets"]["mace_checkpoint_key"]["file"] == "./mace-checkpoint-key.pem"
    assert env["MACE_CHECKPOINT_INTERVAL"] == "${MACE_CHECKPOINT_INTERVAL:-1}"


def test_mace_health_check_asks_readyz(mace: dict[str, Any]) -> None:
    check = mace["healthcheck"]
    command = " ".join(check["test"])
    assert "http://127.0.0.1:8000/readyz" in command
    assert {"interval", "timeout", "retries"} <= check.keys()
