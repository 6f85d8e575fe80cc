"""An aggregate whose event is at schema version 2, for the upcasting test."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate


class Gadget(MaceAggregate):
    NAME_PREFIX = "gadget"
    NAME_FIELD = "name"

    @event("Registered")
    def __init__(self, name: str, colour: str) -> None:
        self.name = name
        self.colour = colour

    class Registered(MaceAggregate.Created):
        # Version 1 had no colour; version 2 records one.
        class_version = 2
        name: str
        colour: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["colour"] = "unrecorded"
