"""Run bundles: one job and everything its replay reads, in one self-contained, signed file.

A bundle is canonical JSON: ``format`` (``mace-bundle/3``) and four members.

- ``records``: the stored records, verbatim (``originator_id``, ``version``, ``topic`` and the
  signed ``state`` envelope as text), stream after stream: the job, its seal witness, each
  declared snapshot, each SEM entry up to the version the job touched last, and the governance
  records of the job and of its snapshots (approvals, halts, replay results).
- ``manifest``: the job id and its tenant, every stream (role, name, id, record count, SHA-256
  of its records), counts, the key ids that signed anything, the SHA-256 over all records, and
  whether (and what) was redacted.
- ``signature``: HMAC-SHA256 of the manifest by the exporting store's active key (key id inside),
  so changing the manifest, or any record the manifest digests, fails verification.
- ``checkpoint``: the verifier key of the ledger's checkpoint notes and a C2SP tlog-proof for
  every record (`infrastructure.bundles.tlog_proofs`), which hold without any HMAC secret. A
  ``mace-bundle/2`` file, read still, carries a JSON checkpoint, its PEM key and a JSON proof a
  record instead (`infrastructure.bundles.inclusion`); a ``mace-bundle/1`` file none, and
  nothing in it is reported as included.

Reading a bundle verifies all of it before anything is used: the manifest signature, every
record's MAC, every stream's versions and seal, the job's witness, the digests, the checkpoint's
signature (under the pinned key, if one is given) and every record's inclusion proof. The verified
records are then loaded into an in-memory ledger (eventsourcing's POPO recorder: no database, no
file), so a bundle replay reads them through the very code the ledger uses. Secrets never enter a
bundle; a reader needs the keys, as any replay does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from domain.canonical import CanonicalJSONError, canonical_json, digest
from domain.checkpoint_note import VerifierKey
from domain.errors import IntegrityFailure, InvalidInput
from domain.job import DEFAULT_TENANT, Job
from domain.naming import tenant_scoped
from domain.validation_messages import first_problem
from infrastructure.application.checkpoints import PublicCheckpointKey, vkey_public_key
from infrastructure.application.ledger import Ledger
from infrastructure.application.records import Keyring, mac_message, parse_envelope, verify_stream
from infrastructure.bundles.inclusion import (
    CheckpointMember,
    Inclusion,
    Record,
    checked_inclusion,
    integrity_failure,
)
from infrastructure.bundles.tlog_proofs import TlogProofMember, checked_tlog_proofs
from projections.redaction import Redaction

FORMAT: Final = "mace-bundle/3"
SECOND_FORMAT: Final = "mace-bundle/2"
"""Before tlog-proofs: read still, its JSON checkpoint and proofs checked."""
FIRST_FORMAT: Final = "mace-bundle/1"
"""Before checkpoints: read still, nothing in it provable."""
READ_FORMATS: Final = (FORMAT, SECOND_FORMAT, FIRST_FORMAT)
SIGNING_CONTEXT: Final = b"mace-bundle/1 manifest\n"
"""Prefixed to the manifest before it is MACed: no record's MAC message starts like this.
Unchanged since the first format: the manifest's form did not change."""

Role = Literal["job", "seal_witness", "snapshot", "sem", "governance"]


class BundleError(InvalidInput):
    """A file that is not a usable bundle, or a job that cannot be bundled: bad input, exit 2."""


# --- the file's shape ----------------------------------------------------------------------------


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordEntry(_Shape):
    originator_id: UUID
    version: StrictInt = Field(ge=1)
    topic: str
    state: str | None = None
    state_base64: str | None = None
    redacted: StrictBool = False


class StreamEntry(_Shape):
    role: Role
    name: str
    originator_id: UUID
    records: StrictInt = Field(ge=0)
    sha256: str


class RedactedRecord(_Shape):
    stream: str
    version: StrictInt
    reasons: list[str]
    paths: list[str]
    body_sha256: str


class OmittedStream(_Shape):
    name: str
    reason: str


class RedactionSummary(_Shape):
    policy: dict[str, str]
    denied_sem_attributes: list[str]
    records: list[RedactedRecord]
    omitted_streams: list[OmittedStream]


