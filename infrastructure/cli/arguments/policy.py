"""The arguments of ``mace policy set|show|clear``; `infrastructure.cli.policy` runs them."""

from __future__ import annotations

import argparse

from domain.job import DEFAULT_TENANT
from infrastructure.cli.common import add_tenant_option


def add_policy_arguments(policy: argparse.ArgumentParser) -> None:
    actions = policy.add_subparsers(dest="policy_command", required=True)

    put = actions.add_parser("set", help="put a YAML policy bundle in force")
    put.add_argument("file", help="the bundle's YAML file, or - for standard input")
    _scope_options(put, required=True)
    put.add_argument("--json", action="store_true", help="print canonical JSON")
    put.set_defaults(handler="infrastructure.cli.policy:set_bundle")

    show = actions.add_parser("show", help="the bundle in force for a tenant, or the global one")
    _scope_options(show, required=False)
    show.add_argument("--json", action="store_true", help="print canonical JSON")
    show.set_defaults(handler="infrastructure.cli.policy:show_bundle")

    clear = actions.add_parser("clear", help="take a tenant's (or the global) bundle out of force")
    _scope_options(clear, required=True)
    clear.add_argument("--json", action="store_true", help="print canonical JSON")
    clear.set_defaults(handler="infrastructure.cli.policy:clear_bundle")


def _scope_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    scope = parser.add_mutually_exclusive_group(required=required)
    add_tenant_option(
        scope,
        default=None if required else DEFAULT_TENANT,
        absent="or --global",
    )
    scope.add_argument(
        "--global", dest="global_scope", action="store_true", help="the global fallback bundle"
    )
