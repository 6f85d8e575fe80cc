"""A real PostgreSQL server for the test session (DESIGN.md section 7).

Sources, in order:

1. ``MACE_TEST_DATABASE_URL``, used as is;
2. testcontainers (``postgres:16-alpine``) when a Docker engine answers;
3. a throwaway cluster started from the PostgreSQL server binaries on this machine.

When none works, CI (``CI=true``) fails loudly; elsewhere the caller gets ``None`` and skips the
PostgreSQL tests. The decision itself is the pure function :func:`choose_sources`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

ENV_URL = "MACE_TEST_DATABASE_URL"
DOCKER_IMAGE = "postgres:16-alpine"
CLUSTER_USER = "mace"
CLUSTER_DBNAME = "mace_test"
STARTUP_DEADLINE_SECONDS = 30.0
POLL_INTERVAL_SECONDS = 0.05
MEMORY_FILESYSTEM = Path("/dev/shm")
MEMORY_PER_CLUSTER = 1 << 30
"""The room a throwaway cluster may take in memory: its catalogs, a few databases at a time and
its write-ahead log, which ``max_wal_size`` below keeps at a fraction of this."""
REQUIRED_IN_CI = (
    "PostgreSQL is required in CI: set MACE_TEST_DATABASE_URL, start Docker, "
    "or install the postgresql server package"
)
UNAVAILABLE = (
    "no PostgreSQL server: set MACE_TEST_DATABASE_URL, start Docker, "
    "or install the postgresql server package"
)

SourceName = Literal["env", "testcontainers", "local-cluster"]


@dataclass(frozen=True)
class PostgresServer:
    """Where the session's PostgreSQL listens; ``dbname`` is a database the tests may use."""

    url: str
    host: str
    port: int
    user: str
    password: str
    dbname: str
    source: SourceName


@dataclass(frozen=True)
class Candidate:
    """One way to obtain a server; ``detail`` is the URL, the image or the binaries directory."""

    source: SourceName
    detail: str


class PostgresHarnessWarning(UserWarning):
    """A source that looked available could not provide a server."""


def in_ci(env: Mapping[str, str]) -> bool:
    return env.get("CI", "").strip().lower() == "true"


def choose_sources(
    env: Mapping[str, str],
    docker_available: Callable[[], bool],
    binaries_dir: Callable[[], Path | None],
) -> list[Candidate]:
    """The sources to try, best first. The probes are only called when they matter.

    Raises RuntimeError in CI when there is nothing to try.
    """
    url = env.get(ENV_URL, "").strip()
    if url:
        return [Candidate("env", url)]
    candidates = []
    if docker_available():
        candidates.append(Candidate("testcontainers", DOCKER_IMAGE))
    bindir = binaries_dir()
    if bindir is not None:
        candidates.append(Candidate("local-cluster", str(bindir)))
    if not candidates:
        fail_if_ci(env, "no MACE_TEST_DATABASE_URL, no Docker engine, no server binaries")
    return candidates


def fail_if_ci(env: Mapping[str, str], detail: str) -> None:
    if in_ci(env):
        raise RuntimeError(f"{REQUIRED_IN_CI} ({detail})")


def describe_plan(env: Mapping[str, str] | None = None) -> str:
    """One line for the pytest header: which source the session will use. Never raises."""
    env = os.environ if env is None else env
    try:
        candidates = choose_sources(env, docker_engine_answers, find_server_bindir)
    except RuntimeError:
        return "postgresql: NONE - CI=true, so PostgreSQL tests will fail"
    if not candidates:
        return f"postgresql: none - PostgreSQL tests will be skipped ({UNAVAILABLE})"
    first = candidates[0]
    if first.source == "env":
        return f"postgresql: env (${ENV_URL})"
    return f"postgresql: {first.source} ({first.detail}), started on first use"


# --- probes -------------------------------------------------------------------------------------


def docker_engine_answers(timeout_seconds: int = 2) -> bool:
    """True when a Docker engine answers a ping; quick and silent when there is none."""
    try:  # imported here: testcontainers takes ~0.2 s to import, and most runs have no Docker
        from testcontainers.core.docker_client import DockerClient  # noqa: PLC0415

        client = DockerClient(timeout=timeout_seconds).client
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def find_server_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: pg_config, Debian's layout, then PATH."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates.extend(sorted(debian, key=_version_key, reverse=True))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in ("initdb", "postgres", "pg_ctl")):
            return bindir
    return None


