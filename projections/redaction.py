"""Safe export (seed 003): what a redacted run bundle leaves out, and how it says so.

Two things never leave the store in a redacted bundle:

- **model I/O** (``model_io``): every field that can carry model or tool content: the prompt and
  response of ``AgentOutput`` and ``ModelCallEnvelope``, a ``ToolCall``'s arguments and a
  ``ToolResult``'s result, in the events themselves and in the iteration traces that repeat
  them, the answer (a trace's final output, claims and evidence, and the job's final answer), an
  error's message and a retrieval's query (a tool's or a model's words, as often as not).
  The hashes stay, so a replay still checks those contents by hash; the answer it cannot compare.
  This is stricter than capture mode ``none``: a prompt quotes the user's input verbatim.
- **PII** (``pii``): every value recorded under a name `domain.sensitive_data` calls a
  secret's (a SEM key whose attribute the job's privacy snapshot denies, a ``password`` or
  ``apiKey`` field anywhere in any event), every text of the job that contains such a value (the
  input, a percept's label, an answer): as a substring, or for a value shorter than
  ``MIN_NEEDLE`` characters as a whole word, and every text that looks like a secret or a
  person's identifier (`sensitive_text`: an SSN, a card number, an API key, ...). A refusal mark
  (`domain.stage0.refusals`), even cut short, counts as such a value: its digest stands for a
  refused secret. SEM streams of denied attributes are left out.

A redacted record keeps its key id and original MAC (the job's seal still commits to it), and
gets a new body with the redacted parts replaced: model I/O by ``null``, PII by ``PII_MARK``.
No digest of an original body is kept: a short secret could be found again by trying values.
Fields that name things rather than say things (keys, ids, hashes, stamps, statuses) are never
rewritten; if one of them still contains a PII value the export is refused (`leak`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from domain.canonical import canonical_json
from domain.governance import Actor, Role
from domain.sensitive_data import (
    HEX_DIGEST,
    TIMESTAMP,
    holds_nothing,
    names_nothing,
    sensitive_name,
    sensitive_text,
)
from domain.stage0.refusals import MARK_OPENING

PII_MARK: Final = "[REDACTED:pii]"
MIN_NEEDLE: Final = 3
MODEL_IO: Final = "model_io"
PII: Final = "pii"

MODEL_IO_FIELDS: Final[dict[str, dict[str, Any]]] = {
    "AgentOutput": {"prompt": None, "response": None, "error": None},
    "ModelCallEnvelope": {"prompt": None, "response": None},
    "ToolCall": {"arguments": None},
    "ToolResult": {"result": None},
    "IterationTrace": {"final_output": None, "claims": [], "evidence_items": []},
    "JobCompleted": {"final_output": None},
    "ErrorEvent": {"message": ""},
    "RetrievalRequest": {"query": ""},
}
"""Each field that can carry model or tool content, by event type, and what a redacted record
holds in its place (an emptied list where the schema wants a list)."""
ANSWER_FIELDS: Final = frozenset({"final_output", "claims", "evidence_items", "final_answer"})
"""The comparisons a replay cannot make once the answer is redacted."""
FULL_IO_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "AgentOutput": ("response",),
    "ModelCallEnvelope": ("response",),
    "ToolCall": ("arguments",),
    "ToolResult": ("result",),
}
"""What a job keeps beyond capture mode ``prompts_only``: responses, and the tools' content."""
TRACE_MODEL_IO: Final = ("prompt", "response", "result", "error")
"""What an entry of an iteration trace's ``agent_outputs`` repeats of a model call's content."""

STRUCTURAL: Final = frozenset(
    {"key", "last_updated", "digest", "node_id", "event_id", "status", "kind", "fallback"}
    | {"decision", "schema_version", "type"}
)


@dataclass(frozen=True)
class Redaction:
    path: str
    reason: str


