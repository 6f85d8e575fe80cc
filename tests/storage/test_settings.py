"""What the settings keep to themselves and what they refuse: no database password in any dump,
repr or string of them; a MACE_STORE that cannot be parsed, or whose ``?schema=`` is not a plain
identifier, is refused in one line naming MACE_STORE, before anything connects."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
from support.ledger_fixtures import run, settings_for

from infrastructure.application.ledger import Ledger
from infrastructure.storage.keys.checkpoint_key import DEVELOPMENT_SUFFIX
from infrastructure.storage.settings import Settings, SettingsError, SQLiteStore, parse_store

PASSWORD = "pa55-w0rd-not-to-show"
REPOSITORY = Path(__file__).resolve().parents[2]


def ignored(name: str) -> bool:
    patterns = (REPOSITORY / ".gitignore").read_text().split()
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def test_development_key_files_are_git_ignored() -> None:
    # The demo and first use make private keys beside the store: `git add .` must not stage them.
    store = SQLiteStore(Path("mace.db"))
    for suffix in (DEVELOPMENT_SUFFIX, ".keys.json"):
        made = store.development_file(suffix)
        assert ignored(made.name), made.name


def test_compose_secret_files_are_git_ignored() -> None:
    # compose.yaml reads its secrets (tokens file, checkpoint key) from files in the checkout,
    # and the keys and database password from the `.env` beside it.
    compose = (REPOSITORY / "compose.yaml").read_text()
    secrets = re.findall(r"^\s+file: \./(\S+)$", compose, flags=re.MULTILINE)
    assert secrets
    for name in [*secrets, ".env"]:
        assert ignored(name), name


def test_no_dump_of_postgres_settings_shows_the_password() -> None:
    settings = Settings(
        store=f"postgresql://u:{PASSWORD}@db.example:5432/mace",
        read_store=f"postgresql://r:{PASSWORD}@replica.example:5432/mace",
    )
    shown = (
        repr(settings),
        str(settings),
        str(settings.model_dump()),
        settings.model_dump_json(),
        repr(settings.parsed_store()),
        str(settings.parsed_read_store()),
    )
    for text in shown:
        assert PASSWORD not in text


def test_settings_without_the_password_in_dumps_still_connect(store_url: str) -> None:
    # Opening connects (PostgreSQL: with the password the dumps leave out) and reads the tables.
    with Ledger.open(settings_for(store_url), create=False) as ledger:
        assert ledger.jobs is not None


@pytest.mark.parametrize(
    "url",
    ["postgresql://u:p@[::1:5432/db", "postgresql://u:p@::1]:5432/db"],
)
def test_unbalanced_bracket_in_store_is_one_line(url: str) -> None:
    with pytest.raises(SettingsError, match=r"^MACE_STORE ") as raised:
        parse_store(url)
    assert "\n" not in str(raised.value)
    assert ":p@" not in str(raised.value)


@pytest.mark.parametrize("schema", ["x;drop table y", "1abc", "a b", 'a"b', "a" * 64])
def test_schema_not_an_identifier_is_refused(schema: str) -> None:
    with pytest.raises(SettingsError, match=r"^MACE_STORE .*schema"):
        parse_store(f"postgresql://u:p@localhost:5432/db?schema={schema}")


def test_schema_identifier_is_kept() -> None:
    store = parse_store("postgresql://u:p@localhost:5432/db?schema=Ledger_2")
    assert store.eventsourcing_env()["POSTGRES_SCHEMA"] == "Ledger_2"


@pytest.mark.parametrize(
    "url", ["postgresql://u:p@[::1:5432/db", "postgresql://u:p@localhost/db?schema=a;b"]
)
def test_cli_refuses_bad_store_in_one_line(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MACE_STORE", url)
    code, out, err = run(capsys, "verify", "--all")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "MACE_STORE" in err
    assert "Traceback" not in err
