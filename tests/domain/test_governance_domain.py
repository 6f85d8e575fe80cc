"""The governance aggregate and actors, pure: no store, no service, only the deterministic clock.

Seed 000 section 10: only some roles may act, every act is an append-only event, a force-continue
needs an admin's request and a council approval from another person (four eyes), a halt stays
until the council clears it, and every replay attempt is numbered and requested before its result
may be recorded. Every event is stamped by the aggregate's own deterministic clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from domain.determinism import DeterministicClock
from domain.errors import ErrorCode, MaceError
from domain.governance import (
    MAX_REASON,
    AccessDenied,
    Actor,
    Governance,
    GovernanceError,
    HaltCause,
    Motion,
    Role,
    Vote,
    governance_scope_of_job,
    governance_scope_of_snapshot,
    halt_scopes,
    replay_requested,
)

ALL_ROLES = "['operator', 'admin', 'auditor', 'council', 'store_operator']"
SNAPSHOT = "ab" * 32
OTHER_SNAPSHOT = "cd" * 32
WHEN = "2026-11-22T10:00:00Z"
ACME_HALTS = f"tenant-snapshot:acme|{SNAPSHOT}"
STORE_HALTS = f"snapshot:{SNAPSHOT}"

ADA = Actor.of("ada", ["council"])  # council member
BOB = Actor.of("bob", ["council"])  # another council member
OPS = Actor.of("ops", ["admin"])  # admin, no council seat
CHAIR = Actor.of("chair", ["admin", "council"])  # admin holding a council seat too
AUDITOR = Actor.of("aud", ["auditor"])


def job_record() -> Governance:
    return Governance.open("job:job-1")


def stamps_follow_the_clock(aggregate: Governance) -> list[Any]:
    """Collect every pending event; assert each is stamped ``clock.at(version)``; return them."""
    events = list(aggregate.collect_events())
    clock = DeterministicClock(aggregate.clock_seed)
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    assert [e.timestamp for e in events] == [clock.at(v) for v in range(1, len(events) + 1)]
    return events


def log_names(events: list[Any]) -> list[str]:
    return [type(e).LOG_NAME for e in events]


def rebuilt(events: list[Any]) -> Governance:
    """The aggregate folded back from its events, as a store would load it."""
    aggregate: Any = None
    for e in events:
        aggregate = e.mutate(aggregate)
    assert isinstance(aggregate, Governance)
    return aggregate


# Actor.of


@pytest.mark.parametrize(
    "actor_id",
    [
        "",
        ".ana",
        "-ana",
        "_ana",
        "@ana",
        "ana bob",
        "ana/x",
        "ana:x",
        "ana\n",
        "\nana",
        " ana",
        "ána",
        "a" * 129,
    ],
)
def test_actor_ids_outside_the_pattern_are_refused(actor_id: str) -> None:
    with pytest.raises(GovernanceError) as caught:
        Actor.of(actor_id, ["admin"])
    assert str(caught.value) == (
        f"invalid actor id {actor_id!r}: expected 1-128 letters, digits and . _ @ -,"
        " starting with a letter or digit"
    )


@pytest.mark.parametrize("actor_id", ["a", "0", "ana", "ana.b_c@d-e", "A9", "a" * 128])
def test_actor_ids_inside_the_pattern_are_kept_verbatim(actor_id: str) -> None:
    assert Actor.of(actor_id, ["operator"]).actor_id == actor_id


@pytest.mark.parametrize(
    "roles",
    [["root"], ["admin", "root"], ["Admin"], ["ADMIN"], [" admin"], ["admin "], [""], ["admins"]],
)
def test_unknown_roles_are_refused(roles: list[str]) -> None:
    with pytest.raises(GovernanceError) as caught:
        Actor.of("ana", roles)
    assert str(caught.value) == f"unknown role in {roles}: expected some of {ALL_ROLES}"


@pytest.mark.parametrize("roles", [[], ()])
def test_an_actor_without_roles_is_refused(roles: list[str] | tuple[str, ...]) -> None:
    with pytest.raises(GovernanceError) as caught:
        Actor.of("ana", roles)
    assert str(caught.value) == f"actor ana holds no role: expected some of {ALL_ROLES}"


def test_governance_errors_are_value_errors() -> None:
    # The CLI turns every ValueError of a governance command into a usage error (exit 2).
    assert issubclass(GovernanceError, ValueError)
    with pytest.raises(ValueError, match="holds no role"):
        Actor.of("ana", [])


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (["council", "admin", "admin", "auditor"], ("admin", "auditor", "council")),
        (("operator", "operator"), ("operator",)),
        ([Role.COUNCIL, "auditor", Role.AUDITOR], ("auditor", "council")),
        (["operator", "council", "auditor", "admin"], ("admin", "auditor", "council", "operator")),
    ],
)
def test_roles_are_sorted_and_deduplicated(
    roles: list[str] | tuple[str, ...], expected: tuple[str, ...]
) -> None:
    actor = Actor.of("ana", roles)
    assert actor.roles == expected
    assert all(type(r) is str for r in actor.roles)
    assert actor.as_json() == {"actor_id": "ana", "roles": list(expected)}


def test_the_same_roles_in_any_order_make_equal_actors() -> None:
    assert Actor.of("ana", ["council", "admin"]) == Actor.of("ana", ["admin", "council", "admin"])


def test_holds_answers_per_role() -> None:
    actor = Actor.of("ana", ["admin", "auditor"])
    assert actor.holds(Role.ADMIN)
    assert actor.holds(Role.AUDITOR)
    assert not actor.holds(Role.COUNCIL)
    assert not actor.holds(Role.OPERATOR)


# Governance.open


@pytest.mark.parametrize(
    "scope",
    [
        "global",
        "job:job-1",
        "job:a",
        "job:a:b.c_d-e",
        "snapshot:" + SNAPSHOT,
        "tenant-snapshot:acme|" + SNAPSHOT,
        "tenant-snapshot:" + SNAPSHOT,
        "job:" + "a" * 128,
    ],
)
def test_valid_scopes_open(scope: str) -> None:
    record = Governance.open(scope)
    assert record.scope == scope
    assert record.votes == {}
    assert record.force_requested_by is None
    assert record.halted == {}
    assert record.replay_attempts == 0
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED"]
    assert record.clock_seed == f"governance:{scope}"
    assert record.id == Governance.id_for(scope)


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "global:x",
        "Global",
        "job",
        "job:",
        "snapshot:",
        "jobs:x",
        "JOB:x",
        "job:-x",
        "job:.x",
        "job:a b",
        "job:a/b",
        "job:x\n",
        " job:x",
        "job:" + "a" * 129,
        "tenant:x",
        "snapshot:acme|" + SNAPSHOT,
        "tenant-snapshot:|" + SNAPSHOT,
        "tenant-snapshot:Acme|" + SNAPSHOT,
        "tenant-snapshot:acme|beta|" + SNAPSHOT,
        "global|acme",
    ],
)
def test_invalid_scopes_are_refused(scope: str) -> None:
    with pytest.raises(GovernanceError) as caught:
        Governance.open(scope)
    assert str(caught.value) == (
        f"invalid governance scope {scope!r}: expected global, job:<id>, snapshot:<id> or"
        " tenant-snapshot:<id>"
    )


def test_scope_helpers_name_jobs_and_snapshots() -> None:
    assert governance_scope_of_job("job-1") == "job:job-1"
    assert governance_scope_of_snapshot(SNAPSHOT, "acme") == ACME_HALTS
    assert governance_scope_of_snapshot(SNAPSHOT, "default") == f"tenant-snapshot:{SNAPSHOT}"
    assert governance_scope_of_snapshot(SNAPSHOT, None) == STORE_HALTS
    assert halt_scopes(SNAPSHOT, "acme") == (ACME_HALTS, STORE_HALTS)
    Governance.open(governance_scope_of_job("job-1"))
    for tenant in ("acme", "default", None):
        record = Governance.open(governance_scope_of_snapshot(SNAPSHOT, tenant))
        assert record.halt_tenant == tenant


# Council votes


@pytest.mark.parametrize(
    "actor",
    [OPS, AUDITOR, Actor.of("op", ["operator"]), Actor.of("all", ["admin", "auditor", "operator"])],
)
def test_only_the_council_votes(actor: Actor) -> None:
    record = job_record()
    with pytest.raises(AccessDenied) as caught:
        record.cast_vote("production_replay", "approve", actor, WHEN)
    assert isinstance(caught.value, MaceError)
    assert caught.value.code is ErrorCode.ACCESS_DENIED
    assert caught.value.code.value == "ACCESS_DENIED"
    assert caught.value.message == (
        f"only the council role may vote; {actor.actor_id} holds {list(actor.roles)}"
    )
    assert str(caught.value) == f"ACCESS_DENIED: {caught.value.message}"
    assert record.votes == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_a_council_vote_is_an_event_with_the_actor_and_the_human_time() -> None:
    record = job_record()
    record.cast_vote("production_replay", "approve", ADA, WHEN)
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "COUNCIL_VOTE"]
    vote = events[1]
    assert (vote.motion, vote.vote, vote.actor_id, vote.roles, vote.recorded_at) == (
        "production_replay",
        "approve",
        "ada",
        ["council"],
        WHEN,
    )
    assert record.votes == {"production_replay": [("ada", "approve")]}


@pytest.mark.parametrize("motion", ["force-continue", "FORCE_CONTINUE", "", "halt", "production"])
def test_unknown_motions_are_refused(motion: str) -> None:
    record = job_record()
    with pytest.raises(GovernanceError) as caught:
        record.cast_vote(motion, "approve", ADA, WHEN)
    assert str(caught.value) == (
        f"unknown motion {motion!r}: expected one of ['force_continue', 'production_replay']"
    )
    assert record.votes == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_the_role_is_checked_before_the_motion() -> None:
    with pytest.raises(AccessDenied):
        job_record().cast_vote("no-such-motion", "approve", OPS, WHEN)


def test_an_unknown_vote_value_records_nothing() -> None:
    record = job_record()
    with pytest.raises(ValueError, match="maybe"):
        record.cast_vote("production_replay", "maybe", ADA, WHEN)
    assert record.votes == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


@pytest.mark.parametrize("motion", list(Motion))
def test_approved_follows_the_latest_vote(motion: Motion) -> None:
    record = job_record()
    assert not record.approved(motion)
    record.cast_vote(motion.value, "approve", ADA, WHEN)
    assert record.approved(motion)
    record.cast_vote(motion.value, "reject", ADA, WHEN)  # approve then reject withdraws
    assert not record.approved(motion)
    record.cast_vote(motion.value, "approve", BOB, WHEN)
    assert record.approved(motion)
    record.cast_vote(motion.value, "reject", BOB, WHEN)
    assert not record.approved(motion)
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED"] + ["COUNCIL_VOTE"] * 4
    assert [e.vote for e in events[1:]] == ["approve", "reject", "approve", "reject"]


def test_another_members_later_reject_withdraws_an_approval() -> None:
    record = job_record()
    record.cast_vote("production_replay", "approve", ADA, WHEN)
    record.cast_vote("production_replay", "reject", BOB, WHEN)
    assert not record.approved(Motion.PRODUCTION_REPLAY)


def test_motions_are_approved_independently() -> None:
    record = job_record()
    record.cast_vote("production_replay", "approve", ADA, WHEN)
    assert record.approved(Motion.PRODUCTION_REPLAY)
    assert not record.approved(Motion.FORCE_CONTINUE)
    record.cast_vote("force_continue", "reject", ADA, WHEN)
    assert record.approved(Motion.PRODUCTION_REPLAY)


def test_votes_accept_the_enum_members() -> None:
    record = job_record()
    record.cast_vote(Motion.PRODUCTION_REPLAY, Vote.APPROVE, ADA, WHEN)
    events = stamps_follow_the_clock(record)
    assert (events[1].motion, events[1].vote) == ("production_replay", "approve")
    assert type(events[1].motion) is str


# Force-continue: an admin's request plus a council approval by someone else


def test_force_continue_needs_the_request_and_the_approval() -> None:
    record = job_record()
    assert not record.force_continue_allowed()
    record.cast_vote("force_continue", "approve", ADA, WHEN)
    assert not record.force_continue_allowed()  # approved, but no admin asked
    other = job_record()
    other.request_force_continue("diverged at iteration 0", OPS, WHEN)
    assert not other.force_continue_allowed()  # asked, but no council approval


@pytest.mark.parametrize("order", ["request first", "approval first"])
def test_request_plus_another_persons_approval_allows_force_continue(order: str) -> None:
    record = job_record()
    if order == "request first":
        record.request_force_continue("diverged at iteration 0", OPS, WHEN)
        record.cast_vote("force_continue", "approve", ADA, WHEN)
    else:
        record.cast_vote("force_continue", "approve", ADA, WHEN)
        record.request_force_continue("diverged at iteration 0", OPS, WHEN)
    assert record.force_continue_allowed()
    assert not record.approved(Motion.PRODUCTION_REPLAY)  # it allows nothing else


def test_a_later_reject_withdraws_the_force_continue() -> None:
    record = job_record()
    record.request_force_continue("diverged at iteration 0", OPS, WHEN)
    record.cast_vote("force_continue", "approve", ADA, WHEN)
    record.cast_vote("force_continue", "reject", BOB, WHEN)
    assert not record.force_continue_allowed()
    record.cast_vote("force_continue", "approve", BOB, WHEN)
    assert record.force_continue_allowed()


def test_a_production_replay_approval_does_not_allow_force_continue() -> None:
    record = job_record()
    record.request_force_continue("diverged at iteration 0", OPS, WHEN)
    record.cast_vote("production_replay", "approve", ADA, WHEN)
    assert not record.force_continue_allowed()


def test_the_requesting_admin_cannot_approve_their_own_force_continue() -> None:
    record = job_record()
    record.request_force_continue("diverged at iteration 0", CHAIR, WHEN)
    with pytest.raises(GovernanceError) as caught:
        record.cast_vote("force_continue", "approve", CHAIR, WHEN)
    assert str(caught.value) == (
        "chair requested this force-continue: the council approval must come from someone else"
    )
    assert not isinstance(caught.value, MaceError)
    assert not record.force_continue_allowed()
    assert "force_continue" not in record.votes
    # Rejecting their own request, or voting on another motion, is not self-approval.
    record.cast_vote("force_continue", "reject", CHAIR, WHEN)
    record.cast_vote("production_replay", "approve", CHAIR, WHEN)
    assert not record.force_continue_allowed()
    record.cast_vote("force_continue", "approve", ADA, WHEN)
    assert record.force_continue_allowed()
    events = stamps_follow_the_clock(record)
    assert log_names(events) == [
        "GOVERNANCE_OPENED",
        "FORCE_CONTINUE_REQUEST",
        "COUNCIL_VOTE",
        "COUNCIL_VOTE",
        "COUNCIL_VOTE",
    ]


def test_an_approval_cast_before_the_same_persons_request_does_not_count() -> None:
    record = job_record()
    record.cast_vote("force_continue", "approve", CHAIR, WHEN)
    record.request_force_continue("diverged at iteration 0", CHAIR, WHEN)
    assert record.approved(Motion.FORCE_CONTINUE)
    assert not record.force_continue_allowed()


def test_a_new_request_by_the_approver_voids_their_approval() -> None:
    other_chair = Actor.of("vice", ["admin", "council"])
    record = job_record()
    record.request_force_continue("diverged at iteration 0", CHAIR, WHEN)
    record.cast_vote("force_continue", "approve", other_chair, WHEN)
    assert record.force_continue_allowed()
    record.request_force_continue("still diverging", other_chair, WHEN)
    assert record.force_requested_by == "vice"
    assert not record.force_continue_allowed()


def test_force_continue_state_survives_a_reload_from_events() -> None:
    record = job_record()
    record.request_force_continue("diverged at iteration 0", OPS, WHEN)
    record.cast_vote("force_continue", "approve", ADA, WHEN)
    events = stamps_follow_the_clock(record)
    loaded = rebuilt(events)
    assert loaded.force_requested_by == "ops"
    assert loaded.votes == {"force_continue": [("ada", "approve")]}
    assert loaded.force_continue_allowed()
    assert loaded.version == 3


@pytest.mark.parametrize(
    "actor",
    [ADA, AUDITOR, Actor.of("op", ["operator"]), Actor.of("au", ["auditor", "council"])],
)
def test_only_an_admin_requests_a_force_continue(actor: Actor) -> None:
    record = job_record()
    with pytest.raises(AccessDenied) as caught:
        record.request_force_continue("diverged", actor, WHEN)
    assert caught.value.code is ErrorCode.ACCESS_DENIED
    assert caught.value.message == (
        f"only the admin role may request a force-continue; {actor.actor_id} holds"
        f" {list(actor.roles)}"
    )
    assert record.force_requested_by is None
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


@pytest.mark.parametrize("scope", ["global", f"snapshot:{SNAPSHOT}"])
def test_a_force_continue_belongs_to_a_job_scope(scope: str) -> None:
    record = Governance.open(scope)
    with pytest.raises(GovernanceError) as caught:
        record.request_force_continue("diverged", OPS, WHEN)
    assert str(caught.value) == (
        f"a force-continue belongs to a job's governance, not to scope {scope}"
    )
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_the_force_continue_request_event() -> None:
    record = job_record()
    record.request_force_continue("  diverged at iteration 0  ", OPS, WHEN)
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "FORCE_CONTINUE_REQUEST"]
    request = events[1]
    assert (request.reason, request.actor_id, request.roles, request.recorded_at) == (
        "diverged at iteration 0",  # stripped
        "ops",
        ["admin"],
        WHEN,
    )
    assert record.force_requested_by == "ops"


# Reasons

REASON_RULE = f"a reason must be one line of 1-{MAX_REASON} characters"


@pytest.mark.parametrize(
    "reason",
    ["", " ", "\t\n ", "two\nlines", "trailing\n\nmore", "x" * (MAX_REASON + 1)],
)
def test_bad_reasons_are_refused_for_force_continue_and_halt(reason: str) -> None:
    record = job_record()
    with pytest.raises(GovernanceError) as caught:
        record.request_force_continue(reason, OPS, WHEN)
    assert str(caught.value) == REASON_RULE
    assert record.force_requested_by is None
    halts = Governance.open(ACME_HALTS)
    with pytest.raises(GovernanceError) as caught:
        halts.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, reason, OPS, WHEN)
    assert str(caught.value) == REASON_RULE
    assert halts.halted == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]
    assert log_names(stamps_follow_the_clock(halts)) == ["GOVERNANCE_OPENED"]


@pytest.mark.parametrize(
    ("reason", "stored"),
    [
        ("x", "x"),
        ("x" * MAX_REASON, "x" * MAX_REASON),
        ("  padded  ", "padded"),
        ("\n  trailing newline stripped \n", "trailing newline stripped"),
        (" " * 10 + "y" * MAX_REASON + " " * 10, "y" * MAX_REASON),  # length after stripping
    ],
)
def test_good_reasons_are_stored_stripped(reason: str, stored: str) -> None:
    record = job_record()
    record.request_force_continue(reason, OPS, WHEN)
    assert stamps_follow_the_clock(record)[1].reason == stored


@pytest.mark.parametrize(
    "reason", ["approved\rrejected", "one\r\ntwo", "line one\u2028line two", "a\x0bb", "a\x1cb"]
)
def test_a_reason_with_any_line_break_is_refused(reason: str) -> None:
    # "approved\rrejected".splitlines() is two lines; Markdown (the replay report, where a halt
    # reason shows up in a step detail) also ends a line at a lone CR.
    record = job_record()
    with pytest.raises(GovernanceError) as caught:
        record.request_force_continue(reason, OPS, WHEN)
    assert str(caught.value) == REASON_RULE
    halts = Governance.open(ACME_HALTS)
    with pytest.raises(GovernanceError) as caught:
        halts.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, reason, OPS, WHEN)
    assert str(caught.value) == REASON_RULE
    assert halts.halted == {}


# Halts


def test_a_halt_is_recorded_once_and_then_stays_as_it_is() -> None:
    record = Governance.open(ACME_HALTS)
    record.halt(SNAPSHOT, HaltCause.INTEGRITY_FAILURE, "signature check failed", OPS, WHEN)
    assert record.halted == {SNAPSHOT: "INTEGRITY_FAILURE: signature check failed"}
    version = record.version
    record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", ADA, "later")
    assert record.version == version
    assert record.halted == {SNAPSHOT: "INTEGRITY_FAILURE: signature check failed"}
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY"]
    halt = events[1]
    assert (
        halt.snapshot_id,
        halt.cause,
        halt.reason,
        halt.actor_id,
        halt.roles,
        halt.recorded_at,
    ) == (SNAPSHOT, "INTEGRITY_FAILURE", "signature check failed", "ops", ["admin"], WHEN)
    assert halt.tenant == "acme"


@pytest.mark.parametrize(
    "scope",
    ["global", "job:job-1", f"snapshot:{OTHER_SNAPSHOT}", f"tenant-snapshot:acme|{OTHER_SNAPSHOT}"],
)
def test_a_halt_belongs_to_its_snapshots_own_scope(scope: str) -> None:
    """Replays read halts from a snapshot's own scopes only: a halt elsewhere is refused."""
    record = Governance.open(scope)
    with pytest.raises(GovernanceError, match=f"belongs to its own scope, not {scope}"):
        record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", OPS, WHEN)
    assert record.halted == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_an_unknown_halt_cause_records_nothing() -> None:
    record = Governance.open(ACME_HALTS)
    with pytest.raises(ValueError, match="SECURITY_BREACH"):
        record.halt(SNAPSHOT, "SECURITY_BREACH", "x", OPS, WHEN)  # type: ignore[arg-type]
    assert record.halted == {}


