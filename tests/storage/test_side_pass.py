"""A pass run beside another, in a forked child or a thread, answers exactly as it would alone.

`verify --all` runs its stream pass beside the checkpoint pass: in a child where the process
runs one thread, else in a thread. Whatever the side pass returns or raises comes back whole (an
integrity failure with its stream, version and reason); a child that dies, or a caller that
leaves first, never leaves it waiting or a process or thread behind.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import pytest
from support.ledger_fixtures import RawTable, run, store_of
from support.sample_job import record_sample_job

from domain.errors import IntegrityFailure
from domain.job import Job
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import UnknownSigningKey
from infrastructure.storage.settings import Settings
from infrastructure.storage.verification import ledger as verification
from infrastructure.storage.verification.side_pass import SidePass, Stopped, may_fork

STREAM = UUID(int=7)
MODES = pytest.mark.parametrize("fork", [True, False], ids=["forked", "thread"])


class Unsendable(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__("held a lock")
        self.lock = threading.Lock()


def _raise(exc: BaseException) -> Callable[[Stopped], object]:
    def work(stopped: Stopped) -> object:
        raise exc

    return work


def _where(stopped: Stopped) -> tuple[int, int]:
    return os.getpid(), threading.get_ident()


@MODES
def test_a_pass_returns_its_value_from_elsewhere(fork: bool) -> None:
    with SidePass(_where, fork=fork) as side:
        pid, thread = side.result()
    assert (pid != os.getpid()) is fork
    assert thread != threading.get_ident() or fork


@MODES
@pytest.mark.parametrize("kind", [IntegrityFailure, UnknownSigningKey])
def test_an_integrity_failure_comes_back_whole(fork: bool, kind: type[IntegrityFailure]) -> None:
    with (
        SidePass(_raise(kind(STREAM, 4, "MAC does not match")), fork=fork) as side,
        pytest.raises(kind) as raised,
    ):
        side.result()
    failure = raised.value
    assert (failure.stream, failure.version) == (str(STREAM), 4)
    assert failure.reason == "MAC does not match"
    assert str(failure) == f"INTEGRITY_FAILURE: stream {STREAM} version 4: MAC does not match"


def test_an_exception_that_cannot_leave_the_child_comes_back_as_its_text() -> None:
    with SidePass(_raise(Unsendable()), fork=True) as side, pytest.raises(RuntimeError) as raised:
        side.result()
    assert str(raised.value) == "Unsendable: held a lock"
    with SidePass(_raise(Unsendable()), fork=False) as side, pytest.raises(Unsendable):
        side.result()  # a thread hands over the exception itself


def test_a_child_that_dies_without_answering_is_an_error_not_a_hang() -> None:
    with (
        SidePass(lambda stopped: os._exit(3), fork=True) as side,
        pytest.raises(ChildProcessError) as raised,
    ):
        side.result()
    assert str(raised.value) == (
        "the side pass ended without an answer (exit code 3): nothing it was to check was judged"
    )


def test_leaving_without_the_result_stops_the_child() -> None:
    never, _keep_open = os.pipe()  # nothing is ever written: the child would wait for good
    side = SidePass(lambda stopped: os.read(never, 1), fork=True)
    child = side._child
    assert child is not None and child.is_alive()
    with side:
        pass
    assert not child.is_alive()
    assert multiprocessing.active_children() == []


def test_leaving_without_the_result_stops_the_thread() -> None:
    running = threading.Event()
    checks: list[bool] = []

    def work(stopped: Stopped) -> None:
        running.set()
        while not stopped():  # a pass checks between streams
            checks.append(False)
            running.wait(0.001)
        checks.append(True)

    side = SidePass(work, fork=False)
    running.wait()
    thread = side._thread
    with side:
        pass
    assert thread is not None and not thread.is_alive()
    assert checks[-1] is True


def test_no_fork_while_another_thread_runs() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not may_fork()
    finally:
        release.set()
        other.join()


# --- verify --all, on both stores ---------------------------------------------------------------


@pytest.fixture
def recorded(ledger: Ledger) -> Iterator[Ledger]:
    record_sample_job(ledger)
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    record_sample_job(ledger, "job-2", "s2")  # after the checkpoint: counted, not yet covered
    yield ledger


def _verify(ledger: Ledger, fork: bool) -> verification.LedgerVerification:
    store = store_of(ledger)
    table = store.recorder.events_table_name  # type: ignore[attr-defined]
    return verification.verify_ledger(
        store.location, table, store.keyring, store.checkpoints, fork=fork
    )


def test_verify_forked_and_threaded_agree(recorded: Ledger) -> None:
    forked, here = _verify(recorded, fork=True), _verify(recorded, fork=False)
    assert forked == here
    assert (here.jobs, here.sealed_jobs) == (2, 2)
    assert here.tree is not None and here.tree.not_yet_checkpointed > 0


def test_a_stream_failure_found_in_the_child_is_the_same_failure(
    recorded: Ledger, settings: Settings
) -> None:
    # A stream below the split, past the checkpoint: only the side pass (the child) can see it.
    below, _ = _job_on_each_side()
    record_sample_job(recorded, below, "seed below")
    RawTable(settings).delete(Job.id_for(below), 2)
    failures = []
    for fork in (True, False):
        with pytest.raises(IntegrityFailure) as raised:
            _verify(recorded, fork=fork)
        failures.append(str(raised.value))
    assert failures[0] == failures[1]
    assert f"stream {Job.id_for(below)} version 2" in failures[0]


def test_a_side_pass_that_dies_is_one_line_from_mace_verify(
    recorded: Ledger,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parent = os.getpid()
    passes = verification._verify_streams

    def killed_in_the_child(*args: Any) -> Any:
        if os.getpid() != parent:
            os._exit(9)  # as the kernel's out-of-memory killer would end it
        return passes(*args)

    monkeypatch.setattr(verification, "_verify_streams", killed_in_the_child)
    monkeypatch.setattr(verification, "may_fork", lambda: True)
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    assert err == (
        "mace: STORE_UNAVAILABLE: the side pass ended without an answer (exit code 9):"
        " nothing it was to check was judged\n"
    )


@MODES
def test_a_checkpoint_failure_is_reported_first_and_the_side_pass_stopped(
    recorded: Ledger, settings: Settings, fork: bool
) -> None:
    RawTable(settings).delete(Job.id_for("job-1"), 2)  # below the checkpoint
    with pytest.raises(IntegrityFailure) as raised:
        _verify(recorded, fork=fork)
    assert "checkpoint 1 no longer holds" in str(raised.value)
    assert multiprocessing.active_children() == []
    assert [t for t in threading.enumerate() if t.name == "side pass"] == []


def _job_on_each_side() -> tuple[str, str]:
    """Two job ids whose streams fall below and above `verification.SPLIT`."""
    names = (f"late-{n}" for n in range(1000))
    below = next(name for name in names if Job.id_for(name) < verification.SPLIT)
    above = next(name for name in names if Job.id_for(name) >= verification.SPLIT)
    return below, above


def test_failures_on_both_sides_of_the_split_report_the_first_in_stream_order(
    recorded: Ledger, settings: Settings
) -> None:
    below, above = _job_on_each_side()
    for job_id in (above, below):
        record_sample_job(recorded, job_id, f"seed {job_id}")
    table = RawTable(settings)
    for job_id in (below, above):
        table.delete(Job.id_for(job_id), 2)  # after the checkpoint: only the stream pass sees it
    store = store_of(recorded)
    events = store.recorder.events_table_name  # type: ignore[attr-defined]
    failures = []
    for checkpoints, fork in ((None, None), (store.checkpoints, True), (store.checkpoints, False)):
        with pytest.raises(IntegrityFailure) as raised:
            verification.verify_ledger(
                store.location, events, store.keyring, checkpoints, fork=fork
            )
        failures.append(raised.value.stream)
    assert failures == [str(Job.id_for(below))] * 3
