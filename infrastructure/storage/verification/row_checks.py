"""The checks of `verify --all`'s pass that need nothing but the row itself: its MAC
(`RecordCheck`) and its Merkle leaf, made a page of rows at a time, on the machine's other
core where this process may fork.

These are most of the pass's processor time (an HMAC and a SHA-256 over every stored byte);
what is left to the pass (reading the rows, each stream's versions, seals and witnesses, the
Merkle tree over the leaves) needs the rows in order and stays in this process. So each page
the pass reads is sent to a forked child (`_Forked`) and checked there while this process reads
the next page and judges the page before it with the child's answer: every row's MAC is known to
hold before the pass uses the row. At most two pages are in flight: memory stays flat. Where
forking is not safe (another thread runs: `side_pass.may_fork`) the same checks run here, in
order (`_Here`); a child that goes away leaves the pages it did not answer to be checked here.

An answer only says what held: a row whose MAC the child did not accept, or whose leaf it did
not make, is judged in this process by the code that judges every row (`verify_record`,
`StoreReader.leaf_of`), so a failure is reported with the same code and message wherever the
row was first checked.
"""

from __future__ import annotations

import gc
import marshal
import multiprocessing
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Final

from domain.checkpoint import CHECKPOINT_STREAM, leaf_hash_after
from domain.errors import IntegrityFailure
from infrastructure.storage.records.signed_record import RecordCheck, stream_header
from infrastructure.storage.verification.scan import LogRow, StoreReader
from infrastructure.storage.verification.side_pass import may_fork

PageAnswer = tuple[list[bytes | None], list[bytes | None]]
"""For each row of a page, position for position: its MAC, when `RecordCheck` accepted it
(None: not accepted); its leaf, when made here (None: not made)."""

_NOTHING: Final = object()


class PageCheck:
    """The checks of one page of rows (`PageAnswer`): pure, the same in a child and here."""

    def __init__(self, reader: StoreReader, check: RecordCheck, *, leaves: bool) -> None:
        self._ids = reader.stream_ids()
        self._prefix_of = reader.leaf_prefix
        self._checkpoints = reader.stored_id(CHECKPOINT_STREAM)  # its events are no leaves
        self._check = check
        self._leaves = leaves

    def __call__(self, rows: list[LogRow]) -> PageAnswer:
        check, ids, leaves = self._check, self._ids, self._leaves
        macs: list[bytes | None] = []
        hashes: list[bytes | None] = []
        at: object = _NOTHING
        header: bytes | None = None
        prefix: bytes | None = None
        for _, stored, version, topic, state in rows:
            if stored != at:
                # A stream's rows mostly follow each other: what they share is made once.
                at = stored
                prefix = (
                    self._prefix_of(stored)
                    if leaves and stored is not None and stored != self._checkpoints
                    else None
                )
                try:
                    header = stream_header(ids(stored))
                except IntegrityFailure:
                    header = None  # no stream: the pass says so
            # Rows of the types a row written by the ledger has (a version from a 64-bit
            # integer column); a row edited into anything else is judged by the pass.
            if type(version) is int and type(topic) is str and type(state) is bytes:
                macs.append(None if header is None else check(header, version, topic, state))
                hashes.append(
                    None if prefix is None else leaf_hash_after(prefix, version, topic, state)
                )
            else:
                macs.append(None)
                hashes.append(None)
        return macs, hashes


class _Here:
    """Pages checked in this process, when asked for their answer."""

    def __init__(self, check: PageCheck) -> None:
        self._check = check
        self._sent: list[list[LogRow]] = []

    def send(self, rows: list[LogRow]) -> None:
        self._sent.append(rows)

    def answer(self) -> PageAnswer:
        return self._check(self._sent.pop(0))


class _Forked:
    """Pages checked by a forked child, one at a time: `send` a page, then `answer` it before
    the next is sent (so neither end ever waits on a pipe the other is filling)."""

    def __init__(self, check: PageCheck) -> None:
        self._here = _Here(check)
        context = multiprocessing.get_context("fork")
        self._pages, there = context.Pipe()
        # The child exits without flushing what this process had buffered, and collects
        # nothing it inherited: an object of this process (a connection), collected in the
        # child, would close handles both share.
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()
        try:
            self._child: BaseProcess | None = context.Process(
                target=_serve, args=(check, there), daemon=True
            )
            self._child.start()
        finally:
            gc.unfreeze()
        there.close()
        self._sent: list[LogRow] | None = None

    def send(self, rows: list[LogRow]) -> None:
        if self._child is not None:
            try:
                self._pages.send_bytes(marshal.dumps(rows))
                self._sent = rows
                return
            except (OSError, ValueError):  # the child is gone, or a row marshal cannot carry
                self._stop()
        self._here.send(rows)

    def answer(self) -> PageAnswer:
        sent, self._sent = self._sent, None
        if sent is not None:
            try:
                # Bytes from the child this process forked, over a pipe of its own.
                answer: PageAnswer = marshal.loads(self._pages.recv_bytes())  # noqa: S302
                return answer
            except (OSError, EOFError, ValueError):
                self._stop()
                self._here.send(sent)  # checked here instead: nothing is checked less
        return self._here.answer()

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        self._pages.close()
        if child.is_alive():
            child.terminate()
        child.join()

    def close(self) -> None:
        self._stop()


def _serve(check: PageCheck, pages: Connection) -> None:
    """The child: each page it is sent, answered, until the pass closes its end."""
    gc.disable()  # nothing it makes outlives a page: no cycles to collect
    while True:
        try:
            rows: Any = marshal.loads(pages.recv_bytes())  # noqa: S302  # from its parent
        except EOFError:
            return
        pages.send_bytes(marshal.dumps(check(rows)))


@contextmanager
def page_checks(check: PageCheck) -> Iterator[_Here | _Forked]:
    """Where ``check`` runs for this pass: a forked child if this process may fork, else here."""
    if not may_fork():
        yield _Here(check)
        return
    forked = _Forked(check)
    try:
        yield forked
    finally:
        forked.close()
