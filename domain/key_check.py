"""The key check: one signed record per key id, proving which secret a store was signed with.

A key id says nothing about the secret behind it: a process configured with another secret under
the same id would sign new events that verify for it and for nobody else, and the store would
fail verification for good. So the first writer that uses a key id records, in the stream
``keycheck:<key_id>``, one event holding the key id and a fixed statement, signed by that very
key. Nothing secret is in it; its stored MAC is the proof. A process whose secret cannot verify
that MAC holds another key and must not write.
"""

from __future__ import annotations

from typing import ClassVar

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate


class KeyCheck(MaceAggregate):
    """The proof of one key id's secret in this store: written once, signed by that key."""

    STATEMENT: ClassVar[str] = (
        "MACE key check: this record is signed by the key it names; a secret under this key id"
        " that cannot verify it is not the one this store was signed with"
    )

    class Recorded(MaceAggregate.Created):
        key_id: str
        statement: str

    NAME_PREFIX = "keycheck"
    NAME_FIELD = "key_id"

    @event(Recorded)
    def __init__(self, key_id: str, statement: str) -> None:
        self.key_id = key_id
        self.statement = statement

    @classmethod
    def of(cls, key_id: str) -> KeyCheck:
        return cls(key_id=key_id, statement=cls.STATEMENT)
