"""``mace verify JOB_ID`` and ``mace verify --all``: integrity only, nothing is replayed.

``--check-retrievals`` also resolves a job's retrieval hits against its tenant's memory log: a hit
that does not resolve is the emitter's claim differing from the ledger (REPLAY_DIVERGENCE, as
replay finds it), never an integrity failure of a store whose bytes verified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from domain.checkpoint import CHECKPOINT_STREAM, SignedCheckpoint
from domain.checkpoint_note import SignedNote
from domain.errors import ErrorCode, IntegrityFailure, InvalidInput, MaceError
from domain.events import RetrievalRequest
from domain.job import DEFAULT_TENANT
from domain.witness_policy import WitnessPolicy
from infrastructure.application.checkpoints import CheckpointService, checked_note
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.governance import ABANDONED, RUNNING, UNRESOLVED
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.witnesses import Witnesses, cosigned_quorum, read_policy
from infrastructure.bundles.exported_checkpoints import read_checkpoint_file
from infrastructure.cli.common import emit_json
from infrastructure.cli.read_store import print_read_store, read_store_note
from projections.reflective_log import recorded_events


def verify_command(args: argparse.Namespace, settings: Settings) -> int:
    _check_arguments(args)
    # Read before the store is: a bad policy file is bad input, nothing opened.
    policy = None if args.policy is None else read_policy(args.policy)
    # Integrity only, nothing written: MACE_READ_STORE answers when set (named in the output).
    with Ledger.open_for_reading(settings) as ledger:
        note = read_store_note(ledger)
        try:
            counts = (
                _verify_all(ledger, settings, args.checkpoint, policy)
                if args.all
                else _verify_job(ledger, args)
            )
        except MaceError as exc:
            if args.json:
                emit_json({"ok": False, "error_code": exc.code.value, **exc.details, **note})
            else:
                print_read_store(note)
            print(f"mace: {exc}", file=sys.stderr)
            return EXIT_FAILED
    if args.json:
        emit_json({"ok": True, "error_code": None, **counts, **note})
        return EXIT_OK
    print_read_store(note)
    if args.all:
        print(
            f"ok: {counts['events']} events in {counts['streams']} streams verified "
            f"({counts['jobs']} jobs, {counts['sealed_jobs']} sealed); checkpoints:"
            f" {counts['checkpoints']} verified, the newest covers {counts['checkpointed']}"
            f" events; not yet checkpointed: {counts['not_yet_checkpointed']}"
        )
        if policy is not None:
            witnessed = counts["witnessed"]
            print(
                f"witness policy {args.policy}: checkpoint {witnessed['number']} is cosigned by"
                f" {', '.join(witnessed['cosigners']) or 'none'} (quorum {witnessed['quorum']});"
                + (
                    " no listed witness holds a larger tree of the log"
                    if witnessed["witnesses_asked"]
                    else f" as {args.checkpoint} carries them (no witness asked)"
                )
            )
        if args.checkpoint is not None:
            extended = counts["extends"]
            print(
                f"the store extends checkpoint {extended['number']} of {args.checkpoint}"
                f" (consistency proof from {extended['tree_size']} to {counts['checkpointed']}"
                " events holds)"
            )
        _print_unanswered(
            counts["abandoned_replays"], counts["running_replays"], counts["unresolved_replays"]
        )
    else:
        sequence = ", sequence and event ids checked" if args.check_sequence else ""
        retrievals = (
            f", {counts['retrievals_checked']} retrievals' hits resolve to stored memories"
            if args.check_retrievals
            else ""
        )
        sem = (
            f", {counts['sem_entries']} SEM entries verified to their checkpointed heads (a"
            " deleted version fails there; the run's SEM claims are checked by replay)"
            if counts["sem_entries"]
            else ""
        )
        print(
            f"ok: job {counts['job_id']}: {counts['events']} events verified"
            f" ({'sealed' if counts['sealed'] else 'open'}), {counts['snapshots']} snapshots"
            f" verified{sem}{sequence}{retrievals}"
        )
    return EXIT_OK


def _check_arguments(args: argparse.Namespace) -> None:
    """Options that do not go together are bad usage, refused before anything is read."""
    if (args.job_id is None) == (not args.all):
        raise InvalidInput("name one JOB_ID or give --all (see 'mace verify --help')")
    if args.all and args.check_sequence:
        raise InvalidInput("--check-sequence applies to one job: name a JOB_ID")
    if args.all and args.tenant is not None:
        raise InvalidInput("--tenant names the tenant of one job: --all verifies every tenant's")
    if args.checkpoint is not None and not args.all:
        raise InvalidInput("--checkpoint applies to --all: the whole store must extend it")
    if args.policy is not None and not args.all:
        raise InvalidInput("--policy applies to --all: the store's newest checkpoint must meet it")
    if args.all and args.check_retrievals:
        raise InvalidInput("--check-retrievals applies to one job: name a JOB_ID")


def _verify_all(
    ledger: Ledger, settings: Settings, witness: Path | None, policy: WitnessPolicy | None
) -> dict[str, Any]:
    """Integrity of every checkpoint and every stream, then that the store extends the exported
    checkpoint ``witness`` (if given: a JSON export, or a signed note such as ``checkpoint export
    --note`` writes), then the replay requests left without a result; before all, that the
    witness ``policy`` (if given) is met: by the note's own cosignatures when ``witness`` is a
    note, else by the newest checkpoint, the listed witnesses asked. Events after the newest
    checkpoint are counted: nothing has signed them yet.

    Without a witness a store restored from an older copy verifies: its shorter chain is intact.

    An abandoned request is not a verification failure: the ledger holds exactly what happened
    (a replay was asked for and its process stopped before recording a verdict). It is listed,
    so that the interrupted audit is seen and run again.
    """
    checkpoints = ledger.checkpoints
    # The file is read and its signature checked before the store is: bad input writes nothing.
    held = None if witness is None else read_checkpoint_file(witness)
    witnessed: dict[str, Any] = {}
    kept: SignedCheckpoint | None
    # The log origin is made only where a note or a policy needs it: a store with no checkpoint
    # yet has none to make it from, and a plain `verify --all` must still answer there.
    if isinstance(held, SignedNote):
        source = f"checkpoint note {witness}"
        kept, cosigners = _noted(checkpoints, held, settings.log_origin, policy, source)
    else:
        kept = None if held is None else checkpoints.verified(*held, f"checkpoint file {witness}")
        cosigners = None
        if policy is not None:
            # The witnesses first: what they cosigned is the outside evidence, and a store rolled
            # back or cut short is then named by the size a witness holds, whatever else it breaks.
            newest, cosigners = Witnesses(checkpoints, settings.witness_timeout).check_policy(
                policy, checkpoints.log_origin(settings.log_origin)
            )
            witnessed = _witnessed(newest, cosigners, policy, asked=True)
    if kept is not None and cosigners is not None and policy is not None:
        witnessed = _witnessed(kept, cosigners, policy, asked=False)
    audit = checkpoints.verify_ledger(kept, str(witness))
    unanswered = ledger.governance.unanswered_replays()
    return {
        **audit.counts(),
        **witnessed,
        "abandoned_replays": [u.as_json() for u in unanswered if u.status == ABANDONED],
        "running_replays": [u.as_json() for u in unanswered if u.status == RUNNING],
        "unresolved_replays": [u.as_json() for u in unanswered if u.status == UNRESOLVED],
    }


def _noted(
    checkpoints: CheckpointService,
    note: SignedNote,
    configured_origin: str | None,
    policy: WitnessPolicy | None,
    source: str,
) -> tuple[SignedCheckpoint, list[str] | None]:
    """The store's checkpoint the note states, once the note is signed by the log's key (the
    policy's ``log`` line, else this ledger's) and cosigned by the policy's quorum (checked
    offline: the note is the witnesses' word as it was kept); the policy's cosigners. A store
    holding no checkpoint of the note's size and root was rolled back or rewritten."""
    vkey = (
        checkpoints.verifier_key(checkpoints.log_origin(configured_origin))
        if policy is None
        else policy.log
    )
    body = checked_note(note, vkey, source)
    cosigners = (
        None
        if policy is None
        else cosigned_quorum(policy, note.text, note.signatures, f"{source}'s checkpoint")
    )
    stored = checkpoints.of_size(body.tree_size)
    if stored is None or bytes.fromhex(stored.checkpoint.root) != body.root:
        newest = checkpoints.newest()
        covers = 0 if newest is None else newest.checkpoint.tree_size
        reason = (
            f"{source} states tree size {body.tree_size} with root {body.root.hex()}, but the"
            f" store holds no checkpoint of that size and root (its newest covers {covers}"
            " events): the store was rolled back, its tail deleted or its log rewritten"
        )
        raise IntegrityFailure(
            CHECKPOINT_STREAM, 0 if newest is None else newest.checkpoint.number, reason
        )
    return stored, cosigners


