"""Regression tests from incidents: a pytest file that replays a job's bundle and asserts the
outcome on record (``mace export-test``).

The outcome asserted is the job's most recent REPLAY_RESULT in its governance record (ok, error
code, authoritative, the number of divergences and, from that attempt's signed replay record,
the divergences themselves), replayed the way that attempt was (mode, actor, force-continue).
Attempts refused for access, and attempts a declared mock answered (mocks are not part of the
record), are passed over. A job with no such result gets the outcome of an audit replay of the
bundle made at export time. The generated file says which in its docstring.

The test reads its keyring the normal way (``MACE_SIGNING_KEYS`` or ``MACE_KEYRING_FILE``): a
test suite holds no production secret, so running it needs the keys, as any replay does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Final

from domain.errors import ErrorCode, NotFoundError
from domain.governance import Actor, Governance, ReplayRequestFields
from infrastructure.application.ledger import Ledger

MAX_NAME: Final = 60
MOCK_REASON: Final = "answered by a declared mock"
WIDTH: Final = 96


@dataclass(frozen=True)
class Expectation:
    """The outcome a regression test asserts, and how the replay that gave it was made."""

    provenance: str
    mode: str
    actor: Actor
    force_continue: bool
    ok: bool
    error_code: str | None
    authoritative: bool
    divergence_count: int
    divergences: list[dict[str, Any]] | None

    @classmethod
    def of_report(cls, report: dict[str, Any], provenance: str, actor: Actor) -> Expectation:
        return cls(
            provenance,
            report["mode"],
            actor,
            report["force_continue"],
            report["ok"],
            report["error_code"],
            report["authoritative"],
            len(report["divergences"]),
            report["divergences"],
        )

    def differences(self, report: dict[str, Any]) -> list[str]:
        """Where a replay's report disagrees with this expectation."""
        found = [
            f"{name} {report[name]!r}, not {want!r}"
            for name, want in (
                ("ok", self.ok),
                ("error_code", self.error_code),
                ("authoritative", self.authoritative),
            )
            if report[name] != want
        ]
        if len(report["divergences"]) != self.divergence_count:
            found.append(f"{len(report['divergences'])} divergences, not {self.divergence_count}")
        elif self.divergences is not None and report["divergences"] != self.divergences:
            found.append("different divergences")
        return found


def recorded_expectation(ledger: Ledger, job_id: str, tenant: str) -> Expectation | None:
    """The tenant's job's most recent replay result a bundle replay can reproduce, if any."""
    stream = Governance.id_for(ledger.governance.existing_job_scope(job_id, tenant))
    requests: dict[int, ReplayRequestFields] = {}
    results: list[Governance.ReplayResulted] = []
    for event in ledger.records.decoded(stream):
        if isinstance(event, ReplayRequestFields):
            requests[event.attempt] = event
        elif isinstance(event, Governance.ReplayResulted):
            results.append(event)
    for result in reversed(results):
        request = requests.get(result.attempt)
        if request is None or result.error_code == ErrorCode.ACCESS_DENIED.value:
            continue
        try:
            report = ledger.replays.record(job_id, result.attempt, tenant=tenant).report
        except NotFoundError:
            report = None
        if report is not None and any(
            MOCK_REASON in r for r in report["non_authoritative_reasons"]
        ):
            continue
        provenance = (
            f"the job's most recent REPLAY_RESULT on record: attempt {result.attempt}, an"
            f" {request.mode} replay by {request.actor_id} [{', '.join(request.roles)}]"
            f"{' with force-continue' if request.force_continue else ''}, recorded at"
            f" {result.recorded_at}"
        )
        return Expectation(
            provenance,
            request.mode,
            Actor.of(request.actor_id, request.roles),
            request.force_continue,
            result.ok,
            result.error_code,
            result.authoritative,
            result.divergences,
            None if report is None else report["divergences"],
        )
    return None


def regression_file_names(job_id: str) -> tuple[str, str]:
    """The generated test's module name and its bundle's file name for a job."""
    safe = re.sub(r"[^a-z0-9_]", "_", job_id.lower())
    if len(safe) > MAX_NAME:  # keep names (and the lines holding them) short; stay unique
        safe = f"{safe[: MAX_NAME - 9]}_{hashlib.sha256(job_id.encode()).hexdigest()[:8]}"
    return f"test_replay_{safe}", f"test_replay_{safe}.bundle.json"


