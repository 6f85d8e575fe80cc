"""Seed 004 section 4: the Stage-0 router's rules R1-R4, tried in order, first match wins.

The rules are data (the router snapshot), so their order decides; an agent the SelfRepresentation
does not show as available falls back to ``generic_agent`` (F3) and keeps the rule that matched.
"""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from support.stage0_support import seed_004_text

from domain.job import MAX_INPUT_CHARS
from domain.snapshot import SnapshotKind
from domain.stage0.config import (
    DEFAULT_ROUTER,
    DEFAULT_SELFREP,
    RECORDED,
    RouterConfig,
    RouterRule,
    parse_config,
)
from domain.stage0.pattern_safety import (
    MAX_PATTERN_CHARS,
    ROUTING_BUDGET,
    backtracking_risk,
    matching_degree,
)
from domain.stage0.router import NO_RULE, Decision, UnroutableText, check_routable, decide

ALL_AGENTS = frozenset(DEFAULT_SELFREP.agents)
R1_REGEX = r"^\s*\d+\s*([+\-*/^])\s*\d+\s*$"


def test_R1_pattern_is_byte_identical_to_the_seed_regex() -> None:
    rule = DEFAULT_ROUTER.rules[0]
    assert rule.rule_id == "R1"
    assert rule.pattern.encode() == R1_REGEX.encode()
    assert f"Regex: `{R1_REGEX}`" in seed_004_text()


def test_default_rules_are_R1_to_R4_in_order_with_the_seed_agents_and_whys() -> None:
    assert [(r.rule_id, r.agent, r.why) for r in DEFAULT_ROUTER.rules] == [
        ("R1", "math_agent", "matched_R1_math"),
        ("R2", "profile_agent", "matched_R2_profile"),
        ("R3", "knowledge_agent", "matched_R3_knowledge"),
        ("R4", "generic_agent", "matched_R4_fallback"),
    ]


def test_every_why_is_written_in_the_seed() -> None:
    seed = seed_004_text()
    for rule in DEFAULT_ROUTER.rules:
        assert f"Agent: `{rule.agent}`\nWhy: `{rule.why}`" in seed


@pytest.mark.parametrize(
    "text", ["2 + 2", "2+2", "  12*3 ", "10 - 4", "8/2", "2^10", "007 * 1", "\t1 +\t1\n"]
)
def test_R1_math(text: str) -> None:
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS) == Decision(
        "R1", "math_agent", "matched_R1_math"
    )


@pytest.mark.parametrize(
    "text",
    [
        "what is my favorite color",
        "What is my favourite colour?",
        "my favorite food is pasta",
        "remember my favorite food is pasta",
        "Remember that my dog is Rex",
        "  remember my pin is 1234",
        "tell me my FAVORITE song",
    ],
)
def test_R2_profile(text: str) -> None:
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS) == Decision(
        "R2", "profile_agent", "matched_R2_profile"
    )


@pytest.mark.parametrize(
    "text",
    [
        "what is 2+2",
        "what is the capital of france",
        "What's the capital of the UK?",
        "who is Ada Lovelace",
        "define entropy",
        "when was Paris founded",
        "where is Tokyo",
        "what is my name",
    ],
)
def test_R3_knowledge(text: str) -> None:
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS) == Decision(
        "R3", "knowledge_agent", "matched_R3_knowledge"
    )


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "",
        "2 + 2 = 4",
        "1 + 2 + 3",
        "-2 + 2",
        "2.5 * 2",
        "2 ** 3",
        "I remember my trip",
        "whatever is fine",
        "favorite color",
    ],
)
def test_R4_fallback(text: str) -> None:
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS) == Decision(
        "R4", "generic_agent", "matched_R4_fallback"
    )


@pytest.mark.parametrize(
    ("text", "rule_id"),
    [
        ("what is my favorite color", "R2"),  # R3 matches too; R2 comes first
        ("what is 2+2", "R3"),  # not anchored arithmetic: R1 does not match
        ("2 + 2", "R1"),
        ("  12*3 ", "R1"),
        ("hello", "R4"),
    ],
)
def test_rule_order_first_match_wins(text: str, rule_id: str) -> None:
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS).rule_id == rule_id


def test_rule_order_is_data() -> None:
    r1, r2, r3, r4 = DEFAULT_ROUTER.rules
    knowledge_first = RouterConfig(rules=[r1, r3, r2, r4])
    text = "what is my favorite color"
    assert decide(DEFAULT_ROUTER, text, ALL_AGENTS).agent == "profile_agent"
    assert decide(knowledge_first, text, ALL_AGENTS) == Decision(
        "R3", "knowledge_agent", "matched_R3_knowledge"
    )
    fallback_first = RouterConfig(rules=[r4, r1, r2, r3])
    assert decide(fallback_first, "2 + 2", ALL_AGENTS) == Decision(
        "R4", "generic_agent", "matched_R4_fallback"
    )


