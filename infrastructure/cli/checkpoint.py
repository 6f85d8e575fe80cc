"""``mace checkpoint``: write a checkpoint now; ``public-key``: the key that checks them;
``export``: the newest for an outside witness; ``verify``: check an exported one with a public
key alone (no store is opened); ``prove``: the consistency proof between two exported ones."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint
from domain.errors import IntegrityFailure, InvalidInput
from infrastructure.application.checkpoints import checkpoint_public_key
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.bundles.exported_checkpoints import (
    read_public_key,
    verified_exported,
    write_exported,
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
    if args.json:
        emit_json({"key_id": key.key_id, "public_key": key.pem})
    else:
        sys.stdout.write(key.pem)
    return EXIT_OK


def export_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    """Checkpoint every event first, so that the file covers everything the store holds now."""
    if not args.output.parent.is_dir():
        msg = f"cannot write checkpoint file {args.output}: its directory does not exist"
        raise InvalidInput(msg)
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        written = ledger.checkpoints.export()
    write_exported(written.newest, args.output)
    body = written.newest.checkpoint
    if args.json:
        emit_json(_summary(body) | {"file": str(args.output), "written": written.written})
    else:
        print(
            f"checkpoint {body.number} ({body.tree_size} events, root {body.root})"
            f" exported to {args.output}"
        )
    return EXIT_OK


def verify_exported_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    # Only the files named: no store, keyring or checkpoint key is read.
    signed = verified_exported(args.file, read_public_key(args.public_key))
    body = signed.checkpoint
    if args.json:
        emit_json({"ok": True, "key_id": signed.key_id} | _summary(body))
    else:
        print(
            f"ok: checkpoint {body.number} signed by key {signed.key_id}: {body.tree_size}"
            f" events, root {body.root}"
        )
    return EXIT_OK


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
