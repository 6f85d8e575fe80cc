"""``mace runs``: the runs recorded from outside that are still open (an emitter that died leaves
one), and ``mace runs abandon``, which closes one as abandoned (acting as ``MACE_ACTOR``)."""

from __future__ import annotations

import argparse

from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json


def list_open_runs(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        runs = ledger.read_models.open_runs(args.tenant)
    if not args.json and not runs:
        print("no open run")
    for run in runs:
        if args.json:
            emit_json(run)
            continue
        print(f"{run['run_id']}  open  {run['events']} events  tenant {run['tenant']}")
    return EXIT_OK


def abandon_run(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    with Ledger.open(settings) as ledger:
        draft = ledger.run_uploads.abandon(args.run_id, args.tenant, actor, args.reason)
    summary = {"run_id": draft.run_id, "status": draft.status, "events": draft.count}
    if args.json:
        emit_json(summary)
        return EXIT_OK
    print(f"run {draft.run_id}: abandoned with {draft.count} events; its job is never sealed")
    return EXIT_OK
