"""The replay report: one artifact in two renderings, ``replay_report.json`` and ``.md``.

The JSON is canonical and holds every fact; the Markdown is rendered from that JSON alone (never
from the replay's live objects), so the two cannot disagree. Neither carries wall-clock time or
durations: replaying the same job the same way gives byte-identical reports.
"""

from __future__ import annotations

from typing import Any

from domain.canonical import canonical_json
from domain.evidence_uri import event_uri, report_uri
from domain.governance import Actor
from projections.replay import NOT_REPRODUCED, NOT_REPRODUCED_WHY, ReplayOutcome
from projections.replay_checks import LABELS, Check, tally

REPORT_VERSION = 3
"""2: the verdict leads, over the table of how each recorded fact was checked. 3: ``ok`` means
reproduced (before, it said only that no error stopped the replay); ``reproduced`` stays, equal
to it, for readers of version 2."""


def replay_report(
    outcome: ReplayOutcome, actor: Actor, attempt: int, force_continue: bool, tenant: str
) -> dict[str, Any]:
    """``attempt`` 0: a replay that is not recorded (from a bundle), so its report has no URI."""
    return {
        "report_version": REPORT_VERSION,
        "uri": report_uri(tenant, outcome.job_id, attempt) if attempt else None,
        "tenant": tenant,
        "job_id": outcome.job_id,
        "attempt": attempt,
        "mode": outcome.mode.value,
        "actor": actor.as_json(),
        "force_continue": force_continue,
        "ok": outcome.ok,
        "reproduced": outcome.ok,
        "error_code": None if outcome.error_code is None else outcome.error_code.value,
        "error_message": outcome.error_message,
        "authoritative": outcome.authoritative,
        "non_authoritative_reasons": list(outcome.non_authoritative),
        "capture_mode": outcome.capture_mode,
        "snapshot_ids": outcome.snapshot_ids,
        "steps": [s.as_json() for s in outcome.steps],
        "divergences": [d.as_json() for d in outcome.divergences],
        "unreconstructable": [m.model_dump() for m in outcome.unreconstructable],
        "checks": [
            {
                **row.as_json(),
                "uri": None
                if row.sequence_index is None
                else event_uri(tenant, outcome.job_id, row.sequence_index),
            }
            for row in outcome.checks
        ],
        "check_counts": tally(outcome.checks),
    }


_ALWAYS_COUNTED = (Check.REEXECUTED, Check.HASH_COMPARED, Check.TAKEN_AS_RECORDED, Check.MISSING)


def verdict(report: dict[str, Any]) -> str:
    """The one line a reader needs first: the result, whether it is authoritative, and what it
    stands on."""
    if report["error_code"] is not None:
        result = f"FAILED {report['error_code']}"
    elif report.get("reproduced", report["ok"]):  # a version 1 report: ok was its only word
        result = "REPRODUCED"
    else:
        result = f"{NOT_REPRODUCED} ({NOT_REPRODUCED_WHY})"
    badge = "authoritative" if report["authoritative"] else "NON-AUTHORITATIVE"
    counts = report.get("check_counts")
    if counts is None:  # a version 1 report kept no table
        return f"{result}, {badge}"
    return f"{result}, {badge}; {fact_counts(counts)}"


def fact_counts(counts: dict[str, int]) -> str:
    """How many facts each kind of check covered (`tally`), in words: the kinds that say how
    far a verdict can be trusted always, the others when there are any."""
    shown = [
        f"{counts[check.value]} {LABELS[check]}{_why(check, counts[check.value])}"
        for check in Check
        if check in _ALWAYS_COUNTED or counts[check.value]
    ]
    return f"of {sum(counts.values())} facts: {', '.join(shown)}"


def _why(check: Check, count: int) -> str:
    """Why facts so checked leave the verdict non-authoritative, when there are any."""
    if check is not Check.TAKEN_AS_RECORDED or not count:
        return ""
    return f" (only the run vouches for {'it' if count == 1 else 'them'})"


def render_markdown(report: dict[str, Any]) -> str:
    if report["error_code"] is not None:
        result = f"FAILED: {report['error_code']}"
    else:
        result = "OK" if report.get("reproduced", report["ok"]) else NOT_REPRODUCED
    badge = "authoritative" if report["authoritative"] else "**NON-AUTHORITATIVE**"
    actor = report["actor"]
    lines = [
        f"# Replay report: job `{report['job_id']}`, attempt {report['attempt']}",
        "",
        f"**Verdict: {verdict(report)}**",
        "",
        f"- Report: `{report['uri']}`" if report["uri"] else "- Report: not recorded",
        f"- Result: **{result}** ({badge})",
        f"- Mode: `{report['mode']}`"
        + (", force-continue requested" if report["force_continue"] else ""),
        f"- Actor: `{actor['actor_id']}` ({', '.join(actor['roles'])})",
        f"- Capture mode: `{report['capture_mode']}`",
    ]
    if report["error_message"]:
        lines.append(f"- Reason: {report['error_message']}")
    for reason in report["non_authoritative_reasons"]:
        lines.append(f"- Not authoritative: {reason}")
    lines += ["", "## What each recorded fact was checked by", ""]
    lines += ["| Fact | Check | Detail |", "|---|---|---|"]
    for row in report["checks"]:
        detail = row["detail"].replace("|", "\\|")
        fact = row["subject"] if row["uri"] is None else f"[{row['subject']}]({row['uri']})"
        lines.append(f"| {fact} | {LABELS[Check(row['check'])]} | {detail} |")
    lines += ["", "## Snapshots", ""]
    lines += [f"- {kind}: `{sid}`" for kind, sid in sorted(report["snapshot_ids"].items())]
    lines += [
        "",
        "## Verification steps",
        "",
        "| # | Step | Outcome | Detail |",
        "|---|---|---|---|",
    ]
    for number, step in enumerate(report["steps"], 1):
        detail = step["detail"].replace("|", "\\|")
        lines.append(f"| {number} | {step['step']} | {step['outcome']} | {detail} |")
    lines += ["", "## Divergences", ""]
    if not report["divergences"]:
        lines.append("None.")
    for divergence in report["divergences"]:
        where = "job" if divergence["iteration"] is None else f"iteration {divergence['iteration']}"
        lines += [
            f"### {divergence['code']}: `{divergence['field']}` ({where})",
            "",
            "```json",
            canonical_json(divergence).decode(),
            "```",
            "",
        ]
    lines += ["", "## Model steps that cannot be reconstructed", ""]
    if not report["unreconstructable"]:
        lines.append("None: every agent, model and tool output was persisted.")
    for missing in report["unreconstructable"]:
        lines.append(
            f"- {missing['step']} (event {missing['sequence_index']}): "
            f"{', '.join(missing['missing'])} not persisted: {missing['reason']}"
        )
    return "\n".join(lines) + "\n"
