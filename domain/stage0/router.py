"""The Stage-0 router (seed 004 section 4): rules as data, first match wins.

The rules come from the job's RouterConfig snapshot, never from code, so replay re-decides with
exactly what the run used. A matched agent that the SelfRepresentation does not show as available
(absent, unavailable or degraded) cannot take the request: the decision keeps the rule that
matched and falls back to ``generic_agent`` (F3). No rule matching at all is F3 too.

Routing is bounded in time: a text is routed only if trying every rule on it stays within
`ROUTING_BUDGET` counted steps (`pattern_safety.matching_steps`), judged by the rules' shapes and
the text's length, never by a clock, so the run and its replay decide alike on any machine.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass

from domain.errors import InvalidInput
from domain.stage0.config import GENERIC_AGENT, RouterConfig
from domain.stage0.pattern_safety import (
    ROUTING_BUDGET,
    longest_within,
    matching_degree,
    matching_steps,
)

NO_RULE = "no_rule_matched"


@dataclass(frozen=True, slots=True)
class Decision:
    rule_id: str | None
    agent: str
    why: str
    fallback: str | None = None


class UnroutableText(InvalidInput):
    """A text too long for a router's rules to be tried on within the routing budget."""


def check_routable(config: RouterConfig, text: str) -> None:
    """UnroutableText, naming the costliest rule and the longest text allowed, unless trying
    every rule of ``config`` on ``text`` stays within `ROUTING_BUDGET` steps."""
    patterns = [rule.pattern for rule in config.rules]
    length = len(text)
    if sum(matching_steps(pattern, length) for pattern in patterns) <= ROUTING_BUDGET:
        return
    worst = max(config.rules, key=lambda rule: matching_steps(rule.pattern, length))
    degree = matching_degree(worst.pattern)
    growth = "exponentially" if degree is None else f"as n**{degree}"
    msg = (
        f"job input: {length} characters, at most {longest_within(patterns)} under this router:"
        f" rule {worst.rule_id} ({worst.pattern!r}) may take time growing {growth}"
    )
    raise UnroutableText(msg)


def decide(config: RouterConfig, text: str, available: Set[str]) -> Decision:
    check_routable(config, text)
    for rule in config.rules:
        if re.search(rule.pattern, text) is None:
            continue
        if rule.agent in available:
            return Decision(rule.rule_id, rule.agent, rule.why)
        return Decision(rule.rule_id, GENERIC_AGENT, rule.why, fallback="F3")
    return Decision(None, GENERIC_AGENT, NO_RULE, fallback="F3")
