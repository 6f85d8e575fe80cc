"""What-if use cases (issue 31): re-run a recorded job under other snapshots or another policy
bundle, say which decisions change, and record that it was asked, never as authoritative.

`WhatIfService.run` is the one way in for the CLI (``mace replay JOB --with ...``), the HTTP API
(``POST /v1/whatif``) and Python callers; the later kinds of issue 31 (as-of, compare, batch,
fork) call it, or `report` and record themselves through `record` the same way (the batch of
`whatif_batch` does). A what-if needs the
roles an audit-mode replay needs and no council approval (it claims nothing authoritative); it
writes one signed `CounterfactualRecord` in a stream of its own and nothing else: not the job,
not its governance record, no halt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from domain.audit_record import audit_name
from domain.canonical import digest
from domain.errors import NotFoundError
from domain.governance import Actor
from domain.job import DEFAULT_TENANT, validate_tenant
from domain.replay_access import check_audit_roles
from domain.whatif import WhatIfChanges
from domain.whatif_record import WHATIF_KIND, WHATIF_KIND_VERSION, CounterfactualRecord
from infrastructure.application.replays import ReplayService, SharedReads
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.store import LedgerStore
from projections.whatif import whatif_report

RECORD_FIELDS: Final = (
    "record_id",
    "kind",
    "kind_version",
    "tenant",
    "actor_id",
    "roles",
    "parameters",
    "outcome",
    "totals",
    "report",
    "authoritative",
    "recorded_at",
)
"""What a recorded what-if shows: every field of its one event."""


@dataclass(frozen=True)
class WhatIfResult:
    record_id: str
    report: dict[str, Any]

    @property
    def verdict(self) -> str:
        return str(self.report["verdict"])

    def answer(self) -> dict[str, Any]:
        """What ``mace replay --with --json`` prints and ``POST /v1/whatif`` answers."""
        return {"record_id": self.record_id, **self.report}


class WhatIfService:
    def __init__(self, store: LedgerStore, replays: ReplayService) -> None:
        self.store = store
        self.replays = replays

    def run(
        self,
        job_id: str,
        changes: WhatIfChanges,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
    ) -> WhatIfResult:
        """The tenant's job re-run under ``changes``, recorded. ACCESS_DENIED (nothing read or
        written) for an actor without an audit-mode replay role; NOT_FOUND for a job the tenant
        does not hold."""
        validate_tenant(tenant)
        check_audit_roles(actor, "a what-if")
        report = self.report(job_id, changes, actor, tenant)
        parameters = {"job_id": job_id, "changes": changes.as_json()}
        record = self.record(WHATIF_KIND, WHATIF_KIND_VERSION, parameters, report, actor, tenant)
        return WhatIfResult(record.record_id, report)

    def report(
        self,
        job_id: str,
        changes: WhatIfChanges,
        actor: Actor,
        tenant: str,
        shared: SharedReads | None = None,
    ) -> dict[str, Any]:
        """The one-job what-if's report, unrecorded: `run` records it alone, a batch
        (`whatif_batch`) records one summary over many, its snapshots and halt records read
        once for all its jobs (``shared``). The caller checked who acts."""
        baseline, changed = self.replays.replay_changed(
            job_id, changes, tenant=tenant, shared=shared
        )
        return whatif_report(baseline, changed, changes, actor, tenant)

    def record(
        self,
        kind: str,
        kind_version: int,
        parameters: dict[str, Any],
        report: dict[str, Any],
        actor: Actor,
        tenant: str,
    ) -> CounterfactualRecord:
        """One counterfactual's signed record, under the first free name its content gives."""
        summary = {
            "kind": kind,
            "kind_version": kind_version,
            "tenant": tenant,
            "actor_id": actor.actor_id,
            "roles": sorted(actor.roles),
            "parameters": parameters,
            "outcome": report["verdict"],
            "totals": report["totals"],
            "report": report,
            "authoritative": False,
        }
        now = recorded_at()
        # The same what-if is asked again and again (a CI job's, each day): named by what it
        # says *and* when it was asked, so that asking again finds its name free at once.
        naming = {"summary": digest(summary), "recorded_at": now}
        return self.store.save_first_free(
            lambda number: CounterfactualRecord.id_for(audit_name(naming, number)),
            lambda number: CounterfactualRecord(
                record_id=audit_name(naming, number), recorded_at=now, **summary
            ),
            f"{kind} record",
        )

    def shown(self, record_id: str, actor: Actor, *, tenant: str) -> dict[str, Any]:
        """A recorded what-if of any kind, verified, as ``GET /v1/whatif/{id}`` answers it and
        the dashboard shows it. ACCESS_DENIED for an actor who could not have run it (an
        audit-mode replay role: a report shows the jobs' decisions); NOT_FOUND for another
        tenant's, and for a batch over every tenant's jobs (``mace audit --with`` without
        ``--tenant``, recorded under the default tenant): its rows are other tenants' too."""
        check_audit_roles(actor, "reading a what-if")
        record = self.get(record_id, tenant=tenant)
        selection = record.parameters.get("selection")
        if selection is not None and selection["tenant"] != tenant:
            raise NotFoundError(f"no what-if record {record_id}")
        return {name: getattr(record, name) for name in RECORD_FIELDS}

    def get(self, record_id: str, *, tenant: str = DEFAULT_TENANT) -> CounterfactualRecord:
        """A counterfactual's record, verified; another tenant's is NOT_FOUND as a free id is."""
        stream = CounterfactualRecord.id_for(record_id)
        what = f"what-if record {record_id}"
        record = self.store.repository.get_one(CounterfactualRecord, stream, what)
        if record.tenant != tenant:
            raise NotFoundError(f"no {what}")
        return record