@pytest.mark.parametrize(
    ("text", "rule_id", "why"),
    [
        ("2 + 2", "R1", "matched_R1_math"),
        ("what is my favorite color", "R2", "matched_R2_profile"),
        ("what is the capital of france", "R3", "matched_R3_knowledge"),
    ],
)
def test_F3_unavailable_agent_falls_back_keeping_the_matched_rule(
    text: str, rule_id: str, why: str
) -> None:
    matched = next(rule.agent for rule in DEFAULT_ROUTER.rules if rule.rule_id == rule_id)
    decision = decide(DEFAULT_ROUTER, text, ALL_AGENTS - {matched})
    assert decision == Decision(rule_id, "generic_agent", why, fallback="F3")


def test_F3_no_rule_matching_falls_back_to_generic_agent() -> None:
    math_only = RouterConfig(rules=[DEFAULT_ROUTER.rules[0]])
    assert decide(math_only, "hello", ALL_AGENTS) == Decision(
        None, "generic_agent", "no_rule_matched", fallback="F3"
    )
    assert NO_RULE == "no_rule_matched"


def test_a_matched_available_agent_has_no_fallback() -> None:
    assert decide(DEFAULT_ROUTER, "2 + 2", {"math_agent"}).fallback is None


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "(?P<a>x)(?P<a>y)"])
def test_router_refuses_an_invalid_regex(pattern: str) -> None:
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        RouterRule(rule_id="R9", pattern=pattern, agent="math_agent", why="bad")


def test_router_refuses_duplicate_rule_ids() -> None:
    r1, r2, _, _ = DEFAULT_ROUTER.rules
    twice = r2.model_copy(update={"rule_id": "R1"})
    with pytest.raises(ValidationError, match=r"rule ids must be unique, repeated: \['R1'\]"):
        RouterConfig(rules=[r1, twice])


def test_router_refuses_no_rules() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        RouterConfig(rules=[])


@pytest.mark.parametrize(
    ("field", "value"),
    [("agent", "Math-Agent"), ("why", "matched R1"), ("rule_id", "R 1"), ("rule_id", "")],
)
def test_router_rule_fields_are_identifiers(field: str, value: str) -> None:
    rule = {"rule_id": "R1", "pattern": "x", "agent": "math_agent", "why": "w", field: value}
    with pytest.raises(ValidationError, match=field):
        RouterRule.model_validate(rule)


def test_router_config_refuses_extra_fields() -> None:
    payload = DEFAULT_ROUTER.model_dump()
    payload["default_agent"] = "math_agent"
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RouterConfig.model_validate(payload)


# --- no rule can make matching take exponential time (issue 28, point 3) -------------------------

CLASSIC_REDOS = ["^(a+)+$", "(a|a)*$", "(a|aa)+$", "(.*a){20}", "(ab|a.)*$", "(a*)*$", r"(a)\1"]


@pytest.mark.parametrize("pattern", CLASSIC_REDOS)
def test_router_refuses_a_pattern_that_can_backtrack_exponentially(pattern: str) -> None:
    expected = f"rule R9: pattern {pattern!r} can take exponential time"
    with pytest.raises(ValidationError, match=re.escape(expected)):
        RouterRule(rule_id="R9", pattern=pattern, agent="math_agent", why="bad")


@pytest.mark.parametrize(
    "pattern",
    [r"(\w|\d)+$", "(?:foo|bar)+x", "x*y*$", "(?:that )?my", r"\s*\d+", r"\s+$", r"[a-z]+\d+"],
)
def test_router_keeps_patterns_that_match_one_way(pattern: str) -> None:
    assert (
        RouterRule(rule_id="R9", pattern=pattern, agent="math_agent", why="ok").pattern == pattern
    )


def test_the_default_rules_pass_the_check_unchanged() -> None:
    for rule in DEFAULT_ROUTER.rules:
        assert backtracking_risk(rule.pattern) is None, rule.rule_id


def test_a_recorded_router_snapshot_with_a_refused_rule_still_parses_for_replay() -> None:
    """A job recorded under such a rule already decided on its input once; replay re-decides the
    same input, so it costs what the run cost, and refusing it would hide the job's evidence."""
    payload = {
        "rules": [{"rule_id": "R1", "pattern": "^(a+)+$", "agent": "math_agent", "why": "w"}]
    }
    with pytest.raises(ValidationError, match=r"rule R1: pattern '\^\(a\+\)\+\$' can take"):
        parse_config(SnapshotKind.ROUTER, payload)
    recorded = parse_config(SnapshotKind.ROUTER, payload, recorded=True)
    assert decide(recorded, "aaa", ALL_AGENTS).rule_id == "R1"


