"""``mace bench``: the ledger's speed on this machine, measured on an empty store.

Defined beside the bench it runs; ``mace`` names it in its command table and loads it on use.
"""

from __future__ import annotations

import argparse
import sys

from domain.canonical import canonical_json
from infrastructure.application.ledger import Ledger
from infrastructure.storage.errors import EXIT_OK, UsageError
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import Bench, BenchError


def add_arguments(bench: argparse.ArgumentParser) -> None:
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
        figures_json = [f.as_json() for f in figures]
        report = {"store": store, "rounds": args.rounds, "figures": figures_json}
        sys.stdout.buffer.write(canonical_json(report) + b"\n")
        return EXIT_OK
    print(f"mace bench on {store}, median of {args.rounds} round(s)")
    for f in figures:
        print(f"  {f.name:<15} {f.per_second:>10.1f} {f.unit}/s  ({f.count} in {f.seconds:.3f} s)")
    return EXIT_OK
