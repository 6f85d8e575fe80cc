"""The bench's ``concurrency`` figure: writer processes recording Stage-0 jobs at the same time.

Each writer is a process of its own (``python -m infrastructure.tooling.bench_writers``) with its
own connections, as several service processes or emitters are: it opens the ledger the
environment names, says it is ready, waits for the go, records its jobs (distinct inputs, so
distinct ids) and prints a line per job: ``ok`` or ``failed`` with the error. The figure is timed
from the go to the last writer's end, so starting Python and opening the store are not in it, and
no writer checkpoints as it closes (the figure is the recording path).

Its raw baseline (``--compare-raw``) is the same with nothing of the ledger: each writer is given
a job's rows as stored (topic and state) and inserts them with plain INSERTs, one commit a job,
into the bench's scratch table (`bench_raw`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Final

import orjson

from infrastructure.application.settings import Settings
from infrastructure.application.store_status import WireTally, counting_wire
from infrastructure.tooling.load_server import environment_of

WRITER_COUNTS: Final = (1, 2, 4, 8)
HANG_GUARD_SECONDS: Final = 600.0
"""Far beyond what the writers need; a writer still running then is killed and counted failed."""


@dataclass(frozen=True, slots=True)
class WritersRun:
    """What ``writers`` processes recorded at once: jobs stored, jobs that failed, in how long;
    the processor seconds the writers spent from the go to their last job, and what they sent
    their store (each counts its own: `Tally`)."""

    writers: int
    jobs: int
    failures: int
    seconds: float
    first_failure: str | None
    cpu_seconds: float
    wire: WireTally

    @property
    def per_second(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


DONE: Final = "done\n"
"""What a writer says after its last job."""
TALLY: Final = "tally "
"""How a writer's last line before `DONE` starts: its processor seconds, statements and round
trips over its jobs (`Tally`)."""
RAW: Final = "raw"
"""The tag of raw writers: they insert the rows they are given, nothing of the ledger."""


def writers_at_once(
    settings: Settings,
    writers: int,
    jobs_each: int,
    tag: str,
    rows: Sequence[tuple[str, bytes]] = (),
) -> WritersRun:
    """Start ``writers`` processes on ``settings``' store, release them together, and count what
    they recorded.

    ``tag`` `RAW`: raw writers, each inserting ``rows`` (a job's, as stored) once a job."""
    command = [sys.executable, "-m", __name__, tag, str(jobs_each)]
    given = orjson.dumps([[topic, state.hex()] for topic, state in rows]).decode() + "\n"
    env = environment_of(settings)
    started = [
        subprocess.Popen(
            [*command, str(writer)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(writers)
    ]
    try:
        for process in started:
            assert process.stdin is not None and process.stdout is not None
            if tag == RAW:
                process.stdin.write(given)
                process.stdin.flush()
            if process.stdout.readline() != "ready\n":
                _, err = process.communicate(timeout=HANG_GUARD_SECONDS)
                lines = err.strip().splitlines() or ["exited before it was ready"]
                # Answered in one line, like an audit worker that the system took away.
                raise ChildProcessError(f"a bench writer could not start: {lines[-1]}")
        go = time.perf_counter()
        guard = threading.Timer(HANG_GUARD_SECONDS, _kill, [started])
        guard.start()
        for process in started:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [_outcome(process) for process in started]
        seconds = time.perf_counter() - go
        guard.cancel()
    except subprocess.TimeoutExpired:
        msg = f"a bench writer was not ready after {HANG_GUARD_SECONDS:g} s"
        raise ChildProcessError(msg) from None
    finally:
        _kill(started)
        for process in started:
            process.communicate()  # reaped, and its pipes closed
    lines = [line for out in outcomes for line in out]
    tallies = [Tally.parse(line) for line in lines if line.startswith(TALLY)]
    jobs = [line for line in lines if not line.startswith(TALLY)]
    failed = [line for line in jobs if line != "ok"]
    recorded = len(jobs) - len(failed)
    failures = writers * jobs_each - recorded
    return WritersRun(
        writers,
        recorded,
        failures,
        seconds,
        failed[0] if failed else None,
        sum(tally.cpu_seconds for tally in tallies),
        WireTally(
            sum(tally.wire.statements for tally in tallies),
            sum(tally.wire.round_trips for tally in tallies),
        ),
    )


@dataclass(frozen=True, slots=True)
class Tally:
    """What one writer spent on its jobs: processor seconds, and what it sent its store."""

    cpu_seconds: float
    wire: WireTally

    def line(self) -> str:
        return f"{TALLY}{self.cpu_seconds!r} {self.wire.statements} {self.wire.round_trips}"

    @classmethod
    def parse(cls, line: str) -> Tally:
        cpu, statements, round_trips = line.removeprefix(TALLY).split()
        return cls(float(cpu), WireTally(int(statements), int(round_trips)))


@contextmanager
def _tallied() -> Iterator[Callable[[], Tally]]:
    """In a writer, counting from before its store is opened (`counting_wire`); the block is
    given what to call, at the go and after the last job, for what the jobs spent."""
    with counting_wire() as wire:
        marks: list[tuple[float, WireTally]] = []

        def mark() -> Tally:
            marks.append((time.process_time(), wire.snapshot()))
            (cpu, sent), (now, then) = marks[0], marks[-1]
            return Tally(now - cpu, then.since(sent))

        yield mark


def _kill(processes: Sequence[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()


def _outcome(process: subprocess.Popen[str]) -> list[str]:
    """The writer's lines up to its ``done``, read as they come: the figure ends when the last
    writer is done, not when its process has exited (leaving Python took longer than a raw
    writer's jobs). A writer that died, or that the hang guard killed, says so in a line."""
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    for line in process.stdout:
        if line == DONE:
            return lines
        lines.append(line.rstrip("\n"))
    process.wait()
    last = (process.stderr.read().strip().splitlines() or [f"exit code {process.returncode}"])[-1]
    if process.returncode == -signal.SIGKILL:
        last = f"still running after the hang guard ({HANG_GUARD_SECONDS:g} s)"
    return [*lines, f"failed: {last}"]


def _write(tag: str, jobs: int, writer: int) -> int:
    """In a writer process: open the store, wait for the go, record the jobs."""
    # Imported here: the module is also imported by the bench, which has it already.
    from infrastructure.application.ledger import Ledger  # noqa: PLC0415

    with _tallied() as mark, Ledger.open(Settings(), checkpoint_on_close=False) as ledger:
        _say("ready")
        sys.stdin.readline()
        mark()
        for n in range(jobs):
            try:
                ledger.jobs.run(f"{tag}: writer {writer}, job {n}", "bench")
            except Exception as exc:  # counted, and the first one shown, by the bench
                _say(f"failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            else:
                _say("ok")
        _say(mark().line())
        _say(DONE.strip())
    return 0


def _write_raw(jobs: int) -> int:
    """In a raw writer process: take the job's rows, connect, wait for the go, insert them."""
    from infrastructure.tooling.bench_raw import open_raw  # noqa: PLC0415

    rows = [(topic, bytes.fromhex(state)) for topic, state in orjson.loads(sys.stdin.readline())]
    with _tallied() as mark, closing(open_raw(Settings().parsed_store())) as raw:
        _say("ready")
        sys.stdin.readline()
        mark()
        for _ in range(jobs):
            try:
                raw.insert(rows, 1)
            except Exception as exc:  # counted, and the first one shown, by the bench
                _say(f"failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            else:
                _say("ok")
        _say(mark().line())
        _say(DONE.strip())
    return 0


def _say(line: str) -> None:
    """One line to the bench, at once: it reads the writer's lines through a pipe."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    tag, jobs, writer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sys.exit(_write_raw(jobs) if tag == RAW else _write(tag, jobs, writer))
