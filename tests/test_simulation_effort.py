"""The curator's time as the measure (issue 89, items 1, 4 and 6): the cost model, the kind of
concept a scheme's decisions teach the linker, the boilerplate that teaches no mention, the queue
orders, and the simulation experiment."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from melo_core.crosswalk import load_crosswalk
from melo_core.effort import COSTS, CostModel, margin, queue_order
from melo_core.experiments.config import load_experiment
from melo_core.experiments.results import read_results
from melo_core.experiments.runner import run_experiment
from melo_core.linker import Linker
from melo_core.scheme_learning import Boilerplate, TargetKinds, scheme_kinds, target_kind
from melo_core.simulate import simulate
from melo_core.taxonomy import Concept, LanguageLabels, Taxonomy

OCCUPATION = "http://data.europa.eu/esco/occupation/"
GROUP = "http://data.europa.eu/esco/isco/C"


# -- the cost model ----------------------------------------------------------------------------------


def test_the_cost_model_prices_a_hand_made_replay() -> None:
    # Accept the first (4 s); pick rank 2 (6 + 2) and rank 10 (6 + 10); rank 11 and not found: search (30 s).
    ranks = [1.0, 2.0, 10.0, 11.0, math.inf]
    assert [COSTS.seconds(r) for r in ranks] == [4.0, 8.0, 16.0, 30.0, 30.0]
    assert COSTS.per_100(ranks) == pytest.approx(100 * 88 / 5)
    # A batch proposal: 1.5 s to confirm when right; rejected (1.5 s), the term then costs as usual.
    assert COSTS.seconds(1.0, proposed=True) == 1.5 and COSTS.seconds(3.0, proposed=True) == 1.5 + 9.0
    assert COSTS.per_100([1.0, 3.0], [True, False]) == pytest.approx(100 * (1.5 + 9.0) / 2)
    assert COSTS.per_100([]) == 0.0
    cheaper_search = CostModel(search=20.0)
    assert cheaper_search.seconds(math.inf) == 20.0 and cheaper_search.seconds(1.0) == 4.0


# -- queue orders ------------------------------------------------------------------------------------


def test_queue_orders() -> None:
    confidences = [0.2, 0.9, 0.2, 0.5]
    assert queue_order("file", confidences) == [0, 1, 2, 3]
    assert queue_order("most-confident", confidences) == [1, 3, 0, 2]  # ties in file order
    assert queue_order("least-confident", confidences) == [0, 2, 3, 1]
    shuffled = queue_order("random", confidences, seed=3)
    assert sorted(shuffled) == [0, 1, 2, 3] and shuffled == queue_order("random", [0.0] * 4, seed=3)
    with pytest.raises(ValueError, match="unknown queue order"):
        queue_order("alphabetical", confidences)
    assert margin([0.9, 0.6, 0.1]) == pytest.approx(0.3) and margin([0.4]) == 0.4 and margin([]) == -math.inf


# -- what a scheme's decisions teach ---------------------------------------------------------------


def concept(number: int, uri: str, label: str, isco_code: str | None = None) -> Concept:
    kind = "isco_group" if uri.startswith(GROUP) else "occupation"
    return Concept(uri=uri, number=number, kind=kind, labels={"no": LanguageLabels(preferred=label)},
                   isco_code=isco_code)  # fmt: skip


@pytest.fixture(scope="module")
def norwegian() -> Taxonomy:
    """ISCO groups named as Norway's titles are, and the occupations Norway's crosswalk maps them
    to, named a little otherwise: the pattern that left nor_no's gold at rank 2."""
    return Taxonomy([
        concept(1, f"{GROUP}2222", "Jordmødre", "2222"),
        concept(2, f"{OCCUPATION}midwife", "jordmødrer"),
        concept(3, f"{GROUP}2212", "Legespesialister", "2212"),
        concept(4, f"{OCCUPATION}doctor", "legespesialist"),
        concept(5, f"{GROUP}5132", "Bartendere", "5132"),
        concept(6, f"{OCCUPATION}bartender", "bartendere i bar"),
        concept(7, f"{GROUP}22", "Helsefagarbeidere", "22"),
        concept(8, f"{OCCUPATION}cook", "kokk"),
    ])  # fmt: skip


