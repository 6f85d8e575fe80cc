"""The batch what-if report (issue 31 point 3): which of the selected recorded jobs would decide
differently under a change, each job's first change, and totals a CI pipeline can gate on.

Built from the one-job what-if reports (`projections.whatif`), one per job in the order the jobs
were selected, and the changes a team said it expects (`domain.whatif_batch`). Never
authoritative; no wall-clock time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, Final

from domain.canonical import canonical_json
from domain.governance import Actor
from domain.whatif import WhatIfChanges
from domain.whatif_batch import ExpectedChange
from domain.whatif_record import WHATIF_BATCH_KIND, WHATIF_BATCH_KIND_VERSION
from projections.whatif import WhatIfVerdict, headline


class BatchVerdict(StrEnum):
    UNCHANGED = "unchanged"
    """No selected job decides differently, none failed."""
    EXPECTED = "expected"
    """Some jobs decide differently, each first on a field expected for it; none failed."""
    CHANGED = "changed"
    """A job decides differently where no change was expected for it."""
    FAILED = "failed"
    """A job's what-if could not be run (its record, or a change, could not be used)."""

    @property
    def passed(self) -> bool:
        """What a CI gate passes: nothing unexpected, nothing failed."""
        return self in {BatchVerdict.UNCHANGED, BatchVerdict.EXPECTED}


def job_row(report: dict[str, Any], expected: frozenset[ExpectedChange]) -> dict[str, Any]:
    """One job's line of the batch, from its one-job what-if report."""
    first = report["first_change"]
    row_first = None
    if first is not None:
        where = ExpectedChange(report["job_id"], first["field"])
        row_first = {**first, "expected": where in expected}
    return {
        "job_id": report["job_id"],
        "tenant": report["tenant"],
        "verdict": report["verdict"],
        "error": report["error"],
        "first_change": row_first,
        "differences": report["totals"]["differences"],
    }


OPEN: Final = "open"
"""A job's verdict in a batch when it is still being recorded: skipped, as an audit skips it."""


def failed_row(
    job_id: str | None, tenant: str | None, code: str, message: str, verdict: str = "failed"
) -> dict[str, Any]:
    """The line of a job whose what-if refused to begin (e.g. ``NOT_FOUND``), or (``verdict``
    `OPEN`) was not begun; a job whose start does not verify has no name or tenant (None)."""
    return {
        "job_id": job_id,
        "tenant": tenant,
        "verdict": verdict,
        "error": {"code": code, "message": message},
        "first_change": None,
        "differences": 0,
    }


def batch_report(
    rows: Sequence[dict[str, Any]],
    changes: WhatIfChanges,
    actor: Actor,
    selection: dict[str, Any],
    expected: Iterable[ExpectedChange],
) -> dict[str, Any]:
    """The batch's report: its rows in selection order, totals, its first change, its verdict."""
    changed = [row for row in rows if row["verdict"] == WhatIfVerdict.CHANGED]
    unexpected = [row for row in changed if not row["first_change"]["expected"]]
    failed = [row for row in rows if row["verdict"] == WhatIfVerdict.FAILED]
    seen = {ExpectedChange(row["job_id"], row["first_change"]["field"]) for row in changed}
    if failed:
        verdict = BatchVerdict.FAILED
    elif unexpected:
        verdict = BatchVerdict.CHANGED
    else:
        verdict = BatchVerdict.EXPECTED if changed else BatchVerdict.UNCHANGED
    # The batch's first change: its first unexpected one (what fails a CI gate), if any.
    first = next(
        ({"job_id": r["job_id"], **r["first_change"]} for r in unexpected or changed), None
    )
    return {
        "report_version": 1,
        "kind": WHATIF_BATCH_KIND,
        "kind_version": WHATIF_BATCH_KIND_VERSION,
        "actor": actor.as_json(),
        "changes": changes.as_json(),
        "selection": selection,
        "expected": [e.as_json() for e in sorted(expected, key=_expected_order)],
        "verdict": verdict.value,
        "authoritative": False,
        "first_change": first,
        "expected_not_seen": [
            e.as_json() for e in sorted(expected, key=_expected_order) if e not in seen
        ],
        "totals": {
            "jobs": len(rows),
            "unchanged": sum(row["verdict"] == WhatIfVerdict.UNCHANGED for row in rows),
            "changed": len(changed),
            "unexpected": len(unexpected),
            "failed": len(failed),
            "open": sum(row["verdict"] == OPEN for row in rows),
        },
        "jobs": list(rows),
    }


def _expected_order(expected: ExpectedChange) -> tuple[str, str]:
    return expected.job_id, expected.field


def render_batch_text(report: dict[str, Any]) -> list[str]:
    """The lines ``mace audit --with`` prints: each changed or failed job, then the totals."""
    lines = [headline(report, "what-if over recorded jobs", "")]
    for row in report["jobs"]:
        if row["verdict"] == WhatIfVerdict.FAILED:
            error = row["error"]
            name = "(unnamed)" if row["job_id"] is None else row["job_id"]
            lines.append(f"  job {name}: FAILED {error['code']}: {error['message']}")
        elif row["verdict"] == OPEN:
            lines.append(f"  job {row['job_id']}: open (skipped: not sealed)")
        elif row["first_change"] is not None:
            first = row["first_change"]
            label = "expected" if first["expected"] else "UNEXPECTED"
            lines.append(
                f"  job {row['job_id']}: CHANGED ({label}) first at {_where(first)},"
                f" field {first['field']}:"
                f" {canonical_json(first['recorded']).decode()} ->"
                f" {canonical_json(first['replayed']).decode()}"
            )
    for missing in report["expected_not_seen"]:
        lines.append(
            f"  expected, not seen: job {missing['job_id']} first changing field {missing['field']}"
        )
    totals, first = report["totals"], report["first_change"]
    at = (
        ""
        if first is None
        else f" (first at job {first['job_id']}, {_where(first)}, field {first['field']})"
    )
    expected = f", {totals['unexpected']} unexpected" if report["expected"] else ""
    lines.append(
        f"{totals['jobs']} jobs: {totals['unchanged']} unchanged, {totals['changed']}"
        f" changed{at}{expected}, {totals['failed']} failed"
        + (f", {totals['open']} open (skipped)" if totals["open"] else "")
    )
    return lines


def _where(first: dict[str, Any]) -> str:
    return "job level" if first["iteration"] is None else f"iteration {first['iteration']}"
