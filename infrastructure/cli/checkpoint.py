"""``mace checkpoint``: write a checkpoint now; ``public-key``: the key that checks them (PEM, or
the notes' verifier key); ``export``: the newest for an outside witness (JSON, or a C2SP signed
note); ``verify``: check an exported one with a public key alone (no store is opened);
``prove``: the consistency proof between two exported ones; ``tiles``: the tree as tlog-tiles;
``witness``: send the newest to witnesses (tlog-witness) and keep their cosignatures."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint, SignedCheckpoint
from domain.checkpoint_note import SignedNote, VerifierKey, parse_vkey
from domain.errors import IntegrityFailure, InvalidInput
from infrastructure.application.checkpoints import (
    checked_origin,
    checked_signature,
    checkpoint_public_key,
    vkey_public_key,
)
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.witnesses import Witnesses, read_policy
from infrastructure.bundles.checkpoint_tiles import staged_tiles
from infrastructure.bundles.exported_checkpoints import (
    read_checkpoint_file,
    read_public_key,
    verified_exported,
    verified_note,
    write_exported,
    write_note,
)
from infrastructure.cli.common import emit_json


def write_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        written = ledger.checkpoints.write()
    body = written.newest.checkpoint
    if args.json:
        emit_json(_summary(body) | {"written": written.written})
    else:
        state = "written" if written.written else "already covers every event"
        print(f"checkpoint {body.number} ({state}): {body.tree_size} events, root {body.root}")
    return EXIT_OK


def print_public_key(args: argparse.Namespace, settings: Settings) -> int:
    # The key alone, so that `mace checkpoint public-key > checkpoint.pub` is the file to hand out.
    key = checkpoint_public_key(settings)
    if args.vkey:
        origin = _log_origin(settings)
        vkey = VerifierKey.ed25519(origin, key.raw).encoded()
        if args.json:
            emit_json({"origin": origin, "vkey": vkey})
        else:
            print(vkey)
    elif args.json:
        emit_json({"key_id": key.key_id, "public_key": key.pem})
    else:
        sys.stdout.write(key.pem)
    return EXIT_OK


def _log_origin(settings: Settings) -> str:
    if settings.log_origin:  # set: no store need be opened
        return checked_origin(settings.log_origin, "MACE_LOG_ORIGIN")
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        return ledger.checkpoints.log_origin(None)


def export_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    """Checkpoint every event first, so that the file covers everything the store holds now."""
    if not args.output.parent.is_dir():
        msg = f"cannot write checkpoint file {args.output}: its directory does not exist"
        raise InvalidInput(msg)
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        written = ledger.checkpoints.export()
        if args.note:
            origin = ledger.checkpoints.log_origin(settings.log_origin)
            note = ledger.checkpoints.note(written.newest, origin)
    if args.note:
        write_note(note, args.output)
    else:
        write_exported(written.newest, args.output)
    body = written.newest.checkpoint
    form = {"format": "note", "origin": origin} if args.note else {"format": "json"}
    if args.json:
        emit_json(_summary(body) | {"file": str(args.output), "written": written.written} | form)
    else:
        as_note = f" as a signed note of {origin}" if args.note else ""
        print(
            f"checkpoint {body.number} ({body.tree_size} events, root {body.root})"
            f" exported to {args.output}{as_note}"
        )
    return EXIT_OK


def export_tiles(args: argparse.Namespace, settings: Settings) -> int:
    """Checkpoint every event first, then publish that checkpoint's tree and note to DIR."""
    # Staged before the store is opened: an -o that cannot be written refuses with nothing done.
    with staged_tiles(args.output) as staged:
        with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
            written = ledger.checkpoints.export()
            origin = ledger.checkpoints.log_origin(settings.log_origin)
            note = ledger.checkpoints.note(written.newest, origin)
            vkey = ledger.checkpoints.verifier_key(origin)
            tiles = ledger.checkpoints.tiles(written.newest)
        body = written.newest.checkpoint
        previous = staged.publish(note, vkey, body.tree_size, tiles)
    before = None if previous is None else previous.tree_size
    if args.json:
        emit_json(
            _summary(body)
            | {
                "directory": str(staged.directory),
                "origin": origin,
                "tiles": len(tiles),
                "previous_tree_size": before,
            }
        )
    else:
        extended = "" if before is None else f", extending the export of {before} events"
        print(
            f"checkpoint {body.number} ({body.tree_size} events, root {body.root}) written as"
            f" {len(tiles)} tiles and its signed note of {origin} to {staged.directory}{extended}"
        )
    return EXIT_OK