def test_target_kinds_count_every_relation(norwegian: Taxonomy) -> None:
    assert [target_kind(c) for c in norwegian.concepts[:2]] == ["isco4", "occupation"]
    assert target_kind(norwegian.by_uri[f"{GROUP}22"]) == "isco2"
    kinds = scheme_kinds([(f"{OCCUPATION}bartender", "closeMatch"), (f"{OCCUPATION}cook", "broadMatch"),
                          (f"{OCCUPATION}doctor", "closeMatch"), ("http://unknown", "exactMatch")],
                         norwegian.by_uri)  # fmt: skip
    assert kinds.decisions == 3 and kinds.usual_relation() == "closeMatch"
    offsets = kinds.offsets()
    assert offsets["occupation"] == 0.0 and offsets["isco2"] < offsets["isco4"] < 0.0  # level 4: the likelier group
    # Nothing decided: no preference beyond the prior; ISCO level 4 decisions turn it round.
    groups = scheme_kinds([(f"{GROUP}2222", "exactMatch")] * 6, norwegian.by_uri)
    assert groups.offsets()["isco4"] == 0.0 and groups.offsets()["occupation"] < 0.0


def test_kind_learning_turns_a_rank_two_pattern_into_rank_one(norwegian: Taxonomy, tmp_path: Path) -> None:
    linker = Linker(norwegian, "char-tfidf", ["no"], cache_dir=tmp_path, query_language="no", persist=False)
    [before] = linker.link(["Jordmødre"], top_k=3)
    assert [c.concept_uri for c in before[:2]] == [f"{GROUP}2222", f"{OCCUPATION}midwife"]
    # Three decisions of the scheme, close and broad matches to occupations, teach the kind.
    kinds = TargetKinds()
    for uri, relation in ((f"{OCCUPATION}bartender", "closeMatch"), (f"{OCCUPATION}doctor", "closeMatch"),
                          (f"{OCCUPATION}cook", "broadMatch")):  # fmt: skip
        kinds.observe(norwegian.by_uri[uri], relation)
    [after] = linker.link(["Jordmødre"], top_k=3, kinds=kinds)
    assert after[0].concept_uri == f"{OCCUPATION}midwife" and after[0].rank == 1
    assert after[1].concept_uri == f"{GROUP}2222"
    # No decision yet: the ranking as without.
    [unchanged] = linker.link(["Jordmødre"], top_k=3, kinds=TargetKinds())
    assert [c.concept_uri for c in unchanged] == [c.concept_uri for c in before]


def test_boilerplate_terms_teach_no_mention() -> None:
    labels = [f"{subject} Teachers, Postsecondary" for subject in ("Chemistry", "Physics", "Biology", "History",
                                                                     "Art", "Law")] + ["Registered Nurses",
                                                                                       "Chefs and Head Cooks"]  # fmt: skip
    boilerplate = Boilerplate.of(labels)
    assert boilerplate.common == {"teachers", "postsecondary"}
    assert not boilerplate.teaches_mention("Chemistry Teachers, Postsecondary")  # 2 of 3 words
    assert boilerplate.teaches_mention("Registered Nurses") and boilerplate.teaches_mention("Teachers")
    assert boilerplate.share("Chefs and Head Cooks") == 0.0


def write_crosswalk(folder: Path, terms: dict[str, tuple[str, str, str]]) -> Path:
    """A crosswalk named as Norway's: the benchmark's rule keeps its close matches as gold."""
    path = folder / "nor_no" / "crosswalk.json"
    path.parent.mkdir(parents=True)
    raw = {code: {"title": title, "description": "", "matches": {uri: relation}}
           for code, (title, uri, relation) in terms.items()}  # fmt: skip
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    return path


