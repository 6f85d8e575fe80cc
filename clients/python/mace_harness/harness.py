"""The re-execution harness of a MACE Ledger, reached over HTTP.

    with replay_harness("https://ledger.example", token, job_id, mode="reexecute") as h:
        h.final_output(my_agent(h))
    h.result.outcome.ok, h.result.outcome.authoritative

The same shape as the ledger's in-process harness, so an agent's test code reads the same either
way. Nothing is matched here: the service holds the harness (``POST /v1/reexecutions``), answers
each call from the recording (``.../calls``) and records the attempt when the block ends
(``.../close``); this module only carries the calls and raises what the service answers. A call
that leaves the recording raises `ReplayDiverged` with the service's canonical diff, and every
call after it raises again, as in process; code that raises inside the block ends the
re-execution as a divergence where it stood, and the exception goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar

import httpx

T = TypeVar("T")

NO_MOCK: Final[Any] = object()
"""A call's ``mock`` when none is declared (None is a mock: JSON null)."""
RAISED_CHARS: Final = 2000
"""How much of an exception's text the service takes."""


class HarnessError(Exception):
    """The service refused or failed: ``code`` is its exact error code (``ACCESS_DENIED``,
    ``MISSING_PERSISTED_AGENT_OUTPUT``, ``NOT_FOUND``, ...), ``message`` its one line."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Divergence:
    """Where the code left its recording: the call's step (``iteration``), the field, both
    values, as the service's canonical diff gives them."""

    code: str
    iteration: int | None
    field: str
    recorded: Any
    replayed: Any

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "iteration": self.iteration,
            "field": self.field,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


class ReplayDiverged(HarnessError):
    """A call the recording does not hold at that step (``REPLAY_DIVERGENCE``)."""

    def __init__(self, divergence: Divergence, message: str, status: int) -> None:
        super().__init__(divergence.code, message, status)
        self.divergence = divergence


@dataclass(frozen=True)
class Outcome:
    """The recorded attempt's verdict."""

    job_id: str
    ok: bool
    authoritative: bool
    error_code: str | None
    error_message: str | None
    divergences: list[Divergence]
    non_authoritative: list[str]


@dataclass(frozen=True)
class ReplayResult:
    """The attempt as the ledger recorded it: its number, verdict, report and the report in
    Markdown."""

    attempt: int
    outcome: Outcome
    report: dict[str, Any] = field(repr=False)
    markdown: str = field(repr=False)


class _Service:
    """One open re-execution's calls to the service; every answer not 2xx raised."""

    def __init__(self, http: httpx.Client, token: str) -> None:
        self._http = http
        self._headers = {"Authorization": f"Bearer {token}"}
        self.path = ""

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self._http.post(self.path + path, json=body, headers=self._headers)
        if response.is_success:
            return response.json()
        raise _refusal(response)


def _refusal(response: httpx.Response) -> HarnessError:
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        text = response.text.splitlines()[0] if response.text else ""
        return HarnessError(f"HTTP_{response.status_code}", text, response.status_code)
    shown = error.get("divergence")
    if isinstance(shown, dict):
        return ReplayDiverged(Divergence(**shown), message, response.status_code)
    return HarnessError(code, message, response.status_code)


class RemoteRNG:
    """The job's seeded RNG (its ``agent`` stream), drawn on the service: the same draws, in the
    same order, as the recorded run's ``RunRecorder.rng()`` gave it."""

    def __init__(self, service: _Service) -> None:
        self._service = service

    def _draw(self, kind: str, **arguments: Any) -> Any:
        return self._service.post("/calls", {"kind": f"rng.{kind}", **arguments})["answer"]

    def random(self) -> float:
        # Sent as its shortest round-trip text: canonical JSON rounds numbers to 9 decimals.
        return float(self._draw("random"))

    def randint(self, a: int, b: int) -> int:
        drawn: int = self._draw("randint", a=a, b=b)
        return drawn

    def randbits(self, k: int) -> int:
        drawn: int = self._draw("randbits", k=k)
        return drawn

    def choice(self, seq: Sequence[T]) -> T:
        """An element of ``seq``: the service draws its index (the draw depends on the length
        only, so the items never leave this process)."""
        index: int = self._draw("choice", length=len(seq))
        return seq[index]

    def shuffle(self, items: MutableSequence[Any]) -> None:
        """Shuffle ``items`` in place, in the order the service draws for their number."""
        order: list[int] = self._draw("shuffle", length=len(items))
        items[:] = [items[i] for i in order]


class RemoteClock:
    """The job's deterministic clock: each ``now`` is its next instant, as in process."""

    def __init__(self, service: _Service) -> None:
        self._service = service

    def now(self) -> datetime:
        instant: str = self._service.post("/calls", {"kind": "clock"})["answer"]
        return datetime.fromisoformat(instant)