@pytest.mark.parametrize(
    "actor", [OPS, AUDITOR, Actor.of("op", ["operator"]), Actor.of("x", ["admin", "auditor"])]
)
def test_only_the_council_clears_a_halt(actor: Actor) -> None:
    record = Governance.open(ACME_HALTS)
    record.halt(SNAPSHOT, HaltCause.INTEGRITY_FAILURE, "MAC mismatch", OPS, WHEN)
    with pytest.raises(AccessDenied) as caught:
        record.clear_halt(SNAPSHOT, actor, WHEN)
    assert caught.value.code is ErrorCode.ACCESS_DENIED
    assert caught.value.message == (
        f"only the council role may clear a halt; {actor.actor_id} holds {list(actor.roles)}"
    )
    assert SNAPSHOT in record.halted
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY"]


def test_only_a_halted_snapshot_can_be_cleared() -> None:
    scope = ACME_HALTS
    record = Governance.open(scope)
    with pytest.raises(GovernanceError) as caught:
        record.clear_halt(SNAPSHOT, ADA, WHEN)
    assert str(caught.value) == f"snapshot {SNAPSHOT} is not halted in scope {scope}"
    record.halt(SNAPSHOT, HaltCause.INTEGRITY_FAILURE, "MAC mismatch", OPS, WHEN)
    record.clear_halt(SNAPSHOT, ADA, WHEN)
    assert record.halted == {}
    with pytest.raises(GovernanceError) as caught:
        record.clear_halt(SNAPSHOT, BOB, WHEN)  # cleared already
    assert str(caught.value) == f"snapshot {SNAPSHOT} is not halted in scope {scope}"
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY", "FORCE_HALT_CLEAR"]
    clear = events[2]
    assert (clear.snapshot_id, clear.actor_id, clear.roles, clear.recorded_at) == (
        SNAPSHOT,
        "ada",
        ["council"],
        WHEN,
    )


