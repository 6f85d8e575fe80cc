"""One pass of a whole-ledger check run beside another: in a forked child process, or a thread.

``mace verify --all`` makes two passes over the log that share nothing: the stream pass (every
MAC, every stream's versions, seals, witnesses) and the checkpoint pass (the Merkle tree in
notification order). One after the other, the tree cost 1.3-2x a verify without it. Side by side
they cost about what the longer one costs:

- On SQLite both passes are Python work, so the side pass runs in a forked child, on the other
  core. A fork copies only the thread that calls it: a lock another thread held at that instant
  stays held in the child for good (a connection pool's threads hold libpq's and OpenSSL's). So
  it forks only where this process runs one thread (the ``mace`` command). The child reads
  through connections of its own, never one it inherited, and answers with the pass's value or
  the exception it raised, which the parent re-raises.
- Anywhere else (PostgreSQL's pool runs threads) it runs in a thread. PostgreSQL computes the
  tree's leaves in the server, and while one pass waits for the server the other runs.

Leaving before asking for the result (the other pass failed) stops the side pass: the child is
terminated; the thread is asked to stop (`Stopped`), and the pass checks between streams.

SQLite warns against using a connection across a fork. The child opens its own, and the fork
happens while this process holds no transaction open (`verify_ledger` forks before it reads),
so no lock state the child inherits describes a lock that is held.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Generic, TypeVar

T = TypeVar("T")

Stopped = Callable[[], bool]
"""Whether the side pass was asked to stop (its result is no longer wanted)."""


class PassStopped(Exception):
    """A side pass gave up because it was asked to stop; nobody reads its result."""


def may_fork() -> bool:
    """Whether a pass can run in a forked child: the platform forks and no other thread runs."""
    return hasattr(os, "fork") and threading.active_count() == 1


def never_stopped() -> bool:
    """`Stopped` for a pass nobody stops (one run in this process, or in a child, which is
    terminated instead)."""
    return False


class SidePass(Generic[T]):
    """``work`` run beside the caller's own, as a context manager: forked when ``fork``, else in a
    thread. `result` waits for it and returns its value or raises its exception."""

    def __init__(self, work: Callable[[Stopped], T], *, fork: bool) -> None:
        self._work = work
        self._child: multiprocessing.process.BaseProcess | None = None
        self._answers: Connection | None = None
        self._thread: threading.Thread | None = None
        self._stop_asked = threading.Event()
        self._outcome: tuple[str, object] = ("raised", RuntimeError("the side pass did not run"))
        if fork:
            self._fork()
        else:
            self._thread = threading.Thread(target=self._run_here, name="side pass", daemon=True)
            self._thread.start()

    def _fork(self) -> None:
        context = multiprocessing.get_context("fork")
        answers, send = context.Pipe(duplex=False)
        # The child flushes the standard streams it inherited when it ends: anything this process
        # had buffered would be printed twice.
        sys.stdout.flush()
        sys.stderr.flush()
        # Frozen, the objects the child inherits are never collected there: a connection of this
        # process, collected in the child, would close file handles (and SQLite locks) it shares.
        # They stay frozen here too while the child runs: a full collection writes to every
        # object, and each page it wrote would then be copied, the parent paying for the fork.
        gc.freeze()
        try:
            work = self._work
            child = context.Process(
                target=_answer, args=(lambda: work(never_stopped), send), daemon=True
            )
            child.start()
        except BaseException:
            gc.unfreeze()
            raise
        send.close()
        self._child, self._answers = child, answers

    def _run_here(self) -> None:
        try:
            self._outcome = ("returned", self._work(self._stop_asked.is_set))
        except BaseException as exc:  # kept for `result`, which re-raises it in the caller
            self._outcome = ("raised", exc)

    def __enter__(self) -> SidePass[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def result(self) -> T:
        try:
            if self._thread is not None:
                self._thread.join()
            elif self._child is not None:
                self._outcome = self._received(self._child)
        finally:
            self._stop()
        kind, value = self._outcome
        if kind == "raised":
            assert isinstance(value, BaseException)
            raise value
        return value  # type: ignore[return-value]  # what `work` returned

    def _received(self, child: multiprocessing.process.BaseProcess) -> tuple[str, object]:
        assert self._answers is not None
        try:
            kind, value = self._answers.recv()
        except EOFError:  # the child died before answering (killed, out of memory)
            child.join()
            msg = (
                f"the side pass ended without an answer (exit code {child.exitcode}):"
                " nothing it was to check was judged"
            )
            # An OSError: the product answers it in one line (a process the system took away).
            return "raised", ChildProcessError(msg)
        child.join()
        return kind, value

    def _stop(self) -> None:
        if self._thread is not None:
            self._stop_asked.set()
            self._thread.join()
            self._thread = None
        if self._child is not None:
            if self._child.is_alive():
                self._child.terminate()
            self._child.join()
            self._child = None
            gc.unfreeze()
        if self._answers is not None:
            self._answers.close()
            self._answers = None


def _answer(work: Callable[[], object], send: Connection) -> None:
    """In the child: run ``work`` and send back what it returned or raised."""
    try:
        answer: tuple[str, object] = ("returned", work())
    except BaseException as exc:  # every outcome goes back to the parent, which re-raises it
        answer = ("raised", exc)
    try:
        send.send(answer)
    except Exception as unsendable:  # an exception that cannot be pickled: its text, then
        kind, value = answer
        text = f"{type(value).__name__}: {value}" if kind == "raised" else repr(unsendable)
        send.send(("raised", RuntimeError(text)))
    finally:
        send.close()
