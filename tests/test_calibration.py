"""Calibrated confidence (melo_core.evaluation.calibration): the expected calibration error on hand-made
numbers, a fit leave one country out that never sees the held-out country, a deterministic JSON,
training rows linked from real crosswalks with the lexical pipeline, the probability on the Link
page and as SSSOM confidence."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from db.exports import sssom_text, validate_sssom
from db.store import Store
from melo_core.esco.taxonomy import Concept, cached_taxonomy_from_melo
from melo_core.evaluation import calibration
from melo_core.evaluation.calibration import (
    ECE_BINS,
    FEATURES,
    Calibrator,
    CandidateRows,
    calibration_step,
    candidate_features,
    expected_calibration_error,
    fit_calibrator,
    load_calibrator,
    percent,
    prepare_calibration,
    reliability,
)
from melo_core.linking.linker import Candidate
from melo_core.linking.pipeline import load_pipeline
from melo_core.linking.scheme_learning import TargetKinds
from tests.conftest import linked_slice
from tests.test_pages_curation import LINK, cache, env, page, started  # noqa: F401  (fixtures)


def candidate(rank: int, score: float, **more: object) -> Candidate:
    fields: dict = dict(rank=rank, concept_uri=f"http://example.org/c{rank}", label=f"c{rank}", score=score,
                        matched_label=f"c{rank}", matched_language="no", kind="occupation", isco_code=None,
                        isco_label=None)  # fmt: skip
    return Candidate(**(fields | more))


SCHEME_TERMS = {"aut": 4000, "bel": 600, "nor": 400}  # terms in each country's synthetic scheme


def synthetic_rows(seed: int = 0, countries: tuple[str, ...] = ("aut", "bel", "nor")) -> CandidateRows:
    """Ten candidates per term; the first is right more often the higher its score, and those below
    it more often in a scheme of few terms (more matches per term): rows a logistic fit can calibrate."""
    rng = np.random.default_rng(seed)
    parts = []
    for country in countries:
        many = SCHEME_TERMS[country] < 1000
        for _ in range(60):
            scores = np.sort(rng.uniform(0, 1, 10))[::-1]
            right = [rng.uniform() < s * (1 if r == 0 else 0.6 if many else 0.1) for r, s in enumerate(scores)]
            lists = [candidate(r + 1, float(s)) for r, s in enumerate(scores)]
            gold = [c.concept_uri for c, ok in zip(lists, right, strict=True) if ok]
            parts.append(calibration.rows_from_lists([lists], [gold], "no", f"{country}_xx", country,
                                                     SCHEME_TERMS[country]))  # fmt: skip
    return CandidateRows.concat(parts)


def test_ece_on_a_hand_made_example() -> None:
    # Bin 1 of 15 ([0.0667, 0.133)): two at 0.1, one right: |0.1 - 0.5|. Bin 13: two at 0.9, both
    # right: |0.9 - 1|. Weighted by their shares: (2 * 0.4 + 2 * 0.1) / 4.
    assert expected_calibration_error([0.1, 0.1, 0.9, 0.9], [0, 1, 1, 1]) == pytest.approx(0.25)
    diagram = reliability([0.1, 0.1, 0.9, 0.9, 1.0], [0, 1, 1, 1, 1])
    assert len(diagram.counts) == ECE_BINS and diagram.edges[0] == 0.0 and diagram.edges[-1] == 1.0
    assert diagram.counts[1] == 2 and diagram.counts[13] == 2 and diagram.counts[14] == 1  # 1.0: the last bin
    assert diagram.accuracy[1] == 0.5 and diagram.mean_probability[13] == pytest.approx(0.9)
    assert expected_calibration_error([0.0, 1.0], [0, 1]) == 0.0  # perfectly calibrated


def test_features_follow_the_ranked_list() -> None:
    listed = [candidate(1, 0.9, via_mention=True, component_scores={"a": 0.8, "b": 0.6},
                        component_ranks={"a": 1, "b": 2}),
              candidate(2, 0.5, matched_language="en", kind="isco_group")]  # fmt: skip
    rows = candidate_features(listed, "no")
    named = [dict(zip(FEATURES, row, strict=True)) for row in rows]
    assert named[0]["margin_next"] == pytest.approx(0.4) and named[1]["margin_next"] == 0.0
    assert named[1]["gap_first"] == pytest.approx(0.4) and named[1]["first_score"] == 0.9
    assert (named[0]["via_mention"], named[0]["language_match"], named[0]["isco_group"]) == (1.0, 1.0, 0.0)
    assert (named[1]["language_match"], named[1]["isco_group"], named[1]["inverse_rank"]) == (0.0, 1.0, 0.5)
    assert named[0]["component_mean"] == pytest.approx(0.7) and named[0]["component_first"] == 0.5
    assert [(n["under_group"], n["group_led"]) for n in named] == [(0.0, 0.0), (0.0, 0.0)]  # an occupation leads
    group_first = [candidate(1, 0.9, kind="isco_group"), candidate(2, 0.8), candidate(3, 0.7, kind="isco_group")]
    led = candidate_features(group_first, "no")
    assert led[:, FEATURES.index("under_group")].tolist() == [0.0, 1.0, 0.0]
    assert led[:, FEATURES.index("group_led")].tolist() == [1.0, 0.0, 1.0]


def test_rows_kept_before_the_list_features_read_back_with_them() -> None:
    # Rows linked with the first twelve features (an hour of linking for best) need no linking again.
    group_first = [candidate(1, 0.9, kind="isco_group"), candidate(2, 0.8), candidate(3, 0.7, kind="isco_group")]
    lists = [group_first, [candidate(1, 0.6), candidate(2, 0.5, kind="isco_group")],
             [candidate(1, 0.4, kind="isco_group")]]  # fmt: skip
    rows = calibration.rows_from_lists(lists, [["http://example.org/c2"], [], []], "no", "nor_no", "nor", 420)
    assert rows.features[:, FEATURES.index("scheme_terms")].tolist() == pytest.approx([np.log(420)] * 6)
    raw = json.loads(rows.to_json())
    for width in (12, 14):  # kept before the list features, and before the scheme's size
        kept = raw | {"features": list(FEATURES[:width]), "rows": [r[:width] for r in raw["rows"]]}
        read = CandidateRows.from_json(json.dumps(kept), scheme_terms=420)
        assert read is not None and read.features.tolist() == rows.features.round(9).tolist()
    assert CandidateRows.from_json(json.dumps(raw | {"features": ["score"]})) is None  # another set: link again


def test_leave_one_country_out_never_sees_the_held_out_country() -> None:
    rows = synthetic_rows()
    held = fit_calibrator(rows, "lexical", "nor")
    assert held.countries == ["aut", "bel"] and held.hold_out_country == "nor"
    # Whatever Norway's rows say, the calibrator held out of Norway stays the same.
    is_nor = np.array([c == "nor" for c in rows.countries])
    flipped = CandidateRows(rows.features.copy(), np.where(is_nor, 1 - rows.labels, rows.labels), rows.ranks,
                            rows.countries, rows.datasets)  # fmt: skip
    flipped.features[is_nor] += 5.0
    assert fit_calibrator(flipped, "lexical", "nor").to_json() == held.to_json()
    assert fit_calibrator(flipped, "lexical").to_json() != fit_calibrator(rows, "lexical").to_json()
    # The prior of a scheme's offset: how far Austria's and Belgium's own offsets lie from 0.
    assert held.offset_spread is not None and 0 < held.offset_spread < 3
    assert Calibrator.from_json(held.to_json()).offset_spread == pytest.approx(held.offset_spread)
    # Fits shared between calibrators (fit_all) give the same calibrators as fits of their own.
    shared: calibration.Fits = {}
    assert [fit_calibrator(rows, "lexical", c, shared).to_json() for c in (None, "aut", "nor")] == [
        fit_calibrator(rows, "lexical", c).to_json() for c in (None, "aut", "nor")
    ]


def test_the_fit_is_deterministic_and_its_json_reads_back() -> None:
    rows = synthetic_rows()
    first, again = fit_calibrator(rows, "lexical"), fit_calibrator(synthetic_rows(), "lexical")
    assert first.to_json() == again.to_json()
    read = Calibrator.from_json(first.to_json())
    listed = [candidate(1, 0.95), candidate(2, 0.3), candidate(3, 0.1)]
    assert read.probabilities(listed, "no") == pytest.approx(first.probabilities(listed, "no"), abs=1e-9)
    probabilities = first.probabilities(listed, "no")
    assert probabilities[0] > probabilities[1] > probabilities[2] and all(0 < p < 1 for p in probabilities)
    with pytest.raises(ValueError, match="another version"):
        Calibrator.from_json(json.dumps(json.loads(first.to_json()) | {"features": ["score"]}))


def group_shy_calibrator() -> Calibrator:
    """Hand-set weights: a list's first candidate is likelier the higher its score, unless it is an
    ISCO group leading the list; an occupation under such a group is likely (as fits on nor_no learn)."""
    from melo_core.evaluation.calibration import Model

    n = len(FEATURES)

    def model(weights: dict[str, float], intercept: float) -> Model:
        return Model([0.0] * n, [1.0] * n, [weights.get(name, 0.0) for name in FEATURES], intercept)

    return Calibrator("lexical", None, model({"score": 4.0, "group_led": -6.0}, -2.0),
                      model({"score": 4.0, "under_group": 3.0}, -4.0))  # fmt: skip


def test_a_list_an_isco_group_leads_is_shown_most_probable_first() -> None:
    calibrator = group_shy_calibrator()
    group = candidate(1, 0.9, kind="isco_group", isco_code="2221", concept_uri="http://example.org/g")
    occupations = [candidate(rank, 0.9 - rank / 20) for rank in range(2, 13)]  # twelve in all
    shown, probabilities = calibrator.ranked([group, *occupations], "no")
    assert [c.concept_uri for c in shown[:9]] == [c.concept_uri for c in occupations[:9]]  # by probability
    assert shown[9].concept_uri == group.concept_uri  # the least probable of the first ten
    assert [c.concept_uri for c in shown[10:]] == [c.concept_uri for c in occupations[9:]]  # past ten: as linked
    assert [c.rank for c in shown] == list(range(1, 13))
    assert probabilities == sorted(probabilities, reverse=True) and len(probabilities) == 10
    by_uri = dict(
        zip(
            [c.concept_uri for c in [group, *occupations]],
            calibrator.probabilities([group, *occupations], "no"),
            strict=False,
        )
    )
    assert all(by_uri[c.concept_uri] == p for c, p in zip(shown, probabilities, strict=False))  # each keeps its own
    # A scheme whose decisions map to ISCO groups of that level: its lists stay in score order.
    mapped = TargetKinds()
    for code in ("2221", "2222"):
        mapped.observe(Concept(f"http://example.org/isco/C{code}", 0, "isco_group", isco_code=code), "narrowMatch")
    assert calibrator.ranked([group, *occupations], "no", kinds=mapped)[0] == [group, *occupations]
    occupational = TargetKinds()  # one that maps to occupations: reordered, as with no decision yet
    occupational.observe(Concept("http://example.org/o", 0, "occupation"), "exactMatch")
    assert calibrator.ranked([group, *occupations], "no", kinds=occupational)[0] == shown
    assert calibrator.ranked([group, *occupations], "no", kinds=TargetKinds())[0] == shown
    # An occupation leads: the list stays in score order, whatever the probabilities say.
    listed = [candidate(1, 0.5), candidate(2, 0.45, kind="isco_group"), candidate(3, 0.4)]
    assert calibrator.ranked(listed, "no")[0] == listed


def test_a_scheme_of_few_terms_expects_more_matches_below_the_first() -> None:
    fitted = fit_calibrator(synthetic_rows(), "lexical")
    listed = [candidate(1, 0.8), candidate(2, 0.7), candidate(3, 0.6)]
    small, large = fitted.probabilities(listed, "no", 400), fitted.probabilities(listed, "no", 4000)
    assert small[1] > 2 * large[1] and small[2] > 2 * large[2]
    # No scheme: a typical one (the training mean).
    typical = fitted.probabilities(listed, "no", round(float(np.exp(fitted.rest.mean[-1]))))
    assert fitted.probabilities(listed, "no") == pytest.approx(typical, abs=1e-3)
    assert len(fitted.first.coefficients) == len(fitted.rest.coefficients) == len(FEATURES)


def test_the_threshold_comes_from_other_countries_precision_curve() -> None:
    calibrator = fit_calibrator(synthetic_rows(), "lexical", "nor")
    # The curve holds the out-of-fold first candidates of Austria and Belgium only (60 terms each).
    assert calibrator.curve_counts[-1] == 120 and calibrator.curve_thresholds == sorted(calibrator.curve_thresholds,
                                                                                        reverse=True)  # fmt: skip
    threshold = calibrator.threshold_for(0.8)
    assert threshold is not None
    at = calibrator.curve_thresholds.index(threshold)
    assert calibrator.curve_precision[at] >= 0.8 and calibrator.curve_counts[at] >= calibration.MIN_PROPOSALS
    assert calibrator.threshold_for(1.01) is None  # no precision above 1


def test_a_schemes_offset_recovers_the_shift_of_its_own_decisions() -> None:
    # A scheme whose candidates are right more often than the calibrator says: logit(truth) = logit(p) + 1.
    rng = np.random.default_rng(0)
    probabilities = rng.uniform(0.02, 0.9, 20_000)
    logits = np.log(probabilities / (1 - probabilities))
    labels = (rng.uniform(size=len(probabilities)) < 1 / (1 + np.exp(-(logits + 1.0)))).astype(float)
    offset = calibration.scheme_offset(probabilities, labels)
    assert offset == pytest.approx(1.0, abs=0.05)
    shifted = 1 / (1 + np.exp(-(logits + offset)))
    assert expected_calibration_error(shifted, labels) < expected_calibration_error(probabilities, labels) / 3
    assert calibration.scheme_offset([0.5, 0.7], [1, 1]) == 0.0  # one outcome only: nothing to fit
    # Under a prior (schemes' offsets spread 0.25 around 0), 250 candidates move it less; 20,000 hardly less.
    few = (probabilities[:250], labels[:250])
    assert 0 < calibration.scheme_offset(*few, spread=0.25) < 0.8 * calibration.scheme_offset(*few)
    assert calibration.scheme_offset(probabilities, labels, spread=0.25) == pytest.approx(offset, abs=0.1)
    fitted = fit_calibrator(synthetic_rows(), "lexical")
    listed = [candidate(1, 0.9), candidate(2, 0.2)]
    moved = fitted.shifted(offset).probabilities(listed, "no")
    assert all(m > p for m, p in zip(moved, fitted.probabilities(listed, "no"), strict=True))


def test_a_probability_reads_as_a_percentage() -> None:
    assert [percent(p) for p in (0.874, 0.5, 0.001, 0.999)] == ["87 %", "50 %", "<1 %", ">99 %"]


@pytest.fixture(scope="module")
def three_countries(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Norway, Denmark and Sweden: each a monolingual dataset (the taxonomy's labels) and its crosswalk."""
    parts = tuple(f"processed/melo/{c}_q_{lang}_c_{lang}" for c, lang in (("nor", "no"), ("dnk", "da"), ("swe", "sv")))
    crosswalks = ("raw/crosswalks_standard/nor_no", "raw/crosswalks_standard/dnk_da", "raw/crosswalks_standard/swe_sv")
    return linked_slice(tmp_path_factory.mktemp("three-countries"), melo_data, parts + crosswalks)


