"""``mace checkpoint``: write a checkpoint now; ``public-key``: the key that checks them."""

from __future__ import annotations

import argparse
import sys

from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import EXIT_OK, emit_json
from infrastructure.storage.settings import Settings


def write_checkpoint(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        checkpoints = ledger.store.checkpoints
        assert checkpoints is not None  # a store opened from settings has its checkpoint key
        written = checkpoints.write()
    body = written.newest.checkpoint
    if args.json:
        emit_json(
            {
                "number": body.number,
                "tree_size": body.tree_size,
                "root": body.root,
                "last_notification_id": body.last_notification_id,
                "written": written.written,
            }
        )
    else:
        state = "written" if written.written else "already covers every event"
        print(f"checkpoint {body.number} ({state}): {body.tree_size} events, root {body.root}")
    return EXIT_OK


def print_public_key(args: argparse.Namespace, settings: Settings) -> int:
    # The key alone, so that `mace checkpoint public-key > checkpoint.pub` is the file to hand out.
    key = settings.load_checkpoint_key()
    if args.json:
        emit_json({"key_id": key.key_id, "public_key": key.public_pem()})
    else:
        sys.stdout.write(key.public_pem())
    return EXIT_OK
