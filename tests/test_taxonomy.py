"""The ESCO taxonomy from the ESCO CSV export and from the union of the MELO corpora."""

from __future__ import annotations

import csv
import gc
from pathlib import Path
from typing import cast

import pytest

import melo_core.esco.taxonomy as taxonomy_module
from melo_core import MeloInputError, Taxonomy, load_dataset, taxonomy_from_esco_csv
from melo_core.esco.taxonomy import (
    ISCO_GROUP,
    OCCUPATION,
    Concept,
    add_esco_details,
    cached_taxonomy_from_melo,
    taxonomy_from_melo,
)


@pytest.fixture(scope="module")
def melo_union(melo_data: Path) -> Taxonomy:
    return taxonomy_from_melo(melo_data)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_esco_csv_import_matches_the_files(esco_csv: Path) -> None:
    taxonomy = taxonomy_from_esco_csv(esco_csv)
    occupations = read_rows(esco_csv / "occupations_en.csv")
    groups = read_rows(esco_csv / "ISCOGroups_en.csv")
    assert len(taxonomy) == len({r["conceptUri"] for r in occupations} | {r["conceptUri"] for r in groups})
    assert taxonomy.languages == ["en"]
    # ISCO groups first (by code), then occupations.
    kinds = [c.kind for c in taxonomy.concepts]
    assert kinds == [ISCO_GROUP] * len(groups) + [OCCUPATION] * len(occupations)
    codes = cast("list[str]", [c.isco_code for c in taxonomy.concepts[: len(groups)]])  # every ISCO group has a code
    assert codes == sorted(codes)
    row = occupations[0]
    concept = taxonomy.by_uri[row["conceptUri"]]
    labels = concept.labels["en"]
    assert labels.preferred == row["preferredLabel"]
    assert labels.alternative == tuple(a.strip() for a in row["altLabels"].split("\n") if a.strip())
    assert concept.isco_code == row["iscoGroup"]
    assert concept.description == row["description"].strip()
    with_hidden = next(r for r in occupations if r["hiddenLabels"].strip())
    hidden = taxonomy.by_uri[with_hidden["conceptUri"]].labels["en"].hidden
    assert hidden == tuple(h.strip() for h in with_hidden["hiddenLabels"].split("\n") if h.strip())


def test_the_descriptions_language_is_the_exports_and_travels_with_the_descriptions(
    esco_csv: Path, tmp_path: Path
) -> None:
    """English where the export has it (the reader prefers its descriptions), else the export's
    language; a taxonomy given an export's descriptions takes their language too."""
    assert taxonomy_from_esco_csv(esco_csv).description_language == "en"
    rows = read_rows(esco_csv / "occupations_en.csv")[:10]
    with (tmp_path / "occupations_de.csv").open("w", encoding="utf-8", newline="") as handle:  # the name decides
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    german = taxonomy_from_esco_csv(tmp_path)
    assert german.description_language == "de" and any(c.description for c in german.concepts)
    bare = Taxonomy(Concept(c.uri, c.number, c.kind) for c in german.concepts[:5])
    assert bare.description_language == "en" and not any(c.description for c in bare.concepts)
    assert add_esco_details(bare, german) == 5
    assert bare.description_language == "de" and all(c.description for c in bare.concepts)


def test_esco_csv_languages_choose_files_and_name_what_the_folder_has(esco_csv: Path, tmp_path: Path) -> None:
    assert len(taxonomy_from_esco_csv(esco_csv, "en").concepts) == len(taxonomy_from_esco_csv(esco_csv).concepts)
    with pytest.raises(MeloInputError, match=r"no occupations_<lang>.csv file for xx, yy \(the folder has en\)"):
        taxonomy_from_esco_csv(esco_csv, ["xx", "yy"])
    with pytest.raises(MeloInputError, match=r"no occupations_<lang>.csv file found \(download ESCO as CSV\)"):
        taxonomy_from_esco_csv(tmp_path)  # an empty folder


def test_esco_csv_with_wrong_columns_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "occupations_en.csv"
    bad.write_text("conceptUri,preferred_label\nhttp://x,baker\n", encoding="utf-8")
    with pytest.raises(MeloInputError, match="missing column") as info:
        taxonomy_from_esco_csv(tmp_path)
    assert info.value.path == bad and info.value.line == 1