class Manifest(_Shape):
    job_id: str
    # Bundles made before job ids were scoped by tenant name none: their job says whose it is.
    tenant: str | None = None
    capture_mode: str
    sealed_event_count: StrictInt
    streams: list[StreamEntry]
    counts: dict[str, StrictInt]
    missing_snapshots: list[str]
    key_ids: list[str]
    records_sha256: str
    redacted: StrictBool
    redaction: RedactionSummary | None


class Signature(_Shape):
    key_id: str
    mac: str = Field(pattern=r"^[0-9a-f]{64}$")


class BundleFile(_Shape):
    format: str
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    signature: Signature
    # Its shape is the format's (`_checkpoint_member`).
    checkpoint: dict[str, Any] | None = None


ROLES: Final[tuple[Role, ...]] = ("job", "seal_witness", "snapshot", "sem", "governance")


# --- streams -------------------------------------------------------------------------------------


@dataclass
class BundleStream:
    role: Role
    name: str
    originator_id: UUID
    records: list[StoredEvent]
    redactions: dict[int, list[Redaction]] = field(default_factory=dict)


# --- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A bundle whose every part has been verified with the reader's keyring."""

    name: str
    manifest: Manifest
    streams: list[BundleStream]
    keyring: Keyring
    """The reader's keys, plus the redacted records this manifest vouches for (if any)."""
    inclusion: Inclusion

    @property
    def job_id(self) -> str:
        return self.manifest.job_id

    @property
    def job_name(self) -> str:
        """The name of the job's stream (`Job.scoped_id`): where it was, and is imported, stored."""
        return tenant_scoped(self.manifest.tenant or DEFAULT_TENANT, self.job_id)

    @property
    def tenant(self) -> str:
        """Whose job it is: the manifest says, or else (an older bundle) the job's JobStarted."""
        if self.manifest.tenant is not None:
            return self.manifest.tenant
        job = next(stream for stream in self.streams if stream.role == "job")
        first = job.records[0] if job.records else None
        started = (
            b"{}"
            if first is None
            else parse_envelope(first.state, first.originator_id, first.originator_version).body
        )
        tenant = orjson.loads(started).get("tenant", DEFAULT_TENANT)
        assert isinstance(tenant, str)
        return tenant

    @property
    def redacted(self) -> bool:
        return self.manifest.redacted

    def records(self) -> list[StoredEvent]:
        return [r for s in self.streams for r in s.records]


class VouchedKeyring(Keyring):
    """A keyring that also accepts the exact redacted records a verified manifest vouches for.

    A redacted record keeps its original MAC (the job's seal commits to it) over a body it no
    longer has; its new body is bound by the bundle manifest's signature instead. Everything
    else is verified by the reader's own keys. It holds no secret of its own.
    """

    __slots__ = ("_inner", "_vouched")

    def __init__(self, inner: Keyring, vouched: frozenset[tuple[str, bytes, bytes]]) -> None:
        self._inner = inner
        self._vouched = vouched

    @property
    def active_key_id(self) -> str:
        return self._inner.active_key_id

    @property
    def key_ids(self) -> list[str]:
        return self._inner.key_ids

    @property
    def source(self) -> str:
        return self._inner.source

    def sign(self, message: bytes, key_id: str | None = None) -> tuple[str, bytes]:
        return self._inner.sign(message, key_id)

    def verify(self, key_id: str, message: bytes, tag: bytes) -> bool:
        return (key_id, message, tag) in self._vouched or self._inner.verify(key_id, message, tag)

    def has_key(self, key_id: str) -> bool:
        return self._inner.has_key(key_id)

    def __repr__(self) -> str:
        return f"VouchedKeyring({self._inner!r}, vouched={len(self._vouched)})"


def read_bundle(path: Path, keyring: Keyring, pinned: PublicCheckpointKey | None = None) -> Bundle:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read bundle {path}: {exc.strerror}") from None
    return parse_bundle(raw, str(path), keyring, pinned)


Pin = PublicCheckpointKey | VerifierKey
"""A checkpoint key the reader trusts: a PEM key (``--public-key``) or a verifier key
(``mace proof verify --vkey``)."""
Member = CheckpointMember | TlogProofMember


