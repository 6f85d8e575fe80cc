"""``mace``: the command line. Thin: parse, validate, call one ledger use case, print.

Exit codes: 0 success; 1 the operation ran and failed (integrity failure, unreachable store);
2 bad usage, input or configuration (a signing key the store contradicts), in which case nothing
has been written; 130 Ctrl-C. Errors are one line on stderr, ``mace: CODE: message``, or with
``--json`` the JSON error ``{"error": {"code", "message"}}``: codes, exit codes and HTTP statuses
come from one table (`infrastructure.application.errors`). The parser and the commands are in
`command_line`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

VERSION: list[str] = ["--version"]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == VERSION:
        # Asked of every install and by scripts in loops: answered before the command table,
        # the domain and pydantic are imported (about 0.4 s), as argparse's own action would.
        from importlib.metadata import version  # noqa: PLC0415

        print(f"mace {version('mace-ledger')}")
        return 0
    from infrastructure.cli.command_line import run  # noqa: PLC0415

    return run(arguments)
