"""``mace rebuild`` (project every read model again from 0, compare digests) and ``mace follow``."""

from __future__ import annotations

import argparse
import sys
from threading import Event

from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import EXIT_FAILED, EXIT_OK, UsageError, emit_json
from infrastructure.storage.settings import Settings

BAR_WIDTH = 30


def follow_views(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        print(f"following {ledger.store.location.describe()}; Ctrl-C stops", file=sys.stderr)
        try:
            # Only Ctrl-C ends it (exit 130): following unsubscribes on the way out.
            ledger.read_models.follow(Event())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return EXIT_OK


def rebuild_views(args: argparse.Namespace, settings: Settings) -> int:
    show_progress = sys.stderr.isatty() and not args.json
    with Ledger.open(settings, create=False) as ledger:
        results = ledger.read_models.rebuild(_progress_bar if show_progress else None)
        position = ledger.read_models.position()
    if show_progress:
        print(file=sys.stderr)
    views = [
        {
            "view": r.view,
            "rows": r.rows,
            "recorded_digest": r.recorded_digest,
            "rebuilt_digest": r.rebuilt_digest,
            "matches": r.matches,
        }
        for r in results
    ]
    ok = all(r.matches for r in results)
    if args.json:
        emit_json({"ok": ok, "position": position, "views": views})
    else:
        for view in views:
            verdict = "matches" if view["matches"] else "DIFFERS from the live view (now rebuilt)"
            print(f"{view['view']}: {view['rows']} rows, digest {view['rebuilt_digest']} {verdict}")
        print(f"rebuilt from position 0 to {position}")
    return EXIT_OK if ok else EXIT_FAILED


def _progress_bar(position: int, head: int) -> None:
    done = BAR_WIDTH if head == 0 else BAR_WIDTH * position // head
    bar = "#" * done + "." * (BAR_WIDTH - done)
    print(
        f"\rrebuilding read models [{bar}] {position}/{head}", end="", file=sys.stderr, flush=True
    )
