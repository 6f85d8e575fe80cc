"""The project's fixed shape, and CI runs exactly the README's command.

Which layer may import which is checked by `lint-imports` (contracts in ``pyproject.toml``), a
step of that command.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "projections", "infrastructure")


def test_top_level_layout_is_the_fixed_one() -> None:
    for name in ("pyproject.toml", "compose.yaml", "README.md", *LAYERS, "tests"):
        assert (ROOT / name).exists(), name


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme_blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    test_command = next(b for b in readme_blocks if "pytest" in b)
    ci_lines = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1] == test_command


def test_the_layer_contracts_are_the_designed_ones() -> None:
    """``lint-imports`` checks what pyproject.toml says; this pins what it says (DESIGN.md s.2)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = [
        (c.get("containers", []), c["layers"]) for c in config["contracts"] if c["type"] == "layers"
    ]
    assert layers == [
        ([], ["infrastructure", "projections", "domain"]),
        (["infrastructure"], ["api | cli | tooling", "bundles", "application", "storage"]),
    ]
    pure = next(c for c in config["contracts"] if c["type"] == "forbidden")
    assert pure["source_modules"] == ["domain", "projections"]
    assert {"sqlite3", "psycopg", "fastapi"} <= set(pure["forbidden_modules"])
