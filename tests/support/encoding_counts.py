"""Counting canonical encodings: a test that counts how often a value is encoded fails when a
redundant encoding comes back (issue 29: each event encoded once on its way in)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from domain import canonical


@contextmanager
def encodings(
    monkeypatch: pytest.MonkeyPatch, *, holding: str | None = None
) -> Iterator[list[int]]:
    """Counts every canonical encoding made while the block runs (`canonical.canonical_json`
    starts each one with a top-level `_orjson_writes_it_so`; nested values recurse deeper).

    ``holding``: only the encodings of a value that holds this text somewhere (a run's events'
    own content), so that the count does not depend on what the process encoded before: a
    process-wide memo (a topic's JSON string, a stream's MAC header) encodes its value the first
    time the process needs it, whichever test that is."""
    made = [0]
    walk = canonical._orjson_writes_it_so

    def counted(obj: Any, depth: int = 0) -> bool:
        if depth == 0 and (holding is None or holding in repr(obj)):
            made[0] += 1
        return walk(obj, depth)

    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_orjson_writes_it_so", counted)
        yield made