def test_esco_csv_with_undecodable_byte(tmp_path: Path, esco_csv: Path) -> None:
    bad = tmp_path / "occupations_en.csv"
    lines = (esco_csv / "occupations_en.csv").read_bytes().split(b"\n")[:40]
    lines[30] = lines[30] + b"\xff"
    bad.write_bytes(b"\n".join(lines))
    with pytest.raises(MeloInputError, match="not valid UTF-8") as info:
        taxonomy_from_esco_csv(tmp_path)
    assert info.value.line == 31


def test_melo_union_covers_21_languages_and_every_corpus(melo_union: Taxonomy, datasets_dir: Path) -> None:
    assert len(melo_union.languages) == 21
    melo_union.languages.append("xx")  # worked out once, but each caller gets its own list
    assert "xx" not in melo_union.languages and melo_union.missing_languages(["xx", "en"]) == ["xx"]
    # Every concept of every corpus is in the union (datasets come from different ESCO
    # versions, so element numbering differs; concepts are matched by URI).
    for name in ("deu_q_de_c_de", "nor_q_no_c_en", "bgr_q_bg_c_bg"):
        ds = load_dataset(datasets_dir / name)
        assert set(ds.concept_of.values()) <= set(melo_union.by_uri), name
    # A language's labels come from the first monolingual corpus in that language, verbatim;
    # later corpora only add concepts that it lacks.
    first_german = load_dataset(datasets_dir / "aut_q_de_c_de")
    union_german = {(f.concept_uri, f.text) for f in melo_union.surface_forms(["de"])}
    corpus = {
        (first_german.concept_of[c], t) for c, t in zip(first_german.corpus_ids, first_german.corpus, strict=True)
    }
    assert corpus <= union_german
    added_concepts = {uri for uri, _ in union_german - corpus}
    assert added_concepts and not added_concepts & set(first_german.concept_of.values())


def test_esco_csv_and_melo_union_agree_on_concepts(melo_union: Taxonomy, esco_csv: Path) -> None:
    esco = taxonomy_from_esco_csv(esco_csv)
    shared = [c for c in esco.concepts if c.uri in melo_union]
    assert len(shared) >= 0.95 * len(esco)
    same_label = sum(melo_union.by_uri[c.uri].preferred_label(["en"]) == c.labels["en"].preferred for c in shared)
    assert same_label >= 0.95 * len(shared)


def test_preferred_label_takes_one_language_as_a_string(melo_union: Taxonomy) -> None:
    # The MELO union reads German first, so a bare "en" once fell back to the German label.
    concept = next(c for c in melo_union.concepts if {"de", "en"} <= set(c.labels))
    english, german = concept.labels["en"].preferred, concept.labels["de"].preferred
    assert english != german
    assert concept.preferred_label("en") == concept.preferred_label(["en"]) == english
    assert concept.preferred_label("de") == german


def test_form_table_takes_one_language_as_a_string(melo_union: Taxonomy) -> None:
    english = melo_union.form_table(["en"])
    assert melo_union.form_table("en").texts == english.texts
    assert set(melo_union.form_table("en").languages) == {"en"}
    assert [f.text for f in melo_union.surface_forms("en")] == english.texts


def test_a_cached_taxonomy_leaves_its_labels_out_of_the_cycle_collector(
    nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The union holds 75k LanguageLabels, each once an attribute dictionary and two lists: 300k
    # objects that every full collection walked. Slotted, with tuples of strings, only they stay.
    cached_taxonomy_from_melo(nor_data, tmp_path)
    monkeypatch.setattr(taxonomy_module, "_last_loaded", None)  # read it back from its file
    taxonomy = cached_taxonomy_from_melo(nor_data, tmp_path)
    gc.collect()  # untracks the tuples that hold only strings
    labels = [lang for concept in taxonomy.concepts for lang in concept.labels.values()]
    assert len(labels) > 1000 and not any(hasattr(lang, "__dict__") for lang in labels)
    assert not any(gc.is_tracked(lang.alternative) or gc.is_tracked(lang.hidden) for lang in labels)
    with_alternatives = next(lang for lang in labels if lang.alternative)
    assert with_alternatives.surface_forms() == [with_alternatives.preferred, *with_alternatives.alternative]
