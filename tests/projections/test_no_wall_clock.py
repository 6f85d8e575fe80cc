"""No wall clock and no unseeded randomness in the deterministic code (seed 000 section 1).

Two nets: at run time, `forbid_nondeterminism` catches the calls actually made (proved here to
catch each kind); statically, an AST scan of ``domain/`` and ``projections/`` refuses the imports
and calls that would reach them, so a code path no test exercises is covered too.
"""

import ast
import datetime
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.forbidden_calls import forbid_nondeterminism

from domain.canonical import canonical_json, digest
from domain.determinism import (
    DeterministicClock,
    DeterministicRNG,
    derive_id,
    episodic_id,
    event_id,
    seed_bytes,
    snapshot_id,
    wm_id,
)
from domain.job import DEFAULT_TENANT, CaptureMode
from domain.sem import SemEntry
from domain.stage0.config import DEFAULT_CONFIGS
from projections.stage0_runtime import Stage0Snapshots, run_stage0

FULL_IO = CaptureMode.FULL_IO
ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ("domain", "projections")
FORBIDDEN_MODULES = frozenset({"random", "secrets", "time"})
FORBIDDEN_CALLS = frozenset({"now", "utcnow", "today", "uuid1", "uuid4", "urandom"})

FORBIDDEN: dict[str, tuple[Callable[[], object], str]] = {
    "time.time": (time.time, "time.time called from"),
    "time.time_ns": (time.time_ns, "time.time_ns called from"),
    "time.monotonic": (time.monotonic, "time.monotonic called from"),
    "time.perf_counter": (time.perf_counter, "time.perf_counter called from"),
    "datetime.now": (
        lambda: datetime.datetime.now(datetime.UTC),
        "datetime.datetime.now called from",
    ),
    "datetime.utcnow": (datetime.datetime.utcnow, "datetime.datetime.utcnow called from"),
    "date.today": (datetime.date.today, "datetime.date.today called from"),
    "random.random": (random.random, "random.Random.random called from"),
    "random.randint": (lambda: random.randint(1, 6), "random.Random.randint called from"),
    "seeded random.Random": (lambda: random.Random(1).random(), "random.Random.__init__"),
    "uuid.uuid4": (uuid.uuid4, "uuid.uuid4 called from"),
    "uuid.uuid1": (uuid.uuid1, "uuid.uuid1 called from"),
    "os.urandom": (lambda: os.urandom(8), "os.urandom called from"),
    "secrets.token_hex": (lambda: secrets.token_hex(8), "secrets.token_hex called from"),
}


@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_forbidden_call_fails_the_block(name: str) -> None:
    call, expected = FORBIDDEN[name]
    with pytest.raises(AssertionError) as caught, forbid_nondeterminism():
        call()
    message = str(caught.value)
    assert expected in message
    assert f"{Path(__file__).resolve()}:" in message or f"{__file__}:" in message


def test_forbidden_call_in_a_thread_started_in_the_block() -> None:
    with pytest.raises(AssertionError, match=r"time\.time called from"), forbid_nondeterminism():
        worker = threading.Thread(target=time.time)
        worker.start()
        worker.join()


def test_entry_point_is_listed_once() -> None:
    with pytest.raises(AssertionError) as caught, forbid_nondeterminism():
        uuid.uuid4()  # reaches os.urandom inside the uuid module
    assert str(caught.value).count("called from") == 1


def test_nothing_is_flagged_outside_the_block() -> None:
    previous = sys.getprofile()
    with forbid_nondeterminism() as found:
        sorted([3, 1, 2])
    time.time()
    random.random()
    assert found == []
    assert sys.getprofile() is previous


