"""The arguments of ``mace memories add|list|forget``; `infrastructure.cli.memories` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def add_memories_arguments(memories: argparse.ArgumentParser) -> None:
    actions = memories.add_subparsers(dest="memories_command", required=True)

    add = actions.add_parser("add", help="remember a fact (under a SEM key) or an episode")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--fact", nargs=2, metavar=("KEY", "JSON"), help="a SEM key and its value")
    what.add_argument("--episode", metavar="TEXT", help="what happened, as text")
    add.add_argument("--label", action="append", default=[], help="a label (repeatable)")
    add.add_argument("--origin", metavar="JSON", help="where it came from, as JSON")
    add_tenant_option(add)
    add.add_argument("--json", action="store_true", help="print canonical JSON")
    add.set_defaults(handler="infrastructure.cli.memories:add_memory")

    listing = actions.add_parser("list", help="the tenant's live memories, oldest first")
    add_tenant_option(listing)
    listing.add_argument("--json", action="store_true", help="print canonical JSON")
    listing.set_defaults(handler="infrastructure.cli.memories:list_memories")

    forget = actions.add_parser("forget", help="tombstone a live memory")
    forget.add_argument("memory_id", help="the memory's id (mace memories list)")
    forget.add_argument("--reason", required=True, help="why, in one line")
    add_tenant_option(forget)
    forget.add_argument("--json", action="store_true", help="print canonical JSON")
    forget.set_defaults(handler="infrastructure.cli.memories:forget_memory")
