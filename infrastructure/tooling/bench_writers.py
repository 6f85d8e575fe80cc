"""The bench's ``concurrency`` figure: writer processes recording Stage-0 jobs at the same time.

Each writer is a process of its own (``python -m infrastructure.tooling.bench_writers``) with its
own connections, as several service processes or emitters are: it opens the ledger the
environment names, says it is ready, waits for the go, records its jobs (distinct inputs, so
distinct ids) and prints a line per job: ``ok`` or ``failed`` with the error. The figure is timed
from the go to the last writer's end, so starting Python and opening the store are not in it, and
no writer checkpoints as it closes (the figure is the recording path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Final

WRITER_COUNTS: Final = (1, 2, 4, 8)
HANG_GUARD_SECONDS: Final = 600.0
"""Far beyond what the writers need; a writer still running then is killed and counted failed."""


@dataclass(frozen=True, slots=True)
class WritersRun:
    """What ``writers`` processes recorded at once: jobs stored, jobs that failed, in how long."""

    writers: int
    jobs: int
    failures: int
    seconds: float
    first_failure: str | None


def writers_at_once(writers: int, jobs_each: int, tag: str) -> WritersRun:
    """Start ``writers`` processes, release them together, and count what they recorded."""
    command = [sys.executable, "-m", __name__, tag, str(jobs_each)]
    started = [
        subprocess.Popen(
            [*command, str(writer)],
            env=os.environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(writers)
    ]
    try:
        for process in started:
            assert process.stdout is not None
            if process.stdout.readline() != "ready\n":
                _, err = process.communicate(timeout=HANG_GUARD_SECONDS)
                lines = err.strip().splitlines() or ["exited before it was ready"]
                # Answered in one line, like a verify's side pass that the system took away.
                raise ChildProcessError(f"a bench writer could not start: {lines[-1]}")
        go = time.perf_counter()
        for process in started:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [_outcome(process) for process in started]
        seconds = time.perf_counter() - go
    except subprocess.TimeoutExpired:
        msg = f"a bench writer was not ready after {HANG_GUARD_SECONDS:g} s"
        raise ChildProcessError(msg) from None
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.communicate()  # reaped, and its pipes closed
    lines = [line for out in outcomes for line in out]
    failed = [line for line in lines if line != "ok"]
    recorded = len(lines) - len(failed)
    failures = writers * jobs_each - recorded
    return WritersRun(writers, recorded, failures, seconds, failed[0] if failed else None)


def _outcome(process: subprocess.Popen[str]) -> list[str]:
    """The writer's lines; a writer that died says so in one line of its own."""
    try:
        out, err = process.communicate(timeout=HANG_GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        return [*out.split("\n")[:-1], "failed: still running after the hang guard"]
    lines = out.split("\n")[:-1]
    if process.returncode != 0:
        last = (err.strip().splitlines() or [f"exit code {process.returncode}"])[-1]
        lines.append(f"failed: {last}")
    return lines


def _write(tag: str, jobs: int, writer: int) -> int:
    """In a writer process: open the store, wait for the go, record the jobs."""
    # Imported here: the module is also imported by the bench, which has these already.
    from infrastructure.application.ledger import Ledger  # noqa: PLC0415
    from infrastructure.storage.settings import Settings  # noqa: PLC0415

    with Ledger.open(Settings(), checkpoint_on_close=False) as ledger:
        _say("ready")
        sys.stdin.readline()
        for n in range(jobs):
            try:
                ledger.jobs.run(f"{tag}: writer {writer}, job {n}", "bench")
            except Exception as exc:  # counted, and the first one shown, by the bench
                _say(f"failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            else:
                _say("ok")
    return 0


def _say(line: str) -> None:
    """One line to the bench, at once: it reads the writer's lines through a pipe."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    tag, jobs, writer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sys.exit(_write(tag, jobs, writer))
