"""The language of a file of titles (melo_core.linking.language_id): detected from its first titles on
real MELO queries and job-ad titles, and `link --input` ranking with it when --query-lang is not given;
of one title (`link --query`) only when py3langid is sure of it."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from db.testing import run_cli
from melo_core.esco.taxonomy import reader_languages
from melo_core.files.tsv import read_text
from melo_core.linking import language_id
from melo_core.linking.bulk import sample_titles
from melo_core.linking.language_id import TITLE_CONFIDENCE, detect_language, detect_title_language
from tests.conftest import linked_slice, write_workbook

TITLES_CSV = Path(__file__).resolve().parent.parent.parent / "shared" / "jobbert" / "titles.csv"


def queries(datasets_dir: Path, name: str) -> list[str]:
    lines = (datasets_dir / name / "queries.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines]


def write_titles(path: Path, titles: list[str]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["title"])
        writer.writerows([t] for t in titles)
    return path


@pytest.mark.parametrize(
    ("dataset", "language"),
    # The closest pairs: Danish/Norwegian/Swedish, Croatian/Slovenian (and Bosnian, outside ESCO).
    [("dnk_q_da_c_en", "da"), ("nor_q_no_c_en", "no"), ("swe_q_sv_c_en", "sv"), ("hrv_q_hr_c_en", "hr"),
     ("svn_q_sl_c_en", "sl"), ("usa_q_en_c_en", "en"), ("bgr_q_bg_c_en", "bg"), ("bel_q_nl_c_en", "nl")],
)  # fmt: skip
def test_a_column_of_national_titles_gets_its_language(datasets_dir: Path, dataset: str, language: str) -> None:
    detection = detect_language(queries(datasets_dir, dataset))
    assert detection.language == language, detection
    assert detection.agreement >= 0.8


def test_job_ad_titles_are_english() -> None:
    if not TITLES_CSV.is_file():
        pytest.skip(f"{TITLES_CSV} not found")
    with TITLES_CSV.open(encoding="utf-8-sig", newline="") as handle:
        titles = [row["vacancyTitle"] for row in csv.DictReader(handle)]
    for start in range(0, 4000, 400):  # ten files of 400 titles
        assert detect_language(titles[start : start + 400]).language == "en"


def test_too_few_titles_or_two_languages_half_and_half_stay_unknown(datasets_dir: Path) -> None:
    few = detect_language(["Koch", "Köchin", "", "Koch"])
    assert few.language is None and few.titles == 2
    assert "too few" in few.describe()
    french, dutch = queries(datasets_dir, "bel_q_fr_c_en"), queries(datasets_dir, "bel_q_nl_c_en")
    mixed = french[:200] + dutch[:200]
    random.Random(1).shuffle(mixed)
    detection = detect_language(mixed)
    assert detection.language is None and detection.agreement < 0.8
    assert "do not agree" in detection.describe()


def test_one_title_gets_a_language_only_when_py3langid_is_sure_of_it(datasets_dir: Path) -> None:
    """Single national titles: many are named, and those rightly; short ones stay unknown."""
    datasets = {"dnk_q_da_c_en": "da", "nor_q_no_c_en": "no", "swe_q_sv_c_en": "sv", "hrv_q_hr_c_en": "hr",
                "svn_q_sl_c_en": "sl", "deu_q_de_c_de": "de", "bgr_q_bg_c_en": "bg", "bel_q_nl_c_en": "nl"}  # fmt: skip
    named = right = total = 0
    for dataset, language in datasets.items():
        for title in queries(datasets_dir, dataset)[:150]:
            detection = detect_title_language(title)
            total += 1
            if detection.language:
                assert detection.confidence is not None and detection.confidence >= TITLE_CONFIDENCE
                named, right = named + 1, right + (detection.language == language)
    assert named >= 0.25 * total and right >= 0.98 * named, (total, named, right)
    short = detect_title_language("lege")
    assert short.language is None and "below 90%" in short.describe()
    german = detect_title_language("Krankenschwester in der Intensivpflege")
    assert german.language == "de" and "detected from the title" in german.describe()


def test_job_ad_titles_named_one_by_one_are_english() -> None:
    if not TITLES_CSV.is_file():
        pytest.skip(f"{TITLES_CSV} not found")
    with TITLES_CSV.open(encoding="utf-8-sig", newline="") as handle:
        titles = [row["vacancyTitle"] for row in csv.DictReader(handle)][:2000]
    named = [d.language for d in map(detect_title_language, titles) if d.language]
    assert named and named.count("en") >= 0.98 * len(named)


def test_link_input_ranks_a_file_in_its_detected_language(nor_data: Path, datasets_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The detected language picks the variant, as --query-lang does: Norwegian titles against the
    Norwegian labels are monolingual, English ones cross-lingual; a given --query-lang wins."""
    norwegian = write_titles(tmp_path / "no.csv", queries(datasets_dir, "nor_q_no_c_no")[:60])
    english = write_titles(tmp_path / "en.csv", queries(datasets_dir, "usa_q_en_c_en")[:60])
    assert sample_titles(norwegian, "title", rows=10) == queries(datasets_dir, "nor_q_no_c_no")[:10]
    assert sample_titles("s3://feeds/2026-11/", "title") is None  # not on this machine: not read
    # a workbook's sample reads its sheet no further than the rows sampled (the header, then 10)
    titles = queries(datasets_dir, "nor_q_no_c_no")[:60]
    book = write_workbook(tmp_path / "no.xlsx", [("id", "title"), *((i, t) for i, t in enumerate(titles))])
    asked: list[int | None] = []

    def reading(path: Path, sheet_rows: int | None = None) -> str:
        asked.append(sheet_rows)
        return read_text(path, sheet_rows)

    monkeypatch.setattr("melo_core.linking.bulk.read_text", reading)
    assert sample_titles(book, "title", rows=10) == titles[:10] and asked == [11]
    head = read_text(book, sheet_rows=11).splitlines()
    assert len(head) == 11 and head[0] == "id,title" and head[10].startswith("9,")
    common = ("--data", str(nor_data), "--column", "title", "--langs", "no", "--pipeline", "lexical", "--top", "2")
    for path, language, variant in ((norwegian, "no", "monolingual"), (english, "en", "cross-lingual")):
        code, _, stderr = run_cli("link", "--input", str(path), "--out", str(tmp_path / f"{language}.out.csv"), *common)
        assert code == 0, stderr
        assert f"query language: {language} (detected from 60 titles" in stderr
        assert f"pipeline lexical ({variant} variant" in stderr
    code, _, stderr = run_cli("link", "--input", str(english), "--out", str(tmp_path / "given.csv"),
                              "--query-lang", "no", *common)  # fmt: skip
    assert code == 0, stderr
    assert "detected" not in stderr and "pipeline lexical (monolingual variant" in stderr


