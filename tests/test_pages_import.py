"""The Import page (Streamlit AppTest): terms CSV, crosswalk JSON with decisions, ESCO CSV files
and the MELO union, imported through uploads into a real SQLite store; bad files are refused with
their line and column, and nothing is written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.store import Store
from tests.conftest import write_workbook

ROOT = Path(__file__).resolve().parent.parent
IMPORT = "pages/4_Import.py"


@pytest.fixture
def url(nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    db_url = f"sqlite:///{tmp_path / 'melo.db'}"
    monkeypatch.setenv("MELO_DATA", str(nor_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MELO_DB_URL", db_url)
    monkeypatch.chdir(ROOT)
    return db_url


def import_page() -> AppTest:
    return AppTest.from_file(str(ROOT / IMPORT), default_timeout=120).run()


def upload_terms(app: AppTest, scheme: str, name: str, content: bytes, file_format: str = "csv") -> AppTest:
    app.text_input(key="import_scheme").input(scheme)
    app.radio(key="import_format").set_value(file_format)
    app.file_uploader(key="import_terms_file").set_value((name, content, "text/csv")).run()
    app.button(key="import_terms_go").click().run()
    assert not app.exception
    return app


def test_upload_a_terms_csv_twice_changes_nothing_the_second_time(url: str, tmp_path: Path) -> None:
    content = "code,label,description,lang\nB1,Bäcker,backt Brot,de\nB2,Konditor,,de\n".encode()
    app = upload_terms(import_page(), "titles", "titles.csv", content)
    assert [s.value for s in app.success] == ["scheme titles: 2 terms added, 0 updated, 0 unchanged"]
    with Store(url) as store:
        terms = store.terms("titles")
        assert [(t.code, t.label, t.description) for t in terms] == [
            ("B1", "Bäcker", "backt Brot"),
            ("B2", "Konditor", ""),
        ]
    app.button(key="import_terms_go").click().run()  # the same upload again
    assert [s.value for s in app.success] == ["scheme titles: 0 terms added, 0 updated, 2 unchanged"]
    # the same terms as an Excel workbook, which the uploader offers
    assert ".xlsx" in app.file_uploader(key="import_terms_file").proto.type
    workbook = write_workbook(tmp_path / "titles.xlsx", [["code", "label", "description", "lang"],
                                                         ["B1", "Bäcker", "backt Brot", "de"], ["B2", "Konditor", None, "de"]])  # fmt: skip
    app = upload_terms(app, "titles", "titles.xlsx", workbook.read_bytes())
    assert [s.value for s in app.success] == ["scheme titles: 0 terms added, 0 updated, 2 unchanged"]


def test_a_bad_file_is_refused_with_its_line_and_column_and_nothing_written(url: str) -> None:
    app = import_page()
    assert app.checkbox(key="import_with_decisions").disabled  # a terms CSV has no decisions
    content = b"code,label\nB1,Baker\nB2,\nB3,Nurse\n"
    app = upload_terms(app, "titles", "titles.csv", content)
    assert not app.success
    [error] = app.error
    assert error.value == "Nothing was imported. titles.csv, line 3: column 'label': empty label"
    with Store(url) as store:
        assert store.schemes() == []


def test_a_crosswalk_json_with_its_matches_as_decisions(url: str, nor_data: Path) -> None:
    path = nor_data / "raw" / "crosswalks_standard" / "nor_no" / "crosswalk.json"
    crosswalk = json.loads(path.read_text(encoding="utf-8"))
    app = import_page()
    app.radio(key="import_format").set_value("crosswalk").run()
    assert app.checkbox(key="import_with_decisions").disabled is False  # only crosswalks bring decisions
    app.checkbox(key="import_with_decisions").check()
    upload_terms(app, "nor", "crosswalk.json", path.read_bytes(), file_format="crosswalk")
    assert not app.error
    with Store(url) as store:
        assert len(store.terms("nor")) == len(crosswalk)
        decided = store.crosswalk("nor")
        assert len(decided) == sum(len(entry["matches"]) for entry in crosswalk.values())
        assert {d.curator for d in decided} == {"import:crosswalk.json"}


def test_esco_csv_files_and_the_melo_union_become_taxonomies(url: str, esco_csv: Path) -> None:
    app = import_page()
    files = [
        (p.name, p.read_bytes(), "text/csv") for p in (esco_csv / "occupations_en.csv", esco_csv / "ISCOGroups_en.csv")
    ]
    app.file_uploader(key="import_esco").set_value(files)
    app.text_input(key="import_esco_version").input("v1.2.0").run()
    app.button(key="import_esco_go").click().run()
    assert not app.exception and not app.error
    app.button(key="import_union").click().run()
    assert not app.exception and not app.error
    with Store(url) as store:
        versions = {(t.name, t.version): t.concepts for t in store.taxonomies()}
    assert set(versions) == {("esco", "v1.2.0"), ("esco", "melo-union")}
    uris: set[str] = set()
    for name in ("occupations_en.csv", "ISCOGroups_en.csv"):
        with (esco_csv / name).open(encoding="utf-8", newline="") as handle:
            uris |= {row["conceptUri"] for row in csv.DictReader(handle)}
    assert versions[("esco", "v1.2.0")] == len(uris)
    with Store(url) as store:  # the CSV export brings the ISCO hierarchy
        assert any(m.isco_code for m in store.find_concepts("baker", languages=["en"]))
