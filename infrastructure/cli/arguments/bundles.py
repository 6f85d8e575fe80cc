"""The arguments of ``mace export``, ``mace import`` and ``mace export-test``.

`infrastructure.cli.bundles` runs them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infrastructure.cli.common import add_tenant_option

PUBLIC_KEY_HELP = (
    "pin the ledger's checkpoint public key (PEM, from mace checkpoint public-key): the"
    " bundle's checkpoint must be signed by it (default: the key in the bundle, unpinned)"
)


def add_public_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--public-key", type=Path, metavar="PEM", help=PUBLIC_KEY_HELP)


def add_include_full_io_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--include-full-io",
        action="store_true",
        help="write the model responses and tool content a job kept into the bundle (a job"
        " that kept any is refused without it)",
    )


def add_export_arguments(export: argparse.ArgumentParser) -> None:
    export.add_argument("job_id", help="the job to export")
    add_tenant_option(export)
    export.add_argument(
        "-o", "--output", required=True, type=Path, metavar="FILE", help="the bundle to write"
    )
    export.add_argument(
        "--redact",
        action="store_true",
        help="safe export: leave out PII (privacy snapshot) and every field that can carry"
        " model or tool content, the final answer included",
    )
    add_include_full_io_option(export)
    export.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    export.add_argument("--json", action="store_true", help="print canonical JSON")
    export.set_defaults(handler="infrastructure.cli.bundles:export_job")


def add_import_arguments(load: argparse.ArgumentParser) -> None:
    load.add_argument("file", type=Path, help="the run bundle (mace export writes one)")
    add_public_key_option(load)
    load.add_argument("--json", action="store_true", help="print canonical JSON")
    load.set_defaults(handler="infrastructure.cli.bundles:import_job")


def add_export_test_arguments(regression: argparse.ArgumentParser) -> None:
    regression.add_argument("job_id", help="the job whose recorded outcome the test asserts")
    add_tenant_option(regression)
    regression.add_argument(
        "-o",
        "--output",
        required=True,
        type=Path,
        metavar="DIR",
        help="the folder for the test file and its bundle",
    )
    add_include_full_io_option(regression)
    regression.add_argument("--force", action="store_true", help="overwrite existing files")
    regression.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: the files written, the outcome the test asserts and how"
        " replaying the bundle now differs from it",
    )
    regression.set_defaults(handler="infrastructure.cli.bundles:export_test")