def test_the_simulated_curator_learns_the_kind_and_saves_time(norwegian: Taxonomy, tmp_path: Path) -> None:
    # The crosswalk maps every title to an occupation; the ISCO group of the same name ranks first.
    # Close matches teach a scorer spec no known mention: what changes is the kind learnt.
    path = write_crosswalk(tmp_path, {
        "1": ("Bartendere", f"{OCCUPATION}bartender", "closeMatch"),
        "2": ("Legespesialister", f"{OCCUPATION}doctor", "closeMatch"),
        "3": ("Jordmødre", f"{OCCUPATION}midwife", "closeMatch"),
    })  # fmt: skip
    result = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="file", cache_dir=tmp_path / "cache")
    learning, static = result.summaries["learning"], result.summaries["static"]
    assert [s.static_rank for s in result.steps] == [2.0, 2.0, 2.0]
    assert [s.learning_rank for s in result.steps] == [2.0, 1.0, 1.0]  # the first decision teaches the kind
    assert static.acc_at_1 == 0.0 and learning.acc_at_1 == pytest.approx(2 / 3) and learning.acc_at_10 == 1.0
    assert static.effort_per_100 == pytest.approx(800.0)  # 6 s + 2 s per term
    assert learning.effort_per_100 == pytest.approx(100 * (8 + 4 + 4) / 3)
    assert "effort 800 s/100 terms" in static.line() and "in file order" in result.header()
    # Learning known mentions only (as before issue 89) leaves the pattern as it was.
    before = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="file", learn_kinds=False,
                      skip_boilerplate=False, cache_dir=tmp_path / "cache")  # fmt: skip
    assert before.summaries["learning"].acc_at_1 == 0.0
    # Most confident first: by the margin between the static linker's first two candidates.
    ordered = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="least-confident",
                       cache_dir=tmp_path / "cache")  # fmt: skip
    assert sorted(s.term.code for s in ordered.steps) == ["1", "2", "3"] and ordered.order == "least-confident"


def test_the_simulation_experiment_writes_effort_rows(nor_data: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    (tmp_path / "effort.toml").write_text(
        'description = "a slice"\n[simulation]\npipelines = ["lexical"]\ncrosswalks = ["nor_no"]\nseeds = [0, 1]\n'
        'variants = ["learning", "static", "mentions-only"]\nlimit = 12\n',
        encoding="utf-8",
    )
    experiment = load_experiment(tmp_path / "effort.toml")
    results = tmp_path / "results.csv"
    run_experiment(experiment, nor_data, results=results, show_progress=False, say=lambda message: None)
    rows = read_results(results)
    by_key = {(r["dataset"], r["pipeline"], r["metric"]): r for r in rows}
    for label in ("lexical", "lexical/static", "lexical/mentions-only"):
        for metric in ("effort_per_100", "acc_at_1", "acc_at_10", "mrr", "not_found_100"):
            assert (("nor_no", label, metric) in by_key) and (("mean:crosswalks", label, metric) in by_key)
        effort = float(by_key[("nor_no", label, "effort_per_100")]["value"])
        assert 400.0 <= effort <= 3000.0 and by_key[("nor_no", label, "acc_at_1")]["queries"] == "12"
    learning = float(by_key[("nor_no", "lexical", "acc_at_1")]["value"])
    assert learning >= float(by_key[("nor_no", "lexical/static", "acc_at_1")]["value"])


def test_a_bad_simulation_file_names_the_key(tmp_path: Path) -> None:
    from melo_core.errors import MeloInputError

    for body, key in (('orders = ["alphabetical"]', "simulation.orders"), ("seeds = []", "simulation.seeds"),
                      ('pipelines = ["nope"]', "simulation.pipelines"), ("limit = -1", "simulation.limit"),
                      ("speed = 1", "unknown key simulation.speed")):  # fmt: skip
        (tmp_path / "bad.toml").write_text(f'description = "x"\n[simulation]\n{body}\n', encoding="utf-8")
        with pytest.raises(MeloInputError, match=key):
            load_experiment(tmp_path / "bad.toml")