def test_link_ranks_the_labels_of_the_query_language_and_english_by_default(
    melo_data: Path, datasets_dir: Path, tmp_path: Path
) -> None:
    """Without --langs, `link` ranks the query language's labels and English ones (as the Link page
    does); all languages only while the query language is unknown, or with --langs all."""
    data = linked_slice(tmp_path / "data", melo_data, ("processed/melo/nor_q_no_c_no", "processed/melo/nor_q_no_c_en"))
    norwegian = write_titles(tmp_path / "no.csv", queries(datasets_dir, "nor_q_no_c_no")[:40])
    common = ("--data", str(data), "--pipeline", "lexical", "--top", "1")
    code, _, stderr = run_cli("link", "--input", str(norwegian), "--column", "title", "--out", str(tmp_path / "a.csv"),
                              *common)  # fmt: skip
    assert code == 0, stderr
    assert "label languages: no, en (the query language and English; --langs sets them)" in stderr
    code, stdout, stderr = run_cli("link", "--query", "lege", *common)
    assert code == 0, stderr
    assert "query language: unknown (one title" in stderr
    assert "label languages: all (the query language unknown" in stderr and stdout.strip()
    code, stdout, stderr = run_cli("link", "--query", "Kontrolloperatører innen metallproduksjon", *common)
    assert code == 0, stderr
    assert "query language: no (detected from the title" in stderr
    assert "label languages: no, en (the query language and English" in stderr and stdout.strip()
    code, _, stderr = run_cli("link", "--query", "lege", "--query-lang", "en", *common)
    assert code == 0, stderr
    assert "label languages: en (the query language and English" in stderr
    code, _, stderr = run_cli("link", "--query", "lege", "--query-lang", "no", "--langs", "all", *common)
    assert code == 0, stderr
    assert "label languages" not in stderr and "monolingual variant" in stderr


