"""What every ``mace`` command shares: the parser that fails in one line, input and output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.governance import Actor, GovernanceError, Role
from domain.job import DEFAULT_TENANT, validate_tenant
from domain.json_input import JSONInputError, NotJSONError, parse_json_input
from domain.snapshot import SnapshotKind, parse_kind
from infrastructure.application.settings import Settings


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InvalidInput(f"{message} (see '{self.prog} --help')")


def emit_json(data: dict[str, Any]) -> None:
    sys.stdout.buffer.write(canonical_json(data) + b"\n")
    sys.stdout.flush()


BAR_WIDTH = 30


def progress_bar(doing: str, unit: str) -> Callable[[int, int], None]:
    """A progress bar on standard error, told how many ``unit`` are done of how many."""

    def show(done: int, total: int) -> None:
        filled = BAR_WIDTH if total == 0 else min(BAR_WIDTH, BAR_WIDTH * done // total)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        print(f"\r{doing} [{bar}] {done}/{total} {unit}", end="", file=sys.stderr, flush=True)

    return show


def add_tenant_option(
    parser: argparse._ActionsContainer,
    *,
    default: str | None = DEFAULT_TENANT,
    absent: str = f"default: the {DEFAULT_TENANT} tenant",
) -> None:
    """``--tenant T``, validated as it is parsed (a bad name is a usage error, exit 2).

    ``absent`` says what the command acts on without the option, when ``default`` is None.
    """
    parser.add_argument(
        "--tenant",
        type=_tenant,
        default=default,
        help="the tenant whose records the command reads and writes ("
        + (f"default: {default}" if default else absent)
        + ")",
    )


def _tenant(text: str) -> str:
    try:
        return validate_tenant(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def read_stream(source: str, read: Callable[[str, IO[bytes]], bytes]) -> tuple[str, bytes]:
    """What ``read`` takes from a file, or from standard input for ``-``, with a name for
    messages: a reader that stops at a limit never holds more of the file than that."""
    name = "standard input" if source == "-" else source
    if source == "-":
        return name, read(name, sys.stdin.buffer)
    try:
        with Path(source).open("rb") as stream:
            return name, read(name, stream)
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror}") from None


def read_bytes(source: str) -> tuple[str, bytes]:
    """The bytes of a file, or of standard input for ``-``, with a name for messages."""
    return read_stream(source, lambda _name, stream: stream.read())


def parse_json(name: str, raw: bytes | str) -> Any:
    """JSON a user handed in, under the one input parser's rules (int64, finite, with the path)."""
    try:
        return parse_json_input(raw)
    except NotJSONError as exc:
        raise InvalidInput(f"{name} is {exc}") from None
    except JSONInputError as exc:
        raise InvalidInput(f"{name}: {exc}") from None


def parse_json_argument(name: str, text: str) -> Any:
    """A JSON value given on the command line; a bare word gets the hint to quote it."""
    try:
        return parse_json_input(text)
    except NotJSONError:
        raise InvalidInput(
            f"{name} {text!r} is not JSON: quote strings, e.g. '\"{text}\"'"
        ) from None
    except JSONInputError as exc:
        raise InvalidInput(f"{name}: {exc}") from None


def read_json_object(source: str) -> dict[str, Any]:
    name, raw = read_bytes(source)
    data = parse_json(name, raw)
    if not isinstance(data, dict):
        raise InvalidInput(f"{name} must hold a JSON object, not {type(data).__name__}")
    return data


def add_snapshot_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--snapshot",
        action="append",
        default=[],
        metavar="KIND=ID",
        help="use this stored snapshot instead of the Stage-0 default (repeatable)",
    )


def snapshot_overrides(options: list[str]) -> dict[str, str]:
    """``["router=<id>", ...]`` as ``{"router": "<id>"}``; each kind at most once."""
    chosen: dict[str, str] = {}
    for option in options:
        kind_text, separator, snapshot_id = option.partition("=")
        if not separator or not snapshot_id:
            raise InvalidInput(f"--snapshot {option!r}: expected KIND=SNAPSHOT_ID")
        try:
            kind: SnapshotKind = parse_kind(kind_text)
        except InvalidInput as exc:
            raise InvalidInput(f"--snapshot {option!r}: {exc}") from None
        if kind.value in chosen:
            raise InvalidInput(f"--snapshot names the {kind.value} snapshot twice")
        chosen[kind.value] = snapshot_id
    return chosen


def reading_actor(settings: Settings) -> Actor | None:
    """Who reads: ``MACE_ACTOR``/``MACE_ROLES`` when either is set, else None (anonymous: a
    reader of personal data who is no admin)."""
    return acting_actor(settings) if settings.actor or settings.roles else None


def acting_actor(settings: Settings) -> Actor:
    """The identity ``MACE_ACTOR`` and ``MACE_ROLES`` name for this command."""
    roles = ", ".join(r.value for r in Role)
    if not settings.actor or not settings.roles:
        raise InvalidInput(
            f"set MACE_ACTOR (who you are) and MACE_ROLES (comma-separated: {roles}) to act"
        )
    try:
        return Actor.of(settings.actor, [r.strip() for r in settings.roles.split(",") if r.strip()])
    except GovernanceError as exc:
        raise InvalidInput(f"MACE_ACTOR/MACE_ROLES: {exc}") from None