def _version_key(bindir: Path) -> tuple[int, ...]:
    version = bindir.parent.name
    return tuple(int(part) for part in version.split(".")) if _is_version(version) else (-1,)


def _is_version(text: str) -> bool:
    return all(part.isdigit() for part in text.split("."))


# --- the provider -------------------------------------------------------------------------------


@contextlib.contextmanager
def provide_postgres(
    env: Mapping[str, str] | None = None,
    docker_available: Callable[[], bool] = docker_engine_answers,
    binaries_dir: Callable[[], Path | None] = find_server_bindir,
) -> Iterator[PostgresServer | None]:
    """A server for the duration of the block, or None (outside CI) when there is none."""
    env = os.environ if env is None else env
    failures: list[str] = []
    for candidate in choose_sources(env, docker_available, binaries_dir):
        with contextlib.ExitStack() as stack:
            try:
                server = stack.enter_context(_start(candidate))
            except Exception as exc:
                failures.append(f"{candidate.source}: {type(exc).__name__}: {exc}")
                continue
            yield server
            return
    if failures:
        fail_if_ci(env, "; ".join(failures))
        warnings.warn(
            "PostgreSQL sources failed: " + "; ".join(failures),
            PostgresHarnessWarning,
            stacklevel=2,
        )
    yield None


def _start(candidate: Candidate) -> contextlib.AbstractContextManager[PostgresServer]:
    if candidate.source == "env":
        return contextlib.nullcontext(server_from_url(candidate.detail, "env"))
    if candidate.source == "testcontainers":
        return _testcontainers_server(candidate.detail)
    return _local_cluster(Path(candidate.detail))


def server_from_url(url: str, source: SourceName) -> PostgresServer:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"{ENV_URL} must be a postgresql:// URL, got scheme {parts.scheme!r}")
    user = unquote(parts.username or "")
    return PostgresServer(
        url=url,
        host=parts.hostname or "localhost",
        port=parts.port or 5432,
        user=user,
        password=unquote(parts.password or ""),
        dbname=unquote(parts.path.lstrip("/")) or user,
        source=source,
    )


def make_url(host: str, port: int, user: str, password: str, dbname: str) -> str:
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
    return f"postgresql://{credentials}@{host}:{port}/{quote(dbname, safe='')}"


@contextlib.contextmanager
def _testcontainers_server(image: str) -> Iterator[PostgresServer]:
    try:  # imported here, as in docker_engine_answers
        from testcontainers.community.postgres import PostgresContainer  # noqa: PLC0415
    except ImportError:  # older testcontainers releases keep it at the top level
        from testcontainers.postgres import PostgresContainer  # noqa: PLC0415

    with PostgresContainer(image, driver=None) as container:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(5432))
        user, password, dbname = container.username, container.password, container.dbname
        url = make_url(host, port, user, password, dbname)
        yield PostgresServer(url, host, port, user, password, dbname, "testcontainers")


# --- a throwaway local cluster ------------------------------------------------------------------


@dataclass(frozen=True)
class _Account:
    """The unprivileged account the cluster runs as when we are root (postgres refuses root)."""

    name: str
    uid: int
    gid: int


