"""``mace checkpoint public-key``: the public half of the checkpoint key, for whoever checks."""

from __future__ import annotations

import argparse
import sys

from infrastructure.cli.common import EXIT_OK, emit_json
from infrastructure.storage.settings import Settings


def print_public_key(args: argparse.Namespace, settings: Settings) -> int:
    # The key alone, so that `mace checkpoint public-key > checkpoint.pub` is the file to hand out.
    key = settings.load_checkpoint_key()
    if args.json:
        emit_json({"key_id": key.key_id, "public_key": key.public_pem()})
    else:
        sys.stdout.write(key.public_pem())
    return EXIT_OK
