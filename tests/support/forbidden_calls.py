"""`forbid_nondeterminism`: fail a test if a block reads the wall clock or unseeded randomness.

Seed 000 section 1 forbids live telemetry in the decision path. A static scan cannot see a
clock read hidden behind a library call, so this observes the calls actually made: a profile
hook (``sys.setprofile`` for this thread, ``threading.setprofile`` for threads started in the
block) sees every Python ``call`` and C ``c_call`` and records the forbidden ones. The hook is
installed only for the block, so pytest's and hypothesis's own clock and random use outside it
is never seen.
"""

import _random
import datetime
import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

# C functions reached as module attributes: matched by identity.
_FORBIDDEN_BUILTINS: Final[dict[object, str]] = {
    time.time: "time.time",
    time.time_ns: "time.time_ns",
    time.monotonic: "time.monotonic",
    time.monotonic_ns: "time.monotonic_ns",
    time.perf_counter: "time.perf_counter",
    time.perf_counter_ns: "time.perf_counter_ns",
    os.urandom: "os.urandom",
}
# C classmethods of datetime.date / datetime.datetime (and subclasses), matched by name.
_FORBIDDEN_DATE_METHODS: Final = frozenset({"now", "utcnow", "today"})
# Pure-Python modules whose functions are forbidden: all of them, or the names listed.
_FORBIDDEN_MODULES: Final[dict[str, frozenset[str] | None]] = {
    "random": None,
    "secrets": None,
    "uuid": frozenset({"uuid1", "uuid4"}),
}


def _location(frame: FrameType | None) -> str:
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _module_of(frame: FrameType | None) -> object:
    return None if frame is None else frame.f_globals.get("__name__")


def _python_call(frame: FrameType) -> str | None:
    """Name of a forbidden pure-Python function entered by ``frame``, else None."""
    module = _module_of(frame)
    if not isinstance(module, str) or module not in _FORBIDDEN_MODULES:
        return None
    name = frame.f_code.co_qualname
    allowed = _FORBIDDEN_MODULES[module]
    if name == "<module>" or (allowed is not None and name not in allowed):
        return None  # importing the module, or a function of it that is not forbidden
    return f"{module}.{name}"


def _c_call(function: object) -> str | None:
    """Name of a forbidden C function about to be called, else None."""
    if function in _FORBIDDEN_BUILTINS:  # c_call functions hash by identity
        return _FORBIDDEN_BUILTINS[function]
    owner = getattr(function, "__self__", None)
    name = getattr(function, "__name__", "")
    if isinstance(owner, _random.Random):
        return f"{type(owner).__module__}.{type(owner).__qualname__}.{name}"
    if (
        isinstance(owner, type)
        and issubclass(owner, datetime.date)
        and name in _FORBIDDEN_DATE_METHODS
    ):
        return f"{owner.__module__}.{owner.__qualname__}.{name}"
    return None


@contextmanager
def forbid_nondeterminism() -> Iterator[list[str]]:
    """Record forbidden calls made inside the block; raise AssertionError listing them on exit.

    Yields the live list of findings (``"<name> called from <file>:<line>"``). A call made by
    one of the forbidden modules themselves (``uuid4`` reaching ``os.urandom``, ``randint``
    reaching ``getrandbits``) is not listed again: the entry point already is.
    """
    found: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            name = _python_call(frame)
            caller = frame.f_back
        elif event == "c_call":
            name = _c_call(arg)
            caller = frame
        else:
            return
        if name is not None and _module_of(caller) not in _FORBIDDEN_MODULES:
            found.append(f"{name} called from {_location(caller)}")

    previous, previous_threads = sys.getprofile(), threading.getprofile()
    # A garbage collection inside the block runs other libraries' gc callbacks (hypothesis times
    # its collections with perf_counter), which are not the code under test: hold the collector
    # off until the block ends. (No collection first: disabled, it cannot start in the block,
    # and a full collection of a worker's heap late in a run took seconds per block.)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield found
    finally:
        sys.setprofile(previous)
        threading.setprofile(previous_threads)
        if gc_was_enabled:
            gc.enable()
    if found:
        listing = "\n  ".join(found)
        msg = f"wall clock or unseeded randomness used in a deterministic block:\n  {listing}"
        raise AssertionError(msg)
