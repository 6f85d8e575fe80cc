"""A store holding every kind of stream the ledger keeps, recorded through ``mace``, for attacks.

Jobs with their witnesses, the declared snapshots, a SEM entry written twice and read, a replay's
records, a what-if's record, a halt set and cleared, a tenant's memory log, policy book and
receipts, and the checkpoints every writing command ends with. `stream_kinds` sorts the
stored streams into those kinds by the topic of their first event, so an attack can pick the
stream it edits by what it is, not by an id the test would have to know.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from support.cli_output import canonical_line
from support.ledger_fixtures import RawTable
from support.receipt_examples import BUNDLE
from support.replay_cli import ROUTER_ID

TENANT = ("--tenant", "acme")

# The kinds a stream can be, by a part of its first event's topic (checked in this order).
KINDS: tuple[tuple[str, str], ...] = (
    ("checkpoints", "LedgerCheckpoints"),
    ("witnesses", "JobSealWitness"),
    ("jobs", "domain.job:Job."),
    ("snapshots", "domain.snapshot:"),
    ("SEM entries", "domain.sem:"),
    ("governance records", "domain.governance:"),
    ("replay records", "domain.replay_record:"),
    ("what-if records", "domain.whatif_record:"),
    ("tenant memory logs", "domain.memories:"),
    ("policy books", "domain.policy_book:"),
    ("receipts", "domain.receipt:"),
    ("key checks", "domain.key_check:"),
)


def record_everything(mace: Callable[..., str], bundle: Path) -> str:
    """Record one of every kind of stream; the id of the job that read the SEM entry.

    ``mace(actor, roles, *argv)`` runs one command, which must succeed; ``bundle`` is a path the
    policy bundle may be written to.
    """
    for text, seed in (("my favorite color is red", "s1"), ("my favorite color is blue", "s2")):
        mace("olga", "operator", "run", text, "--seed", seed, "--user", "u1")
    out = mace(
        "olga",
        "operator",
        "run",
        "what is my favorite color",
        "--seed",
        "s3",
        "--user",
        "u1",
        "--json",
    )
    job_id = str(canonical_line(out)["job_id"])
    for _ in range(2):
        mace("ana", "admin,auditor", "replay", job_id)
    # A what-if under the router the job declared: nothing changes (exit 0), one record.
    mace("ana", "auditor", "replay", job_id, "--with", f"router={ROUTER_ID}")
    mace("sec", "admin", "governance", "halt", ROUTER_ID, "--reason", "key leak")
    mace("cleo", "council", "governance", "clear", ROUTER_ID)
    for fact, value in (("plan", '"gold"'), ("tier", '"2"'), ("region", '"eu"')):
        key = f"user/customer/alice/{fact}"
        mace("wes", "operator", "memories", "add", "--fact", key, value, *TENANT)
    bundle.write_text(BUNDLE, encoding="utf-8")
    for _ in range(3):
        mace("ada", "auditor", "policy", "set", str(bundle), *TENANT)
    for query in ("alice plan", "alice tier", "alice region"):
        mace("support-bot", "operator", "context", query, *TENANT)
    return job_id


def stream_kinds(table: RawTable) -> dict[str, list[tuple[UUID, int]]]:
    """Every stored stream as (id, number of events), by kind; longest streams first."""
    rows = table.execute(
        "SELECT originator_id, originator_version, topic FROM {table}"
        " ORDER BY originator_id, originator_version"
    )
    first_topic: dict[UUID, str] = {}
    lengths: dict[UUID, int] = defaultdict(int)
    for originator_id, _, topic in rows:
        stream = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
        first_topic.setdefault(stream, topic)
        lengths[stream] += 1
    kinds: dict[str, list[tuple[UUID, int]]] = defaultdict(list)
    for stream, topic in first_topic.items():
        kind = next((name for name, part in KINDS if part in topic), f"unknown: {topic}")
        kinds[kind].append((stream, lengths[stream]))
    for streams in kinds.values():
        streams.sort(key=lambda s: (-s[1], str(s[0])))
    return dict(kinds)
