"""The arguments of ``mace serve``, defined beside the service it runs.

Light on purpose (argparse only): ``mace`` loads this module to parse ``mace serve``, or to print
its ``--help``, and the handler (`infrastructure.api.serve_command`, with FastAPI and uvicorn)
only when the service starts.
"""

from __future__ import annotations

import argparse


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    serve.set_defaults(handler="infrastructure.api.serve_command:serve_http")