class Harness:
    """What the re-executed code calls instead of its model, tools, retriever, policy engine,
    identity provider, RNG and clock; every answer the service's, from the recording."""

    def __init__(self, service: _Service, job_id: str, mode: str) -> None:
        self._service = service
        self.job_id = job_id
        self.mode = mode
        self._rng = RemoteRNG(service)
        self._clock = RemoteClock(service)
        self._final_output: Any = NO_MOCK
        self.result: ReplayResult | None = None
        """The recorded attempt, once the block has ended."""

    def _call(self, body: dict[str, Any], mock: Any = NO_MOCK) -> Any:
        sent = body if mock is NO_MOCK else {**body, "mock": mock}
        return self._service.post("/calls", sent)["answer"]

    def model_call(self, model_id: str, prompt: Any, *, mock: Any = NO_MOCK) -> Any:
        """The recorded response to this prompt, when it is the run's next call, to this model.
        ``mock`` (reexecute only): the response to use where the run kept only its hash."""
        return self._call({"kind": "model", "model_id": model_id, "prompt": prompt}, mock)

    def tool_call(self, name: str, arguments: Any, *, mock: Any = NO_MOCK) -> Any:
        """The recorded result of this tool, when it is the run's next call, with these
        arguments (compared in canonical JSON by the service); `ReplayDiverged` otherwise."""
        return self._call({"kind": "tool", "name": name, "arguments": arguments}, mock)

    def retrieve(self, query: str, *, mock: Any = NO_MOCK) -> list[dict[str, Any]]:
        """The recorded hits of this query, when it is the run's next call."""
        hits: list[dict[str, Any]] = self._call({"kind": "retrieve", "query": query}, mock)
        return hits

    def policy(self, bundle_hash: str) -> str:
        """The YAML of the policy bundle the run named by this hash, as the ledger archived it
        (parse it with your own policy engine)."""
        text: str = self._call({"kind": "policy", "bundle_hash": bundle_hash})
        return text

    def identity(self) -> dict[str, Any]:
        """The workload identity the run recorded (the ``WorkloadIdentity`` event's fields),
        verified by the service from the recorded evidence alone."""
        identity: dict[str, Any] = self._call({"kind": "identity"})
        return identity

    def rng(self) -> RemoteRNG:
        return self._rng

    def clock(self) -> RemoteClock:
        return self._clock

    def final_output(self, value: Any) -> None:
        """The code's final answer, compared with the recorded one when the block ends."""
        self._final_output = value

    def close(self, raised: BaseException | None) -> ReplayResult:
        body: dict[str, Any] = {}
        if self._final_output is not NO_MOCK:
            body["final_output"] = self._final_output
        if raised is not None:
            text = f"{type(raised).__name__}: {raised}".splitlines() or [type(raised).__name__]
            body["raised"] = text[0][:RAISED_CHARS]
        answer = self._service.post("/close", body)
        self.result = _result(answer)
        return self.result


def _result(answer: dict[str, Any]) -> ReplayResult:
    report = answer["report"]
    outcome = Outcome(
        job_id=answer["job_id"],
        ok=answer["ok"],
        authoritative=answer["authoritative"],
        error_code=report["error_code"],
        error_message=report["error_message"],
        divergences=[Divergence(**d) for d in report["divergences"]],
        non_authoritative=list(report["non_authoritative_reasons"]),
    )
    return ReplayResult(answer["attempt"], outcome, report, answer["report_markdown"])


@contextmanager
def replay_harness(
    ledger: str | httpx.Client,
    token: str,
    job_id: str,
    *,
    mode: str = "reexecute",
    timeout: float = 30.0,
) -> Iterator[Harness]:
    """Re-execute the job (of the token's tenant) against its recording on the ledger at
    ``ledger``: a base URL, or an ``httpx.Client`` of your own (its base URL, TLS and proxy
    settings) that this leaves open. ``mode``: ``reexecute`` (a sandbox: declared mocks allowed,
    non-authoritative unless they are the recorded answers) or ``production`` (only what the run
    persisted). The attempt is recorded when the block ends, whatever the code did."""
    with (
        httpx.Client(base_url=ledger, timeout=timeout)
        if isinstance(ledger, str)
        else _borrowed(ledger) as http
    ):
        service = _Service(http, token)
        opened = service.post("/v1/reexecutions", {"job_id": job_id, "mode": mode})
        service.path = f"/v1/reexecutions/{opened['reexecution_id']}"
        harness = Harness(service, job_id, opened["mode"])
        try:
            yield harness
        except BaseException as raised:
            # Recorded whatever the code raised: a divergence the service answered is already
            # in its outcome; anything else diverges where the code stopped.
            harness.close(raised)
            raise
        harness.close(None)


@contextmanager
def _borrowed(client: httpx.Client) -> Iterator[httpx.Client]:
    """A caller's client, used and left open."""
    yield client
