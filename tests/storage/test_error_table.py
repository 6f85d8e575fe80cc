"""The one error table: every code has its HTTP status and exit code, every error its code."""

from __future__ import annotations

from uuid import UUID

import pytest
from eventsourcing.persistence import OperationalError
from pydantic import BaseModel, ValidationError

from domain.errors import (
    ConflictError,
    ErrorCode,
    IntegrityFailure,
    InvalidInput,
    MaceError,
    NotFoundError,
    SnapshotError,
    StoreBusyError,
)
from domain.fork import ForkCode, NotForkable
from domain.governance import AccessDenied
from domain.receipt import Unreplayable, UnreplayableCode
from domain.run_draft import RunTooLarge
from infrastructure.application.errors import (
    ANSWERS,
    ERRORS,
    Code,
    Failure,
    WitnessFailed,
    failure_of,
)
from infrastructure.storage.backends.schema import StoreNotSetUp
from infrastructure.storage.keys.checkpoint_key import CheckpointKeyError
from infrastructure.storage.keys.keyring import Keyring, KeyringError
from infrastructure.storage.records.key_checks import KeyMismatch, MissingSigningKey
from infrastructure.storage.settings import SettingsError

MISSING_KEY = MissingSigningKey("MACE_SIGNING_KEYS", "k1", "stream s version 1", "evidence")


class _Port(BaseModel):
    port: int


def _invalid_port() -> ValidationError:
    try:
        _Port.model_validate({"port": "eighty"})
    except ValidationError as exc:
        return exc
    raise AssertionError("the model took a word for a port")


STREAM = UUID(int=7)
KEYRING = Keyring({"k1": b"x" * 32}, "k1", "MACE_SIGNING_KEYS")

EXAMPLES: list[tuple[BaseException, Failure]] = [
    (
        MaceError(ErrorCode.REPLAY_DIVERGENCE, "step 2 differs\nmore"),
        Failure("REPLAY_DIVERGENCE", "step 2 differs", 409, 1),
    ),
    (
        IntegrityFailure(STREAM, 3, "MAC mismatch"),
        Failure("INTEGRITY_FAILURE", f"stream {STREAM} version 3: MAC mismatch", 500, 1),
    ),
    (AccessDenied("needs admin"), Failure("ACCESS_DENIED", "needs admin", 403, 1)),
    (
        Unreplayable(UnreplayableCode.NESTED_REPLAY, "a replay"),
        Failure("unreplayable.nested_replay", "a replay", 422, 1),
    ),
    (
        NotForkable("job j holds tool calls: a fork decides again only Stage-0 iterations"),
        Failure(
            "FORK_NOT_REDECIDABLE",
            "job j holds tool calls: a fork decides again only Stage-0 iterations",
            422,
            2,
        ),
    ),
    (NotFoundError("no job j"), Failure("NOT_FOUND", "no job j", 404, 2)),
    (StoreNotSetUp("no ledger at x"), Failure("NOT_FOUND", "no ledger at x", 404, 2)),
    (ConflictError("already there"), Failure("CONFLICT", "already there", 409, 2)),
    (SnapshotError("no snapshot s"), Failure("INVALID_INPUT", "no snapshot s", 422, 2)),
    (StoreBusyError("busy"), Failure("STORE_BUSY", "busy", 503, 1)),
    (
        RunTooLarge("run r would exceed 5 events"),
        Failure("PAYLOAD_TOO_LARGE", "run r would exceed 5 events", 413, 2),
    ),
    (ChildProcessError("ended"), Failure("STORE_UNAVAILABLE", "ended", 503, 1)),
    (
        KeyMismatch(KEYRING, "k1"),
        Failure("KEY_MISMATCH", str(KeyMismatch(KEYRING, "k1")), 503, 2),
    ),
    (
        MISSING_KEY,
        Failure("KEY_MISMATCH", str(MISSING_KEY), 503, 2),
    ),
    (KeyringError("bad key"), Failure("INVALID_INPUT", "bad key", 422, 2)),
    (
        WitnessFailed("witness http://w refused the checkpoint: it answered HTTP 500"),
        Failure(
            "WITNESS_FAILED",
            "witness http://w refused the checkpoint: it answered HTTP 500",
            502,
            1,
        ),
    ),
    (CheckpointKeyError("not PEM"), Failure("INVALID_INPUT", "not PEM", 422, 2)),
    (SettingsError("bad store"), Failure("INVALID_INPUT", "bad store", 422, 2)),
    (
        InvalidInput("--seed must not be empty"),
        Failure("INVALID_INPUT", "--seed must not be empty", 422, 2),
    ),
    (
        _invalid_port(),
        Failure(
            "INVALID_INPUT",
            "port: Input should be a valid integer, unable to parse string as an integer",
            422,
            2,
        ),
    ),
    (
        OperationalError("connection refused"),
        Failure("STORE_UNAVAILABLE", "store unavailable: connection refused", 503, 1),
    ),
    (
        PermissionError("mace.db"),
        Failure("STORE_UNAVAILABLE", "store unavailable: mace.db", 503, 1),
    ),
]


@pytest.mark.parametrize(("error", "expected"), EXAMPLES, ids=lambda x: type(x).__name__)
def test_each_error_has_its_code_status_and_exit_code(
    error: BaseException, expected: Failure
) -> None:
    assert failure_of(error) == expected


def test_every_mapped_error_has_an_example_above() -> None:
    examples = {type(error) for error, _ in EXAMPLES}
    assert all(any(issubclass(e, kind) for e in examples) for kind in ERRORS)


def test_every_code_is_in_the_table_by_its_exact_string() -> None:
    codes = [*ErrorCode, *UnreplayableCode, *ForkCode, *Code]
    assert sorted(ANSWERS) == sorted(c.value for c in codes)
    assert all(code == code.name for code in (*ErrorCode, *Code))
    assert {answer.exit_code for answer in ANSWERS.values()} == {1, 2}


def test_an_unexpected_error_is_not_answered_as_if_it_were_expected() -> None:
    assert failure_of(KeyError("a bug")) is None
    assert failure_of(ValueError("a bug")) is None
