"""Known mentions (other countries' crosswalk titles) lift the concepts they match, in every scorer."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import (
    ALIAS_RELATIONS,
    RELATIONS,
    Crosswalk,
    crosswalk_path,
    list_crosswalks,
    load_crosswalk,
)
from melo_core.esco.datasets import load_dataset
from melo_core.evaluation.experiments.grids import fusion as fusion_grid
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.hybrid import HybridScorer
from melo_core.scorers.known_mentions import (
    KnownMentions,
    KnownMentionScorer,
    crosswalk_mentions,
    dataset_mentions,
)
from melo_core.scorers.tfidf import TfidfScorer

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ["baker", "pastry cook", "butcher", "carpenter"]
CONCEPTS = ("bake", "bake", "butch", "carp")


def _lifted(weight: float) -> tuple[KnownMentionScorer, TfidfScorer]:
    mentions = KnownMentions(
        ("Konditor", "boulanger", "Fleischer", "nowhere"), ("bake", "bake", "butch", "absent"), weight
    )
    context = ScorerContext("de", ("en",), concepts=CONCEPTS, mentions=mentions)
    scorer = create_scorer("char-tfidf", context)
    bare = create_scorer("char-tfidf", ScorerContext("de", ("en",)))
    scorer.fit(CORPUS)
    bare.fit(CORPUS)
    return scorer, bare  # type: ignore[return-value]


def test_mentions_lift_the_forms_of_their_concept_by_the_weight() -> None:
    queries = ["Konditorin", "Fleischerei", "carpenters"]
    for weight in (0.5, 1.0):
        scorer, bare = _lifted(weight)
        assert isinstance(scorer, KnownMentionScorer)
        base = bare.score(queries)
        against = bare.score_against(queries, ["Konditor", "boulanger", "Fleischer"])
        best = {"bake": against[:, :2].max(axis=1), "butch": against[:, 2]}
        expected = base.copy()
        for column, concept in enumerate(CONCEPTS):
            if concept in best:
                expected[:, column] += weight * np.maximum(0, best[concept] - base[:, column])
        np.testing.assert_allclose(scorer.score(queries), expected, rtol=1e-9)
    # "Konditorin" shares little with the English corpus; its German mention ranks the bakers first.
    assert base[0].argmax() != 0 and scorer.score(queries)[0].argmax() in (0, 1)
    np.testing.assert_allclose(scorer.score(queries)[:, 3], base[:, 3])  # carpenter: no mention, no change


def test_a_fusion_lifts_its_parts_not_its_fused_scores() -> None:
    mentions = KnownMentions(("Bäcker",), ("bake",), 0.5)
    fusion = create_scorer("wsum:0.5*char-tfidf+0.5*word-tfidf", ScorerContext(concepts=CONCEPTS, mentions=mentions))
    assert isinstance(fusion, HybridScorer)
    assert all(isinstance(part, KnownMentionScorer) for part in fusion.components)
    with pytest.raises(ValueError, match="known mentions need the concept"):
        create_scorer("char-tfidf", ScorerContext(mentions=mentions)).fit(CORPUS)
    with pytest.raises(ValueError, match="mention weight"):
        KnownMentions(("a",), ("b",), 0.0)


def test_crosswalk_mentions_leave_out_the_held_out_country(melo_data: Path) -> None:
    got = crosswalk_mentions(melo_data, "bel", relations=RELATIONS)
    expected = set()
    for code in list_crosswalks(melo_data):
        if not code.startswith("bel_"):
            for term in load_crosswalk(crosswalk_path(melo_data, code)).terms:
                expected |= {(term.title, uri) for uri in term.matches if term.title}
    assert set(zip(got.texts, got.concepts, strict=True)) == expected
    belgian = {t.title for t in load_crosswalk(crosswalk_path(melo_data, "bel_fr")).terms}
    french = {t.title for t in load_crosswalk(crosswalk_path(melo_data, "fra_fr")).terms}
    assert belgian - french and not (belgian - french) & set(got.texts)
    aliases = crosswalk_mentions(melo_data, "bel", relations=ALIAS_RELATIONS, languages=["fr"])
    assert 0 < len(aliases.texts) < len(got.texts) and set(aliases.texts) <= french
    with pytest.raises(MeloInputError, match="unknown crosswalk"):
        crosswalk_mentions(melo_data, "bel", codes="xxx_yy")
    with pytest.raises(MeloInputError, match="own country"):
        dataset_mentions(melo_data, "my-terms")


def test_own_country_mentions_would_give_the_answers_away(datasets_dir: Path, melo_data: Path) -> None:
    """Holding out the country matters: with its own crosswalk as mentions a dataset is far
    easier than with another country's, so a reported run must never see its own."""
    dataset = load_dataset(datasets_dir / "aut_q_de_c_de").subset(150)
    protocol = Protocol("trec", 0)

    def mrr(mentions: KnownMentions | None) -> float:
        scorer = create_scorer("char-tfidf", ScorerContext.for_dataset(dataset, show_progress=False, mentions=mentions))
        return evaluate(dataset, scorer, protocol).metrics["mrr"]

    own = crosswalk_mentions(melo_data, "deu", codes="aut_de", relations=RELATIONS)
    fair = crosswalk_mentions(melo_data, "aut", codes="deu_de", relations=RELATIONS, weight=0.5)
    bare, fair_mrr, own_mrr = mrr(None), mrr(fair), mrr(own)
    assert bare < fair_mrr < own_mrr - 0.2