def test_prepare_readies_the_label_languages_link_will_rank(melo_data: Path, tmp_path: Path) -> None:
    """`prepare --query-lang L` without --langs prepares what `link` then ranks by default: L and
    English (not all 21 languages); without --query-lang, or with --langs all, every language."""
    data = linked_slice(tmp_path / "data", melo_data, ("processed/melo/nor_q_no_c_no", "processed/melo/nor_q_no_c_en"))
    common = ("prepare", "--data", str(data), "--pipeline", "lexical", "--quiet")
    code, stdout, stderr = run_cli(*common, "--query-lang", "no")
    assert code == 0, stderr
    assert "lexical: ready over no, en" in stdout
    code, stdout, stderr = run_cli(*common, "--query-lang", "no", "--langs", "all")
    assert code == 0, stderr
    assert "lexical: ready over all languages" in stdout
    code, stdout, stderr = run_cli(*common)
    assert code == 0, stderr
    assert "lexical: ready over all languages" in stdout


def test_reader_languages_are_the_query_language_and_english_the_taxonomy_has() -> None:
    assert reader_languages("no", ["en", "no", "de"]) == ("no", "en")
    assert reader_languages("en", ["en", "no"]) == ("en",)
    assert reader_languages("el", ["en", "no"]) == ("en",)
    assert reader_languages("no", ["de"]) == ()
    assert reader_languages(None, ["en", "no"]) == ()


def test_the_language_model_is_unpacked_once_into_the_cache_and_reads_as_py3langid_own(
    datasets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py3langid's model is LZMA-compressed; unpacked once into the cache folder, a later process
    reads it from there and names every title as py3langid's own loader does. A damaged copy is
    unpacked again."""
    import py3langid.modelio
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    def fresh_process() -> None:
        language_id._model.cache_clear()
        language_id._cached_identifier.cache_clear()

    titles = [
        t for name in ("dnk_q_da_c_en", "deu_q_de_c_de", "bgr_q_bg_c_en") for t in queries(datasets_dir, name)[:60]
    ]
    own = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    own.set_languages([x for x in language_id.ESCO_LANGUAGES if x in own.nb_classes])
    expected = [own.classify(t) for t in titles]
    monkeypatch.setenv("MELO_CACHE", str(tmp_path))
    try:
        fresh_process()
        assert [language_id._identifier(language_id.ESCO_LANGUAGES, True).classify(t) for t in titles] == expected
        (unpacked,) = (tmp_path / "language_id").glob("model-*.pickle")
        fresh_process()
        with monkeypatch.context() as patched:
            patched.setattr(py3langid.modelio, "load_model", lambda path: pytest.fail("unpacked again"))
            named = [detect_title_language(t) for t in titles]
        assert [(d.confidence, d.language) for d in named] == [
            (float(p), lang if p >= TITLE_CONFIDENCE else None) for lang, p in expected
        ]
        unpacked.write_bytes(b"not a pickle")
        fresh_process()
        assert [language_id._identifier(language_id.ESCO_LANGUAGES, True).classify(t) for t in titles] == expected
        assert unpacked.stat().st_size > 1_000_000
    finally:
        fresh_process()  # the other tests' identifiers read the session's cache again
