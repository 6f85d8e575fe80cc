"""Tenancy is one rule (`application.tenancy`), and every HTTP route reaches a job through it.

The behaviour (another tenant's job, run or receipt answers exactly as a missing one) is tested
end to end in tests/application/test_tenant_ids.py; this pins where the rule is applied, so that
a new route with a job id cannot forget it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from support.api_support import token_book

from domain.errors import NotFoundError
from infrastructure.api.app import create_app
from infrastructure.api.context import owned_job_id, owned_replay_ask, read_job_id
from infrastructure.application.tenancy import holds, require_holder
from infrastructure.storage.settings import Settings


def calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dependency in dependant.dependencies:
        if dependency.call is not None:
            yield dependency.call
        yield from calls(dependency)


def api_routes(routes: Iterable[Any]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        # FastAPI keeps an included router as one entry that holds the router's own routes.
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from api_routes(included.routes)


def routes() -> list[APIRoute]:
    app = create_app(Settings(), token_book())  # not started: no store is opened
    return list(api_routes(app.routes))


def test_every_route_with_a_job_in_its_path_asks_the_tenancy_rule() -> None:
    with_job = [route for route in routes() if "{job_id}" in route.path]
    assert len(with_job) >= 8  # jobs, events, replays, governance (3) and two dashboard pages
    # Writing routes ask it on MACE_STORE's ledger, reading routes on the one they read.
    checks = {owned_job_id, read_job_id}
    unchecked = [r.path for r in with_job if not checks & set(calls(r.dependant))]
    assert unchecked == []


def test_a_replay_request_asks_the_tenancy_rule_for_the_job_in_its_body() -> None:
    (route,) = [r for r in routes() if r.path == "/replay/request"]
    assert owned_replay_ask in set(calls(route.dependant))


@pytest.mark.parametrize(("owner", "held"), [("acme", True), ("beta", False), (None, False)])
def test_a_record_is_held_by_its_own_tenant_only(owner: str | None, held: bool) -> None:
    assert holds("acme", owner) is held
    if held:
        require_holder("acme", owner, "job j1")
    else:
        with pytest.raises(NotFoundError, match=r"^no job j1$"):
            require_holder("acme", owner, "job j1")
