"""Graded similarity (issue 89, item 5): the crosswalk grades, the unrelated pairs drawn, Spearman
through the linker, and the `graded` experiment's rows."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import Crosswalk, SourceTerm
from melo_core.esco.taxonomy import Concept, LanguageLabels, Taxonomy
from melo_core.evaluation.experiments import load_experiment, run_experiment
from melo_core.evaluation.experiments.results import Provenance, append_results, read_results
from melo_core.evaluation.graded import UNRELATED, graded_pairs, graded_similarity, related_pairs, spearman
from ui.graded import graded_table

ROOT = Path(__file__).resolve().parent.parent


def _concept(number: int, label: str) -> Concept:
    return Concept(f"http://x/occupation/{number}", number, "occupation", {"en": LanguageLabels(label)})


def _taxonomy(labels: list[str]) -> Taxonomy:
    return Taxonomy(_concept(i, label) for i, label in enumerate(labels))


def _uri(number: int) -> str:
    return f"http://x/occupation/{number}"


def _crosswalk(matches: dict[str, dict[int, str]], name: str = "tst_en") -> Crosswalk:
    return Crosswalk(name, [SourceTerm(title, title, matches={_uri(n): r for n, r in m.items()})
                            for title, m in matches.items()])  # fmt: skip


def test_grades_follow_the_relations() -> None:
    taxonomy = _taxonomy([f"concept {i}" for i in range(6)])
    crosswalk = _crosswalk({"nurse": {0: "exactMatch", 1: "closeMatch", 2: "narrowMatch", 3: "broadMatch",
                                      99: "exactMatch"}, "": {4: "exactMatch"}})  # fmt: skip
    grades = {p.concept_uri: p.grade for p in related_pairs(crosswalk, taxonomy)}
    # exact 3, close 2, narrow and broad 1; a concept outside the taxonomy and an empty title are left out
    assert grades == {_uri(0): 3, _uri(1): 2, _uri(2): 1, _uri(3): 1}


def test_unrelated_pairs_are_drawn_deterministically_and_never_related() -> None:
    taxonomy = _taxonomy([f"concept {i}" for i in range(40)])
    crosswalk = _crosswalk({f"term {t}": {(t * 3 + k) % 40: ("exactMatch", "closeMatch", "narrowMatch")[k]
                                          for k in range(1 + t % 3)} for t in range(25)})  # fmt: skip
    pairs = graded_pairs(crosswalk, taxonomy, seed=7)
    assert pairs == graded_pairs(crosswalk, taxonomy, seed=7)
    assert pairs != graded_pairs(crosswalk, taxonomy, seed=8)
    related = {(p.code, p.concept_uri) for p in related_pairs(crosswalk, taxonomy)}
    unrelated = [p for p in pairs if p.grade == UNRELATED]
    assert len(unrelated) == len(related)  # as many unrelated pairs as related ones
    assert not {(p.code, p.concept_uri) for p in unrelated} & related
    assert len({(p.code, p.concept_uri) for p in unrelated}) == len(unrelated)  # never the same one twice
    # drawn from the crosswalk's own targets: concepts no term maps to are never drawn
    targets = {uri for _, uri in related}
    assert {p.concept_uri for p in unrelated} <= targets
    # a sample of terms: deterministic, each term whole, file order kept
    sample = graded_pairs(crosswalk, taxonomy, seed=7, terms=5)
    assert sample == graded_pairs(crosswalk, taxonomy, seed=7, terms=5)
    codes = list(dict.fromkeys(p.code for p in sample))
    assert len(codes) == 5 and codes == sorted(codes, key=lambda c: int(c.split()[1]))
    per_term = Counter(p.code for p in sample if p.grade)
    assert all(per_term[c] == 1 + int(c.split()[1]) % 3 for c in codes)


def test_a_term_related_to_every_target_draws_from_the_taxonomy() -> None:
    taxonomy = _taxonomy(["a", "b", "c"])
    pairs = graded_pairs(_crosswalk({"only": {0: "exactMatch", 1: "closeMatch"}}), taxonomy)
    assert [p.concept_uri for p in pairs if p.grade == UNRELATED] == [_uri(2)]


def test_spearman_on_known_orderings() -> None:
    assert spearman([0.1, 0.2, 0.3, 0.9], [0, 1, 2, 3]) == pytest.approx(1.0)
    assert spearman([0.9, 0.3, 0.2, 0.1], [0, 1, 2, 3]) == pytest.approx(-1.0)
    # ties share their mean rank: ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4)
    assert spearman([0.1, 0.1, 0.5, 0.7], [0, 1, 2, 3]) == pytest.approx(0.9486833)
    assert math.isnan(spearman([0.5, 0.5, 0.5], [0, 1, 3]))


def test_scores_through_the_linker_follow_a_known_ordering(tmp_path: Path) -> None:
    """Each term's exact concept bears its own words, its close one shares one word, its narrow
    one shares a few letters, the others share nothing: char TF-IDF orders them by grade."""
    labels = ["aaaa bbbb", "aaaa qqqq", "aab zzzz", "xxxx yyyy", "xxxx wwww", "xxy vvvv"]
    taxonomy = _taxonomy(labels)
    crosswalk = _crosswalk({"aaaa bbbb": {0: "exactMatch", 1: "closeMatch", 2: "narrowMatch"},
                            "xxxx yyyy": {3: "exactMatch", 4: "closeMatch", 5: "narrowMatch"}})  # fmt: skip
    result = graded_similarity(crosswalk, taxonomy, "char-tfidf", cache_dir=tmp_path)
    scores, grades = result.scores["char-tfidf"], [p.grade for p in result.pairs]
    by_grade: dict[int, list[float]] = {}
    for score, grade in zip(scores, grades, strict=True):
        by_grade.setdefault(grade, []).append(score)
    assert min(by_grade[3]) > max(by_grade[2]) > 0 and min(by_grade[2]) > max(by_grade[1])
    assert min(by_grade[1]) > max(by_grade[0])
    # ordered by grade, it falls short of 1 only where scores differ within a grade
    assert result.spearman == {"char-tfidf": pytest.approx(spearman(scores, grades))}
    assert spearman([g + i / 1000 for i, g in enumerate(grades)], grades) < result.spearman["char-tfidf"] < 1.0


def test_a_fusion_reports_its_fused_score_and_each_component(tmp_path: Path) -> None:
    taxonomy = _taxonomy(["aaaa bbbb", "aaaa qqqq", "xxxx yyyy", "xxxx wwww"])
    crosswalk = _crosswalk({"aaaa bbbb": {0: "exactMatch", 1: "closeMatch"},
                            "xxxx yyyy": {2: "exactMatch", 3: "closeMatch"}})  # fmt: skip
    spec = "wsum:0.5*char-tfidf+0.5*word-tfidf"
    result = graded_similarity(crosswalk, taxonomy, spec, cache_dir=tmp_path)
    assert set(result.spearman) == {spec, f"{spec}/char-tfidf", f"{spec}/word-tfidf"}
    assert all(len(values) == len(result.pairs) == 8 for values in result.scores.values())
    assert result.spearman[spec] > 0.8


def test_the_graded_experiment_appends_spearman_rows(nor_data: Path, tmp_path: Path) -> None:
    path = tmp_path / "graded.toml"
    path.write_text('description = "graded"\n[graded]\nscorers = ["lexical", "char-tfidf"]\n'
                    'crosswalks = ["nor_no"]\nterms = 12\nseed = 1\n', encoding="utf-8")  # fmt: skip
    results = tmp_path / "results.csv"
    run_experiment(load_experiment(path), nor_data, results=results, command="test", show_progress=False,
                   say=lambda message: None)  # fmt: skip
    rows = read_results(results)
    assert {r["metric"] for r in rows} == {"spearman_grade"}
    by_key = {(r["dataset"], r["pipeline"]): r for r in rows}
    assert set(by_key) == {(dataset, pipeline) for dataset in ("nor_no", "mean:crosswalks")
                           for pipeline in ("lexical", "lexical/char-tfidf", "char-tfidf")}  # fmt: skip
    nor = by_key[("nor_no", "lexical")]
    assert int(nor["queries"]) > 2 * 12 and nor["command"] == "test"
    assert all(0.0 < float(r["value"]) <= 1.0 for r in rows)  # char n-grams do follow the grades
    assert by_key[("mean:crosswalks", "char-tfidf")]["value"] == by_key[("nor_no", "char-tfidf")]["value"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('scorers = ["lexical"]\nterms = -1', "graded.terms"),
        ('scorers = ["lexical"]\ncrosswalks = "some"', "graded.crosswalks"),
        ('scorers = ["no-such-scorer"]', "graded.scorers"),
        ('scorers = ["lexical"]\nlanguages = ["en"]', "unknown key graded.languages"),
    ],
)
def test_a_bad_graded_table_is_refused_by_its_key(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f'description = "bad"\n[graded]\n{table}\n', encoding="utf-8")
    with pytest.raises(MeloInputError, match=message):
        load_experiment(path)


def _provenance(run: str) -> Provenance:
    return Provenance(run=run, commit="abc", models="", data_stamp="", command="experiment run graded-similarity",
                      machine="test", date=f"2026-12-06T{run[-7:-5]}:00:00+00:00")  # fmt: skip


def test_the_benchmark_page_shows_the_latest_spearman_per_crosswalk(tmp_path: Path, melo_data: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from streamlit.testing.v1 import AppTest

    from db.store import Store

    results = tmp_path / "results.csv"
    row = {"metric": "spearman_grade", "queries": 100, "seconds": 1.0}
    append_results(results, "graded-similarity", [{**row, "dataset": "ita_it", "pipeline": "best", "value": 0.1}],
                   _provenance("20261206T010000Z"))  # fmt: skip
    append_results(results, "graded-similarity", [
        {**row, "dataset": "ita_it", "pipeline": "best", "value": 0.6},
        {**row, "dataset": "ita_it", "pipeline": "best/domain", "value": 0.5},
        {**row, "dataset": "nor_no", "pipeline": "best", "value": 0.4},
        {**row, "dataset": "nor_no", "pipeline": "best/domain", "value": 0.3},
        {**row, "dataset": "mean:crosswalks", "pipeline": "best", "value": 0.9},  # the runner's: recomputed
        {**row, "dataset": "ita_it", "pipeline": "best", "metric": "mrr", "value": 0.8},  # another measure
    ], _provenance("20261206T020000Z"))  # fmt: skip
    monkeypatch.setattr("melo_core.evaluation.experiments.results.RESULTS_FILE", results)
    database = tmp_path / "melo.db"
    Store(f"sqlite:///{database}", create=True).close()
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{database}")
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    app = AppTest.from_file(str(ROOT / "pages" / "5_Benchmark.py"), default_timeout=120).run()
    assert not app.exception
    assert "Graded similarity" in [h.value for h in app.subheader]
    table = app.dataframe[0].value
    assert list(table.columns) == ["crosswalk", "best", "best/domain"]
    assert table.values.tolist() == [["ita_it", 0.6, 0.5], ["nor_no", 0.4, 0.3], ["mean", pytest.approx(0.5),
                                                                                  pytest.approx(0.4)]]  # fmt: skip


def test_no_graded_rows_no_section(tmp_path: Path) -> None:
    assert graded_table([{"experiment": "x", "dataset": "ita_it", "pipeline": "best", "metric": "mrr", "value": "1",
                          "date": "", "run": ""}]).empty  # fmt: skip
