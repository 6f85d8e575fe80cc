"""``mace serve`` in its own process, on SQLite and PostgreSQL: its notary leaves the store fully
checkpointed when the service stops (SIGTERM), even with an interval it never reached."""

from __future__ import annotations

from pathlib import Path

import httpx
from support.ledger_fixtures import settings_for, store_of

from domain.checkpoint import CHECKPOINT_STREAM
from infrastructure.application.ledger import Ledger
from infrastructure.tooling.load_server import ServiceProcess, make_token


def test_a_stopped_service_leaves_every_commit_checkpointed(store_url: str, tmp_path: Path) -> None:
    settings = settings_for(store_url).model_copy(update={"checkpoint_interval": 3600.0})
    with Ledger.open(settings, checkpoint_on_close=False):
        pass  # the store's tables, as `mace init` makes them
    token = make_token(tmp_path / "tokens.json")
    log = tmp_path / "serve.log"
    with ServiceProcess(settings, tmp_path / "tokens.json", log) as service:
        service.start()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=service.base_url, headers=headers, timeout=60) as client:
            job = client.post("/v1/jobs", json={"input": "2 + 3", "seed": "s1"})
            assert job.status_code == 201, job.content
            # The interval never passed: no checkpoint yet, and the request did not wait for one.
            newest = client.get("/v1/checkpoints/newest")
            assert newest.status_code == 404, newest.content
    assert "Traceback" not in log.read_text()
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        checkpoints = store_of(ledger).checkpoints
        assert checkpoints is not None
        last = checkpoints.newest()
        assert last is not None
        notifications = store_of(ledger).recorder.select_notifications(0, 10_000)
        events = [n for n in notifications if str(n.originator_id) != str(CHECKPOINT_STREAM)]
        assert last.checkpoint.tree_size == len(events) > 0
        assert last.checkpoint.last_notification_id == events[-1].id