def test_eval_cli_with_mentions(datasets_dir: Path, melo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.csv"
    run = subprocess.run(
        [sys.executable, "-m", "melo_core", "eval", "--data", str(melo_data), "--datasets", "aut_q_de_c_de",
         "--scorers", "char-tfidf", "--depth", "0", "--limit-queries", "150", "--mentions", "0.5",
         "--mention-relations", "all", "--quiet", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    row = next(csv.DictReader(out.open(encoding="utf-8")))
    assert row["scorer"] == "char-tfidf | mentions=0.5"
    dataset = load_dataset(datasets_dir / "aut_q_de_c_de").subset(150)
    fair = dataset_mentions(melo_data, dataset.name, relations=RELATIONS, weight=0.5)
    scorer = create_scorer("char-tfidf", ScorerContext.for_dataset(dataset, show_progress=False, mentions=fair))
    assert float(row["mrr"]) == pytest.approx(evaluate(dataset, scorer, Protocol("trec", 0)).metrics["mrr"], abs=1e-6)
    bad = subprocess.run([sys.executable, "-m", "melo_core", "eval", "--data", str(melo_data), "--datasets",
                          "aut_q_de_c_de", "--scorers", "char-tfidf", "--mentions", "2"],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert bad.returncode != 0 and "--mentions must be in [0, 1]" in bad.stderr


def test_fusion_grid_pools_agree_with_evaluate_under_mentions(datasets_dir: Path, melo_data: Path) -> None:
    dataset = load_dataset(datasets_dir / "aut_q_de_c_de").subset(120)
    mentions = crosswalk_mentions(melo_data, "aut", codes="deu_de,fra_fr", relations=RELATIONS)
    grid = fusion_grid.grid_mrr(dataset, "char-tfidf", ["word-tfidf"], [0.0], ["asis"],
                               mention_weights=(0.0, 0.5), mentions=mentions)  # fmt: skip
    for key in ("wsum:0.3*char-tfidf+0.7*word-tfidf", "wsum:0.3*char-tfidf+0.7*word-tfidf | mentions=0.5"):
        spec, weight = fusion_grid.split_config_key(key)
        lifted = KnownMentions(mentions.texts, mentions.concepts, weight) if weight else None
        scorer = create_scorer(spec, ScorerContext.for_dataset(dataset, show_progress=False, mentions=lifted))
        assert grid[key] == pytest.approx(evaluate(dataset, scorer, Protocol("trec", 0)).metrics["mrr"], abs=1e-4)
    assert grid["wsum:0.3*char-tfidf+0.7*word-tfidf | mentions=0.5"] != grid["wsum:0.3*char-tfidf+0.7*word-tfidf"]


def counted_crosswalk_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each parse of a crosswalk file from now on, as the arguments it was read with."""
    from melo_core.esco import crosswalk as crosswalk_module

    reads: list[object] = []
    read = crosswalk_module.load_crosswalk

    def reading(*args: Any) -> Crosswalk:
        reads.append(args)
        return read(*args)

    monkeypatch.setattr(crosswalk_module, "load_crosswalk", reading)
    return reads


def write_crosswalk(data: Path, code: str, title: str, uri: str, relation: str = "exactMatch") -> Path:
    """A standardised crosswalk of one term under ``data``."""
    import json

    path = data / "raw" / "crosswalks_standard" / code / "crosswalk.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"1": {"title": title, "matches": {uri: relation}}}), encoding="utf-8")
    return path


def test_crosswalk_mentions_are_read_once_until_a_crosswalk_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold `link` asks for the crosswalks' mentions up to three times (the default pipeline's
    readiness, its fallback's, the linker): parsed once while the files stay as they are, and a
    later process reads the copy kept in the cache."""
    from melo_core.linking.pipeline import _crosswalk_mentions, crosswalk_mentions_of

    data, cache = tmp_path / "data", tmp_path / "cache"
    uri = "http://data.europa.eu/esco/occupation/baker"
    write_crosswalk(data, "xyz_en", "Baker", uri)
    reads = counted_crosswalk_reads(monkeypatch)

    first = crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache)
    assert first == [("Baker", uri, "en")] and len(reads) == 1
    first.clear()  # a caller's list is its own
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache) == [("Baker", uri, "en")] and len(reads) == 1
    _crosswalk_mentions.cache_clear()  # as a new process
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache) == [("Baker", uri, "en")] and len(reads) == 1
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, "xyz", cache_dir=cache) == []

    write_crosswalk(data, "xyz_en", "Master baker", uri, "narrowMatch")
    changed = [("Master baker", uri, "en")]
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache) == changed and len(reads) == 2
    _crosswalk_mentions.cache_clear()
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache) == changed and len(reads) == 2
    assert crosswalk_mentions_of(data, ("exactMatch",), cache_dir=cache) == []
    for kept in (cache / "crosswalk_mentions").glob("*.pkl"):
        kept.write_bytes(b"partial")  # a file cut short reads as a miss
    _crosswalk_mentions.cache_clear()
    assert crosswalk_mentions_of(data, ALIAS_RELATIONS, cache_dir=cache) == changed and len(reads) == 4