def witness_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    """The URLs named, and the policy's witnesses that have one, each asked once."""
    policy = None if args.policy is None else read_policy(args.policy)
    listed = [] if policy is None else [w.url for w in policy.witnesses if w.url is not None]
    urls = list(dict.fromkeys([*args.urls, *listed]))
    if not urls:
        raise InvalidInput("name at least one witness URL, or a --policy that lists witness URLs")
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        origin = ledger.checkpoints.log_origin(settings.log_origin)
        witnesses = Witnesses(ledger.checkpoints, settings.witness_timeout)
        signed, answers = witnesses.witness(urls, origin)
    body = signed.checkpoint
    if args.json:
        cosigned = [
            {"url": a.witness, "old_size": a.old_size, "cosignatures": len(a.lines)}
            for a in answers
        ]
        emit_json(_summary(body) | {"origin": origin, "witnesses": cosigned})
    else:
        for answer in answers:
            print(
                f"witness {answer.witness} cosigned checkpoint {body.number} ({body.tree_size}"
                f" events, root {body.root}) from size {answer.old_size}:"
                f" {len(answer.lines)} cosignature(s) kept"
            )
    return EXIT_OK


def verify_exported_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    """The file's format decides how it is checked: a note by ``--vkey`` (its origin is the
    vkey's name), a JSON export by either key."""
    # Only the files named: no store, keyring or checkpoint key is read.
    vkey = None if args.vkey is None else parse_vkey(args.vkey)
    held = read_checkpoint_file(args.file)
    if isinstance(held, SignedNote):
        return _verified_note(args, held, vkey)
    # A JSON export names its key by the key's own id: a vkey's key checks it as its PEM would.
    key = read_public_key(args.public_key) if vkey is None else vkey_public_key(vkey)
    algorithm, exported = held
    signed = checked_signature(algorithm, exported, key, f"checkpoint file {args.file}")
    _print_verified(args, signed)
    return EXIT_OK


def _verified_note(args: argparse.Namespace, note: SignedNote, vkey: VerifierKey | None) -> int:
    if vkey is None:
        msg = (
            f"{args.file} is a signed note: check it with --vkey ORIGIN+ID+KEY (mace checkpoint"
            " public-key --vkey), which names the log's origin as a PEM key cannot"
        )
        raise InvalidInput(msg)
    body = verified_note(note, vkey, args.file)
    named = f"{vkey.name}+{vkey.key_id.hex()}"
    if args.json:
        emit_json(
            {
                "ok": True,
                "format": "note",
                "origin": body.origin,
                "tree_size": body.tree_size,
                "root": body.root.hex(),
                "signed_by": named,
            }
        )
    else:
        print(
            f"ok: checkpoint note of {body.origin} signed by {named}: {body.tree_size} events,"
            f" root {body.root.hex()}"
        )
    return EXIT_OK


def _print_verified(args: argparse.Namespace, signed: SignedCheckpoint) -> None:
    body = signed.checkpoint
    if args.json:
        emit_json({"ok": True, "key_id": signed.key_id} | _summary(body))
    else:
        print(
            f"ok: checkpoint {body.number} signed by key {signed.key_id}: {body.tree_size}"
            f" events, root {body.root}"
        )


def prove_consistency(args: argparse.Namespace, settings: Settings) -> int:
    """Both files must be this ledger's (its checkpoint key); the proof comes from its store."""
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        key = ledger.checkpoints.public_key
        old = verified_exported(args.old, key).checkpoint
        new = verified_exported(args.new, key).checkpoint
        if old.tree_size > new.tree_size or old.number > new.number:
            msg = (
                f"OLD ({args.old}: checkpoint {old.number}) is newer than NEW ({args.new}:"
                f" checkpoint {new.number}): name the older one first"
            )
            raise InvalidInput(msg)
        proved = ledger.checkpoints.prove(old, new)
    proof = [node.hex() for node in proved.proof]
    if args.json:
        emit_json(
            {
                "ok": proved.holds,
                "old": _summary(old),
                "new": _summary(new),
                "proof": proof,
            }
        )
    else:
        print(
            f"consistency proof from checkpoint {old.number} ({old.tree_size} events) to"
            f" checkpoint {new.number} ({new.tree_size} events): {len(proof)} hashes"
        )
        for node in proof:
            print(node)
    if not proved.holds:
        reason = (
            f"checkpoint {new.number} of {args.new} does not extend checkpoint {old.number} of"
            f" {args.old}: the consistency proof does not hold"
        )
        raise IntegrityFailure(CHECKPOINT_STREAM, new.number, reason)
    return EXIT_OK


def _summary(body: Checkpoint) -> dict[str, Any]:
    return body.summary() | {"last_notification_id": body.last_notification_id}
