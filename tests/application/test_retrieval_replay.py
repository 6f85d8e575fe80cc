"""Retrievals from the ledger's own memories are served again at replay (seed 003: exact replay
is retrieval + events), on SQLite and PostgreSQL, with run files written by hand: a retrieval
names the memory log position it was served from; replay serves it again there and compares the
hits, their scores (within 1e-9) and explain fields. One from an outside system is taken as
recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.hand_written_runs import (
    ANA,
    as_auditor,
    ingest_and_replay,
    math_iteration,
    run_file,
    with_brainstates,
)
from support.ledger_fixtures import run, store_of

from domain.canonical import canonical_json, digest
from domain.events import RetrievalResponse, hash_of
from domain.run_draft import RunDraft
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

QUERY = "when is the launch"


@pytest.fixture
def remembered(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The default snapshots' ids, and three episodes remembered by `ANA` (as ``mace memories
    add --json`` answers each)."""
    ids = as_auditor(cli_env, monkeypatch)
    texts = ("the launch moved to friday", "lunch is at noon", "the launch needs a review")
    with Ledger.open(cli_env) as ledger:
        remember = ledger.memories.remember_episode
        memories = [remember("default", text, [], ANA, None).as_json() for text in texts]
    return ids, [orjson.loads(canonical_json(memory)) for memory in memories]


def request(position: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": "RetrievalRequest",
        "request_id": "r1",
        "query": QUERY,
        "request_hash": hash_of(QUERY),
        "memory_position": position,
        **extra,
    }


def response(hits: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "RetrievalResponse",
        "request_id": "r1",
        "hits": hits,
        "response_hash": hash_of(hits),
    }


def hit(memory: dict[str, Any], rank: int, score: float) -> dict[str, Any]:
    return {
        "uri": f"mace://default/memory/{memory['memory_id']}",
        "score": score,
        "explain": {"rank": rank, "position": memory["position"], "retriever": "ledger"},
    }


def served(
    memories: list[dict[str, Any]], hits: list[dict[str, Any]] | None = None, *more: Any
) -> list[dict[str, Any]]:
    """A run whose one iteration is followed by a retrieval served when the log held all three
    memories (``hits``: as the ledger serves it, unless given) and ``more`` events."""
    moved, lunch, review = memories
    if hits is None:
        hits = [hit(review, 1, 2.0), hit(moved, 2, 2.0), hit(lunch, 3, 1.0)]
    retrieval = [request(review["position"]), response(hits)]
    return with_brainstates([*math_iteration(0, "2 + 3", 5), *retrieval, *more])


