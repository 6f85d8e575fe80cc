"""Personal data planted in every field kind of a run, to be searched for in what a reader sees.

Each canary is a secret or a person's identifier of a kind the privacy rules know (a password
under its key name and after ``password:``, a US SSN, a payment card number, an API key, a PEM
private key, a bearer token). `run_lines` puts all of them into each field that can carry
content: the run's input and final output, a percept's text, tool arguments and results, model
prompts and responses, an agent's error, a retrieval's query and hits, an error message, a stage
transition's reason and a SEM value.
"""

from __future__ import annotations

from typing import Any

from domain.events import hash_of

PASSWORD = "hunter2"
SSN = "123-45-6789"
CARD = "4111 1111 1111 1111"
API_KEY = "sk-proj-4f9aQ7ZxL2mN8pR3tV6wY1bC"
PEM = "-----BEGIN RSA PRIVATE KEY-----"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.canary0token0body"
CANARIES = (PASSWORD, SSN, CARD, API_KEY, PEM, BEARER)

TEXT = (
    f"password: {PASSWORD}; ssn {SSN}; card {CARD}; key {API_KEY}; {PEM}; Authorization: {BEARER}"
)
"""Every canary in one text, as a prompt or a tool's answer might quote them."""


def run_lines(seed: str = "canary", **start: Any) -> list[dict[str, Any]]:
    """A whole run (Run Event Schema v1 lines, start to completion) with every canary in every
    field kind; ``full_io`` so that responses and results are kept."""
    return [
        {
            "type": "RunStarted",
            "seed": seed,
            "input": TEXT,
            "capture_mode": "full_io",
            **start,
        },
        *event_lines(),
        {"type": "RunCompleted", "final_output": TEXT},
    ]


def event_lines() -> list[dict[str, Any]]:
    """The run's events (no start or completion), every field kind carrying the canaries."""
    return [
        {"type": "InputReceived", "iteration": 0, "text": TEXT, "user": "alice"},
        {"type": "StageTransition", "to_stage": "plan", "reason": TEXT},
        {
            "type": "ToolCall",
            "call_id": "c1",
            "tool": "crm_lookup",
            "tool_schema_hash": hash_of("crm_lookup schema"),
            "arguments": {"password": PASSWORD, "user_password": PASSWORD, "note": TEXT},
        },
        {
            "type": "ToolResult",
            "call_id": "c1",
            "status": "ok",
            "result": {"apiKey": API_KEY, "record": TEXT},
        },
        {
            "type": "ModelCallEnvelope",
            "call_id": "m1",
            "model_id": "model",
            "model_version": "2026-01",
            "prompt_bundle_hash": hash_of("bundle"),
            "temperature": 0,
            "prompt": TEXT,
            "response": {"text": TEXT, "card_number": CARD},
        },
        {
            "type": "AgentOutput",
            "iteration": 0,
            "agent": "helper",
            "status": "failed",
            "prompt": TEXT,
            "response": TEXT,
            "error": TEXT,
        },
        {"type": "RetrievalRequest", "request_id": "r1", "query": TEXT},
        {
            "type": "RetrievalResponse",
            "request_id": "r1",
            "hits": [{"uri": "doc-1", "score": 0.5, "explain": {"snippet": TEXT}}],
        },
        {"type": "ErrorEvent", "code": "E_TOOL", "message": TEXT},
        {
            "type": "SemWrite",
            "iteration": 0,
            "key": "user/person/alice/note",
            "value": TEXT,
            "status": "failed",
            "reason": "not allowed",
        },
    ]


def found(text: str | bytes) -> dict[str, int]:
    """How often each canary occurs in ``text`` (only those that occur)."""
    shown = text.decode() if isinstance(text, bytes) else text
    counts = {canary: shown.count(canary) for canary in CANARIES}
    return {canary: count for canary, count in counts.items() if count}
