"""``mace reexecute JOB_ID --agent MODULE:CALLABLE``: an agent's code re-executed against its
recording, as a CI step runs it (docs/reexecution.md).

Exit 0 only for an authoritative match; 1 when the attempt ran and did not match (a divergence,
a refusal, another final answer, a recording that fails verification, an answer only a mock
gave); 2 when the code cannot be loaded or the job is unknown, before anything is recorded.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from functools import reduce
from importlib import import_module
from pathlib import Path
from typing import Any

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.replay_harness import AgentCode, reexecute
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json
from infrastructure.cli.replay import print_report


def reexecute_job(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    code = load_agent(args.agent)
    with Ledger.open(settings, create=False) as ledger:
        result = reexecute(
            ledger.recordings,
            args.job_id,
            code,
            actor,
            input=args.input,
            mode=args.mode,
            tenant=args.tenant,
        )
    if args.json:
        emit_json(result.report)
    else:
        print_report(result, None)
    outcome = result.outcome
    if outcome.ok and outcome.authoritative:
        return EXIT_OK
    if outcome.error_code is not None:
        print(f"mace: {outcome.error_code}: {outcome.error_message}", file=sys.stderr)
    else:
        reasons = "; ".join(outcome.non_authoritative)
        print(f"mace: NON-AUTHORITATIVE: {reasons}", file=sys.stderr)
    return EXIT_FAILED


def load_agent(spec: str) -> AgentCode:
    """The callable ``MODULE:CALLABLE`` names (``CALLABLE`` may be dotted), its module imported
    as a console script would not by itself: with the current directory on the path (last, so
    that it never shadows what is installed). Anything wrong is bad input, before any record."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        msg = f"--agent {spec!r}: expected MODULE:CALLABLE, e.g. my_agent.ci:reexecute"
        raise InvalidInput(msg)
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.append(here)
    try:
        module = import_module(module_name)
    except Exception as failed:  # the agent's module runs code of its own as it is imported
        why = str(failed) if isinstance(failed, ImportError) else _named(failed)
        raise InvalidInput(f"--agent {spec!r}: cannot import {module_name}: {why}") from None
    try:
        found: Any = reduce(getattr, attribute.split("."), module)
    except AttributeError:
        msg = f"--agent {spec!r}: {module_name} has no attribute {attribute!r}"
        raise InvalidInput(msg) from None
    if not callable(found):
        msg = f"--agent {spec!r}: {attribute} is not callable (a {type(found).__name__})"
        raise InvalidInput(msg)
    try:
        inspect.signature(found).bind(None, "")
    except TypeError as unfit:
        msg = f"--agent {spec!r}: cannot be called with (harness, input): {unfit}"
        raise InvalidInput(msg) from None
    except ValueError:  # a callable without a signature to read (a builtin): called as it is
        pass
    code: AgentCode = found
    return code


def _named(failed: Exception) -> str:
    first = str(failed).splitlines()
    return f"{type(failed).__name__}: {first[0]}" if first else type(failed).__name__
