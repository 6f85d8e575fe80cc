"""A divergence as a person compares it: recorded and replayed side by side, line by line.

Both values are written as canonical JSON spread over lines (keys sorted, two-space indent: the
canonical form, only laid out to be read), then lined up by `difflib`: each row holds a line of
each side (or none) and whether the two differ there. The values come from the replay report's
divergence, never from anywhere else.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import orjson

from domain.canonical import canonical_json


@dataclass(frozen=True, slots=True)
class DiffRow:
    recorded: str | None
    replayed: str | None
    changed: bool


def readable_json(value: Any) -> str:
    """The canonical JSON of ``value``, indented over lines."""
    canonical = orjson.loads(canonical_json(value))
    return orjson.dumps(canonical, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def side_by_side(recorded: Any, replayed: Any) -> list[DiffRow]:
    """The rows of the two values' readable JSON, lined up; ``changed`` where they differ."""
    left = readable_json(recorded).splitlines()
    right = readable_json(replayed).splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(DiffRow(line, line, changed=False) for line in left[i1:i2])
            continue
        ours, theirs = left[i1:i2], right[j1:j2]
        for at in range(max(len(ours), len(theirs))):
            rows.append(
                DiffRow(
                    ours[at] if at < len(ours) else None,
                    theirs[at] if at < len(theirs) else None,
                    changed=True,
                )
            )
    return rows