def _witnessed(
    signed: SignedCheckpoint, cosigners: list[str], policy: WitnessPolicy, *, asked: bool
) -> dict[str, Any]:
    """What the policy was held to: the checkpoint, its cosigners, and whether the listed
    witnesses were asked (the newest checkpoint) or a note's kept cosignatures counted."""
    body = signed.checkpoint
    return {
        "witnessed": {
            "number": body.number,
            "tree_size": body.tree_size,
            "cosigners": cosigners,
            "quorum": policy.quorum,
            "witnesses_asked": asked,
        }
    }


def _print_unanswered(
    abandoned: list[dict[str, Any]],
    running: list[dict[str, Any]],
    unresolved: list[dict[str, Any]],
) -> None:
    line = f"replay requests without a result: {len(abandoned)} abandoned, {len(running)} running"
    if unresolved:
        line += (
            f", {len(unresolved)} unresolved (no result in the read store and no lease held on"
            " the primary: abandoned, or answered after the read store's head)"
        )
    print(line)
    for state, requests in (
        ("abandoned", abandoned),
        ("running", running),
        ("unresolved", unresolved),
    ):
        for r in requests:
            print(
                f"{state}: job {r['job_id']} attempt {r['attempt']} ({r['mode']} by"
                f" {r['actor_id']}, requested {r['requested_at']})"
            )


