"""Policy bundles (seed 001): what loads, what is refused and why, and what a rule decides."""

from __future__ import annotations

import pytest
from support.receipt_examples import ALIAS_BOMB

from domain.canonical import digest
from domain.policy import MAX_BUNDLE_BYTES, Action, PolicyError, Subject, parse_bundle

NO_ALIASES = "YAML anchors and aliases are not allowed in a policy bundle"
BUNDLE = """\
version: 1
metadata:
  name: acme default
  owner: privacy-office
rules:
  - id: no-health-for-support
    when:
      memory_label: health
      caller_role_not: clinician
    action: deny
  - id: redact-pii
    when:
      memory_labels_any: [pii, contact]
    action: redact
  - id: episodes-for-bots
    when:
      memory_kind: episode
      caller: triage-bot
    action: deny
"""

# The same bundle: other key order, flow style, comments and spacing.
REFORMATTED = """\
# acme's bundle, reformatted
rules:
- {action: deny, id: no-health-for-support,
   when: {caller_role_not: clinician, memory_label: health}}
- id: redact-pii   # contact details too
  action: redact
  when: {memory_labels_any: [pii, contact]}
- when: {caller: triage-bot, memory_kind: episode}
  action: deny
  id: episodes-for-bots
metadata: {owner: privacy-office, name: acme default}
version: 1
"""


def subject(
    kind: str = "fact",
    labels: tuple[str, ...] = (),
    caller: str = "ana",
    roles: tuple[str, ...] = (),
) -> Subject:
    return Subject(kind, frozenset(labels), caller, frozenset(roles))


def test_a_bundle_loads_with_its_rules_in_order() -> None:
    bundle = parse_bundle(BUNDLE)
    assert [r.rule_id for r in bundle.rules] == [
        "no-health-for-support",
        "redact-pii",
        "episodes-for-bots",
    ]
    assert [r.action for r in bundle.rules] == [Action.DENY, Action.REDACT, Action.DENY]
    assert bundle.metadata == {"name": "acme default", "owner": "privacy-office"}


def test_bundle_hash_is_sha256_of_the_canonical_parsed_bundle() -> None:
    expected = {
        "version": 1,
        "metadata": {"name": "acme default", "owner": "privacy-office"},
        "rules": [
            {
                "id": "no-health-for-support",
                "when": {"memory_label": "health", "caller_role_not": "clinician"},
                "action": "deny",
            },
            {
                "id": "redact-pii",
                "when": {"memory_labels_any": ["pii", "contact"]},
                "action": "redact",
            },
            {
                "id": "episodes-for-bots",
                "when": {"memory_kind": "episode", "caller": "triage-bot"},
                "action": "deny",
            },
        ],
    }
    assert parse_bundle(BUNDLE).bundle_hash == digest(expected)
    # Pinned: a change to the parsed form or to canonical JSON shows here.
    assert (
        parse_bundle(BUNDLE).bundle_hash
        == "ca7f39adbe2b54d6e977a16201113ac94dea4b0473e062340fa5825a43537533"
    )


def test_comments_formatting_and_key_order_do_not_change_the_hash() -> None:
    assert parse_bundle(REFORMATTED).bundle_hash == parse_bundle(BUNDLE).bundle_hash


def test_a_changed_rule_changes_the_hash() -> None:
    changed = BUNDLE.replace("action: redact", "action: deny")
    assert parse_bundle(changed).bundle_hash != parse_bundle(BUNDLE).bundle_hash


def test_first_matching_rule_wins() -> None:
    bundle = parse_bundle(BUNDLE)
    both = subject(labels=("health", "pii"))
    decided = bundle.decide(both)
    assert decided is not None and decided.rule_id == "no-health-for-support"
    clinician = subject(labels=("health", "pii"), roles=("clinician",))
    decided = bundle.decide(clinician)
    assert decided is not None and decided.rule_id == "redact-pii"


@pytest.mark.parametrize(
    ("memory", "rule_id"),
    [
        (subject(labels=("health",)), "no-health-for-support"),
        (subject(labels=("health",), roles=("clinician", "auditor")), None),
        (subject(labels=("contact",)), "redact-pii"),
        (subject(labels=("weather",)), None),
        (subject(kind="episode", caller="triage-bot"), "episodes-for-bots"),
        (subject(kind="fact", caller="triage-bot"), None),
        (subject(kind="episode", caller="ana"), None),
    ],
)
def test_predicates_are_anded(memory: Subject, rule_id: str | None) -> None:
    decided = parse_bundle(BUNDLE).decide(memory)
    assert (None if decided is None else decided.rule_id) == rule_id


