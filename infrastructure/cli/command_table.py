"""Every ``mace`` command in one table: its name, group, one-line help and where it is defined.

Commands are named by strings (``"module:function"``, as console scripts are) and loaded in two
steps: a command's arguments when it is parsed (a light module: argparse and domain names), its
handler when it runs (the use cases, the store and its driver). So ``mace --version`` and
``mace --help`` load no command, ``mace run --help`` no store, and ``mace run`` never the web
stack that ``mace serve`` needs. The table also writes the grouped command list of
``mace --help``, so that list cannot drift from the commands. ``serve`` is defined beside the HTTP
service and ``bench``, ``demo`` and ``loadtest`` beside the tools: the command line names them
here and never imports them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import import_module
from typing import Any

from infrastructure.cli.common import Parser


class Group(StrEnum):
    """The headings of ``mace --help``, in the order they are listed."""

    RECORDING = "recording"
    REPLAY = "replay and governance"
    RECEIPTS = "receipts and memories"
    SERVICE = "store and service"


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    group: Group
    help: str
    # "package.module:function" that adds the command's arguments to its parser, and its
    # handler as the default ``handler="package.module:function"``.
    arguments: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        load(self.arguments)(parser)


def load(name: str) -> Any:
    """The function ``"package.module:function"`` names, its module imported now."""
    module, _, function = name.partition(":")
    return getattr(import_module(module), function)


def _cli(module: str, function: str) -> str:
    return f"infrastructure.cli.arguments.{module}:{function}"


COMMANDS: tuple[Command, ...] = (
    Command(
        "run",
        Group.RECORDING,
        "run one job through the Stage-0 runtime and record it",
        _cli("jobs", "add_run_arguments"),
    ),
    Command(
        "ingest",
        Group.RECORDING,
        "record a run from a JSON-lines file",
        _cli("ingest", "add_ingest_arguments"),
    ),
    Command(
        "schema",
        Group.RECORDING,
        "print the JSON Schema of a run file's lines",
        _cli("ingest", "add_schema_arguments"),
    ),
    Command(
        "sem",
        Group.RECORDING,
        "read and write semantic memory (SEM)",
        _cli("sem", "add_sem_arguments"),
    ),
    Command(
        "snapshot",
        Group.RECORDING,
        "declare and inspect snapshots",
        _cli("snapshots", "add_snapshot_arguments"),
    ),
    Command(
        "runs",
        Group.RECORDING,
        "list runs recorded from outside that are still open; abandon one",
        _cli("runs", "add_runs_arguments"),
    ),
    Command(
        "events",
        Group.RECORDING,
        "print a job's events in order",
        _cli("jobs", "add_events_arguments"),
    ),
    Command(
        "jobs",
        Group.RECORDING,
        "list jobs, their replayability and gaps",
        _cli("jobs", "add_jobs_arguments"),
    ),
    Command(
        "replay",
        Group.REPLAY,
        "replay a job and compare it bit for bit with its record",
        _cli("replay", "add_replay_arguments"),
    ),
    Command(
        "fork",
        Group.REPLAY,
        "fork a job from an iteration: keep the rest as recorded, re-run from there under changes",
        _cli("fork", "add_fork_arguments"),
    ),
    Command(
        "reexecute",
        Group.REPLAY,
        "run an agent's code against its recorded job: exit 0 on an authoritative match",
        _cli("reexecute", "add_reexecute_arguments"),
    ),
    Command(
        "verify",
        Group.REPLAY,
        "check MACs, stream contiguity and seals of one job or of every stream",
        _cli("verify", "add_verify_arguments"),
    ),
    Command(
        "audit",
        Group.REPLAY,
        "replay every job from one read of the log; record one signed audit result",
        _cli("audit", "add_audit_arguments"),
    ),
    Command(
        "governance",
        Group.REPLAY,
        "council votes, force-continue requests, halts and their log",
        _cli("governance", "add_governance_arguments"),
    ),
    Command(
        "export",
        Group.REPLAY,
        "write one job's run bundle: a self-contained, signed file",
        _cli("bundles", "add_export_arguments"),
    ),
    Command(
        "proof",
        Group.REPLAY,
        "check a record's tlog-proof, or a bundle's proofs, against the ledger's verifier key",
        _cli("proof", "add_proof_arguments"),
    ),
    Command(
        "import",
        Group.REPLAY,
        "load a run bundle's job into this store",
        _cli("bundles", "add_import_arguments"),
    ),
    Command(
        "export-test",
        Group.REPLAY,
        "write a pytest file and its bundle that replay a job and assert its recorded outcome",
        _cli("bundles", "add_export_test_arguments"),
    ),
    Command(
        "rebuild",
        Group.REPLAY,
        "rebuild every read model from position 0 and compare digests",
        _cli("rebuild", "add_rebuild_arguments"),
    ),
    Command(
        "follow",
        Group.REPLAY,
        "keep the read models current as events are committed",
        _cli("rebuild", "add_follow_arguments"),
    ),
    Command(
        "memories",
        Group.RECEIPTS,
        "a tenant's memories: facts and episodes",
        _cli("memories", "add_memories_arguments"),
    ),
    Command(
        "policy",
        Group.RECEIPTS,
        "the policy bundles applied to context assembly",
        _cli("policy", "add_policy_arguments"),
    ),
    Command(
        "context",
        Group.RECEIPTS,
        "assemble a context from the tenant's memories; emit its receipt",
        _cli("context", "add_context_arguments"),
    ),
    Command(
        "handoff",
        Group.RECEIPTS,
        "assemble the context handed to another agent; emit its receipt",
        _cli("context", "add_handoff_arguments"),
    ),
    Command(
        "receipts",
        Group.RECEIPTS,
        "list, show, verify and replay receipts",
        _cli("receipts", "add_receipts_arguments"),
    ),
    Command(
        "init",
        Group.SERVICE,
        "set up the store's tables (once; running it again changes nothing)",
        _cli("init", "add_init_arguments"),
    ),
    Command(
        "checkpoint",
        Group.SERVICE,
        "write a signed checkpoint of the whole ledger now; print the key that checks them",
        _cli("checkpoint", "add_checkpoint_arguments"),
    ),
    Command(
        "serve",
        Group.SERVICE,
        "run the HTTP service over the ledger",
        "infrastructure.api.command_arguments:add_serve_arguments",
    ),
    Command(
        "token",
        Group.SERVICE,
        "manage the HTTP service's bearer tokens",
        _cli("tokens", "add_token_arguments"),
    ),
    Command(
        "bench",
        Group.SERVICE,
        "measure write, read, replay and receipt speed on an empty store of its own",
        "infrastructure.tooling.command_arguments:add_bench_arguments",
    ),
    Command(
        "demo",
        Group.SERVICE,
        "record Stage-0 jobs, replay them, and show what replay catches",
        "infrastructure.tooling.command_arguments:add_demo_arguments",
    ),
    Command(
        "loadtest",
        Group.SERVICE,
        "load the HTTP service over PostgreSQL and verify what it stored",
        "infrastructure.tooling.command_arguments:add_loadtest_arguments",
    ),
)
BY_NAME = {command.name: command for command in COMMANDS}


class CommandsOnUse(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The commands of ``mace``: arguments load when a command is parsed, its handler after."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, list)  # a subparsers action always gets [name, *rest]
        command = BY_NAME.get(values[0])
        if command is not None:  # an unknown name is argparse's to refuse, with the choices
            command.add_arguments(self.choices[command.name])
        super().__call__(parser, namespace, values, option_string)
        # Parsed, so the command runs (a --help has exited already): its module loads now.
        namespace.handler = load(namespace.handler)


def add_commands(commands: argparse._SubParsersAction[Parser]) -> None:
    """One parser per command, empty until the command is used; its help is the table's."""
    for command in COMMANDS:
        commands.add_parser(command.name, description=command.help)


