"""Another tenant's job, run or receipt costs what a free id costs, on SQLite and PostgreSQL.

Response time must not say whether an id is held by another tenant. Timings are not asserted
(they belong in a measurement, not a pass/fail test); what a lookup does is: the lookup of an id
another tenant holds sends the store the same statements, of the same kinds, as the lookup of an
id nobody holds, builds as many records from rows, and checks as many MACs, over as many bytes
(to the size class), and decodes as many records (another tenant's first record is checked and
decoded to read its tenant, and nothing more of its stream is read; for a free id, a stand-in
record of the same kind is, `application.tenancy.StandIn`). The store is checkpointed first, as
every CLI write leaves it, so the reads are held against proven heads as users' reads are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent
from support.api_support import Api
from support.ledger_fixtures import store_of

from domain.checkpoint import CHECKPOINT_STREAM
from domain.context_assembly import ContextCaller, ContextRequest
from domain.errors import NotFoundError
from domain.events import RunStarted
from domain.governance import Actor, Motion, Vote
from domain.job import Job
from domain.receipt import MemoryView, ReceiptKind
from domain.replay_access import ReplayMode
from domain.run_draft import RunDraft
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.storage.checkpoints.head_check import HeadCheck, ProvenHead
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.mapper import SignedMapper
from infrastructure.storage.records.signed_record import VerifiedRecord, stream_header

Statement = tuple[str, tuple[tuple[str, Any], ...]]
ADMIN = Actor.of("adam", ["admin", "auditor", "council", "operator"])


@dataclass
class Work:
    """What one lookup asked of the store and of the keys: statements (method and options),
    streams' heads proven against the newest checkpoint, records built (from the rows read, or a
    stand-in's), MACs checked, the bytes under them, and records decoded."""

    statements: list[Statement] = field(default_factory=list)
    proofs: int = 0
    records: int = 0
    macs: int = 0
    mac_bytes: int = 0
    decodes: int = 0

    def cost(self) -> tuple[object, ...]:
        """What decides the time a lookup takes, the bytes MAC-checked to their size class (a
        power of two: an id, an input, a tenant's name differ by a few bytes between records)."""
        size_class = self.mac_bytes.bit_length()
        return self.statements, self.proofs, self.records, self.macs, size_class, self.decodes


