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
from infrastructure.tooling.bench_writers import WritersRun


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        try:
            bench = Bench(ledger, args.jobs, args.memories, args.contexts, args.verify_events)
            report = bench.run(args.rounds)
        except BenchError as exc:
            raise UsageError(str(exc)) from None
        store = ledger.store.location.describe()
    tree_cost = report.tree_cost
    if args.json:
        answer = {
            "store": store,
            "rounds": args.rounds,
            "figures": [f.as_json() for f in report.figures],
            "tree_cost": round(tree_cost.wall, 3),
            "tree_cpu_cost": round(tree_cost.cpu, 3),
            "concurrency": [_writers_json(run) for run in report.concurrency],
        }
        sys.stdout.buffer.write(canonical_json(answer) + b"\n")
        return EXIT_OK
    print(f"mace bench on {store}, median of {args.rounds} round(s)")
    for f in report.figures:
        print(f"  {f.name:<15} {f.per_second:>10.1f} {f.unit}/s  ({f.count} in {f.seconds:.3f} s)")
    print(
        f"  verify with the checkpoint pass / without: {tree_cost.wall:.2f}x"
        f" (processor time {tree_cost.cpu:.2f}x)"
    )
    for run in report.concurrency:
        failed = "" if run.first_failure is None else f"; first: {run.first_failure}"
        print(
            f"  concurrency {run.writers} writer(s) {_per_second(run):>8.1f} jobs/s"
            f"  ({run.jobs} in {run.seconds:.3f} s, {run.failures} failed{failed})"
        )
    return EXIT_OK


def _per_second(run: WritersRun) -> float:
    return run.jobs / run.seconds if run.seconds > 0 else 0.0


def _writers_json(run: WritersRun) -> dict[str, object]:
    return {
        "writers": run.writers,
        "jobs": run.jobs,
        "failures": run.failures,
        "seconds": round(run.seconds, 4),
        "per_second": round(_per_second(run), 1),
        "first_failure": run.first_failure,
    }