def _verify_job(ledger: Ledger, args: argparse.Namespace) -> dict[str, Any]:
    result = ledger.jobs.verify(
        args.job_id, check_sequence=args.check_sequence, tenant=args.tenant or DEFAULT_TENANT
    )
    counts: dict[str, Any] = {
        "job_id": result.job_id,
        "events": result.events,
        "sealed": result.sealed,
        "snapshots": result.snapshots,
        "sequence_checked": result.sequence_checked,
        "sem_entries": result.sem_entries,
    }
    if args.check_retrievals:
        counts["retrievals_checked"] = _check_retrievals(ledger, args)
    return counts


def _check_retrievals(ledger: Ledger, args: argparse.Namespace) -> int:
    """How many retrievals served from the tenant's memories were checked; REPLAY_DIVERGENCE
    naming the first hit that is no memory the log held where the retrieval says it stood. The
    store is intact (its bytes verified): it is the emitter's claim that differs from the memory
    log, as replay finds it serving the retrieval again."""
    tenant = args.tenant or DEFAULT_TENANT
    events = recorded_events(ledger.jobs.get(args.job_id, tenant=tenant))
    problems = ledger.memories.unresolved_hits(tenant, events)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise MaceError(ErrorCode.REPLAY_DIVERGENCE, problems[0] + more, problems=problems)
    return sum(isinstance(e, RetrievalRequest) and e.memory_position is not None for _, e in events)
