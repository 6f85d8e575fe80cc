"""Eight processes recording at once, on SQLite and PostgreSQL: none fails.

Writers of one record (one SEM key, one tenant's memory log) race for its next version: a loser
pauses (backoff with jitter) and reads and decides again, within a budget far past what eight
writers can make it lose (`LedgerStore.racing`, `write_retries`), where it used to give up with
STORE_BUSY after five immediate retries (on PostgreSQL 10 of 80 writes to one SEM key and 18 of
80 memory writes for one tenant failed so). Every write is then in the record's history once,
each writer's in the order it made them, the history in the log's order, and the ledger verifies
as `mace verify --all` checks it. The store starts checkpointed, and the writers hold one ledger
each (as service processes do) or open one per write that checkpoints on close (as `mace sem put`
and `mace memories add` do).

Every job used to append to one store-wide job registry stream in its own transaction, and every
receipt to its tenant's receipt book, so writers raced for one version: four processes recording
Stage-0 jobs lost one job in eight to STORE_BUSY. A job, or a receipt, now writes only its own
streams. Each writer here is a process of its own (its own connections, nothing shared but the
store), all released at once, and not one attempt may fail: everything is stored once, listed
once, and the store verifies.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.ledger_fixtures import store_of, subprocess_env
from support.sample_job import job_ids

from domain.determinism import iso_text
from domain.sem import SemEntry, SemRecord
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

# The writers also race to set up the store: on SQLite, processes (not threads) take its locks.
pytestmark = pytest.mark.empty_store

WRITERS = 8
EACH = 5
ONE_RECORD_EACH = 10
"""Writes each writer makes to the one record they all write: 80 in all, as the race was seen."""
SEM_KEY = "world/country/france/capital"
HANG_GUARD_SECONDS = 300
"""Far beyond what the writers need; only there so that a hang fails instead of blocking."""

WRITER = """
import sys
from domain.context_assembly import ContextCaller, ContextRequest
from domain.governance import Actor
from domain.receipt import ReceiptKind
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.storage.settings import Settings

writer, what, count, SEM_KEY, mode = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), *sys.argv[4:]
caller = ContextCaller("bot", ("operator",))

def write(ledger, n):
    if what == "jobs":
        print(ledger.jobs.run(f"what is {writer} + {n}?", "s1").job_id, flush=True)
    elif what == "sem":  # every writer writes the same key
        ledger.sem.put(SEM_KEY, f"{writer}-{n}")
        print(f"{writer}-{n}", flush=True)
    elif what == "memories":  # every writer appends to the same tenant's memory log
        key, actor = f"world/writer/w{writer}/n{n}", Actor.of("bot", ("operator",))
        memory = ledger.memories.remember_fact("acme", key, n, [], actor, None)
        print(memory.memory_id, flush=True)
    else:  # the same request from every writer: only the second and the count tell them apart
        request = ContextRequest("plan", 5)
        assembly = Assembly(ReceiptKind.CONTEXT, "acme", caller, request, None)
        answer = ledger.receipts.emit(assembly)
        assert "warning" not in answer, answer["warning"]
        print(answer["receipt"]["receipt_id"], flush=True)

if mode == "commands":  # each write opens the store and checkpoints on close, as mace does
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        with Ledger.open(Settings()) as ledger:
            write(ledger, n)
else:  # one ledger for all of a process's writes, as the HTTP service has
    with Ledger.open(Settings()) as ledger:
        print("ready", flush=True)
        sys.stdin.readline()  # every writer is open: go
        for n in range(count):
            write(ledger, n)
"""


def _at_once(store_url: str, what: str, each: int = EACH) -> list[str]:
    """What eight writer processes, released together, recorded: job or receipt ids."""
    return [line for lines in _by_writer(store_url, what, each) for line in lines]


def _by_writer(store_url: str, what: str, each: int, mode: str = "service") -> list[list[str]]:
    """What each of eight writer processes, released together, recorded, in its order; in
    ``mode`` "service" each holds one ledger open, in "commands" each write opens its own."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(writer), what, str(each), SEM_KEY, mode],
            env=subprocess_env(store_url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(WRITERS)
    ]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
    for writer in writers:  # released together, as far as one process can
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    recorded: list[list[str]] = []
    for writer in writers:
        out, err = writer.communicate(timeout=HANG_GUARD_SECONDS)
        assert (writer.returncode, err) == (0, ""), err
        recorded.append(out.split())
    every = [line for lines in recorded for line in lines]
    assert len(every) == len(set(every)) == WRITERS * each
    return recorded


