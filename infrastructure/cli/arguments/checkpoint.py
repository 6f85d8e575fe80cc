"""The arguments of ``mace checkpoint``; `infrastructure.cli.checkpoint` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_checkpoint_arguments(checkpoint: argparse.ArgumentParser) -> None:
    checkpoint.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: number, tree_size, root, last_notification_id, written",
    )
    checkpoint.set_defaults(handler="infrastructure.cli.checkpoint:write_checkpoint")
    actions = checkpoint.add_subparsers(dest="checkpoint_command", metavar="ACTION")
    public_key = actions.add_parser(
        "public-key", help="print the public key that checks checkpoints (PEM)"
    )
    public_key.add_argument(
        "--vkey",
        action="store_true",
        help="print the verifier key of the checkpoint notes instead (c2sp.org/signed-note:"
        " origin+key id+base64 key), as Go's golang.org/x/mod/sumdb/note takes it",
    )
    public_key.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: key_id, public_key (with --vkey: origin, vkey)",
    )
    public_key.set_defaults(handler="infrastructure.cli.checkpoint:print_public_key")
    export = actions.add_parser(
        "export",
        help="write the newest checkpoint (after checkpointing every event) to a file for an"
        " outside witness",
    )
    export.add_argument(
        "-o", "--output", required=True, type=Path, metavar="FILE", help="the file to write"
    )
    export.add_argument(
        "--note",
        action="store_true",
        help="write it as a C2SP tlog-checkpoint signed note (origin, tree size, root) instead of"
        " JSON",
    )
    export.add_argument(
        "--json", action="store_true", help="print canonical JSON: number, tree_size, root, file"
    )
    export.set_defaults(handler="infrastructure.cli.checkpoint:export_checkpoint")
    tiles = actions.add_parser(
        "tiles",
        help="write the log's Merkle tree as C2SP tlog-tiles with the newest checkpoint's signed"
        " note (after checkpointing every event), for monitors to mirror as static files",
    )
    tiles.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        metavar="DIR",
        help="the directory to write (new, empty, or an earlier export of this log to update)",
    )
    tiles.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: number, tree_size, root, directory, tiles, previous_tree_size",
    )
    tiles.set_defaults(handler="infrastructure.cli.checkpoint:export_tiles")
    witness = actions.add_parser(
        "witness",
        help="send the newest checkpoint (after checkpointing every event) to witnesses per"
        " c2sp.org/tlog-witness and keep their cosignatures beside it",
    )
    witness.add_argument(
        "urls",
        nargs="*",
        metavar="URL",
        help="a witness's submission prefix (its add-checkpoint is URL/add-checkpoint)",
    )
    witness.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="also send it to every witness with a URL in this witness policy",
    )
    witness.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: number, tree_size, root, origin, witnesses",
    )
    witness.set_defaults(handler="infrastructure.cli.checkpoint:witness_checkpoint")
    verify = actions.add_parser(
        "verify",
        help="check an exported checkpoint's signature, JSON or signed note, with a public key"
        " (no store)",
    )
    verify.add_argument(
        "file", type=Path, metavar="FILE", help="an exported checkpoint (JSON or signed note)"
    )
    keys = verify.add_mutually_exclusive_group(required=True)
    keys.add_argument(
        "--public-key",
        type=Path,
        metavar="PEM",
        help="the Ed25519 public key a JSON export must be signed by (mace checkpoint public-key)",
    )
    keys.add_argument(
        "--vkey",
        metavar="KEY",
        help="the verifier key a note (or a JSON export) must be signed by, for its origin"
        " (mace checkpoint public-key --vkey)",
    )
    verify.add_argument("--json", action="store_true", help="print canonical JSON")
    verify.set_defaults(handler="infrastructure.cli.checkpoint:verify_exported_checkpoint")
    prove = actions.add_parser(
        "prove",
        help="print and check the consistency proof that NEW's tree extends OLD's (both exported"
        " checkpoints of this ledger)",
    )
    prove.add_argument("old", type=Path, metavar="OLD", help="the older exported checkpoint")
    prove.add_argument("new", type=Path, metavar="NEW", help="the newer exported checkpoint")
    prove.add_argument("--json", action="store_true", help="print canonical JSON")
    prove.set_defaults(handler="infrastructure.cli.checkpoint:prove_consistency")
