"""``mace export``: one sealed job and every stream its replay reads, as a signed bundle.

The streams are read as the ledger reads them (every one verified), and the records copied
verbatim, each with its tlog-proof in the newest checkpoint (written first if it does not
cover them all). A ``--redact`` export rewrites what seed 003's safe export leaves out
(infrastructure/bundle_redaction.py says what) and says so in the manifest.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Final
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from domain.canonical import canonical_json, digest
from domain.determinism import iso_text
from domain.errors import InvalidInput
from domain.fork import lineage_of
from domain.governance import Governance, governance_scope_of_job, halt_scopes
from domain.job import DEFAULT_TENANT, Job, JobSealWitness
from domain.naming import tenant_and_key, tenant_scoped
from domain.sem import SemEntry
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.config import PrivacyPolicy, parse_config
from infrastructure.application.ledger import Ledger
from infrastructure.application.records import parse_envelope, with_body
from infrastructure.bundles.format import (
    FORMAT,
    ROLES,
    SIGNING_CONTEXT,
    BundleError,
    BundleStream,
    Role,
)
from infrastructure.bundles.inclusion import Record
from infrastructure.bundles.tlog_proofs import tlog_proof_member
from projections.redaction import (
    PrivacyNeedles,
    full_io_content,
    leak,
    redact_job_body,
    redact_sem_body,
)

STARTED_TOPIC: Final = get_topic(Job.Started)

REDACTION_POLICY: Final = {
    "model_io": "prompt, response and tool result content removed (null); their hashes kept",
    "pii": (
        "values recorded under SEM attributes the job's privacy snapshot denies, and every text"
        " of the job that contains one, replaced by [REDACTED:pii]; SEM entries of those"
        " attributes left out"
    ),
    "verification": (
        "a redacted record keeps its key id and original MAC (the job's seal still covers it);"
        " its new body is vouched for by this manifest's signature only"
    ),
}


def _stream(ledger: Ledger, role: Role, prefix: str, key: str, stream_id: UUID) -> BundleStream:
    return BundleStream(role, f"{prefix}:{key}", stream_id, ledger.records.verified(stream_id))


def _sem_stream(ledger: Ledger, tenant: str, key: str, stamps: set[str]) -> BundleStream | None:
    """The tenant's SEM entry under the key up to the last version the job read or wrote (later
    jobs' writes are not this job's business); None when the job met no stored version of it."""
    stream_id = SemEntry.id_in(tenant, key)
    read = ledger.records.verified_events(stream_id)
    records = [record for record, _ in read]
    events = [event for _, event in read]
    met = [
        i
        for i, e in enumerate(events)
        if isinstance(e, SemEntry.Event) and iso_text(e.timestamp) in stamps
    ]
    if not met:
        return None
    kept = records[: max(met) + 1]
    name = f"{SemEntry.NAME_PREFIX}:{tenant_scoped(tenant, key)}"
    return BundleStream("sem", name, stream_id, kept)


def _sem_stamps(job: Job) -> dict[str, set[str]]:
    """For each SEM key the job read or wrote, the ``last_updated`` stamps it recorded."""
    stamps: dict[str, set[str]] = {}
    for fact in job.facts:
        if fact.event_type not in {"SemRead", "SemWrite"}:
            continue
        key, stamp = fact.payload.get("key"), fact.payload.get("last_updated")
        if isinstance(key, str):
            found = stamps.setdefault(key, set())
            if isinstance(stamp, str):
                found.add(stamp)
    return stamps


def collect_streams(
    ledger: Ledger, job_id: str, tenant: str
) -> tuple[Job, list[BundleStream], list[str]]:
    """The tenant's job's streams, each verified as the ledger reads it, and the snapshots it
    lacks."""
    job = ledger.jobs.get(job_id, tenant=tenant)
    if not job.sealed:
        raise BundleError(f"job {job_id} is open: only completed, sealed jobs can be exported")
    named = job.scoped_id
    streams = [
        _stream(ledger, "job", Job.NAME_PREFIX, named, Job.id_for(named)),
        _stream(
            ledger,
            "seal_witness",
            JobSealWitness.NAME_PREFIX,
            named,
            JobSealWitness.id_for(named),
        ),
    ]
    missing: list[str] = []
    present: list[str] = []
    # A fork's kept iterations were decided under the snapshots of the job it forked: its
    # replay needs them too (`domain.fork`).
    lineage = lineage_of(job.provenance)
    kept = {} if lineage is None else lineage.prefix_snapshot_ids
    declared = [snapshot_id for _, snapshot_id in sorted(job.snapshot_ids.items())]
    for snapshot_id in [*declared, *(snapshot_id for _, snapshot_id in sorted(kept.items()))]:
        if snapshot_id in present or snapshot_id in missing:
            continue
        if not ledger.records.exists(Snapshot.id_for(snapshot_id)):
            missing.append(snapshot_id)
            continue
        ledger.snapshots.get(snapshot_id)  # its content address still holds
        present.append(snapshot_id)
        streams.append(
            _stream(
                ledger, "snapshot", Snapshot.NAME_PREFIX, snapshot_id, Snapshot.id_for(snapshot_id)
            )
        )
    for key, stamps in sorted(_sem_stamps(job).items()):
        sem = _sem_stream(ledger, job.tenant, key, stamps)
        if sem is not None:
            streams.append(sem)
    scopes = [governance_scope_of_job(named)]
    scopes += [scope for s in present for scope in halt_scopes(s, job.tenant)]
    for scope in scopes:
        if ledger.records.exists(Governance.id_for(scope)):
            streams.append(
                _stream(
                    ledger, "governance", Governance.NAME_PREFIX, scope, Governance.id_for(scope)
                )
            )
    return job, streams, missing


# --- export ------------------------------------------------------------------------------------


def _body(record: StoredEvent) -> bytes:
    return parse_envelope(record.state, record.originator_id, record.originator_version).body


def _key_id(record: StoredEvent) -> str:
    return parse_envelope(record.state, record.originator_id, record.originator_version).key_id


def _privacy(ledger: Ledger, job: Job) -> PrivacyPolicy:
    snapshot_id = job.snapshot_ids.get(SnapshotKind.PRIVACY.value)
    if snapshot_id is None or not ledger.records.exists(Snapshot.id_for(snapshot_id)):
        msg = f"cannot redact job {job.job_id}: its privacy snapshot is not in the ledger"
        raise BundleError(msg)
    try:
        policy = parse_config(SnapshotKind.PRIVACY, ledger.snapshots.get(snapshot_id).payload)
    except ValueError:
        msg = f"cannot redact job {job.job_id}: privacy snapshot {snapshot_id} is unusable"
        raise BundleError(msg) from None
    assert isinstance(policy, PrivacyPolicy)
    return policy


def redact(ledger: Ledger, job: Job, streams: list[BundleStream]) -> dict[str, Any]:
    """Rewrite ``streams`` as a safe export carries them; returns the manifest's account of it."""
    needles = PrivacyNeedles(frozenset(_privacy(ledger, job).deny_sem_attributes))
    for fact in job.facts:
        needles.collect(fact.payload)
    omitted = _omit_denied_sem(streams, needles)
    for stream in streams:
        if stream.role in {"job", "sem"}:
            _rewrite(stream, needles)
    for stream in streams:
        _refuse_leaks(job.job_id, stream, needles)
    return {
        "policy": REDACTION_POLICY,
        "denied_sem_attributes": sorted(needles.denied),
        "records": [
            {
                "stream": stream.name,
                "version": version,
                "reasons": sorted({r.reason for r in found}),
                "paths": [r.path for r in found],
                "body_sha256": hashlib.sha256(_body(stream.records[version - 1])).hexdigest(),
            }
            for stream in streams
            for version, found in sorted(stream.redactions.items())
        ],
        "omitted_streams": omitted,
    }


