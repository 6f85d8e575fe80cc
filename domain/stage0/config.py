"""What each of a Stage-0 job's five snapshots says, as validated models, and their defaults.

A job runs under exactly the snapshots it declares (seed 000 section 1). Their payloads are
parsed here, so a snapshot that the runtime could not use is refused before anything runs:

- ``router``: the ordered rules R1-R4 (rule order is part of the snapshot).
- ``selfrep``: who the system is and which agents it has, with their status.
- ``brainstate``: the working memory a job starts with, and the SEM vocabulary (synonyms, S4).
- ``privacy``: which SEM attributes must never be stored.
- ``governance``: the caps a replay of the job runs under.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from domain.errors import InvalidInput
from domain.sem import SNAKE_CASE, SemValueError, SemVocabulary
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.pattern_safety import MAX_PATTERN_CHARS, backtracking_risk, polynomial_risk
from domain.validation_messages import first_problem

AGENT_NAME = r"^[a-z][a-z0-9_]{0,63}$"
RECORDED: dict[str, bool] = {"recorded": True}
"""Validation context of a snapshot a recorded job ran under (replay, audit), not a new use."""
GENERIC_AGENT = "generic_agent"


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RouterRule(_Config):
    rule_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    pattern: str
    agent: str = Field(pattern=AGENT_NAME)
    why: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            msg = f"not a valid regular expression: {exc}"
            raise InvalidInput(msg) from None
        return pattern

    @model_validator(mode="after")
    def _bounded(self, info: ValidationInfo) -> RouterRule:
        # A recorded job's snapshot is read as it was stored (refusing it would hide the job's
        # evidence); its replay is held to the routing budget instead (`router.check_routable`).
        if info.context == RECORDED:
            return self
        rule = f"rule {self.rule_id}: pattern {self.pattern!r}"
        if len(self.pattern) > MAX_PATTERN_CHARS:
            msg = f"{rule} has {len(self.pattern)} characters, expected at most {MAX_PATTERN_CHARS}"
            raise InvalidInput(msg)
        risk = backtracking_risk(self.pattern)
        if risk is not None:
            msg = (
                f"{rule} can take exponential time on some inputs ({risk}); expected no nested"
                " quantifiers, overlapping alternatives under a quantifier or backreferences"
            )
            raise InvalidInput(msg)
        risk = polynomial_risk(self.pattern)
        if risk is not None:
            msg = (
                f"{rule} can take polynomial time on some inputs ({risk}); expected repeated"
                r" parts in a row to match different characters (\s*\d+, not \w*\d*)"
            )
            raise InvalidInput(msg)
        return self


class RouterConfig(_Config):
    """Rules tried in order with ``re.search``; the first that matches decides."""

    rules: list[RouterRule] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> RouterConfig:
        ids = [rule.rule_id for rule in self.rules]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            msg = f"rule ids must be unique, repeated: {duplicates}"
            raise InvalidInput(msg)
        return self


class AgentProfile(_Config):
    status: Literal["available", "unavailable", "degraded"] = "available"


class SelfRepConfig(_Config):
    name: str = "MACE"
    stage: int = 0
    agents: dict[str, AgentProfile]

    @field_validator("agents")
    @classmethod
    def _agent_names(cls, agents: dict[str, AgentProfile]) -> dict[str, AgentProfile]:
        bad = sorted(name for name in agents if not re.fullmatch(AGENT_NAME, name))
        if bad:
            msg = f"agent names must be snake_case identifiers: {bad}"
            raise InvalidInput(msg)
        return agents


def node_order(node: dict[str, Any]) -> tuple[float, str]:
    """Seed 000 section 4's deterministic order of working-memory nodes: ``(apt desc, node_id
    asc)``, the order the BrainState reducer keeps and a snapshot stores them in."""
    return (-float(node["apt"]), str(node["node_id"]))


class WorkingMemoryNode(_Config):
    node_id: str
    kind: str
    label: str
    apt: float = Field(ge=0, le=1)


class WorkingMemoryConfig(_Config):
    capacity: int = Field(default=7, ge=1, le=256)
    decay: float = Field(default=0.9, gt=0, le=1)
    jitter: float = Field(default=0.01, ge=0, le=0.5)
    nodes: list[WorkingMemoryNode] = Field(default_factory=list)


class BrainStateConfig(_Config):
    working_memory: WorkingMemoryConfig = Field(default_factory=WorkingMemoryConfig)
    sem: SemVocabulary = Field(default_factory=SemVocabulary)


class PrivacyRefusal(SemValueError):
    """A memory write the privacy policy refused: the value must not be kept (seed 004 F5)."""

    def __init__(self, attribute: str, denied: str) -> None:
        # The denied word is named only when it is not the whole attribute: a refusal of the
        # bare word reads (and is recorded) as it always has.
        naming = "" if denied == attribute else f" (a word of it, {denied!r}, is denied)"
        super().__init__(f"the privacy policy denies storing attribute {attribute!r}{naming}")
        self.attribute = attribute


def denied_word(attribute: str, denied: Iterable[str]) -> str | None:
    """The first of ``denied`` that ``attribute`` holds as whole snake_case words, else None.

    ``favorite_ssn``, ``bank_pin``, ``email_passwords`` and ``old_credit_card_number`` hold
    ``ssn``, ``pin``, ``password`` and ``credit_card``: what the rule is about, however the
    attribute was worded (a plural too). ``spinach``, ``opinion`` and ``passwordless`` are other
    words, and are kept: a value a passwordless login setting holds is no password. Words are
    compared as lists, never by a regex, so the time is linear in the attribute's words.
    """
    words = attribute.split("_")
    for term in denied:
        *leading, last = term.split("_")
        span = len(leading) + 1
        for start in range(len(words) - span + 1):
            window = words[start : start + span]
            if window[:-1] == leading and window[-1] in (last, f"{last}s"):
                return term
    return None


class PrivacyPolicy(_Config):
    deny_sem_attributes: list[str] = Field(default_factory=list)

    @field_validator("deny_sem_attributes")
    @classmethod
    def _snake(cls, attributes: list[str]) -> list[str]:
        bad = [a for a in attributes if not SNAKE_CASE.fullmatch(a)]
        if bad:
            msg = f"attributes must be snake_case: {bad}"
            raise InvalidInput(msg)
        return attributes

    def denied_word(self, attribute: str) -> str | None:
        """The denied attribute that ``attribute`` holds as a word (`denied_word`), else None."""
        return denied_word(attribute, self.deny_sem_attributes)

    def check_storable(self, key: str) -> None:
        """Refuse a canonical SEM key whose attribute the policy never lets memory keep."""
        attribute = key.rsplit("/", 1)[-1]
        denied = self.denied_word(attribute)
        if denied is not None:
            raise PrivacyRefusal(attribute, denied)


class GovernanceConfig(_Config):
    replay_max_seconds: float = Field(default=60, gt=0, le=86_400)
    replay_max_iterations: int = Field(default=1000, ge=1, le=1_000_000)


CONFIG_MODELS: dict[SnapshotKind, type[_Config]] = {
    SnapshotKind.ROUTER: RouterConfig,
    SnapshotKind.SELFREP: SelfRepConfig,
    SnapshotKind.BRAINSTATE: BrainStateConfig,
    SnapshotKind.PRIVACY: PrivacyPolicy,
    SnapshotKind.GOVERNANCE: GovernanceConfig,
}


def parse_config(kind: SnapshotKind, payload: dict[str, Any], *, recorded: bool = False) -> Any:
    """The snapshot's payload as the model of its kind; ValueError says what is wrong.

    ``recorded``: the payload is one a recorded job ran under, read to replay it; router rules
    are then taken as stored, not held to the backtracking check new rules meet.
    """
    return CONFIG_MODELS[kind].model_validate(payload, context=RECORDED if recorded else None)


class UnusableSnapshot(InvalidInput):
    """A snapshot payload its kind's parser refuses; the message names the kind and the field."""