@dataclass
class PrivacyNeedles:
    """The PII a job recorded: values under secrets' names (a denied SEM attribute, a
    ``password`` field), as texts to search for."""

    denied: frozenset[str]
    texts: set[str] = field(default_factory=set)
    _named: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    """Each name's verdict once taken: a record repeats the same few names many times."""

    def is_denied(self, key: Any) -> bool:
        """Whether a SEM key's attribute names a secret (`sensitive_name`: ``bank_pin`` too)."""
        return isinstance(key, str) and self.is_secret_name(key.rsplit("/", 1)[-1])

    def is_secret_name(self, name: str) -> bool:
        """Whether a field or attribute name names a secret under the job's rules."""
        verdict = self._named.get(name)
        if verdict is None:
            verdict = not names_nothing(name) and sensitive_name(name, self.denied) is not None
            self._named[name] = verdict
        return verdict

    def collect(self, value: Any) -> None:
        """Take every value recorded under a secret's name anywhere inside ``value``."""
        if isinstance(value, dict):
            if self.is_denied(value.get("key")) and "value" in value:
                self._take(value["value"])
            for name, item in value.items():
                if self.is_secret_name(str(name)):
                    self._take(item)
                self.collect(item)
        elif isinstance(value, list):
            for item in value:
                self.collect(item)

    def _take(self, value: Any) -> None:
        if holds_nothing(value):
            return
        for leaf in _leaves(value):
            text = leaf if isinstance(leaf, str) else canonical_json(leaf).decode()
            if text and not isinstance(leaf, bool):
                self.texts.add(text)

    def found_in(self, text: str) -> bool:
        if MARK_OPENING in text:  # a refusal mark, even cut short (a percept label is)
            return True
        if sensitive_text(text) is not None:
            return True
        return any(
            needle in text if len(needle) >= MIN_NEEDLE else _word(needle).search(text)
            for needle in self.texts
        )


def strip_model_io(entries: Any) -> Any:
    """An iteration trace's ``agent_outputs`` without the content of prompts and responses."""
    if not isinstance(entries, list):
        return entries
    return [
        {k: (None if k in TRACE_MODEL_IO else v) for k, v in e.items()}
        if isinstance(e, dict)
        else e
        for e in entries
    ]


