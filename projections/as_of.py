"""The as-of report: a recorded job's retrievals and SEM reads served from the tenant's memory as
it stood at a point of the log (``as_of``), or at two points and diffed (``compare``), seed 003's
``--as-of``/``--compare-to``.

Built from audit-mode replays of the same job (`projections.replay.replay_job`): the job under
what it declared, which must reproduce (as a what-if's baseline must), then once with memory as
of each point. Only memory moves: the job's declared snapshots and the policy bundles it recorded
are held, so a difference is data drift (a retrieval's hits, a SEM read) or a consequence of it
(a decision made on what was read), and policy drift is none by construction, as in a receipt
replay (seed 001: the frozen bundle is replayed verbatim). A compare diffs what each point served,
hit sets by memory URI (added, removed, common, scores beyond `SCORE_EPSILON`) as a receipt diff
matches entries by memory. What the replay reads of memory is said, and what it could not serve
as of the point (a retrieval answered from outside the ledger, a SEM read the replay does not
re-run) is listed. Never authoritative; no wall-clock time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from domain.as_of import LogPoint, MemoryAsOf
from domain.canonical import canonical_json
from domain.governance import Actor
from domain.retrieval import SCORE_EPSILON
from domain.whatif_record import (
    AS_OF_KIND,
    AS_OF_KIND_VERSION,
    COMPARE_KIND,
    COMPARE_KIND_VERSION,
)
from projections.replay import Divergence, ReplayOutcome
from projections.replay_checks import Check, FactCheck
from projections.replay_report import replay_report
from projections.whatif import WhatIfVerdict, baseline_error, headline

NOTHING_READ: Final = "nothing read from memory: as of the point, nothing differs"
POLICY_HELD: Final = (
    "the job's declared snapshots and the policy bundles it recorded are held at every point:"
    " only memory is served as of the point, so policy drift is none and every difference is"
    " data drift or follows from it"
)
_MEMORY_READS: Final = (" RetrievalRequest", " SemRead")
_SERVED: Final = frozenset({Check.REEXECUTED, Check.DIVERGED})


def is_data_drift(field: str) -> bool:
    """Whether a difference is in what memory served (a retrieval's hits, a SEM read), not in a
    decision made on it."""
    return field.endswith((" RetrievalResponse hits", " memory_position")) or field.startswith(
        "sem_read "
    )


def as_of_report(
    baseline: ReplayOutcome,
    at: Sequence[ReplayOutcome],
    points: Sequence[MemoryAsOf],
    actor: Actor,
    tenant: str,
) -> dict[str, Any]:
    """``baseline``: the job under what it declared; ``at``: the job with memory as of each of
    ``points`` (one: an as-of; two: a compare; none when the baseline failed)."""
    compare = len(points) == 2
    error = _error(baseline, at)
    reads = [row for row in baseline.checks if row.subject.endswith(_MEMORY_READS)]
    served = [row for row in reads if row.check in _SERVED]
    if error is not None:
        differences: list[dict[str, Any]] = []
    elif compare:
        differences = _between(at[0].divergences, at[1].divergences)
    else:
        differences = [d.as_json() for d in at[0].divergences]
    data = [d for d in differences if is_data_drift(d["field"])]
    verdict = (
        WhatIfVerdict.FAILED
        if error is not None
        else WhatIfVerdict.CHANGED
        if differences
        else WhatIfVerdict.UNCHANGED
    )
    report: dict[str, Any] = {
        "report_version": 1,
        "kind": COMPARE_KIND if compare else AS_OF_KIND,
        "kind_version": COMPARE_KIND_VERSION if compare else AS_OF_KIND_VERSION,
        "tenant": tenant,
        "job_id": baseline.job_id,
        "actor": actor.as_json(),
        "as_of": points[0].as_json(),
        "compare_to": points[1].as_json() if compare else None,
        "declared_snapshot_ids": baseline.snapshot_ids,
        "verdict": verdict.value,
        "authoritative": False,
        "error": error,
        "served": {
            "retrievals": sum(r.subject.endswith(_MEMORY_READS[0]) for r in served),
            "sem_reads": sum(r.subject.endswith(_MEMORY_READS[1]) for r in served),
        },
        "not_served": [_not_served(row) for row in reads if row.check not in _SERVED],
        "nothing_read": NOTHING_READ if not reads and error is None else None,
        "first_change": differences[0] if differences else None,
        "data_drift": data,
        "consequences": [d for d in differences if not is_data_drift(d["field"])],
        "policy_drift": {"differences": [], "why": POLICY_HELD},
        "totals": {
            "differences": len(differences),
            "data_drift": len(data),
            "consequences": len(differences) - len(data),
            "policy_drift": 0,
        },
    }
    shown = at if at else [baseline]
    report["replay"] = replay_report(shown[0], actor, 0, False, tenant)
    if compare:
        report["replay_compared"] = replay_report(shown[-1], actor, 0, False, tenant)
    return report


def _error(baseline: ReplayOutcome, at: Sequence[ReplayOutcome]) -> dict[str, str] | None:
    if not at:
        return baseline_error(baseline)
    for outcome in at:
        if outcome.error_code is not None:
            return {"code": outcome.error_code.value, "message": outcome.error_message or ""}
    return None


def _not_served(row: FactCheck) -> dict[str, str]:
    return {"subject": row.subject, "check": row.check.value, "detail": row.detail}


def _between(first: Sequence[Divergence], second: Sequence[Divergence]) -> list[dict[str, Any]]:
    """Each field either point differs on from the record, where the two points served
    differently: what each served (the recorded value where a point did not differ)."""
    at_first = {d.field: d for d in first}
    at_second = {d.field: d for d in second}
    rows: list[dict[str, Any]] = []
    for field, either in {**at_second, **at_first}.items():
        one, other = at_first.get(field), at_second.get(field)
        served_first = either.recorded if one is None else one.replayed
        served_second = either.recorded if other is None else other.replayed
        if canonical_json(served_first) == canonical_json(served_second):
            continue
        row = {
            "code": either.code.value,
            "iteration": either.iteration,
            "field": field,
            "recorded": either.recorded,
            "as_of": served_first,
            "compare_to": served_second,
        }
        if field.endswith(" RetrievalResponse hits"):
            row["hits"] = hits_diff(served_first or [], served_second or [])
            if not any(row["hits"][k] for k in ("added", "removed", "rescored", "reranked")):
                continue  # the same hits, scores within epsilon
        rows.append(row)
    return rows


def hits_diff(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Two hit lists matched by memory URI, as a receipt diff matches entries by memory: those
    added and removed (sorted by URI), how many both hold, those whose score moved beyond
    `SCORE_EPSILON`, and whether the common ones are ranked differently."""
    was = {h["uri"]: h for h in before}
    now = {h["uri"]: h for h in after}
    common = [uri for uri in was if uri in now]
    return {
        "added": [now[uri] for uri in sorted(now.keys() - was.keys())],
        "removed": [was[uri] for uri in sorted(was.keys() - now.keys())],
        "common": len(common),
        "rescored": [
            {"uri": uri, "as_of": was[uri]["score"], "compare_to": now[uri]["score"]}
            for uri in sorted(common)
            if abs(was[uri]["score"] - now[uri]["score"]) > SCORE_EPSILON
        ],
        "reranked": common != [uri for uri in now if uri in was],
    }


def render_text(report: dict[str, Any]) -> list[str]:
    """The lines ``mace replay --as-of`` prints: the verdict, what was served as of the point
    and what could not be, then each difference, data drift first."""
    where = point_label(report["as_of"])
    if report["compare_to"] is not None:
        where += f" compared to {point_label(report['compare_to'])}"
    lines = [headline(report, report["kind"], f"job {report['job_id']} ", f"as of {where}")]
    if report["error"] is not None:
        lines.append(f"  {report['error']['code']}: {report['error']['message']}")
        return lines
    served = report["served"]
    lines.append(
        f"  served as of the point: {served['retrievals']} retrieval(s) from the tenant's memory"
        f" log, {served['sem_reads']} SEM read(s) from its SEM log"
    )
    if report["nothing_read"] is not None:
        lines.append(f"  {report['nothing_read']}")
    for row in report["not_served"]:
        lines.append(f"  not served as of the point ({row['check']}): {row['subject']}")
    for title, rows in (("data drift", report["data_drift"]), ("follows", report["consequences"])):
        for row in rows:
            at = "job" if row["iteration"] is None else f"iteration {row['iteration']}"
            lines.append(f"  {title}: {at}, field {row['field']}:")
            lines.extend(_values(row))
    lines.append("  policy drift: none (the job's snapshots and policy bundles are held)")
    return lines


def _values(row: dict[str, Any]) -> list[str]:
    if "hits" in row:
        hits = row["hits"]
        return [
            *(f"    added: {hit['uri']}" for hit in hits["added"]),
            *(f"    removed: {hit['uri']}" for hit in hits["removed"]),
            *(
                f"    rescored: {hit['uri']} {hit['as_of']} -> {hit['compare_to']}"
                for hit in hits["rescored"]
            ),
            f"    {hits['common']} hit(s) in both" + (", ranked differently" * hits["reranked"]),
        ]
    if "as_of" in row:
        return [
            f"    as of:      {canonical_json(row['as_of']).decode()}",
            f"    compare to: {canonical_json(row['compare_to']).decode()}",
        ]
    return [
        f"    recorded: {canonical_json(row['recorded']).decode()}",
        f"    as of:    {canonical_json(row['replayed']).decode()}",
    ]


def point_label(point: dict[str, int]) -> str:
    """A recorded point as the caller named it: ``checkpoint N`` or ``log position N``."""
    return LogPoint(point.get("checkpoint"), point.get("position")).label()
