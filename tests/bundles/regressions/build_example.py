"""How the example regression test here was made:
``python tests/bundles/regressions/build_example.py``.

The incident: a job whose record says ``2 + 3`` went to the generic agent (rule R4), where the
router snapshot it declares sends it to the math agent (R1). Its audit replay failed with
REPLAY_DIVERGENCE on ``router_decision``. The script records that job in a throwaway store signed
with the TEST-ONLY key beside it (its checkpoints by the suite's TEST-ONLY checkpoint key),
replays it (the REPLAY_RESULT on record), and lets ``mace export-test`` write the test and its
bundle (provable against that checkpoint) into this folder. Run it again only to remake the
example (``--force`` overwrites it): the bundle here is a ``mace-bundle/2``, made before
bundles carried tlog-proofs, and kept so as the proof that that format still reads
(`tests/bundles/test_bundle_inclusion.py`); remade, it would be a ``mace-bundle/3``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import orjson

from domain.canonical import canonical_json
from infrastructure.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from support.misrouted_run import misrouted_run

HERE = Path(__file__).parent
JOB_ID = "incident-r1-misrouted"


def mace(*argv: str) -> None:
    code = main(list(argv))
    if code != 0 and argv[0] != "replay":
        sys.exit(f"mace {' '.join(argv)} exited {code}")


def build(force: bool) -> None:
    keyring = orjson.loads((HERE / "TEST-ONLY-keyring.json").read_bytes())
    with tempfile.TemporaryDirectory() as scratch:
        os.environ |= {
            "MACE_STORE": f"sqlite:///{scratch}/incident.db",
            "MACE_SIGNING_KEYS": orjson.dumps(keyring["keys"]).decode(),
            "MACE_ACTIVE_KEY_ID": keyring["active_key_id"],
            # The suite's TEST-ONLY checkpoint key: the bundle's checkpoint is signed by it.
            "MACE_CHECKPOINT_KEY": str(HERE.parents[1] / "support" / "test-checkpoint-key.pem"),
            "MACE_ACTOR": "incident-auditor",
            "MACE_ROLES": "auditor",
        }
        mace("run", "2 + 3", "--seed", "incident-seed", "--job-id", "source-job")
        events = Path(scratch) / "events.json"
        with events.open("w") as out:
            sys.stdout, saved = out, sys.stdout
            try:
                mace("events", "source-job", "--json")
            finally:
                sys.stdout = saved
        entries = [orjson.loads(line) for line in events.read_text().splitlines()]
        run_file = Path(scratch) / "run.jsonl"
        lines = misrouted_run(entries, JOB_ID)
        run_file.write_bytes(b"".join(canonical_json(line) + b"\n" for line in lines))
        mace("ingest", str(run_file))
        mace("replay", JOB_ID)
        mace("export-test", JOB_ID, "-o", str(HERE), *(["--force"] if force else []))


if __name__ == "__main__":
    build(force="--force" in sys.argv[1:])
