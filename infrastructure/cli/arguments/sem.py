"""The arguments of ``mace sem put|get``; `infrastructure.cli.sem` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_snapshot_option, add_tenant_option


def add_sem_arguments(sem: argparse.ArgumentParser) -> None:
    sem_commands = sem.add_subparsers(dest="sem_command", required=True)
    put = sem_commands.add_parser("put", help="store a fact under a canonical key")
    put.add_argument("key", help="<scope>/<entity_type>/<entity_id>/<attribute>")
    put.add_argument("value", metavar="JSON", help="the value as JSON, e.g. '\"Paris\"' or 42")
    add_tenant_option(put)
    add_snapshot_option(put)
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler="infrastructure.cli.sem:sem_put")
    get = sem_commands.add_parser("get", help="read the fact under a key")
    get.add_argument("key", help="<scope>/<entity_type>/<entity_id>/<attribute>")
    add_tenant_option(get)
    add_snapshot_option(get)
    get.add_argument("--json", action="store_true", help="print canonical JSON")
    get.set_defaults(handler="infrastructure.cli.sem:sem_get")