def test_the_role_is_checked_before_the_halt() -> None:
    with pytest.raises(AccessDenied):
        Governance.open(ACME_HALTS).clear_halt(SNAPSHOT, OPS, WHEN)


def test_a_cleared_snapshot_can_be_halted_again() -> None:
    record = Governance.open(ACME_HALTS)
    record.halt(SNAPSHOT, HaltCause.INTEGRITY_FAILURE, "MAC mismatch", OPS, WHEN)
    record.clear_halt(SNAPSHOT, ADA, WHEN)
    record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", OPS, WHEN)
    assert record.halted == {SNAPSHOT: "SECURITY_INCIDENT: leaked key"}
    events = stamps_follow_the_clock(record)
    assert log_names(events) == [
        "GOVERNANCE_OPENED",
        "FORCE_HALT_REPLAY",
        "FORCE_HALT_CLEAR",
        "FORCE_HALT_REPLAY",
    ]
    assert rebuilt(events).halted == {SNAPSHOT: "SECURITY_INCIDENT: leaked key"}


STORE_OPS = Actor.of("sam", ["store_operator"])  # acts for the whole store
STORE_COUNCIL = Actor.of("sue", ["council", "store_operator"])


def test_a_tenant_halt_says_whose_it_is_and_its_council_clears_it() -> None:
    record = Governance.open(ACME_HALTS)
    record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", AUDITOR, WHEN)
    record.clear_halt(SNAPSHOT, ADA, WHEN)
    events = stamps_follow_the_clock(record)
    assert [getattr(e, "tenant", "-") for e in events] == ["-", "acme", "acme"]


