"""The arguments of ``mace bench``, ``mace demo`` and ``mace loadtest``, defined beside the tools.

Light on purpose (argparse only): ``mace`` loads this module to parse one of these commands, or
to print its ``--help``, and the handler (``*_command.py``, with the store and HTTP client) only
when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

LOADTEST_DESCRIPTION = """\
Start the real service (`mace serve` in its own process, so that the clients do not share its
interpreter lock, on a free 127.0.0.1 port) over the postgresql:// store MACE_STORE names (any
other store is refused unless --allow-sqlite), with a throwaway tokens file (one
operator+admin+auditor token for tenant "loadtest"), and drive it with --clients threads, each
with its own keep-alive HTTP connection.

Each of --runs runs is an outside run: POST /v1/runs, --events events in --batches batches,
one batch sent again (it must come back as all duplicates: idempotency under load), POST
/v1/runs/{id}/complete. Its first events are the Stage-0 iteration for its input (an arithmetic
question) under the declared Stage-0 default snapshots, the rest tool calls and results, so an
audit replay of it reproduces it (authoritatively only with --events 4: a tool's result is the
emitter's word). --replays of the runs (spread evenly; default
every 4th) get POST /replay/request (audit) right after they are recorded, from the same client.

Reported: requests, wall time, requests/s and recorded events/s, p50/p95/p99/max latency per
endpoint kind (open, batch, complete, replay), failures by status. Then the store is read back
through the ledger, not the HTTP answers: every acknowledged run must be a sealed job holding
exactly the events sent (count and content digests, in order; the re-sent batch stored once),
and every answered replay recorded in its job's governance as ok, and authoritative where no
fact is taken as recorded.

A request that fails is counted by status and its run abandoned; with --retries N, an answer
that asks to try again (503, or a 409 whose message ends "try again": a race the service lost)
is first re-sent at once, up to N times, each re-send counted as retried. An abandoned run must
be absent from the store or recorded exactly, never in part. --timeout bounds the whole command
(start-up, load and read-back). Exit 0 only when no request failed, every answer was as expected
and the read-back holds; 1 otherwise; 2 on bad usage (nothing started). Each invocation writes
new jobs (ids load-<random>-<n>) to the store: point MACE_STORE at a database meant for it.
"""


def add_bench_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--jobs", type=int, default=50, help="Stage-0 jobs per round (50)")
    bench.add_argument("--memories", type=int, default=200, help="memory writes per round (200)")
    bench.add_argument("--contexts", type=int, default=50, help="receipts per round (50)")
    bench.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians (3)")
    bench.add_argument(
        "--verify-events",
        type=int,
        default=20_000,
        help="events recorded (as runs of 100) before the rounds, so that read and verify"
        " measure a ledger of some size, not their fixed costs (20000; 0: none)",
    )
    bench.add_argument(
        "--http-runs",
        type=int,
        default=20,
        help="after the rounds, runs recorded over HTTP by `mace serve`, each sent in two"
        " batches of --http-batch events (20; 0: skip)",
    )
    bench.add_argument(
        "--http-batch", type=int, default=100, help="events a batch in --http-runs (100)"
    )
    bench.add_argument(
        "--otlp-spans",
        type=int,
        default=10_000,
        help="after the http runs, spans of an agent's traces (4 a trace) exported over"
        " OTLP/HTTP in protobuf to `mace serve`, each trace recorded as its last span arrives"
        " (10000; 0: skip)",
    )
    bench.add_argument(
        "--flat-entries",
        type=int,
        default=10_000,
        help="after the rounds, time memory writes and contexts on a log of 100 entries and on"
        " one of this many (the same 50 live facts written again and again) and print how much"
        " more each costs (10000; 0: skip)",
    )
    bench.add_argument(
        "--compare-raw",
        action="store_true",
        help="beside each figure, the same rows written and read by the raw store (plain INSERTs"
        " at the same rows per commit; a plain cursor, an HMAC and a JSON parse a row) and the"
        " ratio",
    )
    bench.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="measure only these figures (repeatable, or a comma list): write, record,"
        " checkpoint, read, verify, scan, replay, memory, context, receipt-replay, concurrency,"
        " http-runs, otlp-spans, flatness (all of them)",
    )
    bench.add_argument("--json", action="store_true", help="print canonical JSON")
    bench.add_argument(
        "--quiet",
        action="store_true",
        help="say nothing on standard error as it goes (by default, each figure as measured)",
    )
    bench.set_defaults(handler="infrastructure.tooling.bench_command:run_bench")


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.set_defaults(handler="infrastructure.tooling.demo_command:demo_command")


def add_loadtest_arguments(parser: argparse.ArgumentParser) -> None:
    # After the command's one line (the table's), what it does in full.
    parser.description = f"{parser.description}.\n\n{LOADTEST_DESCRIPTION}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--runs", type=int, default=200, help="runs in total (200)")
    parser.add_argument("--events", type=int, default=20, help="events per run (20; at least 4)")
    parser.add_argument("--batches", type=int, default=2, help="event batches per run (2)")
    parser.add_argument(
        "--replays", type=int, default=None, help="runs to replay (default: every 4th run)"
    )
    parser.add_argument(
        "--retries", type=int, default=0, help="re-sends of a 'try again' answer (0)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="hard limit in seconds, all phases (600)"
    )
    parser.add_argument(
        "--allow-sqlite", action="store_true", help="also run on a SQLite store (a quick try)"
    )
    parser.add_argument("--server-log", type=Path, help="keep the service's output in this file")
    parser.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    parser.set_defaults(handler="infrastructure.tooling.loadtest_command:load_test")