def test_each_crosswalk_is_parsed_once_whichever_country_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calibration and the simulation ask once per held-out country; each used to parse every
    other crosswalk again (24 parses of 24 crosswalks: 47 s of lexical's calibration)."""
    from melo_core.linking.pipeline import crosswalk_mentions_of

    data, cache = tmp_path / "data", tmp_path / "cache"
    uri = "http://data.europa.eu/esco/occupation/baker"
    for code, title in (("abc_en", "Baker"), ("def_en", "Bread baker"), ("ghi_en", "Pastry baker")):
        write_crosswalk(data, code, title, uri)
    reads = counted_crosswalk_reads(monkeypatch)
    titles = {country: [t for t, _, _ in crosswalk_mentions_of(data, ALIAS_RELATIONS, country, cache_dir=cache)]
              for country in ("abc", "def", "ghi", None)}  # fmt: skip
    assert titles == {"abc": ["Bread baker", "Pastry baker"], "def": ["Baker", "Pastry baker"],
                      "ghi": ["Baker", "Bread baker"], None: ["Baker", "Bread baker", "Pastry baker"]}  # fmt: skip
    assert len(reads) == 3


def test_shared_head_counts_the_common_start() -> None:
    from melo_core.scorers.mention_index import shared_head

    given = [f"term {i}" for i in range(1000)]
    assert shared_head(given, [*given, "decided"]) == 1000  # a decision
    assert shared_head([*given, "decided"], given) == 1000  # its undo
    assert shared_head(given, [*given[:400], "theirs", *given[401:]]) == 400
    assert shared_head([], given) == 0 and shared_head(given, given) == 1000
