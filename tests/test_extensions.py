"""The store joins ``python -m melo_core`` from above (melo_core.cli.extensions): through the installed
entry point it brings its commands and the store that ``eval --store`` and ``train --with-decisions``
use; without it the core commands still work and the others say how to get them."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from db.testing import run_cli
from melo_core.cli import extensions
from melo_core.cli.commands import main


def stopped(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """A command argparse ends itself (--help, an unknown command): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    printed = capsys.readouterr()
    return int(exit_.value.code or 0), printed.out, printed.err


@pytest.fixture
def installed_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EntryPoint]]:
    """The entry points the test puts in the list, instead of the installed ones."""
    entries: list[EntryPoint] = []
    monkeypatch.setattr(extensions, "entry_points", lambda group: [e for e in entries if e.group == group])
    extensions.installed.cache_clear()
    yield entries
    extensions.installed.cache_clear()


def test_the_installed_entry_point_brings_the_store(capsys: pytest.CaptureFixture[str]) -> None:
    found = extensions.installed()
    assert found.store is not None and not found.unavailable and found.note() is None
    code, out, _ = stopped(capsys, "--help")
    assert code == 0
    for command in ("eval", "train", "import-taxonomy", "import-terms", "export", "migrate", "import-results"):
        assert f"    {command}" in out


def test_without_the_entry_point_core_commands_work_and_store_ones_say_how(
    installed_only: list[EntryPoint], tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = stopped(capsys, "--help")
    assert code == 0 and "import-terms" not in out.split("options:")[0]
    assert "make install" in out  # the epilog says how to get them

    code, out, _ = run_cli("scorers")
    assert code == 0 and "char-tfidf" in out

    code, _, err = stopped(capsys, "export", "--scheme", "nor_no", "--format", "sssom", "--out", "-")
    assert code == 2 and "invalid choice: 'export'" in err
    assert err.strip().splitlines()[-1].startswith("The store's commands (import-taxonomy, import-terms, export")

    url = f"sqlite:///{tmp_path / 'never.db'}"
    code, _, err = run_cli("eval", "--datasets", str(tiny_dataset), "--scorers", "edit-distance", "--store",
                           "--db", url, "--quiet")  # fmt: skip
    assert code == 2
    assert err.startswith("error: --store needs the crosswalk store (db)") and "make install" in err
    assert not (tmp_path / "never.db").exists()

    code, _, err = run_cli("train", "--data", str(tmp_path), "--out", str(tmp_path / "m"), "--with-decisions",
                           "--db", url, "--quiet")  # fmt: skip
    assert code == 2 and "--with-decisions needs the crosswalk store (db)" in err


def test_an_entry_point_whose_module_is_missing_is_named_not_fatal(installed_only: list[EntryPoint]) -> None:
    installed_only.append(EntryPoint("store", "no_such_layer.commands:register", extensions.ENTRY_POINT_GROUP))
    found = extensions.installed()
    assert found.unavailable == ["store = no_such_layer.commands:register"] and found.store is None
    assert "no_such_layer.commands:register" in (found.note() or "")
    code, out, _ = run_cli("scorers")
    assert code == 0 and "char-tfidf" in out


def test_an_entry_point_that_fails_inside_is_not_hidden(installed_only: list[EntryPoint]) -> None:
    """A module that is there but breaks on import is a bug to see, not a missing layer."""
    installed_only.append(EntryPoint("store", "tests.test_extensions:missing_function", extensions.ENTRY_POINT_GROUP))
    with pytest.raises(AttributeError):
        extensions.installed()
