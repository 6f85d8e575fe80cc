"""``mace memories add|list|forget``: a tenant's memories, the ones context assembly draws on.

Not to be confused with ``mace sem``, which reads and writes a job-scoped SEM through the Stage-0
snapshots. Writes act as ``MACE_ACTOR``; the actor lands in the memory's provenance.
"""

from __future__ import annotations

import argparse
from typing import Any

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.memories import check_episode, check_fact_key, check_labels
from domain.sem import validate_value
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import (
    acting_actor,
    emit_json,
    parse_json,
    parse_json_argument,
    reading_actor,
)


def add_memory(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    origin = None if args.origin is None else parse_json("--origin", args.origin)
    check_labels(args.label)
    if args.fact is not None:
        key, value = args.fact[0], parse_json_argument("value", args.fact[1])
        check_fact_key(key)
        validate_value(value)
    else:
        check_episode(args.episode)
    with Ledger.open(settings) as ledger:
        if args.fact is not None:
            memory = ledger.memories.remember_fact(
                args.tenant, key, value, args.label, actor, origin
            )
        else:
            memory = ledger.memories.remember_episode(
                args.tenant, args.episode, args.label, actor, origin
            )
    if args.json:
        emit_json(memory.as_json())
    else:
        print(f"{memory.memory_id} {memory.kind.value} at position {memory.position}")
    return EXIT_OK


def list_memories(args: argparse.Namespace, settings: Settings) -> int:
    reader = reading_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        shown = ledger.memories.shown(args.tenant, reader)
    if args.json:
        emit_json(shown)
        return EXIT_OK
    if not shown["memories"]:
        print(f"no live memories for tenant {args.tenant}")
    for memory in shown["memories"]:
        print(memory_line(memory))
    return EXIT_OK


def memory_line(memory: dict[str, Any]) -> str:
    """One line: id, kind, a fact's key or an episode's text (as JSON: one line), labels."""
    key = memory["key"]
    said = key if key is not None else canonical_json(memory["content"]).decode()
    return f"{memory['memory_id']} {memory['kind']} {said} [{','.join(memory['labels'])}]"


def forget_memory(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        try:
            ledger.memories.forget(args.tenant, args.memory_id, args.reason, actor)
        except LookupError:
            raise InvalidInput(f"no memory {args.memory_id}") from None
    if args.json:
        emit_json({"memory_id": args.memory_id, "tenant": args.tenant, "forgotten": True})
    else:
        print(f"forgot {args.memory_id} (tenant {args.tenant}) by {actor.actor_id}")
    return EXIT_OK