def test_prepare_links_real_crosswalks_and_fits_one_calibrator_per_held_out_country(three_countries: Path,
                                                                                   tmp_path: Path) -> None:  # fmt: skip
    definition = load_pipeline("lexical")
    taxonomy = cached_taxonomy_from_melo(three_countries, tmp_path / "cache")
    models = tmp_path / "models"
    said: list[str] = []
    written = prepare_calibration(definition, taxonomy, three_countries, tmp_path / "cache", models,
                                  on_message=said.append, terms_per_crosswalk=12)  # fmt: skip
    assert sorted(p.name for p in written) == ["lexical-without-dnk.json", "lexical-without-nor.json",
                                               "lexical-without-swe.json", "lexical.json"]  # fmt: skip
    assert said[:3] == ["calibration: linking dnk_da (1 of 3)", "calibration: linking nor_no (2 of 3)",
                        "calibration: linking swe_sv (3 of 3)"]  # fmt: skip
    rows = calibration.collect_rows(definition, taxonomy, three_countries, None, 12, cache_dir=tmp_path / "cache",
                                    on_progress=said.append)  # fmt: skip
    assert len(said) == 4  # the rows were kept: nothing linked again
    assert len(rows) == 3 * 12 * calibration.TOP_K and set(rows.countries) == {"dnk", "nor", "swe"}
    assert set(rows.ranks.tolist()) == set(range(1, calibration.TOP_K + 1)) and 0 < rows.labels.mean() < 0.5
    without_nor = load_calibrator("lexical", "nor", models)
    assert without_nor is not None and without_nor.countries == ["dnk", "swe"]
    assert load_calibrator("lexical", models_dir=models).countries == ["dnk", "nor", "swe"]  # type: ignore[union-attr]
    assert load_calibrator("best", models_dir=models) is None
    # Fitted again from the same rows: the same files.
    before = {p.name: p.read_text(encoding="utf-8") for p in written}
    again = prepare_calibration(definition, taxonomy, three_countries, tmp_path / "cache", models,
                                terms_per_crosswalk=12)  # fmt: skip
    assert {p.name: p.read_text(encoding="utf-8") for p in again} == before


