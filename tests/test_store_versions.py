"""ESCO versions in the store: the version each decision is made against, and ``migrate`` from one
ESCO import to another (carried over, relabelled, replaced with a candidate, gone), its review
queue, and its refusals (one line, exit code 2, nothing changed).

Two ESCO CSV exports are built from the shared one: ``v1.1.1`` (200 occupations, one of them
given a label nothing else resembles) and ``v1.2.0`` (the same with concepts removed, relabelled
and replaced by a new URI with the same or a close label). Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from db.store import Store
from db.testing import run_cli, run_cli_ok, snapshot

N = 200
OLD, NEW = "v1.1.1", "v1.2.0"
NEW_URI = "http://data.europa.eu/esco/occupation/new-"


def _write(folder: Path, fields: list[str], rows: list[dict[str, str]]) -> Path:
    folder.mkdir(parents=True)
    with (folder / "occupations_en.csv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return folder


@pytest.fixture
def versions(esco_csv: Path, tmp_path: Path) -> dict[str, object]:
    """The two exports, and which concepts each case uses (by role)."""
    with (esco_csv / "occupations_en.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = [row for _, row in zip(range(N), reader, strict=False)]
    labels = {r["preferredLabel"] for r in rows}
    role = {name: rows[i]["conceptUri"] for i, name in enumerate(("same", "relabel", "exact", "close", "gone"))}
    old = [dict(r) for r in rows]
    old[4]["preferredLabel"], old[4]["altLabels"], old[4]["hiddenLabels"] = "zqx keeper of lost umbrellas", "", ""
    new = [dict(r) for r in old]
    new[1]["preferredLabel"] = old[1]["preferredLabel"] + " (renamed)"
    # "exact" and "close" leave; new URIs take over their label, or a close one.
    new[2] = {**old[2], "conceptUri": NEW_URI + "exact", "altLabels": ""}
    new[3] = {**old[3], "conceptUri": NEW_URI + "close", "preferredLabel": old[3]["preferredLabel"] + "s"}
    assert new[3]["preferredLabel"] not in labels
    del new[4]  # gone, nothing like it
    return {
        "old": _write(tmp_path / "old", fields, old),
        "new": _write(tmp_path / "new", fields, new),
        "role": role,
        "labels": {name: old[i]["preferredLabel"] for i, name in enumerate(role)},
        "new_relabel": new[1]["preferredLabel"],
        "new_close": new[3]["preferredLabel"],
    }


def _setup(url: str, versions: dict[str, object], tmp_path: Path) -> dict[str, int]:
    """v1.1.1 imported, a scheme of six terms linked against it, a decision per case."""
    run_cli_ok("import-taxonomy", "--esco-csv", str(versions["old"]), "--version", OLD, "--db", url, "--quiet")
    terms = tmp_path / "terms.csv"
    terms.write_text("code,label\nT1,one\nT2,two\nT3,three\nT4,four\nT5,five\nT6,six\n", encoding="utf-8")
    run_cli_ok("import-terms", "--scheme", "tst", "--csv", str(terms), "--lang", "en", "--db", url)
    role = versions["role"]
    assert isinstance(role, dict)
    with Store(url) as store:
        ids = {t.code: t.id for t in store.terms("tst")}
        store.decide(ids["T1"], role["same"], "exactMatch", "alice")
        store.decide(ids["T2"], role["relabel"], "narrowMatch", "alice")
        store.decide(ids["T3"], role["exact"], "exactMatch", "bob", scorer="fast", score=0.91, rank=1)
        store.decide(ids["T4"], role["close"], "closeMatch", "bob")
        store.decide(ids["T5"], role["gone"], "exactMatch", "alice")
        store.decide(ids["T6"], role["gone"], "rejected", "alice")  # not a match: not migrated
    run_cli_ok("import-taxonomy", "--esco-csv", str(versions["new"]), "--version", NEW, "--db", url, "--quiet")
    return ids


def test_decisions_record_the_version_of_the_schemes_taxonomy(
    store_url: str, versions: dict[str, object], tmp_path: Path
) -> None:
    ids = _setup(store_url, versions, tmp_path)
    with Store(store_url) as store:
        target = store.scheme_taxonomy("tst")
        assert target is not None and (target.name, target.version) == ("esco", OLD)
        assert {d.esco_version for d in store.crosswalk("tst", outcomes=None)} == {OLD}
        # Importing another version does not move a scheme: only migrate does.
        assert store.decide(ids["T1"], "http://x/y", "unsure", "carol").esco_version == OLD
        undone = store.undo(ids["T1"], "http://x/y", "carol")
        assert undone is not None and undone.esco_version == OLD


def test_migrate_carries_over_flags_and_finds_candidates(
    store_url: str, versions: dict[str, object], tmp_path: Path
) -> None:
    ids = _setup(store_url, versions, tmp_path)
    role, labels = versions["role"], versions["labels"]
    assert isinstance(role, dict) and isinstance(labels, dict)
    before = snapshot(store_url)["decisions"]
    review = tmp_path / "review.csv"
    code, out, err = run_cli("migrate", "--scheme", "tst", "--to", NEW, "--review-out", str(review), "--db", store_url)
    assert code == 0, err
    assert out.strip() == (
        f"scheme tst: {OLD} -> {NEW}: 1 carried over, 1 relabelled (carried over, to review), "
        "2 gone with a replacement candidate, 1 gone without candidate"
    )
    assert snapshot(store_url)["decisions"] == before  # decisions are never rewritten
    rows = list(csv.DictReader(io.StringIO(review.read_text(encoding="utf-8"))))
    by_code = {r["term_code"]: r for r in rows}
    assert sorted(by_code) == ["T2", "T3", "T4", "T5"]
    assert (by_code["T2"]["change"], by_code["T2"]["old_label"], by_code["T2"]["new_label"]) == (
        "relabelled",
        labels["relabel"],
        versions["new_relabel"],
    )
    assert by_code["T2"]["relation"] == "skos:narrowMatch" and by_code["T2"]["candidate_uri"] == ""
    assert (by_code["T3"]["change"], by_code["T3"]["candidate_uri"], by_code["T3"]["candidate_score"]) == (
        "replaced",
        NEW_URI + "exact",
        "1",
    )
    assert by_code["T4"]["change"] == "replaced" and by_code["T4"]["candidate_uri"] == NEW_URI + "close"
    assert by_code["T4"]["new_label"] == versions["new_close"] and 0.85 <= float(by_code["T4"]["candidate_score"]) < 1
    assert (by_code["T5"]["change"], by_code["T5"]["candidate_uri"]) == ("gone", "")
    assert {(r["from_version"], r["to_version"]) for r in rows} == {(OLD, NEW)}

    with Store(store_url) as store:
        target = store.scheme_taxonomy("tst")
        assert target is not None and target.version == NEW
        queue = store.migration_reviews("tst")
        assert [i.term_code for i in queue] == ["T2", "T3", "T4", "T5"]
        # Resolving: re-decide the relabelled pair (now against v1.2.0), take the candidate for T3.
        confirmed = store.decide(ids["T2"], role["relabel"], "narrowMatch", "alice")
        assert confirmed.esco_version == NEW
        store.decide(ids["T3"], role["exact"], "rejected", "bob", comment="concept gone")
        store.decide(ids["T3"], NEW_URI + "exact", "exactMatch", "bob")
        assert [i.term_code for i in store.migration_reviews("tst")] == ["T4", "T5"]
        assert [i.open for i in store.migration_reviews("tst", open_only=False)] == [False, False, True, True]
    # Without --to: the open queue, as CSV on stdout.
    code, out, err = run_cli("migrate", "--scheme", "tst", "--db", store_url)
    assert code == 0 and "2 open item(s) to review in scheme tst" in err
    assert [r["term_code"] for r in csv.DictReader(io.StringIO(out))] == ["T4", "T5"]
    with Store(store_url) as store:
        # Back to the old version: T1, T4, T5 are there; T2 relabelled back; T3 (new URI) is gone.
        report = store.migrate_scheme("tst", OLD)
        assert (report.carried_over, report.relabelled, report.replaced, report.gone) == (3, 1, 1, 0)


def test_dry_run_writes_nothing(store_url: str, versions: dict[str, object], tmp_path: Path) -> None:
    _setup(store_url, versions, tmp_path)
    before = snapshot(store_url)
    code, out, _ = run_cli("migrate", "--scheme", "tst", "--to", NEW, "--dry-run", "--db", store_url)
    assert code == 0 and "(dry run, nothing written)" in out and "1 gone without candidate" in out
    assert snapshot(store_url) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--scheme", "tst", "--to", "v9"),
            f"error: no taxonomy version 'esco v9' in the store (imported: esco {OLD}, esco {NEW}; "
            "import it first with import-taxonomy --version)",
        ),
        (("--scheme", "nope", "--to", NEW), "error: no source scheme 'nope' in the store (schemes: tst)"),
        (("--scheme", "nope"), "error: no source scheme 'nope' in the store (schemes: tst)"),
        (("--scheme", "tst", "--to", OLD), f"error: scheme 'tst' already targets esco {OLD}"),
        (
            ("--scheme", "tst", "--to", NEW, "--name", "other"),
            f"error: no taxonomy version 'other {NEW}' in the store (imported: esco {OLD}, esco {NEW}; "
            "import it first with import-taxonomy --version)",
        ),
    ],
)
def test_bad_migrations_are_one_line_and_change_nothing(
    store_url: str, versions: dict[str, object], tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    _setup(store_url, versions, tmp_path)
    before = snapshot(store_url)
    code, out, err = run_cli("migrate", *args, "--db", store_url)
    assert (code, out, err.strip().splitlines()) == (2, "", [message])
    assert snapshot(store_url) == before


def test_a_scheme_made_before_any_taxonomy_adopts_the_first_one(store_url: str, tmp_path: Path) -> None:
    terms = tmp_path / "terms.csv"
    terms.write_text("code,label\nT1,one\n", encoding="utf-8")
    run_cli_ok("import-terms", "--scheme", "early", "--csv", str(terms), "--db", store_url)
    with Store(store_url) as store:
        assert store.scheme_taxonomy("early") is None
        assert store.decide(store.terms("early")[0].id, "http://x/a", "exactMatch", "a").esco_version is None
    from db.imports import import_taxonomy
    from tests.test_store import tiny_taxonomy

    with Store(store_url) as store:
        import_taxonomy(store, tiny_taxonomy(), "esco", "v1.0.9")
        assert store.decide(store.terms("early")[0].id, "http://x/a", "closeMatch", "a").esco_version == "v1.0.9"


def test_migration_0005_keeps_old_decisions_and_targets_the_latest_taxonomy(store_url: str, tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import text

    from db.imports import import_taxonomy
    from db.store import _alembic_config
    from tests.test_store import BAKER, tiny_taxonomy

    terms = tmp_path / "terms.csv"
    terms.write_text("code,label\nT1,one\n", encoding="utf-8")
    with Store(store_url) as store:
        import_taxonomy(store, tiny_taxonomy(), "esco", "v1.0.9")
        import_taxonomy(store, tiny_taxonomy(), "esco", "v1.1.1")
        run_cli_ok("import-terms", "--scheme", "tst", "--csv", str(terms), "--db", store_url)
        with store.engine.begin() as connection:  # back to before 0005, with a decision written then
            command.downgrade(_alembic_config(connection), "0004")
            connection.execute(
                text(
                    "INSERT INTO decisions (term_id, concept_uri, outcome, curator, decided_at, comment) "
                    "SELECT id, :uri, 'exactMatch', 'alice', CURRENT_TIMESTAMP, '' FROM source_terms"
                ),
                {"uri": BAKER},
            )
    with Store(store_url) as store:  # opening upgrades to head
        target = store.scheme_taxonomy("tst")
        assert target is not None and target.version == "v1.1.1"
        [old] = store.crosswalk("tst")
        assert old.esco_version is None  # not known, and not rewritten
        assert store.decide(old.term_id, BAKER, "closeMatch", "bob").esco_version == "v1.1.1"