def test_eight_processes_record_distinct_jobs_at_once_and_none_fails(
    settings: Settings, store_url: str
) -> None:
    Ledger.open(settings).close()  # the tables exist: only the recording is raced
    recorded = _at_once(store_url, "jobs")
    with Ledger.open(settings) as ledger:
        assert sorted(job_ids(ledger)) == sorted(recorded)
        summary = store_of(ledger).verify_all()
        assert (summary.jobs, summary.sealed_jobs) == (len(recorded), len(recorded))


def test_eight_processes_emit_receipts_for_one_tenant_at_once_and_none_fails(
    settings: Settings, store_url: str
) -> None:
    Ledger.open(settings).close()
    recorded = _at_once(store_url, "receipts")
    with Ledger.open(settings) as ledger:
        listed = ledger.receipts.listing("acme", limit=500)
        assert [row["number"] for row in listed] == list(range(len(recorded)))
        assert sorted(row["receipt_id"] for row in listed) == sorted(recorded)
        assert all(row["intact"] for row in listed)
        store_of(ledger).verify_all()


def sem_values_in_log_order(ledger: Ledger) -> list[str]:
    """The SEM key's values in log order, once its versions are found to stand in the log in
    version order, their ``last_updated`` to increase with them (F2: the latest wins) and a read
    to answer the last one."""
    events = [
        event
        for event in ledger.sem.sem_events("default", SEM_KEY)
        if isinstance(event, SemEntry.Stored | SemEntry.Overwritten)
    ]
    positions = ledger.sem.sem_positions("default", SEM_KEY)
    assert [event.originator_version for event in events] == list(range(1, len(events) + 1))
    in_log = [positions[event.originator_version] for event in events]
    assert in_log == sorted(set(in_log))
    stamps = [iso_text(event.timestamp) for event in events]
    assert stamps == sorted(set(stamps))
    assert ledger.sem.get(SEM_KEY)[1] == SemRecord(True, events[-1].value, stamps[-1])
    return [event.value for event in events]


def memory_ids_in_log_order(ledger: Ledger) -> list[str]:
    """The tenant's memories in log order (each writer wrote its own keys: all stay live), once
    the log's versions are found to stand in the log in version order."""
    log = ledger.memories.log("acme")
    assert log is not None
    positions = store_of(ledger).stream_positions([log.id])[log.id]
    in_log = [positions[version] for version in range(1, log.version + 1)]
    assert in_log == sorted(set(in_log))
    live = log.live()
    assert [memory.position for memory in live] == list(range(2, log.version + 1))
    return [memory.memory_id for memory in live]


@pytest.mark.parametrize("mode", ["service", "commands"])
@pytest.mark.parametrize("what", ["sem", "memories"])
def test_eight_processes_write_one_record_at_once_and_none_fails(
    settings: Settings, store_url: str, what: str, mode: str
) -> None:
    with Ledger.open(settings) as ledger:
        ledger.checkpoints.write()  # checkpointed, as every mace command leaves a store
    recorded = _by_writer(store_url, what, ONE_RECORD_EACH, mode)
    with Ledger.open(settings) as ledger:
        if what == "sem":
            history = sem_values_in_log_order(ledger)
        else:
            history = memory_ids_in_log_order(ledger)
        assert sorted(history) == sorted(line for lines in recorded for line in lines)
        # Each writer's writes in the order it made them (it printed each as it returned).
        for lines in recorded:
            assert [written for written in history if written in lines] == lines
        audit = ledger.checkpoints.verify_ledger()  # what `mace verify --all` checks
        assert audit.counts()["not_yet_checkpointed"] == 0