@contextmanager
def lookup_work(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    """Everything the block asks of the events table, the keyring and the mapper.

    The newest checkpoint is read (and its record checked and decoded) now and then, whatever
    is looked up (`HeadCheck` keeps it a while): that work is not the lookup's, and left out."""
    recorder = store_of(ledger).recorder
    work = Work()
    checkpoint_header = stream_header(CHECKPOINT_STREAM)

    def probe(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if args[0] != CHECKPOINT_STREAM:
                work.statements.append((name, tuple(sorted(kwargs.items()))))
            return original(*args, **kwargs)

        return counted

    verify, decode, built = Keyring.verify, SignedMapper.decode, StoredEvent.__init__
    heads = HeadCheck.heads

    def counted_heads(check: HeadCheck, streams: Sequence[UUID]) -> dict[UUID, ProvenHead]:
        work.proofs += len(streams)
        return heads(check, streams)

    def counted_verify(keyring: Keyring, key_id: str, message: bytes, tag: bytes) -> bool:
        if not message.startswith(checkpoint_header):
            work.macs += 1
            work.mac_bytes += len(message)
        return verify(keyring, key_id, message, tag)

    def counted_build(record: StoredEvent, originator_id: Any, *args: Any, **kwargs: Any) -> None:
        work.records += str(originator_id) != str(CHECKPOINT_STREAM)
        built(record, originator_id, *args, **kwargs)

    def counted_decode(mapper: SignedMapper, record: VerifiedRecord) -> Any:
        work.decodes += record.stored.originator_id != CHECKPOINT_STREAM
        return decode(mapper, record)

    with monkeypatch.context() as patched:
        for name in ("select_events", "select_streams"):
            patched.setattr(recorder, name, probe(name, getattr(recorder, name)))
        patched.setattr(Keyring, "verify", counted_verify)
        patched.setattr(SignedMapper, "decode", counted_decode)
        patched.setattr(StoredEvent, "__init__", counted_build)
        patched.setattr(HeadCheck, "heads", counted_heads)
        yield work


def refused_work(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, look_up: Callable[[], object]
) -> Work:
    with lookup_work(ledger, monkeypatch) as work, pytest.raises(NotFoundError):
        look_up()
    return work


def free_work(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, look_up: Callable[[], object]
) -> Work:
    """What the lookup of a free id asks, once its stand-in is made (the first time one is
    needed in the process, and never again)."""
    refused_work(ledger, monkeypatch, look_up)
    return refused_work(ledger, monkeypatch, look_up)


def answered_work(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, look_up: Callable[[], object]
) -> tuple[object, Work]:
    with lookup_work(ledger, monkeypatch) as work:
        answer = look_up()
    return answer, work


def before_ids_were_scoped(monkeypatch: pytest.MonkeyPatch, record: Callable[[], object]) -> None:
    """``record`` as a ledger did before ids were scoped by tenant: every job and run under its
    id alone, whatever its tenant (the default tenant's names)."""
    with monkeypatch.context() as before_scoping:
        unscoped = classmethod(lambda cls, fields: fields[cls.NAME_FIELD])
        before_scoping.setattr(Job, "name_of", unscoped)
        before_scoping.setattr(Job, "scoped_id", property(lambda job: job.job_id))
        before_scoping.setattr(RunDraft, "name_of", unscoped)
        record()


CHECKPOINTED = pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointed", "not"])


def job_lookups(ledger: Ledger, tenant: str) -> dict[str, Callable[[str], object]]:
    """Every use case that looks a job up by id for ``tenant`` (the HTTP routes with a job id
    ask `owned_name` first: `api.context`), each refusing an id the tenant does not hold."""
    return {
        "owned_name": lambda job_id: ledger.jobs.owned_name(job_id, tenant),
        "get": lambda job_id: ledger.jobs.get(job_id, tenant=tenant),
        "stream": lambda job_id: ledger.jobs.stream(job_id, tenant=tenant),
        "verify": lambda job_id: ledger.jobs.verify(job_id, tenant=tenant),
        "replay record": lambda job_id: ledger.replays.record(job_id, 1, tenant=tenant),
        "replay": lambda job_id: ledger.replays.run(job_id, ReplayMode.AUDIT, ADMIN, tenant=tenant),
        "governance log": lambda job_id: ledger.governance.log(job_id, tenant=tenant),
        "force-continue": lambda job_id: ledger.governance.request_force_continue(
            job_id, "why", ADMIN, tenant=tenant
        ),
        "vote": lambda job_id: ledger.governance.vote(
            job_id, Motion.FORCE_CONTINUE, Vote.APPROVE, ADMIN, tenant=tenant
        ),
    }


@CHECKPOINTED
def test_another_tenants_job_id_costs_what_a_free_one_costs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="held-by-default")
    ledger.jobs.run("2 + 3", "s1", job_id="held-by-beta", tenant="beta")
    if checkpointed:
        ledger.checkpoints.write()
    for what, look_up in job_lookups(ledger, "acme").items():
        free = free_work(ledger, monkeypatch, partial(look_up, "free-id"))
        assert free.statements, what  # the lookup does read the store
        for held in ("held-by-default", "held-by-beta"):
            held_work = refused_work(ledger, monkeypatch, partial(look_up, held))
            assert held_work.cost() == free.cost(), (what, held)
    assert ledger.jobs.name("held-by-default", "acme") is None
    assert not ledger.jobs.exists("held-by-default", tenant="acme")


@CHECKPOINTED
def test_a_job_another_tenant_recorded_before_ids_were_scoped_costs_what_a_free_id_costs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """The default tenant's names are the ids alone, where beta's older job lies: whose it is
    is read from its first record, and a free id pays for a stand-in's."""
    before_ids_were_scoped(
        monkeypatch, lambda: ledger.jobs.run("2 + 3", "s1", job_id="legacy", tenant="beta")
    )
    if checkpointed:
        ledger.checkpoints.write()
    for what, look_up in job_lookups(ledger, "default").items():
        free = free_work(ledger, monkeypatch, partial(look_up, "free-id"))
        assert free.records == free.macs == free.decodes == 1, what
        legacy = refused_work(ledger, monkeypatch, partial(look_up, "legacy"))
        assert legacy.cost() == free.cost(), what  # its first record read, not its stream
    assert ledger.jobs.get("legacy", tenant="beta").tenant == "beta"


@CHECKPOINTED
def test_own_jobs_are_still_verified_whole(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """Deciding whose a job is from its first record leaves the rest as it was: every event of
    one's own job, and its witness, checked before it is used."""
    ledger.jobs.run("2 + 3", "s1", job_id="mine", tenant="acme")
    if checkpointed:
        ledger.checkpoints.write()
    job, work = answered_work(ledger, monkeypatch, lambda: ledger.jobs.get("mine", tenant="acme"))
    assert isinstance(job, Job) and job.sealed
    assert work.macs >= job.version + 1  # every event and the seal's witness


def receipt_lookups(ledger: Ledger, tenant: str) -> dict[str, Callable[[str], object]]:
    return {
        "get": lambda receipt_id: ledger.receipts.get(receipt_id, tenant, None),
        "verify": lambda receipt_id: ledger.receipts.verify(receipt_id, tenant),
        "replay": lambda receipt_id: ledger.receipts.replay(
            receipt_id, tenant, ADMIN, MemoryView.CURRENT
        ),
    }


@CHECKPOINTED
def test_another_tenants_receipt_id_costs_what_a_free_one_costs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    caller = ContextCaller("support-bot", ("operator",))
    ask = Assembly(ReceiptKind.CONTEXT, "beta", caller, ContextRequest("alice", 10), None)
    emitted = ledger.receipts.emit(ask)
    receipt_id = emitted["receipt"]["receipt_id"]
    if checkpointed:
        ledger.checkpoints.write()
    for what, look_up in receipt_lookups(ledger, "acme").items():
        free = free_work(ledger, monkeypatch, partial(look_up, "rct-" + "0" * 32))
        assert free.statements and free.records == free.macs == free.decodes == 1, what
        held = refused_work(ledger, monkeypatch, partial(look_up, receipt_id))
        assert held.cost() == free.cost(), what
    assert ledger.receipts.get(receipt_id, "beta", ADMIN)["signature"] == emitted["signature"]


def run_lookups(ledger: Ledger, tenant: str) -> dict[str, Callable[[str], object]]:
    return {
        "get": lambda run_id: ledger.run_uploads.get(run_id, tenant),
        "append": lambda run_id: ledger.run_uploads.append(run_id, tenant, []),
        "abandon": lambda run_id: ledger.run_uploads.abandon(run_id, tenant, ADMIN, "gone"),
        "complete": lambda run_id: ledger.run_uploads.complete(run_id, tenant, "done"),
    }


@CHECKPOINTED
def test_another_tenants_run_id_costs_what_a_free_one_costs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """acme's runs are scoped by its tenant; beta's older run lies under its id alone, where
    the default tenant's names are: neither tells the other tenant more than a free id."""
    started = RunStarted(job_id="held-run", seed="s1", input="say hello")
    ledger.run_uploads.open(started, "acme")
    legacy = RunStarted(job_id="legacy-run", seed="s1", input="say hello")
    before_ids_were_scoped(monkeypatch, lambda: ledger.run_uploads.open(legacy, "beta"))
    if checkpointed:
        ledger.checkpoints.write()
    for tenant, held in (("default", "legacy-run"), ("default", "held-run"), ("beta", "held-run")):
        for what, look_up in run_lookups(ledger, tenant).items():
            free = free_work(ledger, monkeypatch, partial(look_up, "free-run"))
            assert free.statements, what
            held_work = refused_work(ledger, monkeypatch, partial(look_up, held))
            assert held_work.cost() == free.cost(), (what, held)
    assert store_of(ledger).stream_exists(RunDraft.id_for("legacy-run"))  # the bare name


@CHECKPOINTED
def test_every_http_route_with_an_id_costs_the_same_for_another_tenants_id_as_for_a_free_one(
    api: Api, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """Through the service, on each family of routes that takes an id: jobs (and their events,
    replays and governance), runs and receipts."""
    ledger = api.ledger
    ledger.jobs.run("2 + 3", "s1", job_id="held")
    caller = ContextCaller("support-bot", ("operator",))
    ask = Assembly(ReceiptKind.CONTEXT, "default", caller, ContextRequest("alice", 10), None)
    receipt_id = ledger.receipts.emit(ask)["receipt"]["receipt_id"]
    before_ids_were_scoped(
        monkeypatch,
        lambda: ledger.run_uploads.open(RunStarted(job_id="run", seed="s1", input="hi"), "beta"),
    )
    if checkpointed:
        ledger.checkpoints.write()
    routes = [
        ("acme", "/v1/jobs/{}", "held"),
        ("acme", "/v1/jobs/{}/events", "held"),
        ("acme", "/v1/jobs/{}/replays/1", "held"),
        ("acme", "/v1/jobs/{}/governance", "held"),
        ("acme", "/v1/receipts/{}", receipt_id),
        ("acme", "/v1/receipts/{}/verify", receipt_id),
        ("default", "/v1/runs/{}", "run"),
    ]
    callers = {"acme": "operator", "default": "default_operator"}
    free_ids = {"held": "free-id", receipt_id: "rct-" + "0" * 32, "run": "free-run"}

    def answered(tenant: str, path: str) -> Work:
        with lookup_work(ledger, monkeypatch) as work:
            assert api.get(path, callers[tenant]).status_code == 404
        return work

    for tenant, route, held in routes:
        answered(tenant, route.format(free_ids[held]))  # its stand-in made, once a process
        free = answered(tenant, route.format(free_ids[held]))
        assert free.statements, route
        assert answered(tenant, route.format(held)).cost() == free.cost(), route