def overview(tagline: str) -> str:
    """``tagline`` and the commands under their group headings, as ``mace --help`` shows them."""
    width = max(len(command.name) for command in COMMANDS) + 2
    lines = [tagline]
    for group in Group:
        lines.extend(["", f"{group}:"])
        lines.extend(
            f"  {command.name:<{width}}{command.help}"
            for command in COMMANDS
            if command.group is group
        )
    return "\n".join(lines)


# What ``mace --help`` says of every variable the settings read (``MACE_`` + a Settings field).
ENVIRONMENT = """\
environment:
  MACE_STORE                  where the ledger lives: sqlite:///path/to/file.db (default
                              ./mace.db) or postgresql://user:password@host:port/dbname
  MACE_READ_STORE             a replica or copy of MACE_STORE (same forms) that verify, rebuild
                              (compare only) and the service's reading routes read; never
                              written (default: unset, MACE_STORE)
  MACE_SIGNING_KEYS           JSON object of key id to base64 secret (each at least 32 bytes)
  MACE_ACTIVE_KEY_ID          the key that signs new events (needed when there are several)
  MACE_ENV                    development (default) or production (refuses to start without keys)
  MACE_KEYRING_FILE           development keyring file (default: <store>.keys.json beside SQLite)
  MACE_CHECKPOINT_KEY         Ed25519 private key (PEM) that signs checkpoints (development
                              default: <store>.checkpoint-key.pem beside SQLite)
  MACE_CHECKPOINT_RETIRED_KEYS  public keys (PEM files, ':'-separated) of earlier checkpoint
                              keys, whose checkpoints still verify after a rotation
  MACE_WITNESS_POLICY         witness policy file whose witnesses mace serve's notary sends each
                              new checkpoint to (default: unset, no witnessing)
  MACE_WITNESS_TIMEOUT        seconds one request to a witness may take (10)
  MACE_CHECKPOINT_INTERVAL    at most how many seconds mace serve leaves a commit without a
                              checkpoint (1)
  MACE_LOG_ORIGIN             the origin (and key name) of the checkpoint notes, such as
                              ledger.example.com/audit (default: mace.example.org/ledger/ and
                              the store's id, made from its first checkpoint)
  MACE_TRACE_QUIET_SECONDS    how long mace serve waits after a whole trace's last span arrived
                              over OTLP before recording it as a run (5; 0: at once)
  MACE_REEXECUTION_IDLE_SECONDS  a re-execution open over HTTP with no call for this long is
                              closed as abandoned, a divergence (300)
  MACE_MAX_OPEN_REEXECUTIONS  how many re-executions mace serve holds open at once (16)
  MACE_ACTOR, MACE_ROLES      who acts on the command line, in which comma-separated roles
  MACE_TOKENS_FILE            the HTTP service's bearer tokens (hashed; mace token new writes it)
  MACE_TOKENS_RELOAD_SECONDS  how often mace serve looks whether the tokens file changed (3)
  MACE_SESSION_IDLE_SECONDS   a dashboard session ends after this long unused (28800: 8 h)
  MACE_SESSION_MAX_SECONDS    and this long after sign-in at most (43200: 12 h)
  MACE_SESSION_COOKIE_SECURE  mark the dashboard's cookie Secure (true; false only for plain
                              HTTP from a host other than localhost)
  MACE_MAX_BODY_BYTES         largest HTTP request body, run event or final_output (1048576)
  MACE_MAX_BATCH_EVENTS       most events in one HTTP event batch, spans in one OTLP export (500)
  MACE_MAX_RUN_EVENTS         most events in one run, HTTP, mace ingest or Python (20000)
  MACE_MAX_RUN_BYTES          most bytes of events in one run, and of a run file (16777216)
  MACE_CONNECT_TIMEOUT        seconds that connecting to PostgreSQL, or waiting for a pooled
                              connection, may take before the store is unavailable (5)

'mace COMMAND --help' tells more of each command."""