def _command(argv: Sequence[str], account: _Account | None, die_with_parent: bool) -> list[str]:
    """``argv`` run as ``account`` (None: as ourselves).

    setpriv execs in place, so our child is the program itself; with ``die_with_parent`` the
    program gets SIGQUIT (for postgres: immediate shutdown) if this test process is killed.
    """
    setpriv = shutil.which("setpriv")
    if setpriv:
        options = ["--pdeathsig=SIGQUIT"] if die_with_parent else []
        if account is not None:
            options += [f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups"]
        return [setpriv, *options, "--", *argv]
    if account is None:
        return list(argv)
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", account.name, "--", *argv]
    raise RuntimeError("running as root, but neither setpriv nor runuser is available")


def _unprivileged_account() -> _Account | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return _Account(name, entry.pw_uid, entry.pw_gid)
    raise RuntimeError("running as root, and there is no 'postgres' or 'nobody' user")


@contextlib.contextmanager
def _local_cluster(bindir: Path) -> Iterator[PostgresServer]:
    with _started_cluster(bindir) as cluster:
        assert cluster.server is not None
        yield cluster.server


@contextlib.contextmanager
def _started_cluster(bindir: Path, settings: Mapping[str, str] | None = None) -> Iterator[_Cluster]:
    account = _unprivileged_account()
    workdir = Path(tempfile.mkdtemp(prefix="mace-pg-", dir=cluster_parent()))
    try:
        cluster = _Cluster(bindir, workdir, account, settings)
        cluster.initdb()
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def restartable_cluster(env: Mapping[str, str] | None = None) -> Iterator[_Cluster | None]:
    """A throwaway cluster of the caller's own, which it may stop and start again on the same
    port (`_Cluster.shut_down`, `_Cluster.start_again`): the session's shared server is never
    stopped. None (outside CI) when this machine has no PostgreSQL server binaries.

    A commit is acknowledged once its log is written (``synchronous_commit``, off in the shared
    cluster): a server stopped with ``immediate`` keeps every commit it acknowledged, as a
    production server does. fsync stays off: a stopped server loses nothing the kernel holds.
    """
    bindir = find_server_bindir()
    if bindir is None:
        fail_if_ci(os.environ if env is None else env, "no PostgreSQL server binaries")
        yield None
        return
    with _started_cluster(bindir, {"synchronous_commit": "on"}) as cluster:
        yield cluster


def cluster_parent(
    candidate: Path = MEMORY_FILESYSTEM,
    env: Mapping[str, str] | None = None,
    room: int = MEMORY_PER_CLUSTER,
) -> Path | None:
    """Where a throwaway cluster lives: in memory (``/dev/shm``) when it has ``room`` for every
    worker's, else the temporary directory (None).

    Its data is thrown away and it runs with fsync off, so a disk holds it no better than memory
    does; on a disk, the ``CREATE DATABASE`` every test makes waited for other programs' writes
    (a database copy is hundreds of files), taking 0.2-0.8 s instead of 0.03-0.08 s.
    """
    env = os.environ if env is None else env
    workers = int(env.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1")
    if not (candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)):
        return None
    try:
        free = shutil.disk_usage(candidate).free
    except OSError:
        return None
    return candidate if free >= workers * room else None


class _Cluster:
    """initdb, start and stop one cluster in ``workdir`` (data, socket and log all live there)."""

    def __init__(
        self,
        bindir: Path,
        workdir: Path,
        account: _Account | None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.bindir = bindir
        # Server settings over the defaults below (`_spawn`).
        self.settings = settings or {}
        self.workdir = workdir
        self.account = account
        self.datadir = workdir / "data"
        self.password = secrets.token_urlsafe(24)
        self.process: subprocess.Popen[bytes] | None = None
        # The server as `start` left it: the test database, on the port it first listened on.
        self.server: PostgresServer | None = None
        if account is not None:
            os.chown(workdir, account.uid, account.gid)
        workdir.chmod(0o700)

    def _argv(self, tool: str, *args: str, die_with_parent: bool = False) -> list[str]:
        return _command([str(self.bindir / tool), *args], self.account, die_with_parent)

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            self._argv(tool, *args),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def initdb(self) -> None:
        pwfile = self.workdir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.account is not None:
            os.chown(pwfile, self.account.uid, self.account.gid)
        try:
            self._run(
                "initdb",
                "--pgdata",
                str(self.datadir),
                "--username",
                CLUSTER_USER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        finally:
            pwfile.unlink()

    def start(self, attempts: int = 3) -> PostgresServer:
        """Start on a free port; retry on another port if someone took it meanwhile."""
        error = ""
        for _ in range(attempts):
            port = free_port()
            self.process = self._spawn(port)
            server, error = self._await_ready(port)
            if server is not None:
                _create_database(server, CLUSTER_DBNAME)
                self.server = _with_dbname(server, CLUSTER_DBNAME)
                return self.server
            self.stop()
            if "could not bind" not in error and "already in use" not in error:
                break
        raise RuntimeError(f"local PostgreSQL did not start: {error}")

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        settings = {
            "listen_addresses": "127.0.0.1",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            # Each CREATE DATABASE logs the database it copies: checkpoint and recycle the log
            # early, so that it stays small wherever the cluster lives (the default is 1 GB).
            "max_wal_size": "128MB",
            "min_wal_size": "32MB",
            **self.settings,
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        where = ["-D", str(self.datadir), "-p", str(port), "-k", str(self.workdir)]
        argv = self._argv("postgres", *where, *options, die_with_parent=True)
        with (self.workdir / "server.log").open("ab") as log:
            return subprocess.Popen(
                argv,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _await_ready(self, port: int) -> tuple[PostgresServer | None, str]:
        assert self.process is not None
        server = PostgresServer(
            url=make_url("127.0.0.1", port, CLUSTER_USER, self.password, "postgres"),
            host="127.0.0.1",
            port=port,
            user=CLUSTER_USER,
            password=self.password,
            dbname="postgres",
            source="local-cluster",
        )
        deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return None, self._log_tail()
            try:
                with psycopg.connect(server.url, connect_timeout=2):
                    return server, ""
            except psycopg.OperationalError:
                time.sleep(POLL_INTERVAL_SECONDS)
        return None, f"not accepting connections after {STARTUP_DEADLINE_SECONDS:.0f}s; " + (
            self._log_tail()
        )

    def _log_tail(self, lines: int = 20) -> str:
        log = self.workdir / "server.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def shut_down(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server as an operator (or a crash, ``immediate``) would; `start_again`
        brings it back with its data."""
        process, self.process = self.process, None
        assert process is not None, "the cluster is not running"
        self._run("pg_ctl", "stop", "-D", str(self.datadir), "-m", mode, "-w")
        process.wait(timeout=STARTUP_DEADLINE_SECONDS)

    def start_again(self) -> None:
        """Start the stopped server on the port it listened on before."""
        assert self.server is not None and self.process is None
        self.process = self._spawn(self.server.port)
        ready, error = self._await_ready(self.server.port)
        if ready is None:
            raise RuntimeError(f"local PostgreSQL did not start again: {error}")

    def stop(self) -> None:
        """Immediate shutdown (the data is thrown away), then make sure the process is gone."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "stop", "-D", str(self.datadir), "-m", "immediate", "-w")
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# --- databases per test -------------------------------------------------------------------------


_database_numbers = itertools.count(1)


def made_databases(
    server: PostgresServer, make: Callable[[str], str]
) -> Iterator[Callable[[], str]]:
    """For a fixture: yields a function that makes a new database with ``make(name)`` and
    returns its URL; every database it made is dropped when the generator is resumed."""
    names: list[str] = []

    def new() -> str:
        name = f"mace_t_{os.getpid()}_{next(_database_numbers)}"
        names.append(name)
        return make(name)

    yield new
    for name in names:
        _drop_database(server, name)


def fresh_database(server: PostgresServer, name: str) -> str:
    """Create an empty database ``name`` (replacing any old one) and return its URL."""
    _drop_database(server, name)
    _create_database(server, name)
    return _with_dbname(server, name).url


def copy_database(server: PostgresServer, source: str, name: str) -> str:
    """Create ``name`` as a copy of the database ``source`` (no one may be connected to it)."""
    _drop_database(server, name)
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(source)
            )
        )
    return _with_dbname(server, name).url


def drop_database(server: PostgresServer, name: str) -> None:
    """Drop ``name`` even while connections to it are still open."""
    _drop_database(server, name)


def _create_database(server: PostgresServer, name: str) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))


def _drop_database(server: PostgresServer, name: str) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}{}").format(sql.Identifier(name), force))


def _with_dbname(server: PostgresServer, name: str) -> PostgresServer:
    """The same server, pointed at database ``name`` (query parameters such as sslmode kept)."""
    parts = urlsplit(server.url)
    url = urlunsplit(parts._replace(path="/" + quote(name, safe="")))
    return PostgresServer(
        url, server.host, server.port, server.user, server.password, name, server.source
    )
