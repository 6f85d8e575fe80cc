"""Seed 004 section 3's replies, byte for byte (note the typographic apostrophe in F1 and F3)."""

from __future__ import annotations

from typing import Final

F1_SEM_MISS: Final = "I don\u2019t have this information stored yet."
F3_NO_AGENT: Final = "I currently don\u2019t have a module for this type of request."
F4_AGENT_FAILURE: Final = (
    "One of my internal modules failed while processing this; "
    "here is a partial answer based on the remaining modules."
)
F5_SEM_WRITE_FAILURE: Final = (
    "I tried to store this, but my memory backend failed. I may not remember this next time."
)
