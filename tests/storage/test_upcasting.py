"""eventsourcing's upcasting still works through the signed canonical mapper."""

from __future__ import annotations

from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic
from support.upcast_model import Gadget

from domain.canonical import canonical_json
from domain.determinism import DeterministicClock
from infrastructure.application.ledger import Ledger
from infrastructure.storage.signed_record import sign_record


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
    state = sign_record(ledger.store.keyring, gadget_id, 1, topic, v1_body)
    ledger.store.recorder.insert_events([StoredEvent(gadget_id, 1, topic, state)])

    gadget: Gadget = ledger.store.repository.get(gadget_id)
    assert isinstance(gadget, Gadget)
    assert (gadget.name, gadget.colour) == ("lamp", "unrecorded")


def test_current_version_is_written_and_read_back(ledger: Ledger) -> None:
    ledger.store.save(Gadget(name="desk", colour="green"))
    gadget: Gadget = ledger.store.repository.get(Gadget.id_for("desk"))
    assert gadget.colour == "green"
    event = next(iter(ledger.store.events.get(gadget.id)))
    assert getattr(type(event), "class_version", None) == 2
