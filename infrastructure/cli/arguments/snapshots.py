"""The arguments of ``mace snapshot put|show``; `infrastructure.cli.snapshots` runs them."""

from __future__ import annotations

import argparse

from domain.snapshot import SnapshotKind


def add_snapshot_arguments(snapshot: argparse.ArgumentParser) -> None:
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True)
    put = snapshot_commands.add_parser("put", help="store a snapshot from a JSON file")
    put.add_argument("--kind", required=True, help=", ".join(k.value for k in SnapshotKind))
    put.add_argument("file", help="JSON object file, or - for standard input")
    put.add_argument(
        "--schema-version", type=int, default=1, help="the payload's schema version (1)"
    )
    put.add_argument("--namespace", help="seed namespace of the id (default mace/<kind>)")
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler="infrastructure.cli.snapshots:snapshot_put")
    show = snapshot_commands.add_parser("show", help="print a stored snapshot")
    show.add_argument("snapshot_id", help="the snapshot's id (mace snapshot put prints it)")
    show.add_argument("--json", action="store_true", help="print canonical JSON")
    show.set_defaults(handler="infrastructure.cli.snapshots:snapshot_show")
