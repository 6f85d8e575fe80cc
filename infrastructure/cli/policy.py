"""``mace policy set|show|clear``: the policy bundle in force over a tenant's memories.

A bundle is set for one tenant or, with ``--global``, as the fallback for every tenant without
its own. ``set`` and ``clear`` name their scope explicitly; ``show`` defaults to the tenant
``default`` and answers the bundle in force for it (its own, else the global one).
"""

from __future__ import annotations

import argparse
from typing import Any

from domain.errors import InvalidInput
from domain.policy import parse_bundle
from domain.policy_book import PolicyBook, scope_of
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json, read_bytes


def _tenant(args: argparse.Namespace) -> str | None:
    """The tenant the command names; None for ``--global``."""
    return None if args.global_scope else str(args.tenant)


def set_bundle(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    name, raw = read_bytes(args.file)
    try:
        bundle_yaml = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{name} is not UTF-8 text") from None
    tenant = _tenant(args)
    parse_bundle(bundle_yaml)
    with Ledger.open(settings) as ledger:
        bundle = ledger.policy.set_bundle(tenant, bundle_yaml, actor)
    scope = scope_of(tenant)
    if args.json:
        emit_json({"scope": scope, "bundle_hash": bundle.bundle_hash, "rules": len(bundle.rules)})
    else:
        print(f"policy bundle {bundle.bundle_hash} in force for {scope} by {actor.actor_id}")
    return EXIT_OK


def show_bundle(args: argparse.Namespace, settings: Settings) -> int:
    tenant = _tenant(args)
    with Ledger.open(settings, create=False) as ledger:
        policy = ledger.policy
        book = policy.book(None) if tenant is None else policy.bundle_in_force(tenant)
    in_force = book if book is not None and book.bundle_yaml is not None else None
    if args.json:
        emit_json(_shown(tenant, in_force))
    elif in_force is None:
        print("no policy bundle in force")
    else:
        print(f"scope: {in_force.scope}")
        print(f"bundle_hash: {in_force.bundle_hash}")
        print(str(in_force.bundle_yaml).rstrip("\n"))
    return EXIT_OK


def _shown(tenant: str | None, book: PolicyBook | None) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "scope": None if book is None else book.scope,
        "bundle_hash": None if book is None else book.bundle_hash,
        "bundle_yaml": None if book is None else book.bundle_yaml,
    }


def clear_bundle(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    tenant = _tenant(args)
    with Ledger.open(settings, create=False) as ledger:
        ledger.policy.clear_bundle(tenant, actor)  # NotFoundError when none is set: exit 2
    scope = scope_of(tenant)
    if args.json:
        emit_json({"scope": scope, "cleared": True})
    else:
        print(f"policy bundle cleared for {scope} by {actor.actor_id}")
    return EXIT_OK