def render_test(job_id: str, bundle_file: str, expected: Expectation) -> str:
    """The source of a pytest module asserting ``expected`` for the job's bundle."""
    module, _ = regression_file_names(job_id)
    actor = expected.actor
    intro = (
        f"It replays the job from {bundle_file} beside this file (no database, nothing recorded)"
        f" and asserts the outcome of {expected.provenance}."
    )
    keys = (
        "The keyring comes from MACE_SIGNING_KEYS or MACE_KEYRING_FILE, as for any replay. A"
        " tampered bundle fails with INTEGRITY_FAILURE. Regenerate rather than edit."
    )
    lines = [
        *_wrap(f'"""Regression test for job {job_id}, generated by `mace export-test`.', WIDTH),
        "",
        *_wrap(intro, WIDTH),
        "",
        *_wrap(keys, WIDTH),
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from pathlib import Path",
        "from typing import Any, Final",
        "",
        "from domain.governance import Actor",
        "from infrastructure.bundles.replay import replay_bundle_file",
        "",
        *_assignment("BUNDLE", f"Path(__file__).with_name({_string(bundle_file)})"),
        f"MODE: Final = {_string(expected.mode)}",
        "ACTOR: Final = Actor.of(",
        f"    {_string(actor.actor_id)},",
        f"    {python_literal(list(actor.roles), 4)},",
        ")",
        f"FORCE_CONTINUE: Final = {expected.force_continue!r}",
    ]
    if expected.divergences is not None:
        literal = python_literal(expected.divergences, 0)
        lines.append(f"EXPECTED_DIVERGENCES: Final[list[dict[str, Any]]] = {literal}")
    else:
        lines.append("EXPECTED_DIVERGENCES: Final[list[dict[str, Any]] | None] = None")
    lines += [
        "",
        "",
        f"def {module}() -> None:",
        "    report = replay_bundle_file(BUNDLE, MODE, ACTOR, FORCE_CONTINUE)",
        f'    assert report["ok"] is {expected.ok!r}',
        '    assert report["error_code"] is None'
        if expected.error_code is None
        else f'    assert report["error_code"] == {_string(expected.error_code)}',
        f'    assert report["authoritative"] is {expected.authoritative!r}',
        f'    assert len(report["divergences"]) == {expected.divergence_count!r}',
    ]
    if expected.divergences is not None:
        lines.append('    assert report["divergences"] == EXPECTED_DIVERGENCES')
    return "\n".join(lines) + "\n"


def python_literal(value: Any, indent: int) -> str:
    """``value`` (JSON data) as Python source, one item a line, no line past ``WIDTH``."""
    if isinstance(value, dict):
        return _dict_literal(value, indent)
    if isinstance(value, list):
        return _list_literal(value, indent)
    if isinstance(value, str):
        return _str_literal(value, indent)
    return repr(value)


def _dict_literal(value: dict[str, Any], indent: int) -> str:
    if not value:
        return "{}"
    inner = " " * (indent + 4)
    items = [
        f"{inner}{_string(str(k))}: {python_literal(v, indent + 4)}," for k, v in value.items()
    ]
    return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"


def _list_literal(value: list[Any], indent: int) -> str:
    if not value:
        return "[]"
    flat = "[" + ", ".join(python_literal(v, 0) for v in value) + "]"
    if all(isinstance(v, str) for v in value) and len(flat) + indent + 8 <= WIDTH:
        return flat
    inner = " " * (indent + 4)
    items = [f"{inner}{python_literal(v, indent + 4)}," for v in value]
    return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"


def _str_literal(value: str, indent: int) -> str:
    text = _string(value)
    if len(text) + indent + 8 <= WIDTH:
        return text
    chunks = [_string(chunk) for chunk in _chunks(value, max(20, WIDTH - indent - 8))]
    inner = " " * (indent + 4)
    return "(\n" + "\n".join(f"{inner}{c}" for c in chunks) + "\n" + " " * indent + ")"


def _chunks(text: str, limit: int) -> list[str]:
    """``text`` cut so that each piece's repr fits in ``limit`` columns."""
    pieces: list[str] = []
    piece = ""
    for char in text:
        if piece and len(_string(piece + char)) > limit:
            pieces.append(piece)
            piece = ""
        piece += char
    return [*pieces, piece]


def _string(text: str) -> str:
    """A double-quoted Python string literal (the project's style) for ``text``."""
    return (
        '"' + "".join('\\"' if c == '"' else "'" if c == "'" else repr(c)[1:-1] for c in text) + '"'
    )


def _assignment(name: str, value: str) -> list[str]:
    line = f"{name}: Final = {value}"
    if len(line) <= WIDTH:
        return [line]
    head, _, rest = value.partition("(")
    return [f"{name}: Final = {head}(", f"    {rest[:-1]}", ")"]


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines
