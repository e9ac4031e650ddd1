"""The curator's time as the measure (issue 89, items 1, 4 and 6): the cost model, the kind of
concept a scheme's decisions teach the linker, the boilerplate that teaches no mention, the queue
orders, and the simulation experiment."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import load_crosswalk
from melo_core.esco.taxonomy import Concept, LanguageLabels, Taxonomy
from melo_core.evaluation.effort import COSTS, CostModel, margin, queue_order
from melo_core.evaluation.experiments.config import load_experiment
from melo_core.evaluation.experiments.results import read_results
from melo_core.evaluation.experiments.runner import run_experiment
from melo_core.evaluation.simulate import Replay, simulate, simulate_many
from melo_core.linking.linker import Linker
from melo_core.linking.scheme_learning import Boilerplate, TargetKinds, scheme_kinds, target_kind

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
    # ISCO level 4 decisions turn it round, once occupations are under a quarter as likely.
    groups = scheme_kinds([(f"{GROUP}2222", "exactMatch")] * 6, norwegian.by_uri)
    assert groups.offsets()["isco4"] == 0.0 and groups.offsets()["occupation"] == 0.0  # 6.5 : 2, both in use
    groups = scheme_kinds([(f"{GROUP}2222", "exactMatch")] * 12, norwegian.by_uri)
    assert groups.offsets()["isco4"] == 0.0 and groups.offsets()["occupation"] < 0.0
    # A scheme that maps to both kinds (Hungary: 48 % ISCO groups) moves neither.
    mixed = scheme_kinds([(f"{GROUP}2222", "exactMatch"), (f"{OCCUPATION}cook", "exactMatch")] * 10,
                         norwegian.by_uri)  # fmt: skip
    assert mixed.offsets()["isco4"] == mixed.offsets()["occupation"] == 0.0 and mixed.offsets()["isco2"] < 0.0


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
    # Frequent function words around two words of its own: still a mention (Italian titles lost by a share rule).
    italian = Boilerplate(frozenset({"tecnici", "della", "e"}))
    assert italian.teaches_mention("Tecnici della produzione alimentare")
    assert not italian.teaches_mention("Tecnici della produzione")


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
    assert [s.learning_rank for s in result.steps] == [2.0, 2.0, 1.0]  # two decisions teach the kind
    assert static.acc_at_1 == 0.0 and learning.acc_at_1 == pytest.approx(1 / 3) and learning.acc_at_10 == 1.0
    assert static.effort_per_100 == pytest.approx(800.0)  # 6 s + 2 s per term
    assert learning.effort_per_100 == pytest.approx(100 * (8 + 8 + 4) / 3)
    assert "effort 800 s/100 terms" in static.line() and "in file order" in result.header()
    # Learning known mentions only (as before issue 89) leaves the pattern as it was.
    before = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="file", learn_kinds=False,
                      skip_boilerplate=False, cache_dir=tmp_path / "cache")  # fmt: skip
    assert before.summaries["learning"].acc_at_1 == 0.0
    # Most confident first: by the margin between the static linker's first two candidates.
    ordered = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="least-confident",
                       cache_dir=tmp_path / "cache")  # fmt: skip
    assert sorted(s.term.code for s in ordered.steps) == ["1", "2", "3"] and ordered.order == "least-confident"


def test_the_simulated_curator_reads_a_list_an_isco_group_leads_as_the_link_page_shows_it(
    norwegian: Taxonomy, tmp_path: Path
) -> None:
    """With a calibrator, the Link page shows a list an ISCO group leads most probable first: the
    occupation under the group, which the crosswalk maps to, then comes first, from the first term."""
    from tests.test_calibration import group_shy_calibrator

    path = write_crosswalk(tmp_path, {
        "1": ("Bartendere", f"{OCCUPATION}bartender", "closeMatch"),
        "2": ("Legespesialister", f"{OCCUPATION}doctor", "closeMatch"),
    })  # fmt: skip
    shown = simulate(load_crosswalk(path), norwegian, "char-tfidf", order="file", cache_dir=tmp_path / "cache",
                     calibrator=group_shy_calibrator(), proposals=False)  # fmt: skip
    assert [(s.static_rank, s.learning_rank, s.proposed) for s in shown.steps] == [(1.0, 1.0, False)] * 2
    assert shown.summaries["static"].effort_per_100 == pytest.approx(400.0)  # 4 s a term, against 8 s by score


def test_the_simulation_experiment_writes_effort_rows(nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    (tmp_path / "effort.toml").write_text(
        'description = "a slice"\n[simulation]\npipelines = ["lexical"]\ncrosswalks = ["nor_no"]\nseeds = [0, 1]\n'
        'variants = ["learning", "static", "mentions-only", "proposals"]\nlimit = 12\n',
        encoding="utf-8",
    )
    from tests.test_proposals import write_calibrator

    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    write_calibrator(tmp_path / "models", "lexical", "nor")
    experiment = load_experiment(tmp_path / "effort.toml")
    results = tmp_path / "results.csv"
    run_experiment(experiment, nor_data, results=results, show_progress=True, say=lambda message: None)
    # A bar of the terms replayed: a crosswalk with best takes minutes.
    assert "nor_no lexical random" in capsys.readouterr().err
    rows = read_results(results)
    by_key = {(r["dataset"], r["pipeline"], r["metric"]): r for r in rows}
    for label in ("lexical", "lexical/static", "lexical/mentions-only", "lexical/proposals"):
        for metric in ("effort_per_100", "acc_at_1", "acc_at_10", "mrr", "not_found_100"):
            assert (("nor_no", label, metric) in by_key) and (("mean:crosswalks", label, metric) in by_key)
        effort = float(by_key[("nor_no", label, "effort_per_100")]["value"])
        assert 400.0 <= effort <= 3000.0 and by_key[("nor_no", label, "acc_at_1")]["queries"] == "12"
    assert 0.0 < float(by_key[("nor_no", "lexical/proposals", "proposal_coverage")]["value"]) <= 1.0
    assert ("nor_no", "lexical", "proposal_coverage") not in by_key
    learning = float(by_key[("nor_no", "lexical", "acc_at_1")]["value"])
    assert learning >= float(by_key[("nor_no", "lexical/static", "acc_at_1")]["value"])
    # Another target proposes by its own threshold, under its own label (the calibrator's curve
    # reached 0.99 from probability 0.9 on, 0.95 from 0.5).
    (tmp_path / "effort-99.toml").write_text(
        'description = "a slice"\n[simulation]\npipelines = ["lexical"]\ncrosswalks = ["nor_no"]\nseeds = [0, 1]\n'
        'variants = ["proposals"]\nlimit = 12\nprecision = 0.99\n',
        encoding="utf-8",
    )
    run_experiment(load_experiment(tmp_path / "effort-99.toml"), nor_data, results=results, say=lambda message: None)
    by_key = {(r["dataset"], r["pipeline"], r["metric"]): r for r in read_results(results)}
    stricter = float(by_key[("nor_no", "lexical/proposals-99", "proposal_coverage")]["value"])
    assert stricter < float(by_key[("nor_no", "lexical/proposals", "proposal_coverage")]["value"])
    (tmp_path / "effort-bad.toml").write_text(
        'description = "a slice"\n[simulation]\nvariants = ["proposals"]\nprecision = 95\n', encoding="utf-8"
    )
    with pytest.raises(MeloInputError, match=r"simulation\.precision"):
        load_experiment(tmp_path / "effort-bad.toml")


def test_replays_on_one_linker_match_replays_alone(melo_data: Path, tmp_path: Path) -> None:
    # Danish decisions teach known mentions on top of Norway's; each replay starts from Norway's only.
    from melo_core.esco.crosswalk import crosswalk_path
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.linking.pipeline import load_pipeline
    from tests.conftest import linked_slice

    data = linked_slice(tmp_path / "data", melo_data, ("processed/melo/dnk_q_da_c_da", "raw/crosswalks_standard/dnk_da",
                                                      "raw/crosswalks_standard/nor_no"))  # fmt: skip
    cache = tmp_path / "cache"
    taxonomy = cached_taxonomy_from_melo(data, cache)
    crosswalk = load_crosswalk(crosswalk_path(data, "dnk_da"))
    pipeline = load_pipeline("lexical")
    replays = [Replay(0), Replay(1), Replay(0, learn_kinds=False, skip_boilerplate=False)]
    together = simulate_many(crosswalk, taxonomy, pipeline, replays, limit=30, data_dir=data, cache_dir=cache)
    assert [r.seed for r in together] == [0, 1, 0] and sum(r.taught for r in together) > 30
    for replay, shared in zip(replays, together, strict=True):
        alone = simulate(crosswalk, taxonomy, pipeline, seed=replay.seed, limit=30, data_dir=data, cache_dir=cache,
                         learn_kinds=replay.learn_kinds, skip_boilerplate=replay.skip_boilerplate)  # fmt: skip
        assert shared.steps == alone.steps and shared.summaries == alone.summaries
    # No checkpoints: no MRR of the undecided terms, the same ranks.
    quick = simulate_many(crosswalk, taxonomy, pipeline, replays[:1], limit=30, data_dir=data, cache_dir=cache,
                          checkpoints=())  # fmt: skip
    assert quick[0].steps == together[0].steps and quick[0].summaries["learning"].remaining_mrr == {}


def test_a_rejected_proposal_ranked_first_later_still_costs_its_rejection() -> None:
    from melo_core.evaluation.simulate import _summary

    summary = _summary("learning", [1.0, 1.0, 3.0], {}, COSTS, [True, True, False], [True, False, False])
    assert summary.effort_per_100 == pytest.approx(100 * (1.5 + (1.5 + 4.0) + 9.0) / 3)
    assert (summary.proposed, summary.confirmed) == (2, 1)


def test_a_replay_with_proposals_confirms_the_right_ones_first(melo_data: Path, tmp_path: Path) -> None:
    # A calibrator as `prepare` leaves it: probability sigmoid(12 score - 6), threshold 0.5 at 0.95.
    from melo_core.esco.crosswalk import crosswalk_path
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.evaluation.calibration import load_calibrator
    from melo_core.linking.pipeline import load_pipeline
    from tests.conftest import linked_slice
    from tests.test_proposals import write_calibrator

    data = linked_slice(tmp_path / "data", melo_data, ("processed/melo/dnk_q_da_c_da", "raw/crosswalks_standard/dnk_da",
                                                      "raw/crosswalks_standard/nor_no"))  # fmt: skip
    cache = tmp_path / "cache"
    write_calibrator(tmp_path / "models", "lexical", "dnk")
    calibrator = load_calibrator("lexical", "dnk", tmp_path / "models")
    taxonomy = cached_taxonomy_from_melo(data, cache)
    crosswalk = load_crosswalk(crosswalk_path(data, "dnk_da"))
    plain, batch = simulate_many(crosswalk, taxonomy, load_pipeline("lexical"), [Replay(0), Replay(0, proposals=True)],
                                 limit=60, data_dir=data, cache_dir=cache, calibrator=calibrator)  # fmt: skip
    confirmed = [s for s in batch.steps if s.proposed and s.static_rank == 1]
    rejected = [s for s in batch.steps if s.proposed and s.static_rank != 1]
    assert confirmed and rejected and not any(s.proposed for s in plain.steps)
    assert all(s.learning_rank == 1 for s in confirmed)
    # The terms not proposed come in the same order; the confirmed ones taught first.
    assert [s.term for s in batch.steps] == [s.term for s in plain.steps]
    seconds = [1.5 if s in confirmed else 1.5 * s.proposed + COSTS.seconds(s.learning_rank) for s in batch.steps]
    assert batch.summaries["learning"].effort_per_100 == pytest.approx(100 * sum(seconds) / 60)
    assert batch.summaries["static"] == plain.summaries["static"]
    assert (batch.summaries["learning"].proposed, batch.summaries["learning"].confirmed) == (
        len(confirmed) + len(rejected),
        len(confirmed),
    )
    with pytest.raises(MeloInputError, match="need a calibrator"):
        simulate_many(crosswalk, taxonomy, load_pipeline("lexical"), [Replay(0, proposals=True)], limit=5,
                      data_dir=data, cache_dir=cache)  # fmt: skip


def test_a_bad_simulation_file_names_the_key(tmp_path: Path) -> None:
    from melo_core.errors import MeloInputError

    for body, key in (('orders = ["alphabetical"]', "simulation.orders"), ("seeds = []", "simulation.seeds"),
                      ('pipelines = ["nope"]', "simulation.pipelines"), ("limit = -1", "simulation.limit"),
                      ("speed = 1", "unknown key simulation.speed"), ("crosswalks = 3", "simulation.crosswalks")):  # fmt: skip
        (tmp_path / "bad.toml").write_text(f'description = "x"\n[simulation]\n{body}\n', encoding="utf-8")
        with pytest.raises(MeloInputError, match=key):
            load_experiment(tmp_path / "bad.toml")
    # The plans that share the calibration's keys name their own table.
    for table in ("calibration", "proposals"):
        for body, key in (('crosswalks = "some"', "crosswalks"), ("terms = -1", "terms")):
            (tmp_path / "bad.toml").write_text(f'description = "x"\n[{table}]\n{body}\n', encoding="utf-8")
            with pytest.raises(MeloInputError, match=f"^.*{table}\\.{key}"):
                load_experiment(tmp_path / "bad.toml")


# -- the Benchmark page ------------------------------------------------------------------------------


def test_the_benchmark_page_shows_curator_effort(tmp_path: Path, melo_data: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from db.store import Store
    from melo_core.evaluation.experiments.results import Provenance, append_results
    from ui.effort import effort_table

    def origin(run: str) -> Provenance:
        return Provenance(run=run, commit="abc", models="", data_stamp="", command="experiment run curator-effort",
                          machine="test", date=f"2026-12-06T{run[-7:-5]}:00:00+00:00")  # fmt: skip

    results = tmp_path / "results.csv"
    row = {"queries": 96, "seconds": 1.0}
    append_results(results, "curator-effort", [{**row, "dataset": "nor_no", "pipeline": "best",
                                                "metric": "effort_per_100", "value": 2000.0}],
                   origin("20261206T010000Z"))  # fmt: skip
    append_results(results, "curator-effort", [
        {**row, "dataset": "nor_no", "pipeline": "best", "metric": "effort_per_100", "value": 1300.0},
        {**row, "dataset": "nor_no", "pipeline": "best", "metric": "acc_at_1", "value": 0.47},
        {**row, "dataset": "nor_no", "pipeline": "best/static", "metric": "effort_per_100", "value": 1460.0},
        {**row, "dataset": "nor_no", "pipeline": "best/static", "metric": "acc_at_1", "value": 0.26},
        {**row, "dataset": "ita_it", "pipeline": "best", "metric": "effort_per_100", "value": 1100.0},
        {**row, "dataset": "ita_it", "pipeline": "best", "metric": "acc_at_1", "value": 0.53},
        {**row, "dataset": "ita_it", "pipeline": "best", "metric": "mrr", "value": 0.6},  # not shown
        {**row, "dataset": "mean:crosswalks", "pipeline": "best", "metric": "acc_at_1", "value": 0.9},  # recomputed
    ], origin("20261206T020000Z"))  # fmt: skip
    other = {**row, "dataset": "nor_no", "pipeline": "best", "metric": "acc_at_1", "value": 0.1}
    append_results(results, "calibration", [other], origin("20261206T030000Z"))  # another experiment's
    monkeypatch.setattr("melo_core.evaluation.experiments.results.RESULTS_FILE", results)
    database = tmp_path / "melo.db"
    Store(f"sqlite:///{database}", create=True).close()
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{database}")
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    app = AppTest.from_file(str(root / "pages" / "5_Benchmark.py"), default_timeout=120).run()
    assert not app.exception
    assert "Curator effort" in [h.value for h in app.subheader]
    [table] = [d.value for d in app.dataframe if "best s/100 terms" in d.value.columns]
    assert list(table.columns) == ["crosswalk", "best acc@1", "best s/100 terms", "best/static acc@1",
                                   "best/static s/100 terms"]  # fmt: skip
    assert table.iloc[0].tolist()[:3] == ["ita_it", 0.53, 1100.0]
    assert table.iloc[1].tolist() == ["nor_no", 0.47, 1300.0, 0.26, 1460.0]
    assert table.iloc[2].tolist()[:3] == ["mean", pytest.approx(0.5), pytest.approx(1200.0)]
    assert effort_table([]).empty


# -- the Link page: the same learning, and the queue order -------------------------------------------


@pytest.fixture
def link_store(nor_data: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store holding the nor_no terms over the ESCO union of the small data folder (its ISCO groups too)."""
    from db.quickstart import start_curation
    from db.store import Store

    url = f"sqlite:///{tmp_path / 'melo.db'}"
    for name, value in (("MELO_DATA", nor_data), ("MELO_ESCO", esco_csv), ("MELO_CACHE", tmp_path / "cache"),
                        ("MELO_DB_URL", url)):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    return url


def link_page() -> AppTest:
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "2_Link.py"), default_timeout=120)
    app.session_state["curator"] = "alice"
    app.session_state["link_pipeline"] = "lexical"  # ready at once
    return app


def test_the_link_page_learns_the_schemes_kind_of_concept(link_store: str) -> None:
    from db.store import Store

    with Store(link_store) as store:
        terms = {t.label: t for t in store.queue("nor_no", status=None, limit=None)}
    midwives = terms["Jordmødre"]
    app = link_page()
    app.query_params["term"] = str(midwives.id)
    app.run()
    assert not app.exception and app.subheader[0].value == "Jordmødre"
    before = app.dataframe[0].value
    assert before["kind"].iloc[0] == "isco_group"  # "Midwifery professionals" first
    assert "occupation" in set(before["kind"])
    # Three other terms decided as close matches to occupations: the scheme maps to occupations.
    with Store(link_store) as store:
        for label, uri in (("Bartendere", f"{OCCUPATION}2f5e38a0-6578-4665-bdbd-e2ab505be140"),
                           ("Legespesialister", f"{OCCUPATION}9b889f07-c39c-464d-b9d9-b2daa650f9ac"),
                           ("Bilvaskere", f"{OCCUPATION}7cb71c5f-c310-481c-b46b-d0044328758c")):  # fmt: skip
            store.decide(terms[label].id, uri, "closeMatch", "alice")
    again = link_page()
    again.query_params["term"] = str(midwives.id)
    again.run()
    assert not again.exception
    after = again.dataframe[0].value
    # Each ISCO group is moved down by what three occupation decisions teach; occupations stay.
    kinds = TargetKinds()
    for _ in range(3):
        kinds.observe(Concept(uri=f"{OCCUPATION}x", number=0, kind="occupation"), "closeMatch")
    offset = kinds.offsets()["isco4"]
    assert offset < -0.05
    score_of = {label: score for label, score in zip(before["concept"], before["score"], strict=True)}
    for label, score, kind in zip(after["concept"], after["score"], after["kind"], strict=True):
        if label in score_of and kind == "occupation":
            assert score == pytest.approx(score_of[label], abs=1e-4)
    assert after["score"].iloc[0] == pytest.approx(before["score"].iloc[0] + offset, abs=1e-3)
    # The ISCO 61 group, third before, falls behind the occupations that followed it.
    assert list(after["kind"].iloc[1:3]) == ["occupation", "occupation"]
    # The relation the scheme's curators use most is the highlighted button (Exact before any decision).
    primary = {b.label for b in again.button if b.proto.type == "primary"}
    assert "Close" in primary and "Exact" not in primary
    assert "Exact" in {b.label for b in app.button if b.proto.type == "primary"}


