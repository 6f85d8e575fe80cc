"""``mace serve``: the HTTP service over the ledger, on uvicorn.

Defined beside the service it runs, not in ``cli`` (its arguments are in
`infrastructure.api.command_arguments`): ``mace`` loads this module only when the service starts,
so no other command, and no ``--help``, loads the web stack (FastAPI, uvicorn, Jinja2).
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from types import FrameType

import uvicorn

from domain.errors import InvalidInput
from infrastructure.api.app import create_app, reading_ledger
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.application.tokens import (
    TokensFileError,
    WatchedTokensFile,
    configured_tokens_file,
)

logger = logging.getLogger("mace.serve")


class ServiceStopped(Exception):
    """SIGTERM: how a service manager asks the service to stop; a clean stop, exit 0."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise ServiceStopped


def say_fatal_signals() -> None:
    """A fatal signal (SIGBUS from a SQLite -shm file cut short under its mapping, SIGSEGV)
    kills the process whatever Python does: it says so on stderr first, with where each thread
    was, instead of vanishing without a line. Left as it is where a handler is on already (a
    test runner's), or where there is no stderr to write to."""
    if not faulthandler.is_enabled() and sys.__stderr__ is not None:
        faulthandler.enable(sys.__stderr__)


def serve_http(args: argparse.Namespace, settings: Settings) -> int:
    if not 0 < args.port < 65536:
        raise InvalidInput(f"--port {args.port}: expected 1-65535")
    try:
        tokens = WatchedTokensFile(configured_tokens_file(settings), settings.tokens_reload_seconds)
    except TokensFileError as exc:
        raise InvalidInput(str(exc)) from None
    # Requests are not held up by checkpoints: the app's notary writes them, at most
    # MACE_CHECKPOINT_INTERVAL seconds after a commit, and a last one as the service stops.
    # A read store that cannot be opened stops the service here, in one line, like the store.
    # Uvicorn shuts down gracefully on SIGINT or SIGTERM, then raises the signal again with the
    # handler it found: SIGINT's KeyboardInterrupt reaches `mace` (exit 130, as any command
    # Ctrl-C stops; `uvicorn.run` swallowed it, exiting 0), and SIGTERM's is ours, so the
    # process closes the ledger and exits 0 instead of dying by the signal.
    previous = signal.signal(signal.SIGTERM, _stop)
    say_fatal_signals()
    try:
        with (
            Ledger.open(settings, checkpoint_on_close=False) as ledger,
            reading_ledger(settings, ledger) as reader,
        ):
            refusal = ledger.status.write_refusal()
            if refusal is not None:
                # Reads are served; writes are refused 503, and /readyz says not ready.
                logger.warning("the store cannot take writes: %s", refusal)
            app = create_app(
                settings, tokens, ledger, notary=True, close_traces=True, reader=reader
            )
            config = uvicorn.Config(
                app, host=args.host, port=args.port, log_level="info", access_log=False
            )
            uvicorn.Server(config).run()
    except ServiceStopped:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK
