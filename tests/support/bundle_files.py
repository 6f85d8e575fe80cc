"""Exporting, reading, rewriting and replaying run bundles through ``mace`` in tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from domain.canonical import canonical_json
from infrastructure.storage.settings import Settings
from support.cli_output import canonical_line
from support.ledger_fixtures import run, settings_for


def use_store(monkeypatch: pytest.MonkeyPatch, url: str) -> Settings:
    monkeypatch.setenv("MACE_STORE", url)
    return settings_for(url)


def export(capsys: pytest.CaptureFixture[str], job_id: str, path: Path, *extra: str) -> Path:
    code, out, err = run(capsys, "export", job_id, "-o", str(path), *extra)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"exported job {job_id} to {path}: ")
    return path


def bundle_json(path: Path) -> dict[str, Any]:
    data = orjson.loads(path.read_bytes())
    assert isinstance(data, dict)
    return data


def rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change a bundle's content and write it back as valid canonical JSON."""
    data = bundle_json(path)
    change(data)
    path.write_bytes(canonical_json(data) + b"\n")


def record_index(data: dict[str, Any], stream: Any, version: int) -> int:
    return next(
        i
        for i, r in enumerate(data["records"])
        if r["originator_id"] == str(stream) and r["version"] == version
    )


def bundle_replay(
    capsys: pytest.CaptureFixture[str], path: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(capsys, "replay", "--bundle", str(path), *extra, "--json")
    return code, canonical_line(out), err


def assert_integrity_failure(err: str, fragment: str) -> None:
    assert err.startswith("mace: INTEGRITY_FAILURE: ")
    assert err.count("\n") == 1
    assert fragment in err