@pytest.mark.parametrize("actor", [OPS, AUDITOR, ADA, CHAIR, Actor.of("op", ["operator"])])
def test_only_a_store_operator_halts_a_snapshot_for_every_tenant(actor: Actor) -> None:
    record = Governance.open(STORE_HALTS)
    with pytest.raises(AccessDenied) as caught:
        record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", actor, WHEN)
    assert caught.value.message == (
        "only the store_operator role may halt a snapshot for every tenant;"
        f" {actor.actor_id} holds {list(actor.roles)}"
    )
    assert record.halted == {}
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_a_store_wide_halt_is_cleared_by_a_council_member_who_is_a_store_operator() -> None:
    record = Governance.open(STORE_HALTS)
    record.halt(SNAPSHOT, HaltCause.SECURITY_INCIDENT, "leaked key", STORE_OPS, WHEN)
    assert record.halted == {SNAPSHOT: "SECURITY_INCIDENT: leaked key"}
    for actor, role, action in [
        (ADA, "store_operator", "clear a store-wide halt"),
        (STORE_OPS, "council", "clear a halt"),
    ]:
        with pytest.raises(AccessDenied) as caught:
            record.clear_halt(SNAPSHOT, actor, WHEN)
        assert caught.value.message == (
            f"only the {role} role may {action}; {actor.actor_id} holds {list(actor.roles)}"
        )
    assert SNAPSHOT in record.halted
    record.clear_halt(SNAPSHOT, STORE_COUNCIL, WHEN)
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY", "FORCE_HALT_CLEAR"]
    assert [e.tenant for e in events[1:]] == [None, None]
    assert rebuilt(events).halted == {}