def test_a_retrieval_from_the_ledgers_memories_is_served_again_at_its_position(
    cli_env: Settings,
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, (moved, lunch, review) = remembered
    # Served when the log held the three: both launch episodes hold "the" and "launch" (score 2,
    # the later first), the lunch one "is" (score 1). A memory remembered afterwards does not
    # change the replay; a score written a hair off still matches.
    hits = [hit(review, 1, 2.0), hit(moved, 2, 2.0000000001), hit(lunch, 3, 1.0)]
    at = review["position"]
    body = served([moved, lunch, review], hits)
    path = run_file(tmp_path, "retrieved", ids, body, "2 + 3 = 5")
    assert run(capsys, "memories", "add", "--episode", "the launch is tomorrow")[0] == 0
    code, report = ingest_and_replay(cli_env, path, "retrieved")
    assert (code, report["reproduced"], report["authoritative"]) == (0, True, True), report
    checked = {r["subject"]: (r["check"], r["detail"]) for r in report["checks"]}
    assert checked["event 4 RetrievalRequest"] == (
        "reexecuted",
        f"served again from the tenant's memory log at position {at};"
        " request_hash is the hash of its query",
    )
    assert checked["event 5 RetrievalResponse"] == (
        "reexecuted",
        "3 hits equal the re-served ones (scores within 1e-09); response_hash is the hash of its"
        " hits",
    )


def test_retrieved_context_hashes_beside_a_served_retrieval_are_said_to_be_taken_as_recorded(
    cli_env: Settings,
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    ids, memories = remembered
    body = served(memories)
    for line in body:
        if line["type"] == "RetrievalResponse":
            line["retrieved_context_hashes"] = ["0" * 64]
    path = run_file(tmp_path, "context", ids, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "context")
    assert code == 0
    checked = {r["subject"]: r["detail"] for r in report["checks"]}
    assert checked["event 5 RetrievalResponse"].endswith(
        "; retrieved_context_hashes taken as recorded"
    )


@pytest.mark.parametrize(
    ("case", "changed"),
    [
        ("a hit left out", lambda m, lunch, r: [hit(r, 1, 2.0), hit(m, 2, 2.0)]),
        (
            "a score changed",
            lambda m, lunch, r: [hit(r, 1, 2.5), hit(m, 2, 2.0), hit(lunch, 3, 1.0)],
        ),
        ("ranks swapped", lambda m, lunch, r: [hit(m, 1, 2.0), hit(r, 2, 2.0), hit(lunch, 3, 1.0)]),
    ],
)
def test_hits_the_memories_did_not_give_diverge(
    cli_env: Settings,
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    case: str,
    changed: Any,
) -> None:
    ids, memories = remembered
    body = served(memories, changed(*memories))
    path = run_file(tmp_path, "lied", ids, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "lied")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE"), case
    (divergence,) = report["divergences"]
    assert divergence["field"] == "event 5 RetrievalResponse hits"
    assert [h["uri"] for h in divergence["replayed"]] == [
        f"mace://default/memory/{m['memory_id']}" for m in (memories[2], memories[0], memories[1])
    ]


def test_a_position_the_memory_log_never_reached_diverges(
    cli_env: Settings,
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    ids, _ = remembered
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), request(99), response([])])
    path = run_file(tmp_path, "future", ids, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "future")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["divergences"][0]["field"] == "event 4 RetrievalRequest memory_position"


def test_a_retrieval_from_outside_is_taken_as_recorded_and_a_bad_ledger_query_refused(
    cli_env: Settings,
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, _ = remembered
    outside = {k: v for k, v in request(3).items() if k != "memory_position"}
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), outside, response([])])
    path = run_file(tmp_path, "outside", ids, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "outside")
    assert code == 0
    checked = {r["subject"]: r["check"] for r in report["checks"]}
    assert checked["event 4 RetrievalRequest"] == "taken_as_recorded"

    wordless = with_brainstates(
        [*math_iteration(0, "2 + 3", 5), request(3, query="?!", request_hash=hash_of("?!"))]
    )
    path = run_file(tmp_path, "wordless", ids, wordless, "2 + 3 = 5")
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert "query: expected at least one word to match memories by" in err


