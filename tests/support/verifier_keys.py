"""The ledger's verifier key as ``mace checkpoint public-key --vkey`` prints it, in tests."""

from __future__ import annotations

import pytest

from support.ledger_fixtures import run


def ledger_vkey(capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run(capsys, "checkpoint", "public-key", "--vkey")
    assert (code, err) == (0, "")
    assert out.endswith("\n") and out.count("\n") == 1
    return out[:-1]


def signer(vkey: str) -> str:
    """``name+id`` of a verifier key, as verifiers name who signed (base64 may hold '+')."""
    return "+".join(vkey.split("+", 2)[:2])