def test_the_link_page_orders_its_queue_by_confidence_and_remembers_it(link_store: str) -> None:
    from db.store import Store

    with Store(link_store) as store:
        first_in_file = store.queue("nor_no", limit=1)[0]
    app = link_page()
    app.query_params["order"] = "most-confident"
    app.run()
    assert not app.exception
    assert app.selectbox(key="link_order").value == "most-confident" and app.query_params["order"] == "most-confident"
    most = app.subheader[0].value
    app.selectbox(key="link_order").set_value("least-confident").run()
    assert not app.exception and app.query_params["order"] == "least-confident"
    least = app.subheader[0].value
    assert most != least
    app.selectbox(key="link_order").set_value("file").run()
    assert app.subheader[0].value == first_in_file.label
    # Skip follows the order chosen.
    ordered = link_page()
    ordered.query_params["order"] = "least-confident"
    ordered.run()
    assert ordered.subheader[0].value == least
    ordered.button(key="link_skip").click().run()
    assert not ordered.exception and ordered.subheader[0].value not in (least, first_in_file.label)


def test_a_schemes_current_matches_and_labels(store: object, tmp_path: Path) -> None:
    from db.aliases import scheme_labels, scheme_matches
    from db.imports import import_terms, read_terms_csv
    from db.store import Store

    assert isinstance(store, Store)
    (tmp_path / "terms.csv").write_text("code,label\nT1,Term 1\nT2,Term 2\nT3,Term 3\n", encoding="utf-8")
    import_terms(store, "tst", read_terms_csv(tmp_path / "terms.csv"), language="no")
    (tmp_path / "other.csv").write_text("code,label\nX1,Other term\n", encoding="utf-8")
    import_terms(store, "other", read_terms_csv(tmp_path / "other.csv"), language="de")
    ids = {code: store.term("tst", code).id for code in ("T1", "T2", "T3")}  # type: ignore[union-attr]
    store.decide(ids["T1"], f"{OCCUPATION}a", "closeMatch", "alice")
    store.decide(ids["T2"], f"{GROUP}2222", "exactMatch", "alice")
    store.decide(ids["T2"], f"{GROUP}2222", "broadMatch", "alice")  # changed: the latest counts
    store.decide(ids["T3"], f"{OCCUPATION}b", "rejected", "alice")  # no match: teaches nothing
    store.decide(store.term("other", "X1").id, f"{OCCUPATION}c", "exactMatch", "alice")  # type: ignore[union-attr]
    assert scheme_matches(store, "tst") == [(f"{OCCUPATION}a", "closeMatch"), (f"{GROUP}2222", "broadMatch")]
    assert sorted(scheme_labels(store, "tst")) == ["Term 1", "Term 2", "Term 3"]