def test_verify_check_retrievals_resolves_every_hit_at_its_position(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, memories = remembered
    moved, lunch, review = memories
    good = [hit(review, 1, 2.0), hit(moved, 2, 2.0), hit(lunch, 3, 1.0)]
    body = served(memories)
    assert run(capsys, "ingest", run_file(tmp_path, "good", ids, body, "2 + 3 = 5"))[0] == 0
    code, out, err = run(capsys, "verify", "good", "--check-retrievals")
    assert (code, err) == (0, "")
    assert out.rstrip().endswith(", 1 retrievals' hits resolve to stored memories")
    code, out, _ = run(capsys, "verify", "good", "--check-retrievals", "--json")
    assert orjson.loads(out)["retrievals_checked"] == 1

    # Served before the review was remembered, yet naming it: it was not there to be found.
    early = with_brainstates(
        [*math_iteration(0, "2 + 3", 5), request(moved["position"]), response(good)]
    )
    assert run(capsys, "ingest", run_file(tmp_path, "early", ids, early, "2 + 3 = 5"))[0] == 0
    code, out, err = run(capsys, "verify", "early", "--check-retrievals")
    assert (code, out) == (1, "")
    assert err == (
        f"mace: REPLAY_DIVERGENCE: retrieval r1 (event 4): hit {good[0]['uri']} is no memory the"
        f" log held at position {moved['position']} (and 1 more)\n"
    )
    code, out, err = run(capsys, "verify", "--all", "--check-retrievals")
    assert (code, out) == (2, "")
    assert "--check-retrievals applies to one job: name a JOB_ID" in err


def test_a_response_hash_that_is_not_the_hash_of_its_hits_is_refused_with_its_line(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, (moved, _, _) = remembered
    zeros = {**response([hit(moved, 1, 1.0)]), "response_hash": "0" * 64}
    body = [*math_iteration(0, "2 + 3", 5), request(moved["position"]), zeros]
    path = run_file(tmp_path, "zeros", ids, with_brainstates(body), "2 + 3 = 5")
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert (
        f"{path} line 7: response_hash does not match the sha256 of the canonical JSON of hits"
        in err
    )


@pytest.mark.parametrize("served", [True, False], ids=["from the ledger", "from outside"])
def test_a_request_hash_that_is_not_the_hash_of_its_query_is_refused_with_its_line(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    served: bool,
) -> None:
    ids, (moved, _, _) = remembered
    zeros = {**request(moved["position"]), "request_hash": "0" * 64}
    if not served:
        del zeros["memory_position"]
    body = [*math_iteration(0, "2 + 3", 5), zeros]  # the line refused is the last one
    path = run_file(tmp_path, "zeros", ids, with_brainstates(body), "2 + 3 = 5")
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert (
        f"{path} line 6: request_hash does not match the sha256 of the canonical JSON of query"
        in err
    )
    code, out, _ = run(capsys, "jobs", "--json")
    assert "zeros" not in out


def test_a_batch_with_a_retrieval_hash_that_is_not_its_content_is_refused(api: Api) -> None:
    run_id = api.open_run({"seed": "r-2", "input": "look it up"})
    before = api.position()
    outside = {k: v for k, v in request(3).items() if k != "memory_position"}
    for event, field in (
        (
            {**outside, "request_hash": "0" * 64},
            "request_hash does not match the sha256 of the canonical JSON of query",
        ),
        (
            {**response([]), "response_hash": "0" * 64},
            "response_hash does not match the sha256 of the canonical JSON of hits",
        ),
    ):
        where = f"body.events.0.event.{event['type']}"
        assert_error(
            api.send(run_id, [{"event_id": "e1", "event": event}]),
            422,
            "INVALID_INPUT",
            f"{where}: {field}",
            where,
        )
    assert api.position() == before


Lines = Callable[[dict[str, Any], list[dict[str, Any]]], list[dict[str, Any]]]

RETRIEVALS_OUT_OF_PLACE: dict[str, tuple[Lines, str]] = {
    "a second response": (
        lambda r, h: [r, response(h), response([])],
        "line 8: RetrievalResponse answers request_id 'r1' a second time",
    ),
    "a response before its request": (
        lambda r, h: [response(h), r],
        "line 6: RetrievalResponse answers request_id 'r1', which no earlier RetrievalRequest made",
    ),
    "a request made twice": (
        lambda r, h: [r, r],
        "line 7: RetrievalRequest 'r1' is made a second time in this run",
    ),
}


@pytest.mark.parametrize("case", sorted(RETRIEVALS_OUT_OF_PLACE))
def test_a_retrieval_request_or_response_out_of_place_is_refused_with_its_line(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    # A forged answer beside the true one: replay compared only the last answer, and took the
    # other as a retrieval from outside.
    ids, (moved, lunch, review) = remembered
    hits = [hit(review, 1, 2.0), hit(moved, 2, 2.0), hit(lunch, 3, 1.0)]
    lines, message = RETRIEVALS_OUT_OF_PLACE[case]
    body = [*math_iteration(0, "2 + 3", 5), *lines(request(review["position"]), hits)]
    path = run_file(tmp_path, "twice", ids, with_brainstates(body), "2 + 3 = 5")
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert err == f"mace: INVALID_INPUT: {path} {message}\n"
    assert "twice" not in run(capsys, "jobs", "--json")[1]


def test_a_request_hash_left_out_is_the_hash_of_the_query(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, _ = remembered
    bare = {k: v for k, v in request(3).items() if k not in {"request_hash", "memory_position"}}
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), bare, response([])])
    assert run(capsys, "ingest", run_file(tmp_path, "bare", ids, body, "2 + 3 = 5"))[0] == 0
    code, out, _ = run(capsys, "events", "bare", "--type", "RetrievalRequest", "--json")
    assert code == 0
    assert orjson.loads(out)["payload"]["request_hash"] == hash_of(QUERY)


def test_a_bundle_replay_takes_retrievals_and_gates_as_recorded_and_says_so(
    remembered: tuple[dict[str, str], list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids, memories = remembered
    gate = {
        "type": "GateDecision",
        "gate": "context",
        "decision": "allow",
        "policy_bundle_hash": "cd" * 32,
        "subject": {"memory_kind": "fact", "caller_id": "bot"},
    }
    path = run_file(tmp_path, "bundled", ids, served(memories, None, gate), "2 + 3 = 5")
    assert run(capsys, "ingest", path)[0] == 0
    bundle = tmp_path / "bundled.json"
    code, _, err = run(capsys, "export", "bundled", "-o", str(bundle), "--include-full-io")
    assert (code, err) == (0, ""), err
    code, out, err = run(capsys, "replay", "--bundle", str(bundle), "--json")
    assert (code, err) == (0, ""), err
    report = orjson.loads(out)
    assert (report["ok"], report["reproduced"], report["authoritative"]) == (True, True, False)
    assert report["non_authoritative_reasons"] == [
        "the tenant's memory log and policy bundles are not among the records replayed: what"
        " they decide is taken as recorded",
        "3 facts only the run vouches for, taken as recorded: event 4 RetrievalRequest,"
        " event 5 RetrievalResponse, event 6 GateDecision",
    ]
    checked = {r["subject"]: r["check"] for r in report["checks"]}
    assert checked["event 4 RetrievalRequest"] == "taken_as_recorded"
    assert checked["event 6 GateDecision"] == "taken_as_recorded"


def run_opened_before(run_id: str, seed: str) -> RunDraft:
    """A run as a ledger opened it before runs opened their jobs: its draft holds its events."""
    started = {"type": "RunStarted", "seed": seed, "input": "look it up"}
    return RunDraft(run_id=run_id, tenant="acme", started=started)  # the operator's tenant


def held_item(held: dict[str, Any]) -> dict[str, Any]:
    """``held`` as a run's draft keeps a batch's event (its digest and canonical size)."""
    return {
        "event_id": "old",
        "event": held,
        "digest": digest(held),
        "size": len(canonical_json(held)),
    }


def test_a_run_holding_an_answer_taken_in_before_pairing_was_checked_says_why_it_is_stuck(
    api: Api,
) -> None:
    # A run opened before retrievals were paired may hold a response that answers nothing: no
    # batch can mend it, and completing it must say so (it raised IndexError, 500, once).
    run_id = "run-r-3"
    draft = run_opened_before(run_id, "r-3")
    held = response([])
    draft._appended(events=[held_item(held)])
    store_of(api.ledger).save(draft)
    stuck = (
        f"run {run_id} holds event 0, taken in before it was checked: RetrievalResponse answers"
        " request_id 'r1', which no earlier RetrievalRequest made; it cannot be completed: send"
        " the run again as a new run"
    )
    before = api.position()
    assert_error(api.send(run_id, [stage_event("s1")]), 409, "CONFLICT", stuck)
    completion = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "done"})
    assert_error(completion, 409, "CONFLICT", stuck)
    assert api.position() == before


def test_a_completed_run_holding_such_an_answer_still_takes_its_batch_again_as_duplicates(
    api: Api,
) -> None:
    # A client retrying after a lost response re-sends a batch the run holds whole.
    run_id = "run-r-4"
    draft = run_opened_before(run_id, "r-4")
    held = RetrievalResponse.model_validate(response([])).model_dump(mode="json")  # as kept
    draft._appended(events=[held_item(held)])
    draft.complete("done")
    store_of(api.ledger).save(draft)
    again = api.send(run_id, [{"event_id": "old", "event": held}])
    assert again.status_code == 200, again.content
    assert (again.json()["accepted"], again.json()["duplicates"]) == (0, 1)