def test_a_halt_recorded_before_tenants_reads_as_store_wide() -> None:
    """Version 1 of the halt events had no tenant: whoever set it, it is kept for every tenant."""
    for event_class in (Governance.HaltSet, Governance.HaltCleared):
        assert event_class.class_version == 2
        state: dict[str, Any] = {"snapshot_id": SNAPSHOT}
        event_class.upcast_v1_v2(state)
        assert state == {"snapshot_id": SNAPSHOT, "tenant": None}


# Replay attempts


def test_replay_attempts_are_numbered_from_one() -> None:
    record = job_record()
    assert record.request_replay("audit", False, OPS, WHEN) == 1
    assert record.request_replay("production", True, AUDITOR, "t2") == 2
    assert record.request_replay("reexecute", False, ADA, "t3") == 3
    assert record.replay_attempts == 3
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED"] + ["REPLAY_REQUEST"] * 3
    assert [
        (e.attempt, e.mode, e.force_continue, e.actor_id, e.roles, e.recorded_at)
        for e in events[1:]
    ] == [
        (1, "audit", False, "ops", ["admin"], WHEN),
        (2, "production", True, "aud", ["auditor"], "t2"),
        (3, "reexecute", False, "ada", ["council"], "t3"),
    ]
    assert rebuilt(events).replay_attempts == 3


