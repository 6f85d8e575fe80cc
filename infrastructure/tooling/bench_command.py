"""``mace bench``: the ledger's speed on this machine, measured on an empty store.

Defined beside the bench it runs (its arguments are in `infrastructure.tooling.command_arguments`);
``mace`` loads this module only when the command runs.
"""

from __future__ import annotations

import argparse
import sys

from domain.canonical import canonical_json
from infrastructure.application.ledger import Ledger
from infrastructure.storage.errors import EXIT_OK, UsageError
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import Bench, BenchError


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        try:
            bench = Bench(ledger, args.jobs, args.memories, args.contexts, args.verify_events)
            figures, tree_cost = bench.run(args.rounds)
        except BenchError as exc:
            raise UsageError(str(exc)) from None
        store = ledger.store.location.describe()
    if args.json:
        figures_json = [f.as_json() for f in figures]
        report = {
            "store": store,
            "rounds": args.rounds,
            "figures": figures_json,
            "tree_cost": round(tree_cost.wall, 3),
            "tree_cpu_cost": round(tree_cost.cpu, 3),
        }
        sys.stdout.buffer.write(canonical_json(report) + b"\n")
        return EXIT_OK
    print(f"mace bench on {store}, median of {args.rounds} round(s)")
    for f in figures:
        print(f"  {f.name:<15} {f.per_second:>10.1f} {f.unit}/s  ({f.count} in {f.seconds:.3f} s)")
    print(
        f"  verify with the checkpoint pass / without: {tree_cost.wall:.2f}x"
        f" (processor time {tree_cost.cpu:.2f}x)"
    )
    return EXIT_OK
