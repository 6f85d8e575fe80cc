"""What the events table is asked while a block runs: the recorder's reads and writes, each as the
caller describes it (tests that count statements, or compare the statements of two lookups)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from domain.checkpoint import CHECKPOINT_STREAM
from infrastructure.application.ledger import Ledger
from support.ledger_fixtures import store_of

T = TypeVar("T")
Describe = Callable[[str, tuple[Any, ...], dict[str, Any]], T]


@contextmanager
def recorder_calls(
    ledger: Ledger, names: Sequence[str], describe: Describe[T]
) -> Iterator[list[T]]:
    """Every call of the recorder methods ``names`` while the block runs, as ``describe(name,
    args, kwargs)`` says it. The newest checkpoint is read now and then, whatever is done
    (`HeadCheck` keeps it a while): those reads are left out."""
    recorder = store_of(ledger).recorder
    originals = {name: getattr(recorder, name) for name in names}
    sent: list[T] = []

    def probe(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if args[0] != CHECKPOINT_STREAM:
                sent.append(describe(name, args, kwargs))
            return original(*args, **kwargs)

        return counted

    for name, original in originals.items():
        setattr(recorder, name, probe(name, original))
    try:
        yield sent
    finally:
        for name, original in originals.items():
            setattr(recorder, name, original)
