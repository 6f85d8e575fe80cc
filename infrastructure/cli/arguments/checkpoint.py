"""The arguments of ``mace checkpoint public-key``; `infrastructure.cli.checkpoint` runs them."""

from __future__ import annotations

import argparse


def add_checkpoint_arguments(checkpoint: argparse.ArgumentParser) -> None:
    actions = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    public_key = actions.add_parser(
        "public-key", help="print the public key that checks checkpoints (PEM)"
    )
    public_key.add_argument(
        "--json", action="store_true", help="print canonical JSON: key_id, public_key"
    )
    public_key.set_defaults(handler="infrastructure.cli.checkpoint:print_public_key")
