"""Job-ad titles as a benchmark (``eval --titles``): concept-level ranking over chosen label
languages, bad files, and known mentions from every crosswalk (titles belong to no country)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.taxonomy import Taxonomy, cached_taxonomy_from_melo
from melo_core.esco.titles import titles_dataset
from melo_core.scorers.known_mentions import crosswalk_mentions, dataset_mentions
from tests.conftest import write_workbook
from tests.test_cli import cli

JOBBERT = Path(__file__).resolve().parent.parent.parent / "shared" / "jobbert" / "titles.csv"


@pytest.fixture(scope="module")
def taxonomy(melo_data: Path) -> Taxonomy:
    return cached_taxonomy_from_melo(melo_data)


def write_titles(
    path: Path,
    rows: list[tuple[str, str]],
    header: tuple[str, str] = ("vacancyTitle", "conceptUri"),
    delimiter: str = ",",
) -> Path:
    with path.open("w", encoding="utf-8-sig" if delimiter == ";" else "utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(["", *header])
        writer.writerows((i, *row) for i, row in enumerate(rows))
    return path


def english_labels(taxonomy: Taxonomy, n: int) -> list[tuple[str, str]]:
    """(label, URI) of the first ``n`` concepts that have at least two English labels."""
    by_concept: dict[str, list[str]] = {}
    for form in taxonomy.surface_forms(["en"]):
        by_concept.setdefault(form.concept_uri, []).append(form.text)
    return [(labels[0], uri) for uri, labels in by_concept.items() if len(labels) > 1][:n]


def test_titles_become_a_dataset_over_the_chosen_languages(taxonomy: Taxonomy, tmp_path: Path) -> None:
    labels = english_labels(taxonomy, 5)
    path = write_titles(tmp_path / "ads.csv", [*labels, ("", labels[0][1]), ("Baker", "http://example.org/gone")])
    dataset, report = titles_dataset(path, taxonomy, ["en"])
    assert dataset.name == "titles_ads_en"
    assert (report.rows, report.kept, report.empty, report.unknown_concept) == (7, 5, 1, 1)
    assert dataset.queries == [title for title, _ in labels]
    # every English label of the title's concept is relevant, none of another language or concept
    first = dataset.relevant[dataset.query_ids[0]]
    assert len(first) > 1
    assert {dataset.concept_of[e] for e in first} == {labels[0][1]}
    assert all("_en_" in e for e in dataset.corpus_ids)
    german, _ = titles_dataset(path, taxonomy, ["de", "en"])
    assert len(german.corpus) > len(dataset.corpus)
    # a spreadsheet's CSV (';', with a byte-order mark) gives the same dataset
    spreadsheet = write_titles(tmp_path / "sheet.csv", [*labels, ("", labels[0][1]), ("Baker", "http://example.org/gone")],
                               delimiter=";")  # fmt: skip
    assert titles_dataset(spreadsheet, taxonomy, ["en"])[0].queries == dataset.queries
    unicode_text = tmp_path / "sheet.txt"  # a spreadsheet's "Unicode Text": UTF-16 with its mark, tabs
    unicode_text.write_bytes(spreadsheet.read_text(encoding="utf-8-sig").replace(";", "\t").encode("utf-16"))
    assert titles_dataset(unicode_text, taxonomy, ["en"])[0].queries == dataset.queries
    below = tmp_path / "below.csv"  # empty lines above the header, as a sheet with empty rows saves
    below.write_text("\r\n\r\n" + spreadsheet.read_text(encoding="utf-8-sig"), encoding="utf-8")
    assert titles_dataset(below, taxonomy, ["en"])[0].queries == dataset.queries
    # an Excel workbook's first sheet, the same rows (an empty row between them is skipped)
    rows: list[Sequence[object]] = [["vacancyTitle", "conceptUri"], *map(list, labels[:2]), [None, None],
                                    *map(list, labels[2:]), ["", labels[0][1]],
                                    ["Baker", "http://example.org/gone"]]  # fmt: skip
    workbook, workbook_report = titles_dataset(write_workbook(tmp_path / "ads.xlsx", rows), taxonomy, ["en"])
    assert (workbook.name, workbook.queries, workbook.relevant) == (dataset.name, dataset.queries, dataset.relevant)
    assert (workbook_report.rows, workbook_report.kept, workbook_report.empty) == (7, 5, 1)
    # one language may come as a bare string: "en", not the languages "e" and "n"
    bare, _ = titles_dataset(path, taxonomy, "en")
    assert bare.corpus_ids == dataset.corpus_ids


def test_bad_titles_files_say_what_is_wrong(taxonomy: Taxonomy, tmp_path: Path) -> None:
    labels = english_labels(taxonomy, 2)
    wrong = write_titles(tmp_path / "wrong.csv", labels, header=("title", "uri"))
    with pytest.raises(MeloInputError, match=r"no column 'vacancyTitle' or 'conceptUri'.*'title', 'uri'"):
        titles_dataset(wrong, taxonomy, ["en"])
    dataset, _ = titles_dataset(wrong, taxonomy, ["en"], title_column="title", uri_column="uri")
    assert len(dataset.queries) == 2
    gone = write_titles(tmp_path / "gone.csv", [("Baker", "http://example.org/gone")])
    with pytest.raises(MeloInputError, match="no title to evaluate"):
        titles_dataset(gone, taxonomy, ["en"])
    with pytest.raises(MeloInputError, match="no labels in xx"):
        titles_dataset(gone, taxonomy, ["xx"])
    with pytest.raises(MeloInputError, match="not found"):
        titles_dataset(tmp_path / "missing.csv", taxonomy, ["en"])
    latin = tmp_path / "latin.csv"  # a spreadsheet's plain CSV
    latin.write_bytes("vacancyTitle,conceptUri\nBäcker,http://example.org/baker\n".encode("cp1252"))
    with pytest.raises(MeloInputError, match=r"byte 0xe4 is not valid UTF-8 .*'CSV UTF-8'") as info:
        titles_dataset(latin, taxonomy, ["en"])
    assert info.value.line == 2


def test_titles_take_known_mentions_from_every_crosswalk(melo_data: Path) -> None:
    every = crosswalk_mentions(melo_data, None)
    assert len(dataset_mentions(melo_data, "titles_ads_en").texts) == len(every.texts)
    assert len(dataset_mentions(melo_data, "nor_q_no_c_no").texts) < len(every.texts)


def test_eval_titles_ranks_concepts(melo_data: Path, taxonomy: Taxonomy, tmp_path: Path) -> None:
    labels = english_labels(taxonomy, 20)
    path = write_titles(tmp_path / "ads.csv", labels)
    out = tmp_path / "run.csv"
    result = cli("eval", "--data", str(melo_data), "--titles", str(path), "--scorers", "char-tfidf",
                 "--out", str(out), "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "20 of 20 titles" in result.stdout
    (row,) = list(csv.DictReader(out.open(encoding="utf-8")))
    assert (row["dataset"], row["scorer"], row["depth"], row["queries"]) == ("titles_ads_en", "char-tfidf", "100", "20")
    # a title that is one of its concept's labels ranks that concept first: concept-level, so the
    # concept's other labels do not push a wrong concept down to rank 2
    assert float(row["mrr"]) == 1.0 and float(row["acc@100"]) == 1.0
    missing = cli("eval", "--data", str(melo_data), "--titles", str(path), "--title-column", "job",
                  "--scorers", "char-tfidf")  # fmt: skip
    assert missing.returncode == 2 and "no column 'job'" in missing.stderr


@pytest.mark.skipif(not JOBBERT.is_file(), reason="job-ad titles not found beside the project")
def test_eval_titles_on_real_job_ads(melo_data: Path, tmp_path: Path) -> None:
    """A slice of the validation titles: noisy ads rank their concept far above chance."""
    out = tmp_path / "run.csv"
    result = cli("eval", "--data", str(melo_data), "--titles", str(JOBBERT), "--scorers", "char-tfidf,random",
                 "--limit-queries", "200", "--out", str(out), "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    mrr = {r["scorer"]: float(r["mrr"]) for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert mrr["char-tfidf"] > 0.15 > 10 * mrr["random"]
