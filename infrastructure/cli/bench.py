"""``mace bench``: the ledger's speed on this machine, measured on an empty store."""

from __future__ import annotations

import argparse
from typing import Any

from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import EXIT_OK, UsageError, emit_json
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import Bench, BenchError


def add_parsers(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="measure write, read, replay and receipt speed on an empty store"
    )
    bench.add_argument("--jobs", type=int, default=50, help="Stage-0 jobs per round (50)")
    bench.add_argument("--memories", type=int, default=200, help="memory writes per round (200)")
    bench.add_argument("--contexts", type=int, default=50, help="receipts per round (50)")
    bench.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians (3)")
    bench.add_argument("--json", action="store_true", help="print canonical JSON")
    bench.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        try:
            figures = Bench(ledger, args.jobs, args.memories, args.contexts).run(args.rounds)
        except BenchError as exc:
            raise UsageError(str(exc)) from None
        store = ledger.store.describe()
    if args.json:
        emit_json(
            {"store": store, "rounds": args.rounds, "figures": [f.as_json() for f in figures]}
        )
        return EXIT_OK
    print(f"mace bench on {store}, median of {args.rounds} round(s)")
    for f in figures:
        print(f"  {f.name:<15} {f.per_second:>10.1f} {f.unit}/s  ({f.count} in {f.seconds:.3f} s)")
    return EXIT_OK
