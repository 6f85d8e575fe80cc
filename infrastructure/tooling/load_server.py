"""The service under load: ``mace serve`` in its own process, on a free loopback port.

Its own process, not uvicorn in a thread of the driver: the driver's client threads would
otherwise share one interpreter lock with the service, so on a small machine the figures would
measure the driver as much as the service. A separate process is also what is deployed, and a
crash in the service cannot take the driver (and its report) down with it.

It is given a throwaway tokens file: one bearer token (operator, admin and auditor) for the load
test's own tenant. Its output goes to a log file, whose tail explains a start that failed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from infrastructure.application.settings import Settings
from infrastructure.application.tokens import add_token

TENANT = "loadtest"
ACTOR = "load-driver"
ROLES = ("operator", "admin", "auditor")
START_SECONDS = 60.0
POLL_SECONDS = 0.05
STOP_SECONDS = 10.0
_MAIN = "import sys; from infrastructure.cli import main; sys.exit(main())"


class LoadSetupError(Exception):
    """The service could not be started (or the store prepared): one line saying why."""


def environment_of(settings: Settings) -> dict[str, str]:
    """This process's environment with ``settings``' store and keys: what a child process
    (``mace serve``, a bench writer) reads to open the same store as ``settings`` does."""
    env = {**os.environ, "MACE_STORE": settings.store}
    env.pop("MACE_READ_STORE", None)
    if settings.read_store is not None:
        env["MACE_READ_STORE"] = settings.read_store
    if settings.signing_keys is not None:
        env["MACE_SIGNING_KEYS"] = settings.signing_keys.get_secret_value()
    if settings.active_key_id is not None:
        env["MACE_ACTIVE_KEY_ID"] = settings.active_key_id
    if settings.keyring_file is not None:
        env["MACE_KEYRING_FILE"] = str(settings.keyring_file)
    if settings.checkpoint_key is not None:
        env["MACE_CHECKPOINT_KEY"] = str(settings.checkpoint_key)
    env["MACE_CHECKPOINT_INTERVAL"] = str(settings.checkpoint_interval)
    env["MACE_CONNECT_TIMEOUT"] = str(settings.connect_timeout)
    return env


def make_token(tokens_file: Path) -> str:
    """A tokens file holding one token for the load test's tenant; returns the token."""
    return add_token(tokens_file, ACTOR, list(ROLES), TENANT)


class ServiceProcess:
    """``mace serve`` over ``settings``' store; stopped when the block ends (SIGTERM, SIGKILL)."""

    def __init__(self, settings: Settings, tokens_file: Path, log_file: Path) -> None:
        self.settings = settings
        self.tokens_file = tokens_file
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.environment: dict[str, str] = {}
        """Set in the service's environment besides ``settings``' store and keys."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(
        self, deadline: float | None = None, attempts: int = 3, probe: str = "/readyz"
    ) -> None:
        """Start and wait until ``probe`` (``/readyz``; ``/healthz``: up, ready or not)
        answers 200; another port if ours was taken."""
        problem = ""
        for _ in range(attempts):
            self.port = _free_port()
            self.process = self._spawn()
            problem = self._await_ready(deadline, probe)
            if not problem:
                return
            self.stop()
            if "already in use" not in problem and "address in use" not in problem.lower():
                break
        raise LoadSetupError(f"mace serve did not start: {problem}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = environment_of(self.settings)
        env["MACE_TOKENS_FILE"] = str(self.tokens_file)
        env.update(self.environment)
        argv = [sys.executable, "-c", _MAIN, "serve", "--host", "127.0.0.1"]
        with self.log_file.open("ab") as log:
            return subprocess.Popen(
                [*argv, "--port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def _await_ready(self, deadline: float | None, probe: str) -> str:
        """Empty when the service answers ``probe``; else why it does not."""
        assert self.process is not None
        started = time.perf_counter()
        limit = started + START_SECONDS if deadline is None else min(deadline, started + 60)
        with httpx.Client(base_url=self.base_url, timeout=2.0) as client:
            while time.perf_counter() < limit:
                if self.process.poll() is not None:
                    return f"exited with {self.process.returncode}: {self.log_tail()}"
                try:
                    if client.get(probe).status_code == 200:
                        return ""
                except httpx.TransportError:
                    pass
                time.sleep(POLL_SECONDS)
        return f"not ready after {time.perf_counter() - started:.0f} s: {self.log_tail()}"

    def log_tail(self) -> str:
        """The last non-empty line of the service's output (one line, for an error message)."""
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else "no output"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
