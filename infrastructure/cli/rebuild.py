"""``mace rebuild`` (project every read model again from 0, compare digests; make the log's
Merkle nodes and leaf index again) and ``mace follow``.

With ``MACE_READ_STORE`` set, ``rebuild`` compares the read models there and writes nowhere
(`_rebuilt`)."""

from __future__ import annotations

import argparse
import sys
from threading import Event
from typing import Any

from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.read_model_sync import Progress, RebuiltView
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json
from infrastructure.cli.read_store import print_read_store, read_store_note

BAR_WIDTH = 30


def follow_views(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        where = ledger.status.where
        said: list[int] = []

        def reached(head: int) -> None:
            # Said once it follows (caught up), then at each head it catches up to.
            if said:
                print(f"read models current to notification {head}", file=sys.stderr, flush=True)
            else:
                line = f"following {where} from notification {head}; Ctrl-C stops"
                print(line, file=sys.stderr, flush=True)
            said.append(head)

        # Only Ctrl-C ends it (exit 130).
        ledger.read_models.follow(Event(), reached)
    return EXIT_OK


def rebuild_views(args: argparse.Namespace, settings: Settings) -> int:
    show_progress = sys.stderr.isatty() and not args.json
    results, position, leaves, note = _rebuilt(settings, _progress_bar if show_progress else None)
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
        log = {} if leaves is None else {"log_leaves": leaves}
        emit_json({"ok": ok, "position": position, "views": views, **log, **note})
    else:
        _print_views(views, position, note)
        if leaves is not None:
            print(f"log nodes and leaf index made again: {leaves} leaves, the newest checkpoint's")
    return EXIT_OK if ok else EXIT_FAILED


def _print_views(views: list[dict[str, Any]], position: int, note: dict[str, Any]) -> None:
    print_read_store(note)
    differs = (
        "DIFFERS from the read store's view (compared only)"
        if note
        else "DIFFERS from the live view (now rebuilt)"
    )
    for view in views:
        verdict = "matches" if view["matches"] else differs
        print(f"{view['view']}: {view['rows']} rows, digest {view['rebuilt_digest']} {verdict}")
    if note:
        print(
            f"rebuilt in memory from position 0 to {position}, where the read store's views are;"
            " nothing written"
        )
    else:
        print(f"rebuilt from position 0 to {position}")


def _rebuilt(
    settings: Settings, progress: Progress | None
) -> tuple[list[RebuiltView], int, int | None, dict[str, Any]]:
    """On MACE_STORE: the views rebuilt in place, and the log's nodes and leaf index made again
    (how many leaves). With MACE_READ_STORE set: the read store's views compared with a rebuild
    in memory, written nowhere (`ReadModels.compare` says why the primary's views are not
    rebuilt from a replica), no leaves (None); ``rebuild`` on MACE_STORE repairs them."""
    if settings.parsed_read_store() is None:
        with Ledger.open(settings, create=False) as ledger:
            leaves = ledger.checkpoints.rebuild_log_tables()
            models = ledger.read_models
            return models.rebuild(progress), models.position(), leaves, {}
    with Ledger.open_for_reading(settings) as ledger:
        models = ledger.read_models
        return models.compare(progress), models.position(), None, read_store_note(ledger)


def _progress_bar(position: int, head: int) -> None:
    done = BAR_WIDTH if head == 0 else BAR_WIDTH * position // head
    bar = "#" * done + "." * (BAR_WIDTH - done)
    print(
        f"\rrebuilding read models [{bar}] {position}/{head}", end="", file=sys.stderr, flush=True
    )