def test_a_jobs_first_replay_request_opens_its_record_in_one_event() -> None:
    record = replay_requested(None, "job:job-1", "audit", False, OPS, WHEN, "0123456789abcdef")
    assert record is replay_requested(record, "job:job-1", "production", True, AUDITOR, "t2")
    assert (record.scope, record.replay_attempts) == ("job:job-1", 2)
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["REPLAY_REQUEST", "REPLAY_REQUEST"]
    assert isinstance(events[0], Governance.OpenedByReplay)
    assert [(e.attempt, e.mode, e.actor_id, e.recorded_at, e.lease) for e in events] == [
        (1, "audit", "ops", WHEN, "0123456789abcdef"),
        (2, "production", "aud", "t2", None),
    ]
    again = rebuilt(events)
    assert (again.scope, again.replay_attempts, again.replay_leases) == (
        "job:job-1",
        2,
        {1: "0123456789abcdef", 2: None},
    )
    again.record_replay_result(1, True, None, True, 0, "f" * 64, "t3")  # attempt 1 was requested


@pytest.mark.parametrize("scope", ["global", f"snapshot:{SNAPSHOT}", "job:bad id"])
def test_a_first_replay_request_opens_only_a_job_record(scope: str) -> None:
    with pytest.raises(GovernanceError):
        replay_requested(None, scope, "audit", False, OPS, WHEN)


