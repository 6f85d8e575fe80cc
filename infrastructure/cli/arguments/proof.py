"""The arguments of ``mace proof``; `infrastructure.cli.proof` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_proof_arguments(proof: argparse.ArgumentParser) -> None:
    actions = proof.add_subparsers(dest="proof_command", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify",
        help="check a record's tlog-proof (or every proof of a run bundle) against the ledger's"
        " verifier key, with no store",
    )
    verify.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="a C2SP tlog-proof whose extra line is the record (as mace export writes them), or"
        " a run bundle",
    )
    verify.add_argument(
        "--vkey",
        metavar="KEY",
        help="the ledger's verifier key (mace checkpoint public-key --vkey): the checkpoint note"
        " must be signed by it, for its origin (default: the --policy file's log line)",
    )
    verify.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="a witness policy (log, witness and quorum lines, as mace verify --all --policy"
        " takes): the note must also carry valid cosignatures of a quorum of its witnesses",
    )
    verify.add_argument("--json", action="store_true", help="print canonical JSON")
    verify.set_defaults(handler="infrastructure.cli.proof:verify_proof")
