"""As-of use case (issue 31 point 2, seed 003 ``--as-of``/``--compare-to``): a recorded job's
retrievals and SEM reads served from the tenant's memory as it stood at a checkpoint or a log
position, or at two points and diffed; recorded as a what-if is, kind ``as_of`` or ``compare``,
never authoritative.

`AsOfService.run` is the one way in for the CLI (``mace replay JOB --as-of N [--compare-to M]``),
the HTTP API (``POST /v1/whatif`` with ``as_of``) and Python callers (``ledger.whatif_as_of``).
Every point is resolved before anything is replayed or written: a checkpoint the ledger does not
hold, or a position beyond the log's head, is bad input and nothing is recorded.
"""

from __future__ import annotations

from typing import Any, Final

from domain.as_of import LogPoint, MemoryAsOf
from domain.errors import InvalidInput, NotFoundError
from domain.governance import Actor
from domain.job import DEFAULT_TENANT, validate_tenant
from domain.memories import MemoryLog
from domain.replay_access import check_audit_roles
from domain.whatif_record import (
    AS_OF_KIND,
    AS_OF_KIND_VERSION,
    COMPARE_KIND,
    COMPARE_KIND_VERSION,
)
from infrastructure.application.checkpoints import CheckpointService
from infrastructure.application.whatif import WhatIfResult, WhatIfService
from infrastructure.storage.store import LedgerStore
from projections.as_of import as_of_report

AsOfResult = WhatIfResult
"""An as-of or compare, recorded: its record's id and its report."""


CLI_OPTIONS: Final = ("--as-of", "--compare-to")
"""How the CLI names the two points, as bad input names them back (a body names its fields)."""


class AsOfService:
    def __init__(
        self, store: LedgerStore, whatif: WhatIfService, checkpoints: CheckpointService
    ) -> None:
        self.store = store
        self.whatif = whatif
        self.checkpoints = checkpoints

    def run(
        self,
        job_id: str,
        as_of: LogPoint,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
        compare_to: LogPoint | None = None,
        names: tuple[str, str] = CLI_OPTIONS,
    ) -> AsOfResult:
        """The tenant's job with memory as of ``as_of`` (and ``compare_to``, diffed), recorded.
        ACCESS_DENIED (nothing read or written) for an actor without an audit-mode replay role;
        INVALID_INPUT (nothing written) for a point the ledger does not have; NOT_FOUND for a
        job the tenant does not hold. ``names``: how the caller named the points."""
        validate_tenant(tenant)
        check_audit_roles(actor, "an as-of replay")
        named = [(as_of, names[0])]
        if compare_to is not None:
            named.append((compare_to, names[1]))
        points = [self.resolved(point, option, tenant) for point, option in named]
        baseline, at = self.whatif.replays.replay_as_of(job_id, points, tenant=tenant)
        report = as_of_report(baseline, at, points, actor, tenant)
        parameters: dict[str, Any] = {"job_id": job_id, "as_of": as_of.as_json()}
        kind, version = AS_OF_KIND, AS_OF_KIND_VERSION
        if compare_to is not None:
            parameters["compare_to"] = compare_to.as_json()
            kind, version = COMPARE_KIND, COMPARE_KIND_VERSION
        record = self.whatif.record(kind, version, parameters, report, actor, tenant)
        return AsOfResult(record.record_id, report)

    def resolved(self, point: LogPoint, option: str, tenant: str) -> MemoryAsOf:
        """``point`` as the store places it: the log position it stands for (a checkpoint's last
        notification id, its signature and place in the chain checked) and the tenant's memory
        log version there. InvalidInput, naming ``option``, for a point the ledger lacks."""
        said = f"{option} {point.label()}"
        if point.checkpoint is not None:
            try:
                signed = self.checkpoints.get(point.checkpoint)
            except NotFoundError:
                newest = self.checkpoints.newest()
                held = "none yet" if newest is None else f"the newest is {newest.checkpoint.number}"
                raise InvalidInput(f"{said}: no such checkpoint ({held})") from None
            position = signed.checkpoint.last_notification_id
        else:
            assert point.position is not None
            head = self.checkpoints.head()
            if point.position > head:
                msg = f"{said}: beyond the log (its head is at log position {head})"
                raise InvalidInput(msg)
            position = point.position
        return MemoryAsOf(point, position, self.memory_version_at(tenant, position))

    def memory_version_at(self, tenant: str, position: int) -> int:
        """The version the tenant's memory log had reached at log ``position`` (0: none). The
        places come from the log's order, which checkpoints sign; the versions served from are
        read and verified by the replay (`MemoryService.live_at`)."""
        log = MemoryLog.id_for(tenant)
        placed = self.store.stream_positions([log])[log]
        return max((v for v, at in placed.items() if at <= position), default=0)