def test_attempt_numbers_are_per_job() -> None:
    first, second = Governance.open("job:job-1"), Governance.open("job:job-2")
    assert first.request_replay("audit", False, OPS, WHEN) == 1
    assert first.request_replay("audit", False, OPS, WHEN) == 2
    assert second.request_replay("audit", False, OPS, WHEN) == 1


@pytest.mark.parametrize("scope", ["global", f"snapshot:{SNAPSHOT}"])
def test_a_replay_request_belongs_to_a_job_scope(scope: str) -> None:
    record = Governance.open(scope)
    with pytest.raises(GovernanceError) as caught:
        record.request_replay("audit", False, OPS, WHEN)
    assert str(caught.value) == f"a replay belongs to a job's governance, not to scope {scope}"
    assert record.replay_attempts == 0
    assert log_names(stamps_follow_the_clock(record)) == ["GOVERNANCE_OPENED"]


def test_a_result_is_recorded_for_a_requested_attempt() -> None:
    record = job_record()
    attempt = record.request_replay("audit", False, OPS, WHEN)
    record.record_replay_result(attempt, False, "REPLAY_DIVERGENCE", False, 2, "f" * 64, "t2")
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED", "REPLAY_REQUEST", "REPLAY_RESULT"]
    result = events[2]
    assert (
        result.attempt,
        result.ok,
        result.error_code,
        result.authoritative,
        result.divergences,
        result.report_digest,
        result.recorded_at,
    ) == (1, False, "REPLAY_DIVERGENCE", False, 2, "f" * 64, "t2")


