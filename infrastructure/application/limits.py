"""How much one way in may hand the ledger: the same byte and event limits for ``mace ingest``, the
Python API (`RunRecorder`, the run use cases), the HTTP service (its body limit and run routes)
and any later way in, read from one place, the settings:

- ``MACE_MAX_BODY_BYTES``: one HTTP request body, one event of a run, one run's final output;
- ``MACE_MAX_RUN_BYTES``: one run in all (its events, and a run file read by ``mace ingest``);
- ``MACE_MAX_RUN_EVENTS``: the events of one run; ``MACE_MAX_BATCH_EVENTS``: one HTTP batch;
- a SEM key given from outside a job: `MAX_SEM_KEY_CHARS` characters.

Sizes are refused before anything is written, and where the input is a stream (a file, standard
input, a request body) before it is read past the limit: `RunTooLarge` (PAYLOAD_TOO_LARGE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.run_draft import RunTooLarge
from infrastructure.storage.settings import Settings

MAX_SEM_KEY_CHARS: Final = 256
"""Four short snake_case parts: far more than any key the Stage-0 agents or a person writes."""
READ_CHUNK: Final = 1 << 16


@dataclass(frozen=True)
class InputLimits:
    body_bytes: int
    batch_events: int
    run_events: int
    run_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> InputLimits:
        return cls(
            body_bytes=settings.max_body_bytes,
            batch_events=settings.max_batch_events,
            run_events=settings.max_run_events,
            run_bytes=settings.max_run_bytes,
        )

    def read_run_file(self, name: str, stream: IO[bytes]) -> bytes:
        """A run file's bytes, read in chunks and refused as soon as they pass ``run_bytes``."""
        data = bytearray()
        while chunk := stream.read(READ_CHUNK):
            data += chunk
            if len(data) > self.run_bytes:
                msg = f"{name} is larger than {self.run_bytes} bytes (MACE_MAX_RUN_BYTES)"
                raise RunTooLarge(msg)
        return bytes(data)

    def check_batch(self, events: int) -> None:
        if events > self.batch_events:
            msg = f"batch of {events} events: at most {self.batch_events} (MACE_MAX_BATCH_EVENTS)"
            raise RunTooLarge(msg)

    def check_events(self, run: str, contents: Sequence[Mapping[str, Any]]) -> None:
        """A run's events (as stored: their JSON form; an event re-sent is held, and counted,
        once): how many, each one's size, their sum."""
        self._check_count(run, len(contents))
        total = 0
        for position, content in enumerate(contents):
            total += self._size(f"{run} event {position}", content)
            if total > self.run_bytes:
                msg = f"{run} holds more than {self.run_bytes} bytes of events (MACE_MAX_RUN_BYTES)"
                raise RunTooLarge(msg)

    def check_added(self, run: str, sizes: Sequence[int], added: int) -> None:
        """A run's events once a batch is added, by their sizes as the run holds them (the last
        ``added`` are the batch's): how many, each added one's size, their sum. Nothing is
        encoded again: a run being sent is held to its limits batch by batch for the price of
        the batch alone."""
        self._check_count(run, len(sizes))
        for position in range(len(sizes) - added, len(sizes)):
            self._check_size(f"{run} event {position}", sizes[position])
        if sum(sizes) > self.run_bytes:
            msg = f"{run} holds more than {self.run_bytes} bytes of events (MACE_MAX_RUN_BYTES)"
            raise RunTooLarge(msg)

    def check_final_output(self, run: str, final_output: Any) -> None:
        self._size(f"{run} final_output", final_output)

    def _check_count(self, run: str, events: int) -> None:
        if events > self.run_events:
            msg = f"{run} would exceed {self.run_events} events (MACE_MAX_RUN_EVENTS)"
            raise RunTooLarge(msg)

    def _size(self, where: str, value: Any) -> int:
        """The canonical JSON size of ``value``: one event or one output, at most a body's."""
        return self._check_size(where, len(canonical_json(value)))

    def _check_size(self, where: str, size: int) -> int:
        if size > self.body_bytes:
            msg = f"{where}: {size} bytes, at most {self.body_bytes} (MACE_MAX_BODY_BYTES)"
            raise RunTooLarge(msg)
        return size


def check_sem_key_length(key: str) -> None:
    """A SEM key handed in from outside a job, refused by its length before it is parsed (and
    without echoing it: a key of 100,000 characters is no key to print)."""
    if len(key) > MAX_SEM_KEY_CHARS:
        msg = f"SEM key: {len(key)} characters, at most {MAX_SEM_KEY_CHARS}"
        raise InvalidInput(msg)