def _omit_denied_sem(streams: list[BundleStream], needles: PrivacyNeedles) -> list[dict[str, str]]:
    """Leave out the SEM entries of denied attributes; their values become needles too."""
    omitted: list[dict[str, str]] = []
    kept: list[BundleStream] = []
    for stream in streams:
        # A SEM stream is named sem:<key>, or sem:<tenant>|<key> (`tenant_scoped`).
        key = tenant_and_key(stream.name.split(":", 1)[1])[1]
        if stream.role != "sem" or not needles.is_denied(key):
            kept.append(stream)
            continue
        for record in stream.records:
            needles.collect({"key": key, **orjson.loads(_body(record))})
        omitted.append(
            {"name": stream.name, "reason": "the privacy snapshot denies this attribute"}
        )
    streams[:] = kept
    return omitted


def _rewrite(stream: BundleStream, needles: PrivacyNeedles) -> None:
    for position, record in enumerate(stream.records):
        body = orjson.loads(_body(record))
        if stream.role == "job":
            new, found = redact_job_body(body, record.topic == STARTED_TOPIC, needles)
        else:
            new, found = redact_sem_body(body, needles)
        if not found:
            continue
        stream.redactions[record.originator_version] = found
        state = with_body(record.state, canonical_json(new))
        stream.records[position] = StoredEvent(
            record.originator_id, record.originator_version, record.topic, state
        )


