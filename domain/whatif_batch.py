"""What a batch what-if (issue 31 point 3) is asked over: the jobs it re-runs and the changes it
expects. Pure: parsing only.

``--jobs FILE`` names jobs, one id a line (blank lines skipped). ``--expect FILE`` names the
changes a team expects of its change, as JSON lines or one JSON list of ``{"job_id", "field"}``
objects: a changed job is expected when its *first* change (the decision that changes first) is
on a field listed for it, since every later difference of a job follows from that one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.errors import InvalidInput
from domain.job import validate_job_id
from domain.json_input import parse_json_input

EXPECT_KEYS = frozenset({"job_id", "field"})


@dataclass(frozen=True, slots=True)
class ExpectedChange:
    job_id: str
    field: str

    def as_json(self) -> dict[str, str]:
        return {"job_id": self.job_id, "field": self.field}


def parse_job_list(name: str, raw: bytes) -> tuple[str, ...]:
    """The job ids ``raw`` names, one a line, each once, in the order given; InvalidInput naming
    ``name`` and the line for a malformed id, an id given twice, or a file naming no job."""
    text = _text(name, raw)
    ids: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        job_id = line.strip()
        if not job_id:
            continue
        try:
            validate_job_id(job_id)
        except InvalidInput as exc:
            raise InvalidInput(f"{name} line {number}: {exc}") from None
        if job_id in ids:
            raise InvalidInput(f"{name} line {number}: job {job_id!r} is named twice")
        ids.append(job_id)
    if not ids:
        raise InvalidInput(f"{name} names no job: expected one job id a line")
    return tuple(ids)


def parse_expectations(name: str, raw: bytes) -> frozenset[ExpectedChange]:
    """The expected changes ``raw`` lists (a JSON list, or JSON lines, of ``{job_id, field}``);
    InvalidInput, one line naming ``name`` and the entry, for anything else."""
    text = _text(name, raw)
    stripped = text.strip()
    if stripped.startswith("["):
        entries = _json(name, stripped, "")
        if not isinstance(entries, list):
            raise InvalidInput(f"{name} is not a JSON list of {{job_id, field}} objects")
        numbered = [(f" entry {index}", entry) for index, entry in enumerate(entries)]
    else:
        numbered = [
            (f" line {number}", _json(name, line, f" line {number}"))
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]
    return frozenset(_expected(f"{name}{where}", entry) for where, entry in numbered)


def _expected(where: str, entry: Any) -> ExpectedChange:
    expected = 'expected {"job_id": ID, "field": FIELD}'
    if not isinstance(entry, dict) or set(entry) != EXPECT_KEYS:
        raise InvalidInput(f"{where}: {expected}")
    job_id, field = entry["job_id"], entry["field"]
    if not isinstance(job_id, str) or not isinstance(field, str) or not field:
        raise InvalidInput(f"{where}: {expected}, both strings")
    try:
        validate_job_id(job_id)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    return ExpectedChange(job_id, field)


def _json(name: str, text: str, where: str) -> Any:
    try:
        return parse_json_input(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{name}{where}: {exc}") from None


def _text(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{name} is not UTF-8 text: byte {exc.start} cannot be decoded"
        ) from None
