"""An HTTP batch of a run validates each of its events once and encodes it twice (the check that
it has a canonical encoding, and the encoding the run keeps for its digest and size), whatever
the run already holds, on SQLite and PostgreSQL (issue 29, point 1). Counts, never timings.

Before, the body's items and then the whole batch were encoded again to check what each event's
validation had checked, and every batch encoded every event the run held again for its limits.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.api_support import Api
from support.encoding_counts import encodings


def items(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {"event_id": f"e{n}", "event": {"type": "StageTransition", "to_stage": f"s{n}"}}
        for n in range(first, first + count)
    ]


def test_an_http_batch_encodes_each_event_twice_whatever_the_run_holds(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: dict[tuple[int, int], int] = {}
    for held in (10, 100):
        for size in (10, 100):
            run_id = api.open_run(
                {"type": "RunStarted", "seed": 7, "input": "hi"} | {"job_id": f"r-{held}-{size}"}
            )
            assert api.send(run_id, items(0, held)).status_code == 200
            with encodings(monkeypatch) as count:
                answer = api.send(run_id, items(held, size))
            assert answer.status_code == 200, answer.content
            assert answer.json()["accepted"] == size
            made[held, size] = count[0]
    assert made[100, 10] == made[10, 10]
    assert made[100, 100] == made[10, 100]
    assert made[10, 100] - made[10, 10] == 2 * 90
