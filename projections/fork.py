"""A fork's report: what the re-run iterations decided differently from the job it forked, shown
as a what-if's differences are (`projections.whatif`: the same envelope, ``recorded`` the
original's value, ``replayed`` the fork's), and what was kept from the recording.

Each iteration the fork re-ran is held to the original's trace of the same iteration, field by
field (seed 004 section 5), then the final answers. Never authoritative. No wall-clock time: the
same fork gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.canonical import canonical_json
from domain.errors import ErrorCode
from domain.events import EQUALITY_FIELDS, IterationTrace, RunEvent
from domain.fork import ForkLineage
from domain.governance import Actor
from domain.whatif_record import FORK_KIND, FORK_KIND_VERSION
from projections.whatif import WhatIfVerdict, difference_lines


def fork_report(
    lineage: ForkLineage,
    fork_job_id: str,
    original: tuple[Sequence[RunEvent], Any],
    fork: tuple[Sequence[RunEvent], Any],
    kept_events: int,
    actor: Actor,
    tenant: str,
) -> dict[str, Any]:
    """``original`` and ``fork``: each job's events (its completion left out) and final answer;
    ``kept_events``: how many of the fork's first events are the original's, as recorded."""
    was = _traces(original[0])
    now = _traces(fork[0])
    differences: list[dict[str, Any]] = []
    for iteration in sorted(set(was) | set(now)):
        if iteration < lineage.iteration:
            continue
        before, after = was.get(iteration), now.get(iteration)
        for name in EQUALITY_FIELDS:
            recorded = None if before is None else getattr(before, name)
            replayed = None if after is None else getattr(after, name)
            if canonical_json(recorded) != canonical_json(replayed):
                differences.append(_difference(iteration, name, recorded, replayed))
    if canonical_json(original[1]) != canonical_json(fork[1]):
        differences.append(_difference(None, "final_answer", original[1], fork[1]))
    verdict = WhatIfVerdict.CHANGED if differences else WhatIfVerdict.UNCHANGED
    return {
        "report_version": 1,
        "kind": FORK_KIND,
        "kind_version": FORK_KIND_VERSION,
        "tenant": tenant,
        "job_id": lineage.job_id,
        "fork_job_id": fork_job_id,
        "forked_from": lineage.as_json(),
        "actor": actor.as_json(),
        "changes": dict(sorted(lineage.changes.items())),
        "verdict": verdict.value,
        "authoritative": False,
        "error": None,
        "first_change": differences[0] if differences else None,
        "differences": differences,
        "kept": {
            "iterations": lineage.iteration,
            "events": kept_events,
            "how": "served from the original's recording, byte for byte, after its replay"
            " reproduced it; not re-run",
        },
        "totals": {
            "differences": len(differences),
            "iterations_changed": len({d["iteration"] for d in differences} - {None}),
            "job_level_changes": sum(d["iteration"] is None for d in differences),
            "iterations_kept": lineage.iteration,
            "iterations_rerun": len([n for n in now if n >= lineage.iteration]),
        },
    }


def _traces(events: Sequence[RunEvent]) -> dict[int, IterationTrace]:
    return {e.iteration: e for e in events if isinstance(e, IterationTrace)}


def _difference(iteration: int | None, name: str, recorded: Any, replayed: Any) -> dict[str, Any]:
    return {
        "code": ErrorCode.REPLAY_DIVERGENCE.value,
        "iteration": iteration,
        "field": name,
        "recorded": recorded,
        "replayed": replayed,
    }


def render_text(report: dict[str, Any]) -> list[str]:
    """The lines ``mace fork`` prints: the verdict, the new job and its lineage, each change."""
    lineage = report["forked_from"]
    changes = ", ".join(f"{key}={value}" for key, value in report["changes"].items())
    also = "another input" if lineage["input"] is not None else ""
    under = " and ".join(part for part in (changes, also) if part) or "nothing changed"
    actor = report["actor"]
    lines = [
        f"fork: {report['verdict'].upper()}, NON-AUTHORITATIVE; job {report['job_id']} from"
        f" iteration {lineage['iteration']} under {under}"
        f" (by {actor['actor_id']} [{', '.join(actor['roles'])}])"
    ]
    kept = report["kept"]
    lines.append(
        f"  recorded as job {report['fork_job_id']}: {kept['iterations']} iteration(s)"
        f" ({kept['events']} events) kept from the recording,"
        f" {report['totals']['iterations_rerun']} re-run"
    )
    return [*lines, *difference_lines(report["differences"], "original: ", "fork:     ")]
