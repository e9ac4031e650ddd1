"""Loading official MELO datasets and hand-made ones; strict validation with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from melo_core import MeloInputError, list_datasets, load_dataset
from melo_core.esco.datasets import DatasetName, parse_dataset_name, write_dataset
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.scorers import create_scorer


def count_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").split("\n") if line.strip())


def test_list_datasets_finds_all_official_ones(melo_data: Path, datasets_dir: Path) -> None:
    names = list_datasets(melo_data)
    on_disk = sorted(p.name for p in datasets_dir.iterdir() if (p / "queries.tsv").is_file())
    assert names == on_disk
    assert len(names) == 47
    assert "deu_q_de_c_de" in names and "nor_q_no_c_no" in names


def test_load_official_dataset(datasets_dir: Path) -> None:
    folder = datasets_dir / "nor_q_no_c_no"
    ds = load_dataset(folder)
    assert len(ds.queries) == count_lines(folder / "queries.tsv") == 96
    assert len(ds.corpus) == count_lines(folder / "corpus_elements.tsv")
    assert sum(len(v) for v in ds.relevant.values()) == count_lines(folder / "annotations.tsv")
    assert (ds.query_language, ds.corpus_languages, ds.kind) == ("no", ("no",), "monolingual")
    # Every corpus element has its ESCO concept, and all relevant elements of a query share one.
    assert set(ds.concept_of) == set(ds.corpus_ids)
    for qid, elements in ds.relevant.items():
        assert len({ds.concept_of[e] for e in elements}) == 1, qid
        assert ds.concept_of[elements[0]].startswith("http://data.europa.eu/esco/")


def parsed(name: str) -> DatasetName:
    """An official folder name's parts (parse_dataset_name gives None for other names)."""
    result = parse_dataset_name(name)
    assert result is not None
    return result


def test_dataset_kinds_are_parsed_from_folder_names() -> None:
    assert parsed("deu_q_de_c_de").kind == "monolingual"
    assert parsed("deu_q_de_c_en").kind == "cross-lingual"
    multi = parsed("bel_q_fr_c_de_en_fr_nl")
    assert multi.corpus_languages == ("de", "en", "fr", "nl") and multi.kind == "multilingual"
    assert parse_dataset_name("my custom set") is None


def test_concept_mapping_is_optional_and_evaluation_works_without_it(tiny_dataset: Path) -> None:
    ds = load_dataset(tiny_dataset)
    assert ds.concept_of == {}
    result = evaluate(ds, create_scorer("char-tfidf"), Protocol("trec", 0))
    assert result.metrics["mrr"] == pytest.approx(1.0)


def test_write_then_load_round_trip(tiny_dataset: Path, tmp_path: Path) -> None:
    ds = load_dataset(tiny_dataset)
    out = write_dataset(ds, tmp_path / "copy" / "tst_q_en_c_en")
    again = load_dataset(out)
    assert (again.query_ids, again.queries, again.corpus_ids, again.corpus, again.relevant) == (
        ds.query_ids,
        ds.queries,
        ds.corpus_ids,
        ds.corpus,
        ds.relevant,
    )


@pytest.mark.parametrize("missing", ["queries.tsv", "corpus_elements.tsv", "annotations.tsv"])
def test_missing_file_is_named(tiny_dataset: Path, missing: str) -> None:
    (tiny_dataset / missing).unlink()
    with pytest.raises(MeloInputError, match=f"missing {missing}") as info:
        load_dataset(tiny_dataset)
    assert str(tiny_dataset) in str(info.value)


def test_annotation_with_unknown_id_names_file_and_line(tiny_dataset: Path) -> None:
    qrels = tiny_dataset / "annotations.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8") + "Q2\t0\tC99\t1\n", encoding="utf-8")
    with pytest.raises(MeloInputError) as info:
        load_dataset(tiny_dataset)
    assert str(info.value) == f"{qrels}:5: corpus element id 'C99' is not in corpus_elements.tsv"


def test_undecodable_byte_names_file_and_line(tiny_dataset: Path) -> None:
    corpus = tiny_dataset / "corpus_elements.tsv"
    corpus.write_bytes(corpus.read_bytes() + b"C6\tb\xe4cker\n")
    with pytest.raises(MeloInputError, match="not valid UTF-8") as info:
        load_dataset(tiny_dataset)
    assert info.value.line == 6 and info.value.path == corpus


def test_wrong_number_of_fields_names_line(tiny_dataset: Path) -> None:
    queries = tiny_dataset / "queries.tsv"
    queries.write_text("Q1\tdata scientist\nQ2 baker\n", encoding="utf-8")
    with pytest.raises(MeloInputError, match="expected 2 tab-separated fields, found 1") as info:
        load_dataset(tiny_dataset)
    assert info.value.line == 2