RULE = "  - id: r1\n    when: {memory_label: x}\n    action: deny\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 2\nrules: []\n", "version 2: only version 1 is understood"),
        ("rules: []\n", "version None: only version 1 is understood"),
        ("version: true\nrules: []\n", "version True: only version 1 is understood"),
        ("version: 1\n", "rules: expected a list of rules"),
        ("- 1\n", "a bundle is a mapping with version, metadata and rules, not list"),
        ("version: 1\nrules: []\npolicy: x\n", "unknown top-level key(s) ['policy']"),
        ("version: 1\nmetadata: [1]\nrules: []\n", "metadata: expected a mapping, got list"),
        ("version: 1\nrules:\n" + RULE + RULE, "rule 'r1': the id is used by an earlier rule"),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {}\n    action: deny\n",
            "rule 'r1': when must be a non-empty mapping of predicates",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    action: deny\n",
            "rule 'r1': when must be a non-empty mapping of predicates",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {memory_colour: red}\n    action: deny\n",
            "rule 'r1': unknown predicate 'memory_colour'",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {memory_label: x}\n    action: allow\n",
            "rule 'r1': action 'allow': expected one of ['deny', 'redact']",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {memory_kind: note}\n    action: deny\n",
            "rule 'r1': memory_kind: expected one of ['fact', 'episode'], got 'note'",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {memory_labels_any: x}\n    action: deny\n",
            "rule 'r1': memory_labels_any: expected a non-empty list of strings, got 'x'",
        ),
        (
            "version: 1\nrules:\n  - when: {memory_label: x}\n    action: deny\n",
            "rules[0].id: expected a non-empty string, got None",
        ),
        (
            "version: 1\nrules:\n  - id: r1\n    when: {memory_label: x}\n    action: deny\n"
            "    note: y\n",
            "rule 'r1': unknown key(s) ['note']",
        ),
        ("version: 1\nversion: 1\nrules: []\n", "line 2: key 'version' appears twice"),
        (
            "version: 1\nmetadata: {since: 2026-01-01}\nrules: []\n",
            "holds a value JSON cannot carry",
        ),
        ("version: 1\nmetadata: {ratio: .nan}\nrules: []\n", "holds a value JSON cannot carry"),
        ("version: [1\n", "not YAML:"),
    ],
)
def test_a_bad_bundle_is_refused_naming_the_rule_and_reason(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_bundle(text)
    assert str(refused.value).startswith(message), str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{[1]: 2}", "line 1: a mapping key must be a plain value"),
        ("{{a: 1}: 2}", "line 1: a mapping key must be a plain value"),
        ("[" * 3000, "nested too deeply to be a policy bundle"),
        (
            "version: 1\nrules: []\nmetadata: {since: 2026-13-45}\n",
            "holds a value YAML cannot read: month must be in 1..12",
        ),
        (
            "version: 1\nrules: []\nmetadata: {n: " + "1" * 5000 + "}\n",
            "holds a value YAML cannot read: Exceeds the limit (4300 digits) for integer string"
            " conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the"
            " limit",
        ),
        (ALIAS_BOMB, f"line 3: {NO_ALIASES}"),
        ("version: 1\nrules: []\nmetadata: {owner: &o team}\n", f"line 3: {NO_ALIASES}"),
        ("version: &v 1\nrules: []\nmetadata: {v: *v}\n", f"line 1: {NO_ALIASES}"),
        ("version: 1\nrules: &r []\n", f"line 2: {NO_ALIASES}"),
        ("version: 1\nrules: []\nmetadata: {<<: *m}\n", f"line 3: {NO_ALIASES}"),
        (
            "version: 1\nrules: []\n#" + "x" * MAX_BUNDLE_BYTES + "\n",
            f"a policy bundle is at most {MAX_BUNDLE_BYTES} bytes of YAML, this one is"
            f" {MAX_BUNDLE_BYTES + 23}",
        ),
    ],
)
def test_yaml_no_bundle_could_hold_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_bundle(text)
    assert str(caught.value) == message


def test_a_bundle_of_the_largest_size_allowed_loads() -> None:
    text = "version: 1\nrules: []\n#"
    text += "x" * (MAX_BUNDLE_BYTES - len(text) - 1) + "\n"
    assert len(text.encode()) == MAX_BUNDLE_BYTES
    assert parse_bundle(text).rules == ()
