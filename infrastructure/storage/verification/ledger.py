"""Verify a whole ledger: every checkpoint, every MAC, every stream's contiguity, every seal and
its witness, in one pass over the log in notification order (`log_pass`).

Each row is fetched once; its leaf feeds the checkpoint checks (`checkpoint_chain`), its MAC and
its place in its stream the stream checks. What is reported is what checking the checkpoints,
then the streams one after another in stream id order, would report:

- a checkpoint that no longer holds first, naming the first checkpoint and the log position (a
  job stream deleted whole below the newest checkpoint is caught there and by the head index; one
  recorded after it is not yet vouched for by anything);
- then the first failing stream in id order, with its stream and version: a stream the pass set
  aside is read back whole and judged as a read of it judges it (`verify_stream`); a seal and
  its witness that disagree, or one without the other, at the first stream holding either;
- then a snapshot a completed job found in the ledger that is gone (a snapshot deleted whole
  produces no event of its own);
- last the stored Merkle nodes, held to the tree the log makes below the newest checkpoint: only
  once the log holds is a node that differs the nodes' own fault.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from domain.errors import IntegrityFailure
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import SEAL_TOPIC, verify_stream
from infrastructure.storage.settings import Store
from infrastructure.storage.verification.checkpoint_chain import (
    TreeVerification,
    verify_checkpoints,
)
from infrastructure.storage.verification.log_pass import LogPass, Pairs
from infrastructure.storage.verification.scan import StoreReader
from infrastructure.storage.verification.stream_facts import (
    JOB_STARTED_TOPIC,
    OWN,
    SNAPSHOT_TOPIC,
    WITNESS_TOPIC,
    FirstFailure,
    StreamFacts,
    job_name,
    seal_facts,
    stream_order,
    witness_counterpart,
)

__all__ = [
    "JOB_STARTED_TOPIC",
    "WITNESS_TOPIC",
    "LedgerVerification",
    "job_name",
    "seal_facts",
    "verify_ledger",
]


@dataclass(frozen=True)
class LedgerVerification:
    events: int
    streams: int
    jobs: int
    sealed_jobs: int
    tree: TreeVerification | None  # None: the checkpoint pass was left out (the bench's baseline)


def verify_ledger(
    store: Store, table: str, keyring: Keyring, checkpoints: Checkpoints | None
) -> LedgerVerification:
    """Verify every stream and, unless ``checkpoints`` is None, every checkpoint, in one pass
    (the module's docstring says what is reported first). Without checkpoints no leaf is hashed:
    verify as it was before them, the bench's baseline."""
    facts, failures = StreamFacts(), FirstFailure()
    with StoreReader(store, table) as reader:
        pairs = Pairs(keyring, failures)
        streams = LogPass(reader, keyring, facts, failures, pairs)
        pages = streams.leaf_pages(leaves=checkpoints is not None)
        if checkpoints is None:
            with closing(pages):
                for _ in pages:
                    pass
            tree = None
        else:
            tree = verify_checkpoints(checkpoints, reader, pages)
        streams.finish()
        for stored in sorted(streams.suspects, key=stream_order):
            if failures.could_precede(stored):
                _read_back(reader, keyring, stored, facts, failures, pairs)
        pairs.look_up(reader)
    failures.raise_first()
    facts.check_snapshots()
    if tree is not None and tree.log_nodes is not None:
        raise tree.log_nodes  # the log holds: only what is derived from it is not its own
    return LedgerVerification(facts.events, facts.streams, facts.jobs, facts.sealed_jobs, tree)


def _read_back(
    reader: StoreReader,
    keyring: Keyring,
    stored: object,
    facts: StreamFacts,
    failures: FirstFailure,
    pairs: Pairs,
) -> None:
    """A stream the pass set aside, read whole in version order and judged as a read of the
    stream judges it: its failure, or its facts and counterparts as the pass would have had them."""
    try:
        events = reader.stream_events(stored)
        _judge_stream(keyring, stored, events, facts, pairs)
    except IntegrityFailure as failure:
        failures.add(stored, OWN, failure)


def _judge_stream(
    keyring: Keyring, stored: object, events: list[StoredEvent], facts: StreamFacts, pairs: Pairs
) -> None:
    if not events:
        return  # gone since the pass: nothing of it is left to judge
    stream = events[0].originator_id
    assert isinstance(stream, UUID)  # read back by its id: `stream_events` parsed it
    verified = verify_stream(keyring, stream, events)
    first, last = verified[0], verified[-1]
    if first.stored.topic == SNAPSHOT_TOPIC:
        facts.snapshots.add(stream)
    elif first.stored.topic == WITNESS_TOPIC:
        pairs.met(stored, witness_counterpart(first.body))
    facts.stream(len(verified))
    if first.stored.topic != JOB_STARTED_TOPIC:
        return
    if last.stored.topic != SEAL_TOPIC:
        facts.jobs += 1
        return
    started = orjson.loads(first.body)
    sealed = seal_facts(last.body)
    counterpart = facts.sealed_job(
        stored, stream, started, verified[-2].body, last.stored.originator_version, sealed
    )
    pairs.met(stored, counterpart)
