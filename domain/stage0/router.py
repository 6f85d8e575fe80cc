"""The Stage-0 router (seed 004 section 4): rules as data, first match wins.

The rules come from the job's RouterConfig snapshot, never from code, so replay re-decides with
exactly what the run used. A matched agent that the SelfRepresentation does not show as available
(absent, unavailable or degraded) cannot take the request: the decision keeps the rule that
matched and falls back to ``generic_agent`` (F3). No rule matching at all is F3 too.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass

from domain.stage0.config import GENERIC_AGENT, RouterConfig

NO_RULE = "no_rule_matched"


@dataclass(frozen=True, slots=True)
class Decision:
    rule_id: str | None
    agent: str
    why: str
    fallback: str | None = None


def decide(config: RouterConfig, text: str, available: Set[str]) -> Decision:
    for rule in config.rules:
        if re.search(rule.pattern, text) is None:
            continue
        if rule.agent in available:
            return Decision(rule.rule_id, rule.agent, rule.why)
        return Decision(rule.rule_id, GENERIC_AGENT, rule.why, fallback="F3")
    return Decision(None, GENERIC_AGENT, NO_RULE, fallback="F3")
