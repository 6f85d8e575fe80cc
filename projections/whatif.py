"""The what-if report: does every decision of a recorded job stay the same under other snapshots
or another policy bundle, and where not, which decision changes first, then the rest.

Built from two replays of the same job (`projections.replay.replay_job`): the job under what it
declared, which must reproduce (a record that is not intact, or does not reproduce itself, says
nothing about a change), then the job under the changes, whose every difference from the record
is a consequence of the change. Each difference is in the replay's diff envelope (``code``,
``iteration``, ``field``, ``recorded``, ``replayed``). What the what-if could not re-decide (a
model's or an outside tool's answer is the run's word: a changed router does not re-run an
outside agent) is listed fact by fact. Never authoritative. No wall-clock time: the same what-if
over the same log gives the same bytes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from domain.canonical import canonical_json
from domain.errors import ErrorCode
from domain.governance import Actor
from domain.whatif import WhatIfChanges
from domain.whatif_record import WHATIF_KIND, WHATIF_KIND_VERSION
from projections.replay import ReplayOutcome
from projections.replay_checks import Check
from projections.replay_report import replay_report

_DIVERGED: Final = frozenset({ErrorCode.REPLAY_DIVERGENCE, ErrorCode.RESULT_MISMATCH})
_REDECIDED: Final = frozenset({Check.REEXECUTED, Check.DIVERGED})
NOT_REDECIDED_WHY: Final = (
    "the run's word, not decided again under the changes: a what-if re-runs the Stage-0"
    " iterations, the reducers, the ledger's retrievals and the gates under a held policy bundle,"
    " never an outside agent, model or tool"
)


class WhatIfVerdict(StrEnum):
    UNCHANGED = "unchanged"
    """Every decision the what-if re-decided is the recorded one."""
    CHANGED = "changed"
    """At least one decision differs under the changes."""
    FAILED = "failed"
    """The record did not verify or reproduce, or a change could not be used: nothing said."""


def whatif_report(
    baseline: ReplayOutcome,
    whatif: ReplayOutcome | None,
    changes: WhatIfChanges,
    actor: Actor,
    tenant: str,
) -> dict[str, Any]:
    """``baseline``: the job replayed under what it declared; ``whatif``: under the changes
    (None when the baseline failed, so the what-if was not run)."""
    shown = baseline if whatif is None else whatif
    error: dict[str, str] | None = None
    if whatif is None:
        verdict = WhatIfVerdict.FAILED
        error = baseline_error(baseline)
    elif whatif.error_code is not None:
        verdict = WhatIfVerdict.FAILED
        error = {"code": whatif.error_code.value, "message": whatif.error_message or ""}
    else:
        verdict = WhatIfVerdict.CHANGED if whatif.divergences else WhatIfVerdict.UNCHANGED
    differences = [] if whatif is None or error else [d.as_json() for d in whatif.divergences]
    not_redecided = [
        {"subject": row.subject, "check": row.check.value, "detail": row.detail}
        for row in shown.checks
        if row.check not in _REDECIDED and error is None
    ]
    return {
        "report_version": 1,
        "kind": WHATIF_KIND,
        "kind_version": WHATIF_KIND_VERSION,
        "tenant": tenant,
        "job_id": baseline.job_id,
        "actor": actor.as_json(),
        "changes": changes.as_json(),
        "declared_snapshot_ids": baseline.snapshot_ids,
        "verdict": verdict.value,
        "authoritative": False,
        "error": error,
        "first_change": differences[0] if differences else None,
        "differences": differences,
        "not_redecided": not_redecided,
        "not_redecided_why": NOT_REDECIDED_WHY,
        "totals": {
            "differences": len(differences),
            "iterations_changed": len({d["iteration"] for d in differences} - {None}),
            "job_level_changes": sum(d["iteration"] is None for d in differences),
            "facts_redecided": sum(row.check in _REDECIDED for row in shown.checks),
            "facts_not_redecided": len(not_redecided),
        },
        "replay": replay_report(shown, actor, 0, False, tenant),
    }


def baseline_error(baseline: ReplayOutcome) -> dict[str, str]:
    assert baseline.error_code is not None
    code, message = baseline.error_code, baseline.error_message or ""
    if code in _DIVERGED:
        message = (
            f"the job does not reproduce under its declared snapshots ({message}): a what-if"
            " against it would mix its divergence with the change's"
        )
    else:
        message = f"the record does not verify: {message}; a what-if on it says nothing"
    return {"code": code.value, "message": message}


def headline(report: dict[str, Any], what: str, subject: str, under: str | None = None) -> str:
    """A counterfactual's first line, one job's or a batch's: its verdict, never authoritative,
    what it ran under (``under``; by default the what-if's changes) and who asked."""
    if under is None:
        under = "under " + ", ".join(f"{key}={value}" for key, value in report["changes"].items())
    actor = report["actor"]
    return (
        f"{what}: {report['verdict'].upper()}, NON-AUTHORITATIVE; {subject}{under}"
        f" (by {actor['actor_id']} [{', '.join(actor['roles'])}])"
    )


def render_text(report: dict[str, Any]) -> list[str]:
    """The lines ``mace replay --with`` prints: the verdict first, then each difference."""
    lines = [headline(report, "what-if", f"job {report['job_id']} ")]
    if report["error"] is not None:
        lines.append(f"  {report['error']['code']}: {report['error']['message']}")
        return lines
    totals = report["totals"]
    lines.append(
        f"  {totals['differences']} difference(s), {totals['iterations_changed']} iteration(s)"
        f" changed; {totals['facts_redecided']} facts re-decided,"
        f" {totals['facts_not_redecided']} not re-decided"
    )
    lines.extend(difference_lines(report["differences"], "recorded: ", "what-if:  "))
    for row in report["not_redecided"]:
        lines.append(f"  not re-decided ({row['check']}): {row['subject']}: {row['detail']}")
    return lines


def difference_lines(differences: list[dict[str, Any]], was: str, now: str) -> list[str]:
    """Each difference as ``mace replay --with`` and ``mace fork`` print it: where, the field,
    then both values, labelled ``was`` (the record's) and ``now`` (the re-run's)."""
    lines: list[str] = []
    for number, difference in enumerate(differences):
        where = difference["iteration"]
        label = "first change" if number == 0 else "then"
        at = "job" if where is None else f"iteration {where}"
        lines.append(f"  {label}: {at}, field {difference['field']}:")
        lines.append(f"    {was}{canonical_json(difference['recorded']).decode()}")
        lines.append(f"    {now}{canonical_json(difference['replayed']).decode()}")
    return lines