@dataclass(frozen=True)
class BundleRead:
    """A bundle file's parts, their shapes checked and nothing verified."""

    form: str
    shape: BundleFile
    entries: list[RecordEntry]
    member: Member | None

    def records(self, name: str) -> list[Record]:
        """Its records as stored (or as redacted), in order, and whether each was redacted."""
        return [
            (StoredEvent(e.originator_id, e.version, e.topic, _state(name, e)), e.redacted)
            for e in self.entries
        ]


def read_shape(raw: bytes, name: str) -> BundleRead:
    """The bundle file ``raw`` holds, nothing checked but its shape; BundleError if not one."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"{name} is not a MACE bundle: not JSON ({exc})") from None
    if not isinstance(data, dict) or "format" not in data:
        raise BundleError(f"{name} is not a MACE bundle: expected a JSON object with 'format'")
    form = data["format"]
    if form not in READ_FORMATS:
        expected = " or ".join(repr(known) for known in READ_FORMATS)
        raise BundleError(f"{name}: unsupported bundle format {form!r}: expected {expected}")
    try:
        shape = BundleFile.model_validate(data)
        if (shape.checkpoint is None) != (form == FIRST_FORMAT):
            has = "has no checkpoint" if shape.checkpoint is None else "has a checkpoint"
            raise BundleError(f"{name} is not a valid {form} file: it {has}")
        member: Member | None = None
        if form == FORMAT:
            member = TlogProofMember.model_validate(shape.checkpoint)
        elif form == SECOND_FORMAT:
            member = CheckpointMember.model_validate(shape.checkpoint)
        entries = [RecordEntry.model_validate(r) for r in shape.records]
    except ValidationError as exc:
        raise BundleError(f"{name} is not a valid {form} file: {first_problem(exc)}") from None
    return BundleRead(form, shape, entries, member)


def checked_proofs(
    name: str, member: Member | None, records: Sequence[Record], pinned: Pin | None
) -> Inclusion:
    """Every record's inclusion proof checked, as the bundle's format carries them."""
    if isinstance(member, TlogProofMember):
        return checked_tlog_proofs(name, member, records, pinned)
    if isinstance(pinned, VerifierKey):
        # A verifier key's material is the key itself: it pins a JSON checkpoint as its PEM would.
        pinned = vkey_public_key(pinned)
    return checked_inclusion(name, member, records, pinned)


def parse_bundle(
    raw: bytes, name: str, keyring: Keyring, pinned: PublicCheckpointKey | None = None
) -> Bundle:
    """Verify everything in a bundle file; BundleError for a bad file, MaceError if tampered.

    ``pinned``: the checkpoint public key the reader trusts; without it, the bundle's own.
    """
    read = read_shape(raw, name)
    shape, entries = read.shape, read.entries
    try:
        manifest = Manifest.model_validate(shape.manifest)
    except ValidationError as exc:
        raise BundleError(f"{name} is not a valid {read.form} file: {first_problem(exc)}") from None
    _check_signature(name, shape, keyring)
    lacking = sorted(set(manifest.key_ids) - set(keyring.key_ids))
    if lacking:
        raise BundleError(_lacking_keys(name, lacking))
    streams, raw_streams, vouched = _streams(name, manifest, entries, shape.records)
    view_keys = VouchedKeyring(keyring, vouched) if vouched else keyring
    for stream, listing in zip(streams, manifest.streams, strict=True):
        verify_stream(view_keys, stream.originator_id, stream.records)
        if len(stream.records) != listing.records:
            reason = f"holds {len(stream.records)} of the {listing.records} records listed"
            raise IntegrityFailure(listing.originator_id, len(stream.records) + 1, reason)
        if digest(raw_streams[listing.originator_id]) != listing.sha256:
            reason = "records differ from their digest in the manifest"
            raise IntegrityFailure(listing.originator_id, 1, reason)
    if digest(shape.records) != manifest.records_sha256:
        raise integrity_failure(name, "records are not those its manifest lists, in that order")
    inclusion = checked_proofs(name, read.member, read.records(name), pinned)
    return Bundle(name, manifest, streams, view_keys, inclusion)


def _lacking_keys(name: str, key_ids: list[str]) -> str:
    return (
        f"bundle {name} is signed with key id(s) {key_ids}, which this keyring lacks: add them"
        " to MACE_SIGNING_KEYS (or MACE_KEYRING_FILE)"
    )


def _check_signature(name: str, shape: BundleFile, keyring: Keyring) -> None:
    key_id = shape.signature.key_id
    if not keyring.has_key(key_id):
        raise BundleError(_lacking_keys(name, [key_id]))
    try:
        message = SIGNING_CONTEXT + canonical_json(shape.manifest)
    except CanonicalJSONError:
        raise integrity_failure(name, "its manifest has no canonical form") from None
    if not keyring.verify(key_id, message, bytes.fromhex(shape.signature.mac)):
        raise integrity_failure(name, "the manifest's signature does not verify (manifest changed)")


def _state(name: str, entry: RecordEntry) -> bytes:
    if (entry.state is None) == (entry.state_base64 is None):
        raise BundleError(f"{name}: a record needs exactly one of state and state_base64")
    if entry.state is not None:
        return entry.state.encode("utf-8")
    try:
        return base64.b64decode(entry.state_base64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise BundleError(f"{name}: a record's state_base64 is not base64") from None


def _streams(
    name: str, manifest: Manifest, entries: Sequence[RecordEntry], raw: list[dict[str, Any]]
) -> tuple[
    list[BundleStream], dict[UUID, list[dict[str, Any]]], frozenset[tuple[str, bytes, bytes]]
]:
    """The manifest's streams with their records (and those records as the file has them), and
    the redacted records the (verified) manifest vouches for."""
    listed = {s.originator_id: s for s in manifest.streams}
    if len(listed) != len(manifest.streams):
        raise integrity_failure(name, "its manifest lists a stream twice")
    job_stream = Job.id_in(manifest.tenant or DEFAULT_TENANT, manifest.job_id)
    if [s.originator_id for s in manifest.streams if s.role == "job"] != [job_stream]:
        raise integrity_failure(name, f"its manifest does not list job {manifest.job_id}'s stream")
    grouped: dict[UUID, list[StoredEvent]] = {s.originator_id: [] for s in manifest.streams}
    raw_grouped: dict[UUID, list[dict[str, Any]]] = {s.originator_id: [] for s in manifest.streams}
    vouching = {
        (r.stream, r.version): r.body_sha256
        for r in (manifest.redaction.records if manifest.redaction else [])
    }
    vouched: set[tuple[str, bytes, bytes]] = set()
    for entry, raw_entry in zip(entries, raw, strict=True):
        stream = listed.get(entry.originator_id)
        if stream is None:
            raise IntegrityFailure(entry.originator_id, entry.version, "not in the manifest")
        state = _state(name, entry)
        grouped[entry.originator_id].append(
            StoredEvent(entry.originator_id, entry.version, entry.topic, state)
        )
        raw_grouped[entry.originator_id].append(raw_entry)
        expected = vouching.pop((stream.name, entry.version), None)
        if entry.redacted != (expected is not None):
            reason = (
                "redacted, but its manifest does not say so"
                if entry.redacted
                else ("its manifest says it is redacted, but it is not marked so")
            )
            raise IntegrityFailure(entry.originator_id, entry.version, reason)
        if expected is None:
            continue
        envelope = parse_envelope(state, entry.originator_id, entry.version)
        if hashlib.sha256(envelope.body).hexdigest() != expected:
            reason = "redacted body differs from the one its manifest vouches for"
            raise IntegrityFailure(entry.originator_id, entry.version, reason)
        message = mac_message(entry.originator_id, entry.version, entry.topic, envelope.body)
        vouched.add((envelope.key_id, message, envelope.mac))
    if vouching:
        (stream_name, version), _ = next(iter(vouching.items()))
        raise integrity_failure(name, f"{stream_name} version {version} is redacted but missing")
    streams = [
        BundleStream(s.role, s.name, s.originator_id, grouped[s.originator_id])
        for s in manifest.streams
    ]
    return streams, raw_grouped, frozenset(vouched)


# --- the in-memory ledger a bundle is read through ----------------------------------------------


@contextmanager
def bundle_ledger(bundle: Bundle) -> Iterator[Ledger]:
    """A ledger holding exactly the bundle's records, in memory, gone when the block ends."""
    with Ledger.in_memory(bundle.keyring, bundle.records()) as ledger:
        yield ledger
