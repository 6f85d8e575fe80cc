"""A Ctrl-C that lands where Python ignores exceptions, delivered there on purpose.

Python runs a SIGINT handler between two bytecodes of whatever runs in the main thread. When that
is a finaliser or a SQLite callback, the handler's KeyboardInterrupt is reported unraisable (or
dropped) and the code it interrupted goes on. A real Ctrl-C lands there only now and then; these
deliver one there every time, at a point the test chooses (after a line of a command's output),
so that what the command does then is tested deterministically.
"""

from __future__ import annotations

import signal
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any, TextIO


class _Dropped:
    """An object made only to be dropped at once, running its finaliser."""


def ctrl_c_in_a_finaliser() -> None:
    """SIGINT to this process while a finaliser runs: `signal.raise_signal` runs the handler at
    once, inside the finaliser."""
    weakref.finalize(_Dropped(), signal.raise_signal, signal.SIGINT)


def ctrl_c_in_a_sqlite_callback() -> None:
    """SIGINT to this process while SQLite runs a Python callback (its trace callback): SQLite
    drops the callback's exception without a word."""
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.set_trace_callback(lambda _: signal.raise_signal(signal.SIGINT))
        connection.execute("SELECT 1")


LOST_CTRL_C: dict[str, Callable[[], None]] = {
    "finaliser": ctrl_c_in_a_finaliser,
    "sqlite callback": ctrl_c_in_a_sqlite_callback,
}


MACE_LOSING_CTRL_C = (
    "import signal, sys, weakref; signal.signal(signal.SIGINT, signal.default_int_handler);"
    " signal.signal(signal.SIGUSR1, lambda *_: weakref.finalize("
    "type('Dropped', (), {})(), signal.raise_signal, signal.SIGINT));"
    " from infrastructure.cli import main; sys.exit(main())"
)
"""``mace`` as a shell starts it (with Python's own Ctrl-C handler), where SIGUSR1 delivers a
Ctrl-C inside a finaliser (`ctrl_c_in_a_finaliser`): for ``mace`` in a process of its own."""


@contextmanager
def python_ctrl_c() -> Iterator[None]:
    """SIGINT handled by Python's own handler while the block runs, as in a process a shell
    starts: a test runner's worker may ignore it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class CtrlCAfterLine:
    """A text stream (standard error) that, once line ``line`` is written to it, has ``lose``
    deliver a Ctrl-C where Python ignores it."""

    def __init__(self, stream: TextIO, line: int, lose: Callable[[], None]) -> None:
        self._stream, self._line, self._lose = stream, line, lose
        self._written = 0

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        before, self._written = self._written, self._written + text.count("\n")
        if before < self._line <= self._written:
            self._lose()
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
