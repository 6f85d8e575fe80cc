"""Programs traced by clients we did not write, exported with the OTLP/HTTP exporter (protobuf) to a
live ``mace serve``: a program on the plain OpenTelemetry SDK setting GenAI semantic convention
spans by hand, and an OpenAI Agents SDK agent traced by OpenInference's instrumentation of that
SDK. Each run is listed, verified, exported as a bundle and replayed. On SQLite and PostgreSQL."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from support.ledger_fixtures import run, subprocess_env
from support.live_service import free_port, wait_until_healthy
from support.otel_sdk import provider_exporting_to, traced_agent

from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import add_token
from infrastructure.storage.settings import Settings
from infrastructure.tooling.demo_agent import ANSWER, run_weather_agent

pytestmark = [pytest.mark.storage, pytest.mark.end_to_end]


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``mace serve`` on the test's store, recording a whole trace as its last span arrives
    (quiet period 0): its base URL and an operator's token of tenant acme."""
    tokens = tmp_path / "tokens.json"
    token = add_token(tokens, "olga", ["operator"], "acme")
    port = free_port()
    env = subprocess_env(store_url, MACE_TOKENS_FILE=str(tokens), MACE_TRACE_QUIET_SECONDS="0")
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("mace")), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            wait_until_healthy(server, client)
        yield base, token
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            log.close()


def plain_sdk_program(provider: TracerProvider, snapshots: Mapping[str, str]) -> None:
    traced_agent(provider.get_tracer("weather-agent"), snapshots=snapshots)


def agents_sdk_agent(provider: TracerProvider, snapshots: Mapping[str, str]) -> None:
    assert run_weather_agent(provider, snapshots) == ANSWER


# Each program, what its job misses for production replay, and how many of its facts a replay
# takes as recorded (the agent's run makes one model call more than the plain program). The
# plain program's spans miss nothing; the agent's carry no temperature (it leaves the
# provider's default), so its two model calls (events 0 and 3) are recorded with it missing.
PROGRAMS = {
    "plain-sdk": (plain_sdk_program, [], 4),
    "openai-agents": (agents_sdk_agent, [(0, ["temperature"]), (3, ["temperature"])], 5),
}


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_a_traced_program_is_recorded_listed_verified_exported_and_replayed(
    program: str,
    service: tuple[str, str],
    cli_env: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    traced: Callable[[TracerProvider, Mapping[str, str]], None]
    traced, missing, taken_as_recorded = PROGRAMS[program]
    base, token = service
    monkeypatch.setenv("MACE_ACTOR", "aude")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    exporter = OTLPSpanExporter(
        endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {token}"}
    )
    provider = provider_exporting_to(exporter)
    with Ledger.open(cli_env) as ledger:
        snapshots = ledger.snapshots.default_ids()
    traced(provider, snapshots)
    provider.shutdown()

    with httpx.Client(base_url=base, timeout=30) as client:
        listed = client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    [job] = listed.json()["jobs"]
    assert (job["tenant"], job["status"], job["capture_mode"]) == ("acme", "sealed", "full_io")
    assert [(m["sequence_index"], m["missing"]) for m in job["missing_artifacts"]] == missing
    assert job["replayable"] == (not missing)
    job_id = job["job_id"]

    code, out, err = run(capsys, "verify", job_id, "--tenant", "acme")
    assert (code, err) == (0, ""), out
    bundle = tmp_path / "run.bundle"
    code, out, err = run(
        capsys, "export", job_id, "--tenant", "acme", "-o", str(bundle), "--include-full-io"
    )
    assert (code, err) == (0, ""), out
    # Replayed from the bundle and in the ledger alike: every fact verified and taken as
    # recorded (nothing in the ledger can recompute a model's or a tool's answer; re-executing
    # the agent against its recording is the harness's), so NOT REPRODUCED, exit 1, no error.
    code, out, err = run(capsys, "replay", "--bundle", str(bundle), "--json")
    report = orjson.loads(out)
    assert (code, report["job_id"], report["error_code"]) == (1, job_id, None), out
    assert (report["reproduced"], report["authoritative"]) == (False, False)
    assert report["check_counts"]["taken_as_recorded"] == taken_as_recorded
    assert report["check_counts"]["diverged"] == report["check_counts"]["missing"] == 0
    code, out, err = run(capsys, "replay", job_id, "--tenant", "acme", "--json")
    recorded = orjson.loads(out)
    assert (code, recorded["error_code"]) == (1, None), out
    assert recorded["check_counts"] == report["check_counts"]
