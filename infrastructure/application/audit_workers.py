"""The processes a batch audit reads the log with: each its own range of stream ids.

An audit is Python work (MACs, decoding, the replays), so ``--workers N`` splits the streams into
N equal ranges of the UUID space (ids are UUIDv5 of names: uniform) and reads them side by side:
this process takes the first range, N - 1 child processes the others, each through a ledger and
connections of its own. A job's events are all in its stream, so no job spans two workers, and
the findings merge in any order (`AuditFindings.ordered` sorts them once).

The children are started before this process opens any store: a fork copies only the thread
that calls it, and a PostgreSQL connection pool runs threads whose locks would stay held in the
child. They fork where this process still runs one thread (the ``mace`` command), else they are
spawned (a fresh interpreter: slower to start, safe anywhere). Each opens its ledger at once,
then waits for the window it is to read, which this process decides once its own ledger is open
(the same head for every worker). A child reports how far it has read, then its findings or the
exception it raised (re-raised here); leaving early (this process failed) ends every child.

A what-if batch (`whatif_batch`) re-runs its jobs in the same processes: each child the selected
jobs whose streams are in its range (`each_range`, given a task of its own instead of a window).
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar
from uuid import UUID

from domain.errors import InvalidInput
from infrastructure.application.audit import AuditService
from infrastructure.application.audit_scan import AuditWindow
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.storage.verification.scan import StreamRange
from infrastructure.storage.verification.side_pass import may_fork
from projections.audit import AuditFindings

UUID_SPACE: Final = 2**128
Part = TypeVar("Part")
Part_co = TypeVar("Part_co", covariant=True)


class RangeTask(Protocol[Part_co]):
    """What a child does over its range of streams, sent to it through its pipe (picklable):
    an audit's window (`_RangeAudit`), a what-if batch's jobs (`whatif_batch.BatchPart`)."""

    def run(self, ledger: Ledger, streams: StreamRange, progress: Callable[[int], None]) -> Part_co:
        """The part of the work in ``streams``, read through ``ledger``; ``progress`` told the
        units done so far."""


@dataclass(frozen=True)
class _RangeAudit:
    window: AuditWindow

    def run(
        self, ledger: Ledger, streams: StreamRange, progress: Callable[[int], None]
    ) -> AuditFindings:
        return ledger.audits.audit_range(self.window, streams, progress)


def stream_ranges(count: int) -> list[StreamRange]:
    """``count`` ranges of stream ids, together every id once, first to last."""
    bounds: list[UUID | None] = [UUID(int=i * UUID_SPACE // count) for i in range(1, count)]
    edges = [None, *bounds, None]
    return list(pairwise(edges))


class AuditWorkers:
    """``count`` workers for one audit, as a context manager; the children start now."""

    def __init__(self, settings: Settings, count: int) -> None:
        if count < 1:
            raise InvalidInput(f"--workers must be at least 1, got {count}")
        self.ranges = stream_ranges(count)
        self._children: list[tuple[BaseProcess, Connection]] = []
        self._frozen = False
        if count > 1:
            self._start(settings)

    def _start(self, settings: Settings) -> None:
        forking = may_fork()
        context = (
            multiprocessing.get_context("fork") if forking else multiprocessing.get_context("spawn")
        )
        if forking:
            # What the child inherits is never collected there: an object of this process
            # (a connection), collected in the child, would close handles both share.
            sys.stdout.flush()
            sys.stderr.flush()
            gc.freeze()
            self._frozen = True
        for streams in self.ranges[1:]:
            here, there = context.Pipe()
            child = context.Process(target=_work, args=(settings, streams, there), daemon=True)
            child.start()
            there.close()
            self._children.append((child, here))

    def __enter__(self) -> AuditWorkers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for child, answers in self._children:
            if child.is_alive():
                child.terminate()
            child.join()
            answers.close()
        self._children = []
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def run(
        self, audits: AuditService, window: AuditWindow, progress: Callable[[int], None]
    ) -> AuditFindings:
        """Every range audited: the first here through ``audits``, the others by the children."""
        found, *others = self.each_range(
            _RangeAudit(window),
            lambda streams, own: audits.audit_range(window, streams, own),
            progress,
        )
        for part in others:
            found = found.then(part)
        return found

    def each_range(
        self,
        task: RangeTask[Part],
        here: Callable[[StreamRange, Callable[[int], None]], Part],
        progress: Callable[[int], None],
    ) -> list[Part]:
        """``task`` done over every range, first to last: the first here (``here``), each other
        by its child through its own ledger; ``progress`` told the units done by all so far."""
        for _, answers in self._children:
            answers.send(task)
        read = [0] * len(self.ranges)
        answered: dict[int, Any] = {}

        def own(done: int) -> None:
            read[0] = done
            self._listen(read, answered, block=False)
            progress(sum(read))

        first = here(self.ranges[0], own)
        while len(answered) < len(self._children):
            self._listen(read, answered, block=True)
            progress(sum(read))
        return [first, *(answered[worker] for worker in sorted(answered))]

    def _listen(self, read: list[int], answered: dict[int, Any], *, block: bool) -> None:
        """Take what the children have said: progress, findings, or an exception (raised)."""
        pending = {
            answers: n for n, (_, answers) in enumerate(self._children, 1) if n not in answered
        }
        ready = wait(list(pending), timeout=None if block else 0)
        for answers in ready:
            assert isinstance(answers, Connection)
            worker = pending[answers]
            try:
                kind, value = answers.recv()
            except EOFError:
                child = self._children[worker - 1][0]
                child.join()
                msg = (
                    f"audit worker {worker + 1} ended without an answer (exit code"
                    f" {child.exitcode}): its streams were not audited"
                )
                raise ChildProcessError(msg) from None
            if kind == "progress":
                read[worker] = value
            elif kind == "done":
                answered[worker] = value
            else:
                raise value


def _work(settings: Settings, streams: StreamRange, answers: Connection) -> None:
    """In a child: open the ledger, wait for the task, do it over the range, answer."""
    answer: tuple[str, object]
    try:
        with Ledger.open_for_reading(settings) as ledger:
            task = answers.recv()
            done = task.run(ledger, streams, lambda read: answers.send(("progress", read)))
        answer = ("done", done)
    except EOFError:
        return  # the work was called off before it began
    except BaseException as exc:  # every failure goes back to the parent, which raises it
        answer = ("raised", exc if _sendable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"))
    answers.send(answer)
    answers.close()


def _sendable(exc: BaseException) -> bool:
    """Whether the exception comes out of a pipe as it went in (some cannot be made again)."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301  # our own bytes, made just now
    except Exception:  # any failure to pickle or to make it again: send its text instead
        return False
    return True
