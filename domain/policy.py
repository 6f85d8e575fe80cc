"""Policy bundles (seed 001): YAML rules that deny or redact memories during context assembly.

A bundle is ``version: 1``, optional ``metadata`` (a mapping kept as written), and ``rules``: each
with an ``id``, a ``when`` of predicates that must all hold, and an ``action`` (``deny`` drops the
memory, ``redact`` replaces its content). The first rule that matches a memory decides it.

Loading refuses, naming the rule and the reason: more than ``MAX_BUNDLE_BYTES`` of YAML, an
anchor or alias (YAML's references, with which a few hundred bytes stand for gigabytes), another
version, a rule without an id or with an id used before, an empty ``when``, an unknown predicate
or action, a value of the wrong type, and YAML that repeats a key or holds what JSON cannot
(dates, NaN). ``bundle_hash`` is the SHA-256 of the canonical JSON of the parsed bundle, so
comments, key order and formatting do not change it; the verbatim YAML is what a receipt freezes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import yaml

from domain.canonical import CanonicalJSONError, canonical_copy, digest
from domain.errors import InvalidInput

BUNDLE_VERSION: Final = 1
MAX_BUNDLE_BYTES: Final = 64 * 1024
"""The most UTF-8 bytes of YAML a bundle may hold: rules are read by people, not generated."""
NO_ALIASES: Final = "YAML anchors and aliases are not allowed in a policy bundle"


class PolicyError(InvalidInput):
    """A bundle that cannot be loaded; the message names the rule (when there is one) and why."""


class Action(StrEnum):
    DENY = "deny"
    REDACT = "redact"


class MemoryKind(StrEnum):
    FACT = "fact"
    EPISODE = "episode"


@dataclass(frozen=True, slots=True)
class Subject:
    """What a rule looks at: one memory (its kind and labels) and the caller asking for it."""

    memory_kind: str
    labels: frozenset[str]
    caller_id: str
    caller_roles: frozenset[str]


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        msg = f"{where}: expected a non-empty string, got {value!r}"
        raise PolicyError(msg)
    return value


def _texts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value:
        msg = f"{where}: expected a non-empty list of strings, got {value!r}"
        raise PolicyError(msg)
    return [_text(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _kind(value: Any, where: str) -> str:
    kinds = [k.value for k in MemoryKind]
    if value not in kinds:
        msg = f"{where}: expected one of {kinds}, got {value!r}"
        raise PolicyError(msg)
    return str(value)


# Each predicate: how its value is checked at load, and whether a subject satisfies it.
Check = Callable[[Any, str], Any]
Holds = Callable[[Subject, Any], bool]
PREDICATES: Final[dict[str, tuple[Check, Holds]]] = {
    "memory_kind": (_kind, lambda s, v: s.memory_kind == v),
    "memory_label": (_text, lambda s, v: v in s.labels),
    "memory_labels_any": (_texts, lambda s, v: not s.labels.isdisjoint(v)),
    "caller": (_text, lambda s, v: s.caller_id == v),
    "caller_role": (_text, lambda s, v: v in s.caller_roles),
    "caller_role_not": (_text, lambda s, v: v not in s.caller_roles),
}


@dataclass(frozen=True, slots=True)
class Rule:
    rule_id: str
    when: Mapping[str, Any]
    action: Action

    def matches(self, subject: Subject) -> bool:
        return all(PREDICATES[name][1](subject, value) for name, value in self.when.items())


@dataclass(frozen=True, slots=True)
class PolicyBundle:
    metadata: Mapping[str, Any]
    rules: tuple[Rule, ...]
    bundle_hash: str

    def decide(self, subject: Subject) -> Rule | None:
        """The first rule that matches the subject, or None (the memory is kept as it is)."""
        return next((rule for rule in self.rules if rule.matches(subject)), None)


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses anchors and aliases, and a mapping repeating a key.

    An alias stands for its whole anchored node, so a few hundred bytes of nested aliases stand
    for billions of values once anything walks them (the canonical JSON of the bundle does):
    they are refused as the parser meets them, before anything is built. A repeated key PyYAML
    would resolve by keeping the last value, silently.
    """

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            msg = f"line {event.start_mark.line + 1}: {NO_ALIASES}"
            raise PolicyError(msg)
        return super().compose_node(parent, index)


