"""``mace-harness reexecute JOB --agent MODULE:CALLABLE``: an agent's code re-executed against its
recording on a ledger over HTTP, from the agent's own environment, as a CI step runs it.

The same command as the ledger's ``mace reexecute``, with the client only (httpx): the service
holds the harness, matches each call and records the attempt (`harness.replay_harness`). Exit 0
only for an authoritative match; 1 when the attempt ran and did not match (a divergence, a
refusal, another final answer, a recording that fails verification, an answer only a mock gave)
or the service cannot be reached; 2 for bad usage: code that cannot be loaded, no URL or token,
an unknown job, a request the service calls bad, before anything is recorded.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import reduce
from importlib import import_module
from pathlib import Path
from typing import Any, NoReturn

import httpx

from mace_harness.harness import Harness, HarnessError, ReplayResult, replay_harness

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
USAGE_STATUSES = frozenset({400, 401, 404, 405, 413, 422})
"""The service's answers to a request that was wrong, not to an attempt that failed."""

AgentCode = Callable[[Harness, str], Any]

ENVIRONMENT = """\
environment:
  LEDGER_URL    the ledger's base URL (mace serve), when --url is not given
  LEDGER_TOKEN  a bearer token of the job's tenant (role operator, admin or auditor), when
                --token is not given"""


class UsageError(Exception):
    """Bad usage or input: one line, exit 2, nothing recorded."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mace-harness",
        description="Re-execute an agent's code against its recording in a MACE Ledger.",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    reexecute = commands.add_parser(
        "reexecute",
        help="run the agent's code against its recorded job: exit 0 on an authoritative match",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reexecute.add_argument("job_id", help="the recorded job (of the token's tenant)")
    reexecute.add_argument(
        "--agent",
        required=True,
        metavar="MODULE:CALLABLE",
        help="the agent's code: a callable taking (harness, input) and returning the final"
        " answer, imported with the current directory on the path",
    )
    reexecute.add_argument(
        "--input", metavar="TEXT", help="the code's input (default: the recorded run's input)"
    )
    reexecute.add_argument(
        "--mode",
        choices=["reexecute", "production"],
        default="reexecute",
        help="reexecute (default; a sandbox, declared mocks allowed) or production",
    )
    reexecute.add_argument("--url", help="the ledger's base URL (default: LEDGER_URL)")
    reexecute.add_argument("--token", help="a bearer token (default: LEDGER_TOKEN)")
    reexecute.add_argument(
        "--json", action="store_true", help="print the recorded report as JSON, keys sorted"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        url = args.url or os.environ.get("LEDGER_URL")
        token = args.token or os.environ.get("LEDGER_TOKEN")
        if not url or not token:
            raise UsageError(
                "give the ledger's --url and a --token (or LEDGER_URL and LEDGER_TOKEN)"
            )
        code = load_agent(args.agent)
        result = _reexecute(url, token, args.job_id, code, args.input, args.mode)
    except UsageError as bad:
        print(f"mace-harness: INVALID_INPUT: {bad}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as refused:  # refused before the code ran (recorded if it ran at all)
        print(f"mace-harness: {refused.code}: {refused.message}", file=sys.stderr)
        return EXIT_USAGE if refused.status in USAGE_STATUSES else EXIT_FAILED
    except httpx.HTTPError as unreachable:
        print(f"mace-harness: cannot reach {url}: {unreachable}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(result.report, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    else:
        print_result(result)
    outcome = result.outcome
    if outcome.ok and outcome.authoritative:
        return EXIT_OK
    if outcome.error_code is not None:
        print(f"mace-harness: {outcome.error_code}: {outcome.error_message}", file=sys.stderr)
    else:
        reasons = "; ".join(outcome.non_authoritative)
        print(f"mace-harness: NON-AUTHORITATIVE: {reasons}", file=sys.stderr)
    return EXIT_FAILED


def _reexecute(
    url: str, token: str, job_id: str, code: AgentCode, given: str | None, mode: str
) -> ReplayResult:
    """The recorded attempt, whatever the code raised (the service recorded it as a divergence
    where the code stood)."""
    harness: Harness | None = None
    try:
        with (
            httpx.Client(base_url=url, timeout=30.0) as http,
            replay_harness(http, token, job_id, mode=mode) as harness,
        ):
            question = _recorded_input(http, token, job_id) if given is None else given
            harness.final_output(code(harness, question))
    except Exception:
        if harness is None or harness.result is None:
            raise
    assert harness is not None and harness.result is not None
    return harness.result


def _recorded_input(http: httpx.Client, token: str, job_id: str) -> str:
    """The recorded run's input, as the token may read it (personal data is redacted for anyone
    but an admin: give ``--input`` then)."""
    answer = http.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    answer.raise_for_status()
    text: str = answer.json()["input"]
    return text


def load_agent(spec: str) -> AgentCode:
    """The callable ``MODULE:CALLABLE`` names (``CALLABLE`` may be dotted), imported with the
    current directory on the path (last: it never shadows what is installed)."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"--agent {spec!r}: expected MODULE:CALLABLE, e.g. my_agent.ci:reexecute")
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.append(here)
    try:
        module = import_module(module_name)
    except Exception as failed:  # the agent's module runs code of its own as it is imported
        lines = str(failed).splitlines() or [""]
        why = (
            lines[0] if isinstance(failed, ImportError) else f"{type(failed).__name__}: {lines[0]}"
        )
        raise UsageError(f"--agent {spec!r}: cannot import {module_name}: {why}") from None
    try:
        found: Any = reduce(getattr, attribute.split("."), module)
    except AttributeError:
        raise UsageError(
            f"--agent {spec!r}: {module_name} has no attribute {attribute!r}"
        ) from None
    if not callable(found):
        raise UsageError(f"--agent {spec!r}: {attribute} is not callable")
    try:
        inspect.signature(found).bind(None, "")
    except TypeError as unfit:
        raise UsageError(
            f"--agent {spec!r}: cannot be called with (harness, input): {unfit}"
        ) from None
    except ValueError:  # a callable without a signature to read (a builtin): called as it is
        pass
    code: AgentCode = found
    return code


def print_result(result: ReplayResult) -> None:
    """The verdict, what stopped the attempt or left it non-authoritative, each divergence."""
    outcome = result.outcome
    if outcome.error_code is not None:
        verdict = f"FAILED {outcome.error_code}"
    else:
        verdict = "REPRODUCED" if outcome.ok else "NOT REPRODUCED"
    badge = "authoritative" if outcome.authoritative else "NON-AUTHORITATIVE"
    print(f"verdict: {verdict}, {badge}")
    print(f"re-execution of job {outcome.job_id} (attempt {result.attempt})")
    if outcome.error_message:
        print(f"  {outcome.error_message}")
    for reason in outcome.non_authoritative:
        print(f"  not authoritative: {reason}")
    for divergence in outcome.divergences:
        where = "job" if divergence.iteration is None else f"iteration {divergence.iteration}"
        print(f"  {divergence.code} at {where}, field {divergence.field}:")
        print(f"    recorded: {_json(divergence.recorded)}")
        print(f"    replayed: {_json(divergence.replayed)}")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