def _refuse_leaks(job_id: str, stream: BundleStream, needles: PrivacyNeedles) -> None:
    for record in stream.records:
        where = leak(orjson.loads(_body(record)), needles)
        if where is not None:
            msg = (
                f"cannot redact job {job_id}: a PII value remains in {stream.name} version"
                f" {record.originator_version} at {where}, a field that names things and is"
                " not rewritten"
            )
            raise BundleError(msg)


def _refuse_full_io(job: Job) -> None:
    kept = full_io_content((fact.event_type, fact.payload) for fact in job.facts)
    if kept:
        shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
        msg = (
            f"job {job.job_id} keeps model or tool content ({shown}): export it with --redact"
            " to leave that out, or with --include-full-io to include it"
        )
        raise InvalidInput(msg)


def _record_entry(record: StoredEvent, redacted: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "originator_id": str(record.originator_id),
        "version": record.originator_version,
        "topic": record.topic,
    }
    try:
        entry["state"] = record.state.decode("utf-8")
    except UnicodeDecodeError:  # an encrypted store's records are not text
        entry["state_base64"] = base64.b64encode(record.state).decode("ascii")
    if redacted:
        entry["redacted"] = True
    return entry


def export_bundle(
    ledger: Ledger,
    job_id: str,
    *,
    tenant: str = DEFAULT_TENANT,
    redacted: bool = False,
    include_full_io: bool = False,
    log_origin: str | None = None,
) -> bytes:
    """The bundle of one sealed job of the tenant as canonical JSON bytes (newline-terminated).

    A job that keeps model responses or tool content is exported only redacted, or with
    ``include_full_io`` said outright: a bundle leaves the ledger's access control behind.
    ``log_origin``: ``MACE_LOG_ORIGIN``, the origin its proofs' checkpoint note names, if set.
    """
    job, streams, missing = collect_streams(ledger, job_id, tenant)
    if not redacted and not include_full_io:
        _refuse_full_io(job)
    redaction = redact(ledger, job, streams) if redacted else None
    entries: list[dict[str, Any]] = []
    listed: list[dict[str, Any]] = []
    records: list[Record] = []
    for stream in streams:
        flagged = [(r, r.originator_version in stream.redactions) for r in stream.records]
        own = [_record_entry(record, changed) for record, changed in flagged]
        records += flagged
        entries += own
        listed.append(
            {
                "role": stream.role,
                "name": stream.name,
                "originator_id": str(stream.originator_id),
                "records": len(own),
                "sha256": digest(own),
            }
        )
    key_ids = {_key_id(r) for s in streams for r in s.records}
    manifest: dict[str, Any] = {
        "job_id": job_id,
        "tenant": tenant,
        "capture_mode": job.capture_mode,
        "sealed_event_count": job.sealed_event_count,
        "streams": listed,
        "counts": {
            "records": len(entries),
            "streams": len(streams),
            **{role: sum(s.role == role for s in streams) for role in ROLES},
        },
        "missing_snapshots": missing,
        "key_ids": sorted(key_ids | {ledger.records.keyring.active_key_id}),
        "records_sha256": digest(entries),
        "redacted": redacted,
        "redaction": redaction,
    }
    key_id, mac = ledger.records.keyring.sign(SIGNING_CONTEXT + canonical_json(manifest))
    bundle = {
        "format": FORMAT,
        "manifest": manifest,
        "records": entries,
        "signature": {"key_id": key_id, "mac": mac.hex()},
        "checkpoint": tlog_proof_member(ledger.checkpoints, records, log_origin),
    }
    return canonical_json(bundle) + b"\n"
