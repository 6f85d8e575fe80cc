"""What an operator asks of the job index: filters and a page, read from query parameters.

A `JobQuery` names the jobs of one tenant (or of every tenant) by job id prefix, status,
replayability, the error code of their latest replay and when that replay was asked for, and a
page of them after a log position (keyset: the jobs in the order the store recorded them, `after`
the last one shown). The job listing (`mace jobs`, ``GET /v1/jobs``) takes the same filters and
pages by limit and offset instead. The stores answer it in SQL
(`infrastructure.storage.read_models.tables`); `matches` is the same question asked of one row,
for views kept in memory. Every value is checked here, so a bad one is one line naming the
parameter and what it takes, before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from domain.errors import ErrorCode, InvalidInput
from projections.read_model_rows import Row

PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 200
STATUSES: Final = ("open", "completed", "sealed", "abandoned")
_ID_CHARACTERS = re.compile(r"[A-Za-z0-9._:-]*")
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?")
FILTERS: Final = ("job", "status", "replayable", "error", "from", "to")
"""What the job listing (`mace jobs`, ``GET /v1/jobs``) filters by, as the dashboard does."""
PARAMETERS: Final = (*FILTERS, "after", "size")


class Replayability(StrEnum):
    YES = "yes"
    NO = "no"
    OPEN = "open"
    """Not completed yet: whether it can be replayed is not known."""


@dataclass(frozen=True, slots=True)
class JobQuery:
    tenant: str | None
    """None: every tenant's jobs (an admin's ``mace jobs``)."""
    job_prefix: str = ""
    status: str | None = None
    replayable: Replayability | None = None
    error_code: str | None = None
    replayed_from: str | None = None
    """The latest replay asked for at or after this instant (``YYYY-MM-DDTHH:MM:SSZ``)."""
    replayed_to: str | None = None
    """... and at or before this one."""
    after: int = 0
    """The log position of the last job of the previous page (0: from the first)."""
    size: int = PAGE_SIZE

    def next_page(self, after: int) -> JobQuery:
        return replace(self, after=after)

    def stored(self) -> JobQuery:
        """What a store can answer from the rows as projected: a job the view says is
        replayable may have lost a snapshot since (`read_model_rows.with_gone_snapshots`), so
        "not replayable" is asked of the rows once that is laid over them, never of the view."""
        return replace(self, replayable=None) if self.replayable is Replayability.NO else self

    def parameters(self) -> dict[str, str]:
        """The query as the URL's parameters, without the page position (a filter's link)."""
        shown = {
            "job": self.job_prefix,
            "status": self.status or "",
            "replayable": "" if self.replayable is None else self.replayable.value,
            "error": self.error_code or "",
            "from": self.replayed_from or "",
            "to": self.replayed_to or "",
            "size": "" if self.size == PAGE_SIZE else str(self.size),
        }
        return {name: value for name, value in shown.items() if value}

    def matches(self, row: Row) -> bool:
        """Whether the job index row is one of the jobs asked for (any page)."""
        replayed_at = row.get("replayed_at")
        return (
            self.tenant in {None, row.get("tenant")}
            and str(row.get("job_id", "")).startswith(self.job_prefix)
            and self.status in {None, row.get("status")}
            and self.replayable in {None, replayability(row)}
            and self.error_code in {None, row.get("replay_error")}
            and (self.replayed_from is None or (replayed_at or "") >= self.replayed_from)
            and (self.replayed_to is None or (replayed_at or "~") <= self.replayed_to)
        )


def replayability(row: Row) -> Replayability:
    flag = row.get("replayable")
    if flag is None:
        return Replayability.OPEN
    return Replayability.YES if flag else Replayability.NO


def parse_job_query(tenant: str | None, given: Mapping[str, str]) -> JobQuery:
    """The query the URL's parameters ask for; InvalidInput naming the first bad one."""
    unknown = sorted(set(given) - set(PARAMETERS))
    if unknown:
        expected = ", ".join(PARAMETERS)
        raise InvalidInput(f"unknown parameter {unknown[0]!r}: expected one of {expected}")
    values = {name: value.strip() for name, value in given.items() if value.strip()}
    prefix = values.get("job", "")
    if len(prefix) > 128 or not _ID_CHARACTERS.fullmatch(prefix):
        raise InvalidInput(
            f"job: {prefix[:40]!r} is not the start of a job id (expected up to 128 letters,"
            " digits, '.', '_', ':' or '-')"
        )
    return JobQuery(
        tenant=tenant,
        job_prefix=prefix,
        status=_choice(values, "status", STATUSES),
        replayable=_replayable(values),
        error_code=_choice(values, "error", tuple(code.value for code in ErrorCode)),
        replayed_from=_instant(values, "from", end_of_day=False),
        replayed_to=_instant(values, "to", end_of_day=True),
        after=_number(values, "after", 0, 2**63 - 1, 0),
        size=_number(values, "size", 1, MAX_PAGE_SIZE, PAGE_SIZE),
    )


def _choice(values: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = values.get(name)
    if value is not None and value not in allowed:
        raise InvalidInput(f"{name}: {value[:40]!r} is not one of {', '.join(allowed)}")
    return value


def _replayable(values: Mapping[str, str]) -> Replayability | None:
    value = _choice(values, "replayable", tuple(r.value for r in Replayability))
    return None if value is None else Replayability(value)


def _instant(values: Mapping[str, str], name: str, *, end_of_day: bool) -> str | None:
    """An instant as replay times are written (``YYYY-MM-DDTHH:MM:SSZ``); a day alone is its
    first second (``from``) or its last (``to``)."""
    value = values.get(name)
    if value is None:
        return None
    bad = (
        f"{name}: {value[:40]!r} is not a UTC date or time (expected YYYY-MM-DD or"
        " YYYY-MM-DDTHH:MM[:SS]Z)"
    )
    if not _INSTANT.fullmatch(value):
        raise InvalidInput(bad)
    try:
        instant = datetime.fromisoformat(value.removesuffix("Z")).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(bad) from None
    if "T" not in value and end_of_day:
        instant = instant.replace(hour=23, minute=59, second=59)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(values: Mapping[str, str], name: str, low: int, high: int, default: int) -> int:
    value = values.get(name)
    if value is None:
        return default
    if not value.isdigit() or not low <= int(value) <= high:
        raise InvalidInput(f"{name}: {value[:40]!r} is not a whole number from {low} to {high}")
    return int(value)