def declare_usable(
    kind: str, payload: dict[str, Any], schema_version: int = 1, seed_namespace: str | None = None
) -> Snapshot:
    """Declare a snapshot only if a job could run under it, so it is refused when stored.

    The payload checked is the one that will be stored (its canonical copy), with the parser a job
    will use; UnusableSnapshot names the field, e.g. ``router snapshot: field rules[1].pattern``.
    """
    snapshot = Snapshot.declare(kind, payload, schema_version, seed_namespace)
    try:
        parse_config(SnapshotKind(snapshot.kind), snapshot.payload)
    except ValidationError as exc:
        raise UnusableSnapshot(f"{snapshot.kind} snapshot: {first_problem(exc)}") from None
    ordered = decisions_sorted(SnapshotKind(snapshot.kind), snapshot.payload)
    if ordered == snapshot.payload:
        return snapshot
    return Snapshot.declare(kind, ordered, schema_version, seed_namespace)


def decisions_sorted(kind: SnapshotKind, payload: dict[str, Any]) -> dict[str, Any]:
    """A usable payload with its decision arrays in their declared order (seed 000 section 4),
    so that the same content has one snapshot id: a BrainState snapshot's working-memory nodes
    by `node_order`. Other arrays keep their order: a router's rules are tried in it."""
    if kind is not SnapshotKind.BRAINSTATE or "working_memory" not in payload:
        return payload
    memory = payload["working_memory"]
    if "nodes" not in memory:
        return payload
    nodes = sorted(memory["nodes"], key=node_order)
    return {**payload, "working_memory": {**memory, "nodes": nodes}}


