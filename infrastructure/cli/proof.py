"""``mace proof verify FILE --vkey KEY``: a record's tlog-proof, or a run bundle's proofs,
checked against the ledger's verifier key alone (no store, no keyring). Exit 0 proven, 1 a
proof or its checkpoint's signature does not hold (``INTEGRITY_FAILURE``), 2 bad input."""

from __future__ import annotations

import argparse

from domain.checkpoint_note import parse_vkey
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.settings import Settings
from infrastructure.bundles.inclusion import Inclusion
from infrastructure.bundles.proof_files import ProvenRecord, verified_proof_file
from infrastructure.cli.common import emit_json

NOT_CHECKED = (
    "its manifest and MACs not checked (they need the ledger's HMAC keys: mace replay --bundle"
    " checks them)"
)


def verify_proof(args: argparse.Namespace, settings: Settings) -> int:
    # Only the file and the key named: no store, keyring or checkpoint key is read.
    vkey = parse_vkey(args.vkey)
    signer = f"{vkey.name}+{vkey.key_id.hex()}"
    proven = verified_proof_file(args.file, vkey)
    if isinstance(proven, Inclusion):
        if args.json:
            emit_json({"ok": True, "kind": "bundle", **proven.facts(), "not_checked": NOT_CHECKED})
        else:
            print(f"ok: bundle {args.file}: {proven.summary()}; {NOT_CHECKED}")
        return EXIT_OK
    _print_record(args, proven, signer)
    return EXIT_OK


def _print_record(args: argparse.Namespace, proven: ProvenRecord, signer: str) -> None:
    record, body = proven.record, proven.checkpoint
    if args.json:
        emit_json(
            {
                "ok": True,
                "kind": "record",
                "stream": str(record.originator_id),
                "version": record.version,
                "topic": record.topic,
                "index": proven.index,
                "origin": body.origin,
                "tree_size": body.tree_size,
                "root": body.root.hex(),
                "signed_by": signer,
                "other_signatures_not_checked": proven.other_signatures,
            }
        )
        return
    print(
        f"ok: stream {record.originator_id} version {record.version} ({record.topic}) is entry"
        f" {proven.index} of {body.origin}'s log, in its checkpoint of size {body.tree_size}"
        f" (root {body.root.hex()}) signed by {signer}; {proven.other_signatures} other"
        " signature(s) (witness cosignatures) not checked"
    )
