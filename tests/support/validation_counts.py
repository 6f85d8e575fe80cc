"""Counting pydantic validations: a test that counts the models a use case validates fails when a
redundant validation comes back (issue 29: each guarantee paid once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic import BaseModel


@contextmanager
def validations(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every pydantic model validated while the block runs, made (``__init__``) or validated
    from data (``model_validate``), by qualified class name (``Job.Recorded``)."""
    counted: Counter[str] = Counter()
    validate = BaseModel.model_validate.__func__  # type: ignore[attr-defined]
    made = BaseModel.__init__

    def validating(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> Any:
        counted[cls.__qualname__] += 1
        return validate(cls, obj, *args, **kwargs)

    def making(self: BaseModel, **data: Any) -> None:
        counted[type(self).__qualname__] += 1
        made(self, **data)

    with monkeypatch.context() as patch:
        patch.setattr(BaseModel, "model_validate", classmethod(validating))
        patch.setattr(BaseModel, "__init__", making)
        yield counted