@pytest.mark.parametrize(
    ("requested", "attempt"), [(0, 1), (0, 0), (1, 0), (1, 2), (2, 3), (2, -1)]
)
def test_a_result_for_an_attempt_never_requested_is_refused(requested: int, attempt: int) -> None:
    record = job_record()
    for _ in range(requested):
        record.request_replay("audit", False, OPS, WHEN)
    with pytest.raises(GovernanceError) as caught:
        record.record_replay_result(attempt, True, None, True, 0, "0" * 64, WHEN)
    assert str(caught.value) == f"replay attempt {attempt} was never requested in scope job:job-1"
    events = stamps_follow_the_clock(record)
    assert log_names(events) == ["GOVERNANCE_OPENED"] + ["REPLAY_REQUEST"] * requested


def test_earlier_attempts_may_still_get_their_result() -> None:
    record = job_record()
    record.request_replay("audit", False, OPS, WHEN)
    record.request_replay("audit", False, OPS, WHEN)
    record.record_replay_result(1, True, None, True, 0, "0" * 64, WHEN)
    record.record_replay_result(2, True, None, True, 0, "1" * 64, WHEN)
    events = stamps_follow_the_clock(record)
    assert [getattr(e, "attempt", None) for e in events] == [None, 1, 2, 1, 2]


# Determinism of every event


def test_every_command_stamps_its_event_from_the_deterministic_clock() -> None:
    record = job_record()
    record.request_force_continue("diverged at iteration 0", OPS, "human time 1")
    record.cast_vote("force_continue", "approve", ADA, "human time 2")
    record.cast_vote("production_replay", "approve", BOB, "human time 3")
    attempt = record.request_replay("production", True, CHAIR, "human time 4")
    record.record_replay_result(attempt, True, None, True, 0, "0" * 64, "human time 5")
    events = stamps_follow_the_clock(record)
    assert log_names(events) == [
        "GOVERNANCE_OPENED",
        "FORCE_CONTINUE_REQUEST",
        "COUNCIL_VOTE",
        "COUNCIL_VOTE",
        "REPLAY_REQUEST",
        "REPLAY_RESULT",
    ]
    clock = DeterministicClock("governance:job:job-1")
    assert [e.timestamp for e in events] == [clock.at(v) for v in range(1, 7)]
    assert [getattr(e, "recorded_at", None) for e in events] == [
        None,
        *(f"human time {n}" for n in range(1, 6)),
    ]
    halts = Governance.open(ACME_HALTS)
    halts.halt(SNAPSHOT, HaltCause.INTEGRITY_FAILURE, "MAC mismatch", OPS, "human time 6")
    halts.clear_halt(SNAPSHOT, ADA, "human time 7")
    stamped = stamps_follow_the_clock(halts)
    assert log_names(stamped) == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY", "FORCE_HALT_CLEAR"]
    assert [getattr(e, "recorded_at", None) for e in stamped] == [
        None,
        "human time 6",
        "human time 7",
    ]


def test_the_same_commands_give_the_same_events_in_another_aggregate() -> None:
    def commands() -> list[bytes]:
        record = job_record()
        record.request_force_continue("diverged", OPS, WHEN)
        record.cast_vote("force_continue", "approve", ADA, WHEN)
        record.request_replay("audit", True, OPS, WHEN)
        return [e.model_dump_json().encode() for e in stamps_follow_the_clock(record)]

    assert commands() == commands()


def test_clocks_differ_between_scopes() -> None:
    one = stamps_follow_the_clock(Governance.open("job:job-1"))
    two = stamps_follow_the_clock(Governance.open("job:job-2"))
    assert one[0].timestamp != two[0].timestamp
