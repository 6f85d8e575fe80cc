"""The project's fixed shape: layers point one way, and CI runs exactly the README's command."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "projections", "infrastructure")
# What each layer may not import: outer layers, and for the pure layers, I/O and storage.
FORBIDDEN = {
    "domain": {"projections", "infrastructure", "sqlite3", "psycopg", "socket", "subprocess"},
    "projections": {"infrastructure", "sqlite3", "psycopg", "socket", "subprocess"},
    "infrastructure": set(),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_point_inward_only(layer: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_modules(path) & FORBIDDEN[layer])
        for path in (ROOT / layer).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_top_level_layout_is_the_fixed_one() -> None:
    for name in ("pyproject.toml", "compose.yaml", "README.md", *LAYERS, "tests"):
        assert (ROOT / name).exists(), name


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme_blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    test_command = next(b for b in readme_blocks if "pytest" in b)
    ci_lines = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1] == test_command