def test_the_calibration_step_is_estimated_from_the_terms_it_still_links(three_countries: Path,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    definition = load_pipeline("lexical")
    cache_dir, models = tmp_path / "cache", tmp_path / "models"
    taxonomy = cached_taxonomy_from_melo(three_countries, cache_dir)
    step = calibration_step(definition, taxonomy, three_countries, cache_dir, models, terms_per_crosswalk=12)
    assert step.what == "lexical calibration"
    _, own = calibration.SECONDS_PER_TERM["lexical"]  # each crosswalk searches its own language
    assert step.seconds == pytest.approx(calibration.FIT_SECONDS + 3 * 12 * own)
    told: list[tuple[float, str]] = []
    assert step.run(lambda fraction, message: told.append((fraction, message))) == 3 * 12
    assert [message for _, message in told[:3]] == ["calibration: linking dnk_da (1 of 3)",
                                                    "calibration: linking nor_no (2 of 3)",
                                                    "calibration: linking swe_sv (3 of 3)"]  # fmt: skip
    assert [fraction for fraction, _ in told[:3]] == pytest.approx([0, 1 / 3, 2 / 3])  # a share of the terms
    assert told[-1][0] == 1.0 and told[-1][1].startswith("calibration: fitting lexical")
    assert load_calibrator("lexical", "nor", models) is not None
    # The rows are kept: nothing is left to link, nothing to wait for.
    again = calibration_step(definition, taxonomy, three_countries, cache_dir, models, terms_per_crosswalk=12)
    assert again.seconds == 0 and again.run(lambda fraction, message: None) == 0
    # Rows of another feature set (kept by an older version) are linked again, and counted so.
    [older] = [p for p in (cache_dir / "calibration").glob("rows-lexical-nor_no-*.json")]
    raw = json.loads(older.read_text(encoding="utf-8"))
    older.write_text(json.dumps({**raw, "features": ["score"]}), encoding="utf-8")
    relinked = calibration_step(definition, taxonomy, three_countries, cache_dir, models, terms_per_crosswalk=12)
    assert relinked.seconds == pytest.approx(calibration.FIT_SECONDS + 12 * own)
    told.clear()
    assert relinked.run(lambda fraction, message: told.append((fraction, message))) == 12
    assert told[0] == (0.0, "calibration: linking nor_no (1 of 1)")
    assert json.loads(older.read_text(encoding="utf-8"))["features"] == raw["features"]


def test_a_first_use_estimates_the_crosswalks_it_links_over_english_alone_as_cheaper(
    melo_data: Path, tmp_path: Path
) -> None:
    """A first use prepares English and the scheme's language (`--langs en,no`): every other
    country's crosswalk is then linked over English alone, a third of the cost of its own language
    (one rate of 0.25 s a term had said 15 min for `best`'s 151 s)."""
    parts = tuple(f"processed/melo/{c}_q_{lang}_c_{lang}" for c, lang in (("nor", "no"), ("dnk", "da"), ("swe", "sv"),
                                                                            ("usa", "en")))  # fmt: skip
    crosswalks = tuple(f"raw/crosswalks_standard/{code}" for code in ("nor_no", "dnk_da", "swe_sv", "usa_en"))
    data = linked_slice(tmp_path / "data", melo_data, parts + crosswalks)
    definition = load_pipeline("best")
    cache_dir, models = tmp_path / "cache", tmp_path / "models"
    taxonomy = cached_taxonomy_from_melo(data, cache_dir)
    other, own = calibration.SECONDS_PER_TERM["best"]
    assert other < own / 2
    first_use = calibration_step(definition, taxonomy, data, cache_dir, models, ["en", "no"], 12)
    # dnk_da and swe_sv over English alone; nor_no and usa_en over their own language too
    assert first_use.seconds == pytest.approx(calibration.FIT_SECONDS + 2 * 12 * other + 2 * 12 * own)
    every_language = calibration_step(definition, taxonomy, data, cache_dir, models, None, 12)
    assert every_language.seconds == pytest.approx(calibration.FIT_SECONDS + 4 * 12 * own)


def test_prepare_skips_a_data_folder_with_one_country(nor_data: Path, tmp_path: Path) -> None:
    taxonomy = cached_taxonomy_from_melo(nor_data, tmp_path / "cache")
    assert prepare_calibration(load_pipeline("lexical"), taxonomy, nor_data, tmp_path / "cache", tmp_path) == []


def test_link_page_shows_the_probability_and_sssom_exports_it(started: str, tmp_path: Path,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    models = tmp_path / "models"
    monkeypatch.setenv("MELO_MODELS", str(models))
    fitted = fit_calibrator(synthetic_rows(), "lexical")
    calibration.save_calibrator(fitted, models)
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
    app = page(LINK).run()
    assert not app.exception
    table = app.dataframe[0].value
    assert all(cell.endswith(" %") for cell in table["probability"])
    assert not any("Raw scores" in c.value for c in app.caption)  # a calibrator: probabilities, no hint
    choice = app.radio(key=f"link_choice_{term.id}")
    assert all(" %" in option for option in choice.options[:10])  # "… · 87 %  [1]" instead of the raw score
    next(b for b in app.button if b.label == "Exact").click().run()
    assert not app.exception
    with Store(started) as store:
        [decision] = store.current(term.id)
        [top] = [s for s in store.suggestions(term.id, "lexical") if s.rank == 1]
        text = sssom_text(store, "nor_no", suggestions=True)
    assert decision.confidence is not None and 0 < decision.confidence < 1
    assert (
        top.confidence == pytest.approx(decision.confidence) and percent(decision.confidence) == table["probability"][0]
    )
    assert validate_sssom(text) == []
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    [row] = [r for r in csv.DictReader(io.StringIO(body), delimiter="\t") if r["author_label"] == "alice"]
    assert float(row["confidence"]) == pytest.approx(decision.confidence, abs=1e-5)
    assert float(row["similarity_score"]) == pytest.approx(decision.score, abs=1e-5)


def test_the_link_page_shows_a_list_an_isco_group_leads_most_probable_first(started: str, tmp_path: Path,  # noqa: F811
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """nor_no's first term: ISCO groups lead by score; with a calibrator the occupations under them
    come first, the keyboard's [1] picks what is shown first, and the store keeps that order."""
    models = tmp_path / "models"
    monkeypatch.setenv("MELO_MODELS", str(models))
    calibration.save_calibrator(group_shy_calibrator(), models)
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
    app = page(LINK).run()
    assert not app.exception
    table = app.dataframe[0].value
    assert table["kind"][0] == "occupation" and table["rank"].tolist() == list(range(1, 11))
    led = table["score"].idxmax()  # what led by score: an ISCO group, now further down
    assert led > 0 and table["kind"][led] == "isco_group"
    shown = [float(cell.strip(" %<>")) for cell in table["probability"]]
    assert shown == sorted(shown, reverse=True)
    assert any("An ISCO group led this list" in c.value for c in app.caption)
    first = table["concept"][0]
    assert app.radio(key=f"link_choice_{term.id}").options[0].startswith(f"1\\. {first}")
    with Store(started) as store:
        stored = sorted(store.suggestions(term.id, "lexical"), key=lambda s: s.rank)
    confidences = [s.confidence for s in stored if s.confidence is not None]
    assert [s.rank for s in stored] == list(range(1, 11)) and len(confidences) == len(stored)
    assert confidences == sorted(confidences, reverse=True)


def test_the_link_page_keeps_score_order_where_the_scheme_maps_to_such_groups(
    started: str,  # noqa: F811
    tmp_path: Path,
    nor_data: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two terms decided as ISCO groups of the level that leads nor_no's first term's list: the
    scheme maps to such groups, so the page keeps the list in score order, group first."""
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    calibration.save_calibrator(group_shy_calibrator(), tmp_path / "models")
    groups = [c.uri for c in cached_taxonomy_from_melo(nor_data).concepts
              if c.kind == "isco_group" and len(c.isco_code or "") == 2]  # fmt: skip
    with Store(started) as store:
        later = store.queue("nor_no", limit=3)[1:]
        for term, uri in zip(later, groups, strict=False):
            store.decide(term.id, uri, "narrowMatch", "alice")
    app = page(LINK).run()
    assert not app.exception
    table = app.dataframe[0].value
    assert table["kind"][0] == "isco_group" and table["score"].idxmax() == 0
    assert not any("An ISCO group led this list" in c.value for c in app.caption)


def test_the_calibration_experiment_writes_ece_rows_the_benchmark_page_shows(
    three_countries: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    from melo_core.evaluation.experiments.config import load_experiment
    from melo_core.evaluation.experiments.runner import run_experiment

    plan = tmp_path / "calibration-test.toml"
    plan.write_text('description = "test"\n[calibration]\npipelines = ["lexical"]\nterms = 12\nmeasured_terms = 16\n',
                    encoding="utf-8")  # fmt: skip
    results = tmp_path / "results.csv"
    rows = run_experiment(load_experiment(plan), three_countries, results=results, show_progress=False,
                          say=lambda message: None)  # fmt: skip
    ece = {r["dataset"]: r["value"] for r in rows if r["metric"] == "ece"}
    assert sorted(map(str, ece)) == ["dnk_da", "mean:crosswalks", "nor_no", "swe_sv"]
    assert all(0 <= float(str(v)) <= 1 for v in ece.values())
    bins = [r for r in rows if str(r["dataset"]).startswith("reliability:")]
    assert {r["metric"] for r in bins} == {"bin_probability", "bin_accuracy"}
    # Fit on 12 terms per crosswalk, measured on 16 of each held-out one.
    assert sum(int(str(r["queries"])) for r in bins if r["metric"] == "bin_accuracy") == 3 * 16 * calibration.TOP_K
    assert {r["queries"] for r in rows if r["metric"] == "ece" and r["dataset"] != "mean:crosswalks"} == {16}

    monkeypatch.setattr("melo_core.evaluation.experiments.results.RESULTS_FILE", results)
    database = tmp_path / "melo.db"
    Store(f"sqlite:///{database}", create=True).close()
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{database}")
    monkeypatch.setenv("MELO_DATA", str(three_countries))
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    app = AppTest.from_file(str(root / "pages" / "5_Benchmark.py"), default_timeout=120).run()
    assert not app.exception
    assert "Calibration" in [h.value for h in app.subheader]
    table = next(d.value for d in app.dataframe if "lexical" in d.value.columns)
    assert list(table["crosswalk"]) == ["dnk_da", "nor_no", "swe_sv", "mean"]
    assert table["lexical"].iloc[:3].tolist() == pytest.approx(
        [float(str(ece[c])) for c in ("dnk_da", "nor_no", "swe_sv")]
    )
    assert len(app.get("plotly_chart")) >= 1  # the reliability diagram


def test_the_link_page_holds_a_melo_schemes_country_out_of_its_calibrator(started: str, tmp_path: Path,  # noqa: F811
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """nor_no is a MELO crosswalk: the Link page uses the calibrator fitted without Norway, as
    `propose` does (the one on every country learnt from nor_no's own decisions)."""
    from dataclasses import replace

    models = tmp_path / "models"
    monkeypatch.setenv("MELO_MODELS", str(models))
    everyone = fit_calibrator(synthetic_rows(), "lexical")
    calibration.save_calibrator(everyone, models)
    app = page(LINK).run()
    assert any(cell != "<1 %" for cell in app.dataframe[0].value["probability"])  # every country's: some chance
    # A fit without Norway that gives every candidate next to nothing: the page now shows that one.
    calibration.save_calibrator(replace(everyone.shifted(-30.0), hold_out_country="nor"), models)
    app.run()
    assert not app.exception
    assert all(cell == "<1 %" for cell in app.dataframe[0].value["probability"])


def test_the_link_page_says_when_a_schemes_probabilities_are_unchecked(started: str, tmp_path: Path,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The calibrator learnt on national crosswalks; on job-ad titles it runs high until a scheme's
    own decisions shift it. A scheme not named like a national crosswalk says so until 25 of its
    terms are decided on the page; nor_no does not."""
    from db.imports import import_terms, read_terms_csv

    note = "unchecked on this scheme until 25 decided terms shift them"
    models = tmp_path / "models"
    monkeypatch.setenv("MELO_MODELS", str(models))
    calibration.save_calibrator(fit_calibrator(synthetic_rows(), "lexical"), models)
    app = page(LINK).run()
    assert not app.exception and "probability" in app.dataframe[0].value.columns
    assert not any(note in c.value for c in app.caption)  # nor_no
    terms = tmp_path / "agency.csv"
    terms.write_text("code,label\n" + "".join(f"A{i},Sykepleier {i}\n" for i in range(30)), encoding="utf-8")
    with Store(started) as store:
        import_terms(store, "agency", read_terms_csv(terms), language="no")
    app = page(LINK)
    app.query_params["scheme"] = "agency"
    app.run()
    assert not app.exception
    assert any(f"{note} (0 so far)" in c.value for c in app.caption)
    with Store(started) as store:  # 25 terms shown with probabilities, as the page stores them, and decided
        nor_first = store.queue("nor_no", limit=1)[0]  # shown by the first run
        shown = [(s.concept_uri, s.score, s.confidence) for s in store.suggestions(nor_first.id, "lexical")]
        assert len(shown) > 1 and all(confidence is not None for _, _, confidence in shown)
        for i, term in enumerate(store.terms("agency")[:25]):
            if not store.suggestions(term.id, "lexical"):
                store.save_suggestions(term.id, "lexical", shown)
            store.decide(term.id, shown[i % 2][0], "exactMatch", "alice")
    app.run()
    assert not app.exception
    assert not any(note in c.value for c in app.caption)


def test_the_link_page_counts_imported_decisions_once_linked_again(started: str, tmp_path: Path,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Decisions that came with a scheme's import were never shown on the page: it links those terms
    again (without the scheme's own decisions) and they count towards the 25, as for `propose`."""
    from db.imports import import_terms, read_terms_csv

    note = "unchecked on this scheme until 25 decided terms shift them"
    models = tmp_path / "models"
    monkeypatch.setenv("MELO_MODELS", str(models))
    calibration.save_calibrator(fit_calibrator(synthetic_rows(), "lexical"), models)
    terms = tmp_path / "agency.csv"
    terms.write_text("code,label\n" + "".join(f"A{i},Sykepleier {i}\n" for i in range(30)), encoding="utf-8")
    with Store(started) as store:
        import_terms(store, "agency", read_terms_csv(terms), language="no")
        nurse = store.find_concepts("sykepleier", limit=1)[0].uri
        for term in store.terms("agency")[:24]:  # decided elsewhere: nothing shown, nothing stored
            store.decide(term.id, nurse, "exactMatch", "alice")
    app = page(LINK)
    app.query_params["scheme"] = "agency"
    app.run()
    assert not app.exception
    assert any(f"{note} (24 so far)" in c.value for c in app.caption)  # linked again: they count
    with Store(started) as store:
        store.decide(store.terms("agency")[24].id, nurse, "exactMatch", "alice")
        assert not store.suggestions(store.terms("agency")[0].id, "lexical")  # nothing forged as shown
    app.run()
    assert not app.exception
    assert not any(note in c.value for c in app.caption)


def test_the_link_page_refits_an_older_calibrator_in_the_background(three_countries: Path, esco_csv: Path,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """After an upgrade the calibrator on disk is of an older format: the Link page shows raw scores,
    says the probabilities are being refitted, and `prepare` refits them in the background (the
    pipeline is ready); the next term shows probabilities."""
    import time

    from db.quickstart import start_curation

    models = tmp_path / "models"
    for name, value in (("MELO_DATA", three_countries), ("MELO_ESCO", esco_csv), ("MELO_CACHE", tmp_path / "cache"),
                        ("MELO_MODELS", models), ("MELO_DB_URL", f"sqlite:///{tmp_path / 'melo.db'}")):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("MELO_PREPARE", raising=False)  # the app prepares in the background, as by default
    with Store(f"sqlite:///{tmp_path / 'melo.db'}", create=True) as store:
        start_curation(store, three_countries, "nor_no")
    older = json.loads(fit_calibrator(synthetic_rows(), "lexical").to_json())
    older["version"] = 1
    path = calibration.calibration_path("lexical", models_dir=models)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(older), encoding="utf-8")
    assert load_calibrator("lexical", models_dir=models) is None  # refused, as after an upgrade

    app = page(LINK).run()
    assert not app.exception
    assert any("being refitted in the background" in c.value for c in app.caption)
    assert "probability" not in app.dataframe[0].value.columns
    deadline = time.monotonic() + 300
    while load_calibrator("lexical", models_dir=models) is None and time.monotonic() < deadline:
        time.sleep(1)
    refitted = load_calibrator("lexical", models_dir=models)
    assert refitted is not None and refitted.countries == ["dnk", "nor", "swe"]  # from the data's crosswalks
    app.run()
    assert not app.exception
    assert all(cell.endswith(" %") for cell in app.dataframe[0].value["probability"])
    assert not any("Raw scores" in c.value for c in app.caption)


def test_the_link_pages_offset_follows_the_schemes_decisions(store: Store, tmp_path: Path) -> None:
    from db.imports import import_taxonomy, import_terms, read_terms_csv
    from tests.test_store import BAKER, NURSE, tiny_taxonomy
    from ui.calibration import scheme_shift

    import_taxonomy(store, tiny_taxonomy(), "esco", "v1")
    terms = tmp_path / "terms.csv"
    terms.write_text("code,label\n" + "".join(f"T{i},Term {i}\n" for i in range(30)), encoding="utf-8")
    import_terms(store, "tst", read_terms_csv(terms), language="no")
    ids = [t.id for t in store.terms("tst")]
    for i, term_id in enumerate(ids):  # the calibrator said 20 %, the curators took the first candidate 9 times in 10
        store.save_suggestions(term_id, "lexical", [(BAKER, 0.7, 0.2), (NURSE, 0.3, 0.05)])
        if i < 24:
            store.decide(term_id, BAKER if i % 10 else NURSE, "exactMatch", "alice")
    assert scheme_shift(store, "tst", "lexical")[0] == 0.0  # 24 decided terms: too few yet
    store.decide(ids[24], BAKER, "exactMatch", "alice")
    offset = scheme_shift(store, "tst", "lexical")[0]
    assert offset > 2.0  # logit(0.2) = -1.39: the shift lifts the first candidate towards what curators did
    assert scheme_shift(store, "tst", "best")[0] == 0.0  # another pipeline's probabilities: none stored
    assert 0 < scheme_shift(store, "tst", "lexical", spread=0.5)[0] < offset  # the calibrator's prior holds it back


def test_the_link_pages_offset_is_fitted_on_the_calibrators_own_probabilities(store: Store, tmp_path: Path) -> None:
    """Probabilities the Link page showed after a shift are stored with it; the next fit takes it out,
    so the same decisions give the same offset whether or not their probabilities were shifted."""
    from db.imports import import_taxonomy, import_terms, read_terms_csv
    from tests.test_store import BAKER, NURSE, tiny_taxonomy
    from ui.calibration import scheme_shift

    import_taxonomy(store, tiny_taxonomy(), "esco", "v1")
    terms = tmp_path / "terms.csv"
    terms.write_text("code,label\n" + "".join(f"T{i},Term {i}\n" for i in range(40)), encoding="utf-8")
    for name in ("plain", "shown"):
        import_terms(store, name, read_terms_csv(terms), language="no")
    shift = 1.5
    shifted = [1 / (1 + np.exp(-(np.log(p / (1 - p)) + shift))) for p in (0.2, 0.05)]
    for name in ("plain", "shown"):
        for i, term in enumerate(store.terms(name)):
            # the first 20 as the calibrator gave them, the rest as shown after a shift of 1.5
            stored = (0.2, 0.05) if name == "plain" or i < 20 else shifted
            store.save_suggestions(term.id, "lexical", [(BAKER, 0.7, stored[0]), (NURSE, 0.3, stored[1])],
                                   confidence_offset=shift if stored is shifted else None)  # fmt: skip
            store.decide(term.id, BAKER if i % 10 else NURSE, "exactMatch", "alice")
    assert {s.confidence_offset for s in store.top_suggestions("shown", max_rank=10)} == {None, shift}
    plain = scheme_shift(store, "plain", "lexical")[0]
    assert plain > 2.0
    assert scheme_shift(store, "shown", "lexical")[0] == pytest.approx(plain, abs=1e-6)
