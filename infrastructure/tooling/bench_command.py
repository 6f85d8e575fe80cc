"""``mace bench``: the ledger's speed on this machine, measured on an empty store of its own.

The store is the bench's (`bench_store`: beside ``MACE_STORE``'s, removed when the bench ends,
Ctrl-C included), so ``MACE_STORE``'s is never written and nothing is left half-filled. Each
figure is said on standard error as it is measured (``--quiet``: nothing), the report printed at
the end on standard output.

Defined beside the bench it runs (its arguments are in `infrastructure.tooling.command_arguments`);
``mace`` loads this module only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_OK, Code, failure
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.store_status import counting_wire
from infrastructure.tooling.bench import (
    FLAT_SMALL,
    Bench,
    BenchError,
    BenchSize,
    Figure,
    HttpLoad,
    PerUnit,
    figure_names,
)
from infrastructure.tooling.bench_http import HttpRunsError
from infrastructure.tooling.bench_store import bench_store
from infrastructure.tooling.load_server import LoadSetupError


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    size = BenchSize(
        args.jobs,
        args.memories,
        args.contexts,
        args.rounds,
        args.verify_events,
        args.flat_entries,
        HttpLoad(args.http_runs, args.http_batch) if args.http_runs else None,
        otlp_spans=args.otlp_spans,
    )
    say = None if args.quiet else _say
    try:
        size = replace(size, only=figure_names(args.only))
        size.check(settings)  # before a store is made for it: bad sizes make nothing
        with (
            # Counting from before the ledger opens: SQLite counts each connection made inside.
            counting_wire() as wire,
            bench_store(settings) as owned,
            # Its store is removed at the end: no checkpoint is written as it closes.
            Ledger.open(owned, checkpoint_on_close=False) as ledger,
        ):
            store = ledger.status.where
            if say is not None:
                say(f"on a store of its own, removed when it ends: {store}")
            report = Bench(ledger, owned, size, wire).run(compare_raw=args.compare_raw, say=say)
    except BenchError as exc:
        raise InvalidInput(str(exc)) from None
    except (LoadSetupError, HttpRunsError) as exc:
        # The service for the http runs or otlp spans figure would not start, or answered a
        # run or an export wrongly.
        refused = failure(Code.NOT_READY, str(exc))
        print(refused.line(args.json), file=sys.stderr)
        return refused.exit_code
    tree_cost, scaling = report.tree_cost, report.scaling
    if args.json:
        answer = {
            "store": store,
            "rounds": args.rounds,
            "compare_raw": args.compare_raw,
            "only": [name.replace(" ", "-") for name in size.only],
            "figures": [f.as_json() for f in report.figures],
            "tree_cost": None if tree_cost is None else round(tree_cost.wall, 3),
            "tree_cpu_cost": None if tree_cost is None else round(tree_cost.cpu, 3),
            "scaling": None if scaling is None else scaling.as_json(),
            "flatness": None if report.flatness is None else report.flatness.as_json(),
        }
        sys.stdout.buffer.write(canonical_json(answer) + b"\n")
        return EXIT_OK
    print(
        f"mace bench on {store}, {args.rounds} round(s): each figure's median round"
        " (its best), then per unit over all rounds: processor ms, statements, round trips"
    )
    # SQLite runs in this process: its statements take no round trips to say.
    remote = not store.startswith("sqlite:")
    for f in report.figures:
        print(f"  {_line(f)}")
        print(f"  {'':<15} {_costs(f, remote)}")
    if tree_cost is not None:
        print(
            f"  verify with the checkpoint pass / without: {tree_cost.wall:.2f}x"
            f" (processor time {tree_cost.cpu:.2f}x)"
        )
    if scaling is not None:
        raw = (
            ""
            if scaling.raw_ratio is None
            else f" (raw {scaling.raw_ratio:.2f}x, {scaling.raw_failures} failed)"
        )
        ratio = "-" if scaling.ratio is None else f"{scaling.ratio:.2f}x"
        print(
            f"  {scaling.writers} writers / 1 writer: {ratio} the jobs a second{raw},"
            f" {scaling.failures} failed"
        )
    flat = report.flatness
    if flat is not None:
        print(
            f"  on a memory log of {flat.entries} entries / of {FLAT_SMALL}: a write costs"
            f" {flat.memory:.2f}x, a context {flat.context:.2f}x"
        )
    return EXIT_OK


def _say(line: str) -> None:
    print(f"mace bench: {line}", file=sys.stderr, flush=True)


def _line(figure: Figure) -> str:
    """One figure: its rate (median round, best round), what it counted, and with a raw
    baseline, that and the ratios."""
    name = figure.name
    run = figure.writers
    if run is not None:
        name = f"concurrency {run.writers}"
    line = (
        f"{name:<15} {figure.per_second:>10.1f} {figure.unit}/s (best {figure.best_per_second:.1f})"
        f"  ({figure.count} in {figure.seconds:.3f} s"
    )
    if run is not None:
        failed = "" if run.first_failure is None else f"; first: {run.first_failure}"
        line += f", {run.failures} failed{failed}"
    line += ")"
    raw, ratio, best = figure.raw_per_second, figure.ratio, figure.best_ratio
    if raw is not None and ratio is not None and best is not None:
        line += f"  raw {raw:.1f}/s, ratio {ratio:.2f}x (best {best:.2f}x)"
    return line


def _costs(figure: Figure, remote: bool) -> str:
    """Per unit: processor ms, statements and (on a server: ``remote``) round trips; the raw
    baseline's beside them."""

    def said(per_unit: PerUnit | None) -> str:
        if per_unit is None:
            return "not measured"
        cpu = "processor time unknown" if per_unit.cpu_ms is None else f"{per_unit.cpu_ms:.3f} ms"
        if per_unit.statements is None or per_unit.round_trips is None:
            return f"{cpu}, statements not counted (another process)"
        trips = f", {per_unit.round_trips:.2f} round trips" if remote else ""
        return f"{cpu}, {per_unit.statements:.2f} statements{trips}"

    unit = figure.unit.removesuffix("s")
    line = f"per {unit}: {said(figure.per_unit)}"
    raw = figure.raw_per_unit
    return line if raw is None else f"{line}; raw: {said(raw)}"