def _mapping_without_repeats(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    keys: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict):
            msg = f"line {key_node.start_mark.line + 1}: a mapping key must be a plain value"
            raise PolicyError(msg)
        if key in keys:
            msg = f"line {key_node.start_mark.line + 1}: key {key!r} appears twice"
            raise PolicyError(msg)
        keys.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_repeats
)


def parse_bundle(bundle_yaml: str) -> PolicyBundle:
    """Load a bundle from its YAML text; PolicyError names the rule and reason if it is refused."""
    size = len(bundle_yaml.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BUNDLE_BYTES:
        msg = f"a policy bundle is at most {MAX_BUNDLE_BYTES} bytes of YAML, this one is {size}"
        raise PolicyError(msg)
    try:
        document = yaml.load(bundle_yaml, Loader=_StrictLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        msg = f"not YAML: {str(exc).splitlines()[0]}"
        raise PolicyError(msg) from None
    except RecursionError:
        # PyYAML composes recursively: thousands of nested brackets exhaust the stack.
        raise PolicyError("nested too deeply to be a policy bundle") from None
    except PolicyError:
        raise
    except ValueError as exc:
        # A scalar its constructor cannot build: a date like 2026-13-45, an integer of
        # thousands of digits.
        msg = f"holds a value YAML cannot read: {str(exc).splitlines()[0]}"
        raise PolicyError(msg) from None
    if not isinstance(document, dict):
        msg = (
            f"a bundle is a mapping with version, metadata and rules, not {type(document).__name__}"
        )
        raise PolicyError(msg)
    unknown = sorted(set(map(str, document)) - {"version", "metadata", "rules"})
    if unknown:
        msg = f"unknown top-level key(s) {unknown}: expected version, metadata, rules"
        raise PolicyError(msg)
    version = document.get("version")
    if version != BUNDLE_VERSION or isinstance(version, bool):
        msg = f"version {version!r}: only version {BUNDLE_VERSION} is understood"
        raise PolicyError(msg)
    metadata = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        msg = f"metadata: expected a mapping, got {type(metadata).__name__}"
        raise PolicyError(msg)
    raw_rules = document.get("rules")
    if not isinstance(raw_rules, list):
        msg = "rules: expected a list of rules"
        raise PolicyError(msg)
    rules = _rules(raw_rules)
    parsed = {
        "version": BUNDLE_VERSION,
        "metadata": metadata,
        "rules": [{"id": r.rule_id, "when": dict(r.when), "action": r.action.value} for r in rules],
    }
    try:
        canonical = canonical_copy(parsed)
    except CanonicalJSONError as exc:
        msg = f"holds a value JSON cannot carry: {exc}"
        raise PolicyError(msg) from None
    return PolicyBundle(canonical["metadata"], tuple(rules), digest(canonical))


def _rules(raw_rules: list[Any]) -> list[Rule]:
    rules: list[Rule] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_rules):
        where = f"rules[{position}]"
        if not isinstance(raw, dict):
            msg = f"{where}: expected a mapping with id, when and action"
            raise PolicyError(msg)
        rule_id = _text(raw.get("id"), f"{where}.id")
        where = f"rule {rule_id!r}"
        if rule_id in seen:
            msg = f"{where}: the id is used by an earlier rule"
            raise PolicyError(msg)
        seen.add(rule_id)
        extra = sorted(set(map(str, raw)) - {"id", "when", "action"})
        if extra:
            msg = f"{where}: unknown key(s) {extra}: expected id, when, action"
            raise PolicyError(msg)
        rules.append(
            Rule(rule_id, _when(raw.get("when"), where), _action(raw.get("action"), where))
        )
    return rules


def _when(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not raw:
        msg = f"{where}: when must be a non-empty mapping of predicates"
        raise PolicyError(msg)
    when: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in PREDICATES:
            msg = f"{where}: unknown predicate {name!r}: expected one of {sorted(PREDICATES)}"
            raise PolicyError(msg)
        when[name] = PREDICATES[name][0](value, f"{where}: {name}")
    return when


def _action(raw: Any, where: str) -> Action:
    try:
        return Action(raw)
    except ValueError:
        msg = f"{where}: action {raw!r}: expected one of {[a.value for a in Action]}"
        raise PolicyError(msg) from None
