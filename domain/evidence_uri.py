"""Stable addresses of the evidence a job leaves (issue 17 point 8), after seed 003's capsule URIs.

``mace://<tenant>/job/<job_id>/event/<sequence_index>`` names a recorded fact of a job, and
``mace://<tenant>/job/<job_id>/replay/<attempt>/report`` the report of one of its replays. Neither
tenants nor job ids hold a ``/`` (`domain.job`), so an address reads back in one way only, and
the same fact has the same address in every store that holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from domain.errors import InvalidInput
from domain.job import validate_job_id, validate_tenant

SCHEME: Final = "mace://"
_SHAPE: Final = re.compile(
    r"mace://(?P<tenant>[^/]+)/job/(?P<job>[^/]+)/"
    r"(?:event/(?P<event>0|[1-9][0-9]{0,9})|replay/(?P<attempt>[1-9][0-9]{0,9})/report)"
)


@dataclass(frozen=True, slots=True)
class EvidenceUri:
    tenant: str
    job_id: str
    kind: Literal["event", "report"]
    number: int
    """The event's sequence index, or the replay's attempt."""


def event_uri(tenant: str, job_id: str, sequence_index: int) -> str:
    return f"{SCHEME}{tenant}/job/{job_id}/event/{sequence_index}"


def report_uri(tenant: str, job_id: str, attempt: int) -> str:
    return f"{SCHEME}{tenant}/job/{job_id}/replay/{attempt}/report"


def parse_evidence_uri(text: str) -> EvidenceUri:
    """The address ``text`` spells; ValueError says what is wrong with it."""
    shape = _SHAPE.fullmatch(text)
    if shape is None:
        msg = (
            f"invalid evidence URI {text!r}: expected mace://<tenant>/job/<job_id>/event/<n>"
            " or mace://<tenant>/job/<job_id>/replay/<attempt>/report"
        )
        raise InvalidInput(msg)
    tenant = validate_tenant(shape["tenant"])
    job_id = validate_job_id(shape["job"])
    if shape["event"] is not None:
        return EvidenceUri(tenant, job_id, "event", int(shape["event"]))
    return EvidenceUri(tenant, job_id, "report", int(shape["attempt"]))
