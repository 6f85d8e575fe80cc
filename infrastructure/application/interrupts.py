"""Ctrl-C that always stops a command: the entry points run each command inside `ctrl_c_stops`.

Python runs a signal's handler in the main thread between two bytecodes of whatever Python code
runs there, and its own SIGINT handler raises KeyboardInterrupt at that point. When that code is a
finaliser (``__del__``, a weakref callback), a garbage collector's callback or a SQLite callback,
the exception is reported as unraisable (or dropped) and the code it interrupted goes on: the
Ctrl-C is lost, and ``mace bench`` ran to its end and exited 0.

So a Ctrl-C is recorded before it is raised, and raised again where it is safe to:

- `stop_if_interrupted`, called between the steps of long loops, raises it if it was lost;
- a command that returns after a Ctrl-C still exits 130 (`Interruption.requested`);
- a KeyboardInterrupt reported unraisable after a Ctrl-C is that Ctrl-C, lost and recorded: it
  is not printed (the command says "interrupted" in one line). It cannot be raised again from
  the hook that reports it: the handler would run inside the hook, where it is lost again.

A store write in flight when KeyboardInterrupt is raised is committed or rolled back by its
transaction, never half: the exception leaves every ``with`` block of a transaction as any other.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass(slots=True)
class Interruption:
    """Whether Ctrl-C was pressed while the command ran (set by the signal handler)."""

    requested: bool = False


_NONE = Interruption()
_current = _NONE  # the running command's; `_NONE` (never set) outside `ctrl_c_stops`


@contextmanager
def ctrl_c_stops() -> Iterator[Interruption]:
    """While the block runs, a Ctrl-C is recorded and raised until it stops the block.

    Only Python's own handler is replaced: a SIGINT that whoever started the process ignores (a
    shell's background job) stays ignored, and a handler someone else installed stays theirs.
    Off the main thread no handler can be installed: nothing is."""
    global _current  # noqa: PLW0603 -- one process, one command, one handler
    on_main_thread = threading.current_thread() is threading.main_thread()
    if not on_main_thread or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield Interruption()
        return
    interruption = Interruption()
    previous_hook = sys.unraisablehook
    _current = interruption
    signal.signal(signal.SIGINT, _on_ctrl_c)
    sys.unraisablehook = _lost_ctrl_c_unsaid(previous_hook)
    try:
        yield interruption
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = previous_hook
        _current = _NONE


def stop_if_interrupted() -> None:
    """A safe point between two steps of a long loop: raise the command's Ctrl-C if one was
    pressed, whether or not its KeyboardInterrupt got through (a no-op outside a command)."""
    if _current.requested:
        raise KeyboardInterrupt


def _on_ctrl_c(signum: int, frame: FrameType | None) -> None:
    _current.requested = True
    raise KeyboardInterrupt


def _lost_ctrl_c_unsaid(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], None]:
    # `sys.UnraisableHookArgs` is typeshed's name, not one Python defines: annotations only.
    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not (_current.requested and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous(unraisable)

    return hook