def test_decided_mentions_leave_out_the_schemes_boilerplate(store: object, tmp_path: Path) -> None:
    """What the Link page and `propose` take as the store's known mentions for a scheme: every
    scheme's current decisions, less terms made of that scheme's boilerplate and unknown concepts."""
    from db.aliases import decided_mentions
    from db.imports import import_terms, read_terms_csv
    from db.store import Store
    from melo_core.esco.crosswalk import ALIAS_RELATIONS

    assert isinstance(store, Store)
    subjects = ("Chemistry", "Physics", "Biology", "History", "Art", "Law")
    rows = [f'T{i},"{subject} Teachers, Postsecondary"' for i, subject in enumerate(subjects)]
    (tmp_path / "soc.csv").write_text("code,label\n" + "\n".join([*rows, "N1,Registered Nurses"]) + "\n",
                                      encoding="utf-8")  # fmt: skip
    import_terms(store, "soc", read_terms_csv(tmp_path / "soc.csv"), language="en")
    (tmp_path / "other.csv").write_text('code,label\nX1,"Music Teachers, Postsecondary"\nX2,Sykepleier\n',
                                        encoding="utf-8")  # fmt: skip
    import_terms(store, "other", read_terms_csv(tmp_path / "other.csv"), language="no")
    decide = {"soc": ("T0", "N1"), "other": ("X1", "X2")}
    for scheme, codes in decide.items():
        for code in codes:
            store.decide(store.term(scheme, code).id, f"{OCCUPATION}{code}", "exactMatch", "alice")  # type: ignore[union-attr]
    known = {f"{OCCUPATION}{code}" for code in ("T0", "N1", "X1")}  # X2's concept: not in the taxonomy
    mentions = decided_mentions(store, "soc", ALIAS_RELATIONS, known)
    assert [label for label, _, _ in mentions] == ["Registered Nurses"]
    # For the other scheme, whose terms share no boilerplate, "... Teachers, Postsecondary" teaches.
    assert [label for label, _, _ in decided_mentions(store, "other", ALIAS_RELATIONS, known)] == [
        "Chemistry Teachers, Postsecondary",
        "Registered Nurses",
        "Music Teachers, Postsecondary",
    ]
