"""eventsourcing's upcasting still works through the signed canonical mapper."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic
from support.ledger_fixtures import store_of
from support.older_records import Bodies, store_as_written_then
from support.upcast_model import Gadget

from domain.canonical import canonical_json, digest
from domain.determinism import DeterministicClock
from domain.naming import DEFAULT_TENANT
from domain.replay_record import ReplayRecord, replay_record_name
from domain.run_draft import RunDraft, RunDraftError
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import sign_record


def test_v1_event_is_upcast_on_read(ledger: Ledger) -> None:
    gadget_id = Gadget.id_for("lamp")
    topic = get_topic(Gadget.Registered)
    v1_body = canonical_json(
        {
            "class_version": 1,
            "name": "lamp",
            "originator_topic": get_topic(Gadget),
            "timestamp": DeterministicClock("lamp").iso(1),
        }
    )
    state = sign_record(store_of(ledger).keyring, gadget_id, 1, topic, v1_body)
    store_of(ledger).recorder.insert_events([StoredEvent(gadget_id, 1, topic, state)])

    gadget: Gadget = store_of(ledger).repository.get(gadget_id)
    assert isinstance(gadget, Gadget)
    assert (gadget.name, gadget.colour) == ("lamp", "unrecorded")


def test_current_version_is_written_and_read_back(ledger: Ledger) -> None:
    store_of(ledger).save(Gadget(name="desk", colour="green"))
    gadget: Gadget = store_of(ledger).repository.get(Gadget.id_for("desk"))
    assert gadget.colour == "green"
    event = next(iter(store_of(ledger).events.get(gadget.id)))
    assert getattr(type(event), "class_version", None) == 2


def test_a_replay_record_written_step_by_step_still_loads(ledger: Ledger) -> None:
    """Replay records before version 2: an opening, one event per step, then the report."""
    name = replay_record_name("job-1", 1)
    stream = ReplayRecord.id_for(name)
    clock = DeterministicClock(f"replay:{name}")
    bodies: Bodies = [
        (
            ReplayRecord.Opened,
            {
                "class_version": 1,
                "replay_id": name,
                "job_id": "job-1",
                "attempt": 1,
                "mode": "audit",
                "originator_topic": get_topic(ReplayRecord),
            },
        ),
        (ReplayRecord.StepLogged, {"step": "1 load", "outcome": "ok", "detail": "job job-1"}),
        (ReplayRecord.ReportStored, {"report": {"ok": True}, "markdown": "# ok\n"}),
    ]
    store_as_written_then(ledger, stream, clock, bodies)

    record = store_of(ledger).repository.get_one(ReplayRecord, stream, f"replay {name}")
    assert (record.mode, record.report, record.markdown) == ("audit", {"ok": True}, "# ok\n")
    assert record.steps == [{"step": "1 load", "outcome": "ok", "detail": "job job-1"}]


def test_a_run_draft_batch_stored_without_digests_still_loads_and_still_tells_resent_events(
    ledger: Ledger,
) -> None:
    """Batches before version 2 held no content digests: they are computed as they are read."""
    stream = RunDraft.id_in(DEFAULT_TENANT, "run-1")
    clock = DeterministicClock("run-draft:run-1")
    started = {"type": "RunStarted", "seed": 7, "input": "2 + 3"}
    event = {"type": "ErrorEvent", "code": "E1", "message": "first"}
    bodies: Bodies = [
        (
            RunDraft.Opened,
            {
                "run_id": "run-1",
                "tenant": DEFAULT_TENANT,
                "started": started,
                "originator_topic": get_topic(RunDraft),
            },
        ),
        (RunDraft.BatchAppended, {"events": [{"event_id": "e1", "event": event}]}),
    ]
    store_as_written_then(ledger, stream, clock, bodies)

    draft = store_of(ledger).repository.get_one(RunDraft, stream, "run run-1")
    assert draft.digests == {"e1": digest(event)}
    assert draft.append([("e1", event)]).duplicates == 1
    with pytest.raises(RunDraftError, match="was sent before with other content"):
        draft.append([("e1", {**event, "message": "other"})])