def full_io_content(facts: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """Where a job's facts (``(event_type, payload)``, in order) keep more than ``prompts_only``
    would: ``event N ToolResult.result``, ... and an iteration trace's copy of a response."""
    found = []
    for index, (event_type, payload) in enumerate(facts):
        found += [
            f"event {index} {event_type}.{name}"
            for name in FULL_IO_FIELDS.get(event_type, ())
            if payload.get(name) is not None
        ]
        if event_type == "IterationTrace" and _keeps_responses(payload.get("agent_outputs")):
            found.append(f"event {index} IterationTrace.agent_outputs")
    return found


def _keeps_responses(entries: Any) -> bool:
    return isinstance(entries, list) and any(
        isinstance(e, dict) and any(e.get(k) is not None for k in ("response", "result"))
        for e in entries
    )


def redact_job_body(
    body: dict[str, Any], started: bool, needles: PrivacyNeedles
) -> tuple[dict[str, Any], list[Redaction]]:
    """A Job stream record's body as a safe export carries it, and what was taken out."""
    found: list[Redaction] = []
    out = dict(body)
    if started:
        out["job_input"] = _scrub(body.get("job_input"), "job_input", needles, found)
        return out, found
    payload = body.get("payload")
    if not isinstance(payload, dict):  # a seal: nothing to redact
        return out, found
    payload = dict(payload)
    for name, emptied in MODEL_IO_FIELDS.get(str(body.get("event_type")), {}).items():
        if payload.get(name, emptied) != emptied:
            payload[name] = emptied
            found.append(Redaction(f"payload.{name}", MODEL_IO))
    if body.get("event_type") == "IterationTrace" and "agent_outputs" in payload:
        stripped = strip_model_io(payload["agent_outputs"])
        if stripped != payload["agent_outputs"]:
            payload["agent_outputs"] = stripped
            found.append(Redaction("payload.agent_outputs", MODEL_IO))
    out["payload"] = _scrub(payload, "payload", needles, found)
    return out, found


def redact_sem_body(
    body: dict[str, Any], needles: PrivacyNeedles
) -> tuple[dict[str, Any], list[Redaction]]:
    """A SEM entry's event as a safe export carries it: its value scrubbed of PII."""
    found: list[Redaction] = []
    if "value" not in body:
        return body, found
    return {**body, "value": _scrub(body["value"], "value", needles, found)}, found


def leak(body: Any, needles: PrivacyNeedles, path: str = "") -> str | None:
    """Where a PII value is still in ``body`` (a safe export must then be refused), if anywhere."""
    if isinstance(body, dict):
        for name, value in body.items():
            where = leak(value, needles, f"{path}.{name}" if path else str(name))
            if where is not None:
                return where
    elif isinstance(body, list):
        for index, value in enumerate(body):
            where = leak(value, needles, f"{path}[{index}]")
            if where is not None:
                return where
    elif (
        isinstance(body, str)
        and not (HEX_DIGEST.fullmatch(body) or TIMESTAMP.fullmatch(body))
        and needles.found_in(body)
    ):
        return path or "(body)"
    return None


def scrub_pii(value: Any, needles: PrivacyNeedles) -> Any:
    """``value`` with its PII replaced by ``PII_MARK`` exactly as a safe export rewrites it."""
    return _scrub(value, "", needles, [])


def reads_in_full(reader: Actor | None) -> bool:
    """Whether ``reader`` (None: anonymous) is shown personal data in full: an admin only."""
    return reader is not None and reader.holds(Role.ADMIN)


def shown_kept(reader: Actor | None, key: str | None, value: Any, denied: Iterable[str]) -> Any:
    """A value kept under a SEM key outside any job (a SEM entry's, a fact memory's; key None:
    any other) as ``reader`` (None: anonymous) may see it: in full to an admin; to anyone else
    as a safe export rewrites it (under a secret's name all of it, else its PII: ``PII_MARK``)."""
    if reads_in_full(reader):
        return value
    return scrub_pii({"key": key, "value": value}, PrivacyNeedles(frozenset(denied)))["value"]


def shown_receipt(
    reader: Actor | None,
    answer: dict[str, Any],
    bodies: Iterable[dict[str, Any]],
    denied: Iterable[str],
) -> dict[str, Any]:
    """A receipt answer (a receipt with its signature, or a receipt replay's diff envelope),
    made from the stored receipt ``bodies``, as ``reader`` (None: anonymous) may see it, with
    ``redacted`` saying whether anything was replaced.

    In full to an admin. To anyone else each context entry's content as a memory's is shown
    (`shown_kept`: under a secret's key all of it) and every other text holding PII (a query, a
    handoff note, a label, any text holding a value kept under a secret's key in these bodies)
    as ``PII_MARK``; the fields that name things (`RECEIPT_NAMES`) never. The stored bodies, and
    so their signatures and their verification, are untouched.
    """
    if reads_in_full(reader):
        return {**answer, "redacted": False}
    needles = PrivacyNeedles(frozenset(denied))
    for body in bodies:  # a receipt fixes every name but those inside its entries' content
        for entry in body.get("entries") or []:
            needles.collect(_kept_entry(entry))
    found: list[Redaction] = []
    shown = _scrub_receipt(answer, needles, found)
    return {**shown, "redacted": bool(found)}


RECEIPT_NAMES: Final = frozenset(
    {"receipt_id", "parent_receipt_id", "original_receipt_id", "replay_receipt_id", "signature"}
    | {"kind", "mode", "tenant", "view", "memory_id", "key", "rule_id", "action"}
    | {"context_hash", "bundle_hash", "emitted_at", "captured_at"}
)
"""The fields of a receipt answer that name rather than say (ids, enums, a fact's key, hashes,
stamps, the signature): never rewritten, so a redacted receipt is still found, matched and
checked by them. (``context_hash`` of a diff envelope holds the two hashes.)"""
CONTEXT_ENTRY: Final = frozenset({"memory_id", "key", "content"})
"""The fields that make a dict a context entry (`domain.context_assembly`)."""


def _kept_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A context entry's content as the value it is kept as under its key."""
    return {"key": entry.get("key"), "value": entry.get("content")}


def _scrub_receipt(value: Any, needles: PrivacyNeedles, found: list[Redaction]) -> Any:
    if isinstance(value, dict):
        if value.keys() >= CONTEXT_ENTRY:
            rest = {name: item for name, item in value.items() if name != "content"}
            content = _scrub(_kept_entry(value), "content", needles, found)["value"]
            return {**_scrub_receipt(rest, needles, found), "content": content}
        return {
            name: item if name in RECEIPT_NAMES else _scrub_receipt(item, needles, found)
            for name, item in value.items()
        }
    if isinstance(value, list):
        return [_scrub_receipt(item, needles, found) for item in value]
    return _scrub(value, "", needles, found)


def holds_pii(value: Any, needles: PrivacyNeedles) -> bool:
    """Whether ``value`` records a value under a denied attribute, or a text holding one."""
    own = PrivacyNeedles(needles.denied)
    own.collect(value)
    return bool(own.texts) or leak(value, needles) is not None


def _scrub(value: Any, path: str, needles: PrivacyNeedles, found: list[Redaction]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        denied = needles.is_denied(value.get("key"))
        for name, item in value.items():
            where = f"{path}.{name}"
            secret = (denied and name == "value") or needles.is_secret_name(name)
            if secret and not holds_nothing(item):
                out[name] = PII_MARK
                found.append(Redaction(where, PII))
            elif name in STRUCTURAL or name.endswith(("_hash", "_hashes")):
                out[name] = item
            else:
                out[name] = _scrub(item, where, needles, found)
        return out
    if isinstance(value, list):
        return [_scrub(item, f"{path}[{i}]", needles, found) for i, item in enumerate(value)]
    if isinstance(value, str) and value != PII_MARK and needles.found_in(value):
        found.append(Redaction(path, PII))
        return PII_MARK
    return value


def _word(needle: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])")


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield value