def test_determinism_module_is_quiet() -> None:
    with forbid_nondeterminism() as found:
        rng = DeterministicRNG("s1")
        rng.random()
        rng.randbits(300)
        rng.randint(0, 10**6)
        rng.choice("abc")
        rng.shuffle(list(range(10)))
        clock = DeterministicClock(42)
        clock.at(3)
        clock.iso(4)
        seed_bytes("s1")
        event_id("s1", 0, "ROUTER_DECISION")
        snapshot_id("abc", 1, "mace/router")
        wm_id("s1", 3)
        episodic_id(42, 7)
        derive_id("s1", "percept", "hello", 0)
        digest({"a": [0.1 + 0.2, "é", None]})
        canonical_json((1, 2.5))
    assert found == []


# --- static scan ---------------------------------------------------------------------------------


def violations(source: str, filename: str = "<source>") -> list[str]:
    """Forbidden imports and calls in ``source``, as ``file:line: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [
                f"{filename}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in FORBIDDEN_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{filename}:{node.lineno}: from {node.module} import")
            found += [
                f"{filename}:{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name in FORBIDDEN_CALLS
            ]
        elif isinstance(node, ast.Call) and _called_name(node) in FORBIDDEN_CALLS:
            found.append(f"{filename}:{node.lineno}: call {_called_name(node)}()")
    return found


def _called_name(node: ast.Call) -> str | None:
    """``f`` for ``f()`` and ``x.f()``: matched by name, whatever ``x`` is, to stay conservative."""
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


@pytest.mark.parametrize(
    "source",
    [
        "import random",
        "import time as t",
        "import secrets",
        "from time import monotonic",
        "from random import Random",
        "from datetime import datetime\ndatetime.now()",
        "import datetime\ndatetime.datetime.utcnow()",
        "from datetime import date\ndate.today()",
        "import uuid\nuuid.uuid4()",
        "from uuid import uuid1",
        "import os\nos.urandom(8)",
        "from os import urandom",
    ],
)
def test_scanner_catches(source: str) -> None:
    assert violations(source) != []


def test_scanner_allows_deterministic_code() -> None:
    source = (
        "import hmac\nimport uuid\nfrom datetime import UTC, datetime, timedelta\n"
        "uuid.uuid5(uuid.NAMESPACE_URL, 'job:1')\ndatetime(2020, 1, 1, tzinfo=UTC)\n"
        "from . import time\n"
    )
    assert violations(source) == []


def test_pure_layers_never_touch_clock_or_randomness() -> None:
    files = sorted(path for package in PURE_PACKAGES for path in (ROOT / package).rglob("*.py"))
    assert ROOT / "domain" / "determinism.py" in files  # not exempt, and the scan is not empty
    found = [
        line
        for path in files
        for line in violations(path.read_text("utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == []


class InMemorySem:
    """A SEM source that is a dict: the runtime's only window on memory."""

    tenant = DEFAULT_TENANT

    def __init__(self) -> None:
        self.entries: dict[str, SemEntry] = {}

    def entry(self, key: str) -> SemEntry | None:
        return self.entries.get(key)


def test_deciding_a_stage0_job_is_quiet() -> None:
    """Routing, every agent and F-path, SEM, both reducers: no clock, no unseeded randomness.

    (Storage is outside the decision: eventsourcing's connection pool reads the clock to age
    connections, which is why this runs the runtime on an in-memory memory source.)
    """
    snapshots = Stage0Snapshots.parse(
        {kind: config.model_dump() for kind, config in DEFAULT_CONFIGS.items()}
    )
    memory = InMemorySem()
    inputs = [
        "2 + 3",
        "4 / 0",
        "my favorite color is blue",
        "what is my favorite color",
        "what is the capital of france",
        "remember my password is x",
        "hello",
    ]
    with forbid_nondeterminism() as found:
        for number, text in enumerate(inputs):
            run = run_stage0(f"job-{number}", "s1", text, "ada", snapshots, memory, FULL_IO)
            for entry in run.sem_writes:
                memory.entries[entry.key] = entry
    assert found == []
    assert run.final_output.startswith("I currently")