DEFAULT_ROUTER = RouterConfig(
    rules=[
        RouterRule(
            rule_id="R1",
            pattern=r"^\s*\d+\s*([+\-*/^])\s*\d+\s*$",
            agent="math_agent",
            why="matched_R1_math",
        ),
        RouterRule(
            rule_id="R2",
            pattern=r"(?i)\bmy\s+favou?rite\b|^\s*remember\s+(?:that\s+)?my\b",
            agent="profile_agent",
            why="matched_R2_profile",
        ),
        RouterRule(
            rule_id="R3",
            pattern=r"(?i)^\s*(?:what\s+is|what's|who\s+is|who's|define|when\s+was|where\s+is)\b",
            agent="knowledge_agent",
            why="matched_R3_knowledge",
        ),
        RouterRule(rule_id="R4", pattern=r".*", agent=GENERIC_AGENT, why="matched_R4_fallback"),
    ]
)

DEFAULT_SELFREP = SelfRepConfig(
    agents={
        name: AgentProfile()
        for name in ("math_agent", "profile_agent", "knowledge_agent", GENERIC_AGENT)
    }
)

DEFAULT_BRAINSTATE = BrainStateConfig(
    sem=SemVocabulary(
        synonyms={
            "entity_type": {"countries": "country", "cities": "city", "people": "person"},
            "entity_id": {"uk": "united_kingdom", "usa": "united_states", "us": "united_states"},
            "attribute": {
                "favourite_color": "favorite_color",
                "favourite_colour": "favorite_color",
                "favorite_colour": "favorite_color",
                "capital_city": "capital",
            },
        },
        entity_types={
            "france": "country",
            "germany": "country",
            "japan": "country",
            "united_kingdom": "country",
            "united_states": "country",
            "paris": "city",
            "tokyo": "city",
        },
    )
)

DEFAULT_PRIVACY = PrivacyPolicy(
    deny_sem_attributes=["password", "pin", "ssn", "credit_card", "credit_card_number"]
)

DEFAULT_GOVERNANCE = GovernanceConfig()

DEFAULT_CONFIGS: dict[SnapshotKind, _Config] = {
    SnapshotKind.SELFREP: DEFAULT_SELFREP,
    SnapshotKind.BRAINSTATE: DEFAULT_BRAINSTATE,
    SnapshotKind.ROUTER: DEFAULT_ROUTER,
    SnapshotKind.PRIVACY: DEFAULT_PRIVACY,
    SnapshotKind.GOVERNANCE: DEFAULT_GOVERNANCE,
}
"""The snapshots a job declares when it names none: Stage-0 as seed 004 describes it."""