# Polynomial backtracking: repeated parts in a row that can trade characters (issue 28, point 3).
# Measured with Python's re on a run of one character and a "!": a*a*a*b took 15 s on 800,
# \w*\d*x 8 s on 2,000, .*.*= 21 s on 4,000, a+a+$ 19 s on 2,000.
POLYNOMIAL = [
    "a*a*a*b",
    r"\w*\d*x",
    ".*.*=",
    "a+a+$",
    r"\d+\s*\d+x",  # \s* may match nothing: the two \d+ still meet
    "[ab]*a[ab]*c",  # the single a between them is a character both can take
    "(?i)k*\u212a*x",  # KELVIN SIGN and k are one letter without case
]


@pytest.mark.parametrize("pattern", POLYNOMIAL)
def test_router_refuses_repeated_parts_in_a_row_that_can_match_the_same_characters(
    pattern: str,
) -> None:
    expected = f"rule R9: pattern {pattern!r} can take polynomial time on some inputs ("
    with pytest.raises(ValidationError, match=re.escape(expected)):
        RouterRule(rule_id="R9", pattern=pattern, agent="math_agent", why="bad")


def test_router_refuses_a_pattern_longer_than_the_analysis_runs_on() -> None:
    pattern = "x" * (MAX_PATTERN_CHARS + 1)
    expected = f"pattern {pattern!r} has {MAX_PATTERN_CHARS + 1} characters, expected at most"
    with pytest.raises(ValidationError, match=re.escape(expected)):
        RouterRule(rule_id="R9", pattern=pattern, agent="math_agent", why="long")


@pytest.mark.parametrize(
    ("pattern", "degree"),
    [
        (r"^\s*\d+\s*$", 1),  # anchored: one start
        (".*", 1),  # matches wherever it is tried: one start
        (r"\bmy\s+x", 1),  # starts never share the text \s+ scans
        (r"\s+$", 2),  # every start scans the same spaces
        ("(?=.*z)x", 2),  # a lookahead scans too
        ("a*a*a*b", 4),
        ("^(a+)+$", None),
    ],
)
def test_a_pattern_s_matching_steps_grow_with_a_degree_read_from_its_shape(
    pattern: str, degree: int | None
) -> None:
    assert matching_degree(pattern) == degree


def test_the_default_router_routes_every_input_a_job_may_have() -> None:
    check_routable(DEFAULT_ROUTER, " " * MAX_INPUT_CHARS)


def rules(*patterns: str) -> RouterConfig:
    return RouterConfig.model_validate(
        {
            "rules": [
                {"rule_id": f"R{i}", "pattern": p, "agent": "math_agent", "why": "w"}
                for i, p in enumerate(patterns, start=1)
            ]
        },
        context=RECORDED,
    )


def test_a_text_is_routed_only_within_the_routing_budget() -> None:
    """\\s+$ is accepted, and takes 0.65 s on 10,000 spaces (60 s on 100,000): quadratic, so the
    text it is tried on is held to 3,162 characters, the budget's square root."""
    quadratic = rules(r"\s+$")
    check_routable(quadratic, " " * 3162)
    expected = (
        "job input: 3163 characters, at most 3162 under this router: rule R1 ('\\\\s+$') may"
        " take time growing as n**2"
    )
    with pytest.raises(UnroutableText, match=re.escape(expected)):
        decide(quadratic, " " * 3162 + "!", ALL_AGENTS)
    assert 3162**2 <= ROUTING_BUDGET < 3163**2


def test_a_recorded_rule_refused_now_is_not_run_on_a_text_it_could_hang_on() -> None:
    """Stored before the checks: re-deciding it on 40 characters could take 2**40 steps (and a
    shape with k alternatives alike k**40); the router refuses at once, by shape and length."""
    with pytest.raises(
        UnroutableText, match=r"at most 6 under this router: rule R1 .* growing exponentially"
    ):
        decide(rules("^(a+)+$"), "a" * 40 + "!", ALL_AGENTS)
    with pytest.raises(UnroutableText, match=r"at most 56 under this router: rule R1 .* n\*\*4"):
        decide(rules("a*a*a*b"), "a" * 101, ALL_AGENTS)
    assert decide(rules("^(a+)+$"), "a" * 6, ALL_AGENTS).rule_id == "R1"
