"""The arguments of ``mace ingest`` and ``mace schema``; `infrastructure.cli.ingest` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def add_ingest_arguments(ingest: argparse.ArgumentParser) -> None:
    ingest.add_argument("file", help="Run Event Schema v1 lines, or - for standard input")
    ingest.add_argument(
        "--otlp",
        action="store_true",
        help="the file is an OTLP/JSON trace export (ExportTraceServiceRequest): each whole"
        " trace is recorded as one run",
    )
    add_tenant_option(ingest)
    ingest.add_argument("--json", action="store_true", help="print canonical JSON")
    ingest.set_defaults(handler="infrastructure.cli.ingest:ingest_run")


def add_schema_arguments(schema: argparse.ArgumentParser) -> None:
    schema.set_defaults(handler="infrastructure.cli.ingest:print_schema")
