"""A `mace serve` process for tests that need the real service on a real port."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx
import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_healthy(server: subprocess.Popen[bytes], client: httpx.Client) -> httpx.Response:
    """Poll /healthz until the server answers; fail at once if it exits, or after 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            return client.get("/healthz")
        except httpx.TransportError:
            pass
        try:
            # Wait on the server process itself: returns early only if it exits.
            server.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"mace serve exited with {server.returncode} before answering")
    pytest.fail("mace serve did not answer /healthz within 60 s")
