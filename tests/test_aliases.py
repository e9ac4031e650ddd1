"""Curator aliases in the linker, from the store, and the simulated curator (`simulate`), on a
slice of real data: the Norwegian ESCO labels of nor_q_no_c_no and the nor_no crosswalk."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from db.aliases import accepted_aliases
from db.imports import import_terms, read_terms_csv
from db.store import Store
from db.testing import run_cli
from melo_core.esco.crosswalk import crosswalk_decisions, crosswalk_path, load_crosswalk
from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_melo
from melo_core.evaluation.simulate import simulate
from melo_core.linking.linker import Linker, mention_form
from melo_core.linking.scheme_learning import Boilerplate
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.base import ExtendableScorer
from melo_core.scorers.mention_index import MentionIndex


@pytest.fixture(scope="module")
def taxonomy(nor_data: Path) -> Taxonomy:
    return taxonomy_from_melo(nor_data)


@pytest.fixture(scope="module")
def small_taxonomy(taxonomy: Taxonomy) -> Taxonomy:
    """400 concepts (about 900 labels): muse embeds them in seconds."""
    return Taxonomy(taxonomy.concepts[:400])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("alias-cache")


# An occupation name made of everyday words, and a concept it has nothing to do with.
ALIAS = "Nattevakt ved fiskeoppdrett på kysten"
NEAR = "nattevakt fiskeoppdrett kysten"


def target(taxonomy: Taxonomy, index: int = 123) -> str:
    return taxonomy.concepts[index].uri


def ranking(linker: Linker, query: str, top_k: int = 10) -> list[tuple[str, float]]:
    return [(c.concept_uri, round(c.score, 9)) for c in linker.link([query], top_k=top_k)[0]]


# -- scorers: score_against uses the fitted representation -------------------------------------


@pytest.mark.parametrize("name", ["char-tfidf", "word-tfidf", "bm25", "edit-distance"])
def test_score_against_corpus_texts_equals_their_fitted_scores(taxonomy: Taxonomy, name: str) -> None:
    corpus = taxonomy.form_table().texts[:3000]
    scorer = create_scorer(name, ScorerContext("no", ("no",)))
    assert isinstance(scorer, ExtendableScorer)
    scorer.fit(corpus)
    queries = ["sykepleier", "baker og konditor", NEAR]
    some = [5, 17, 2999, 400]
    expected = scorer.score(queries)[:, some]
    np.testing.assert_allclose(scorer.score_against(queries, [corpus[i] for i in some]), expected, atol=1e-12)
    # Twice (the second time from the memo of transformed texts): the same.
    np.testing.assert_allclose(scorer.score_against(queries, [corpus[i] for i in some]), expected, atol=1e-12)


# -- the linker -------------------------------------------------------------------------------------


# BM25 favours short labels: the one-word label "nattevakt" outscores the alias for NEAR.
@pytest.mark.parametrize(("scorer", "near"), [("char-tfidf", NEAR), ("bm25", f"{ALIAS} i Nord-Norge")])
def test_a_lexical_alias_ranks_its_concept_first(taxonomy: Taxonomy, cache: Path, scorer: str, near: str) -> None:
    linker = Linker(taxonomy, scorer, cache_dir=cache)
    uri = target(taxonomy)
    assert uri not in [u for u, _ in ranking(linker, ALIAS, 3)]
    assert linker.add_mentions([(ALIAS, uri, "no")]) == 1
    for query in (ALIAS, near):
        [top, *_] = linker.link([query], top_k=5)[0]
        assert top.concept_uri == uri, query
        assert (top.matched_label, top.matched_language, top.via_mention) == (ALIAS, "no", True)
    others = linker.link(["sykepleier"], top_k=5)[0]
    assert not any(c.via_mention for c in others)


@pytest.mark.parametrize("scorer", ["muse", "wsum:0.3*char-tfidf+0.7*muse"])
def test_a_dense_or_hybrid_alias_ranks_its_concept_first(small_taxonomy: Taxonomy, cache: Path, scorer: str) -> None:
    linker = Linker(small_taxonomy, scorer, cache_dir=cache)
    uri = target(small_taxonomy, 300)
    assert uri not in [u for u, _ in ranking(linker, ALIAS, 3)]
    linker.add_mentions([(ALIAS, uri, "no")])
    for query in (ALIAS, NEAR):
        [top, *_] = linker.link([query], top_k=5)[0]
        assert (top.concept_uri, top.matched_label, top.via_mention) == (uri, ALIAS, True), query
    [top, *_] = linker.link([ALIAS], top_k=1)[0]
    assert all(score == pytest.approx(1.0, abs=1e-5) for score in top.component_scores.values())


def test_aliases_stay_out_of_the_shared_caches(small_taxonomy: Taxonomy, tmp_path: Path) -> None:
    linker = Linker(small_taxonomy, "wsum:0.5*char-tfidf+0.5*muse", cache_dir=tmp_path)
    before = ranking(linker, NEAR)

    def shared() -> dict[Path, int]:
        # The fitted state every linker reads; the embedding cache and the known mentions' own
        # matrices (`*.mentions/`) are keyed by their texts, so no other linker reads an alias there.
        return {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")
                if p.is_file() and "embeddings" not in p.parts and not p.parent.name.endswith(".mentions")}  # fmt: skip

    files = shared()
    linker.add_mentions([(ALIAS, target(small_taxonomy, 300), "no")])
    assert ranking(linker, NEAR) != before
    assert shared() == files  # lexical state, vector snapshot and faiss index untouched
    fresh = Linker(small_taxonomy, "wsum:0.5*char-tfidf+0.5*muse", cache_dir=tmp_path)
    assert ranking(fresh, NEAR) == before and not fresh.mentions


def test_duplicates_unknown_concepts_and_empty_mentions_are_ignored(taxonomy: Taxonomy, cache: Path) -> None:
    linker = Linker(taxonomy, "char-tfidf", cache_dir=cache)
    before = ranking(linker, NEAR)
    uri = target(taxonomy)
    label = taxonomy.by_uri[uri].labels["no"].preferred
    assert label
    added = linker.add_mentions([
        (ALIAS, uri, "no"),
        (f"  {ALIAS} ", uri, "no"),  # the same text
        (f"{ALIAS} (h/f/x)", uri, "no"),  # the same once its gender marker is dropped
        (ALIAS, "http://data.europa.eu/esco/occupation/none", "no"),
        ("   ", uri, "no"),
    ])  # fmt: skip
    assert added == 1 and len(linker.mentions) == 1
    assert linker.add_mentions([(ALIAS, uri, None)]) == 0
    # Kept, as evaluation keeps them: a term equal to a label (dense scores mix in the concept's
    # centroid, so it still lifts) and a term in a language the linker does not search.
    assert linker.add_mentions([(label, uri, "no"), ("Night watch", uri, "de")]) == 2
    assert linker.add_mentions([("Fiskeoppdrettsvakt (m/w/d)", uri, None)]) == 1  # no language: kept
    assert [(m.text, m.form, m.language) for m in linker.mentions][-1] == (
        "Fiskeoppdrettsvakt (m/w/d)",
        "Fiskeoppdrettsvakt",
        "",
    )
    assert linker.add_mentions([("  Nattevakt   på  skip ", uri, "no")]) == 1  # shown and scored with spaces collapsed
    assert (linker.mentions[-1].text, linker.mentions[-1].form) == ("Nattevakt på skip", "Nattevakt på skip")
    # set_mentions keeps the wanted ones (not encoded again) and drops the rest.
    assert linker.set_mentions([(ALIAS, uri, "no")]) == (0, 4)
    assert linker.remove_mentions([(ALIAS, uri)]) == 1
    assert ranking(linker, NEAR) == before


def test_the_same_mentions_set_again_as_the_link_page_does_on_each_rerun(taxonomy: Taxonomy, cache: Path) -> None:
    """The Link page sets every known mention on each rerun, one more after a decision: the
    same list changes nothing; a changed one is followed exactly, reused mentions included."""
    linker = Linker(taxonomy, "char-tfidf", cache_dir=cache)
    before = ranking(linker, NEAR)
    uri, other = target(taxonomy), target(taxonomy, 300)
    given = [(ALIAS, uri, "no"), (f"{ALIAS} (h/f/x)", uri, "no"), ("Fiskevakt", other, None), ("  ", uri, "no")]
    assert linker.set_mentions(given) == (2, 0)
    lifted = ranking(linker, NEAR)
    assert lifted != before
    assert linker.set_mentions(list(given)) == (0, 0) and ranking(linker, NEAR) == lifted
    assert linker.set_mentions(given[1:]) == (0, 0)  # ALIAS again from its gendered twin
    assert linker.set_mentions(given[2:]) == (0, 1) and [m.text for m in linker.mentions] == ["Fiskevakt"]
    assert linker.set_mentions(given) == (1, 0) and ranking(linker, NEAR) == lifted
    moved = [*given[:2], ("Fiskevakt", uri, None), given[3]]  # as long, one concept changed
    assert linker.set_mentions(moved) == (1, 1) and {m.concept_uri for m in linker.mentions} == {uri}
    assert linker.set_mentions([]) == (0, 2) and ranking(linker, NEAR) == before


def test_mentions_are_indexed_by_concept_then_form(taxonomy: Taxonomy, nor_data: Path, cache: Path) -> None:
    """The mention index groups the mentions by concept (taxonomy order), each concept's by form,
    and numbers the distinct forms by first appearance in the order given: a form shared by two
    concepts is scored once. Real mentions: the nor_no crosswalk, given in its own (unsorted) order."""
    linker = Linker(taxonomy, "char-tfidf", cache_dir=cache)
    pairs = crosswalk_decisions(nor_data, "nor_no", relations=("exactMatch", "narrowMatch", "broadMatch", "closeMatch"))
    shared = (pairs[0][0], pairs[-1][1], "no")  # the first title again, for another concept
    linker.set_mentions([*reversed(pairs), shared])
    index = linker._mention_index
    assert index is not None
    position = {c.uri: i for i, c in enumerate(taxonomy.concepts)}
    expected = sorted(linker.mentions, key=lambda m: (position[m.concept_uri], m.form))
    assert index.mentions == expected
    assert index.texts == list(dict.fromkeys(m.form for m in linker.mentions))
    assert [index.texts[i] for i in index.text_of] == [m.form for m in expected]
    groups = [expected[a:b] for a, b in zip(index.starts, [*index.starts[1:], len(expected)], strict=True)]
    assert all(len({m.concept_uri for m in group}) == 1 for group in groups)
    assert len(groups) == len({m.concept_uri for m in expected})


@pytest.mark.parametrize("scorer", ["char-tfidf", "wsum:0.5*char-tfidf+0.5*muse"])
def test_a_few_mentions_given_after_the_others_are_indexed_as_if_given_at_once(
    taxonomy: Taxonomy, nor_data: Path, cache: Path, scorer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Link page after a decision: the same mentions and one more (after an undo: one fewer).
    The linker inserts the new ones into its index (takes the last out) and extends (cuts) what
    its components hold per form (sparse rows, vectors) instead of rebuilding them: the result
    must be what a linker given them all at once has."""
    relations = ("exactMatch", "narrowMatch", "broadMatch", "closeMatch")
    pairs = crosswalk_decisions(nor_data, "nor_no", relations=relations)[::15]  # 201, 167 distinct titles
    mentioned = {uri for _, uri, _ in pairs}
    small_taxonomy = Taxonomy(c for c in taxonomy.concepts if c.uri in mentioned or c.number % 20 == 0)
    earlier, later = pairs[:-6], pairs[-6:]
    # A known form sorted before the others, for another concept; a repeat.
    later += [(min(t for t, _, _ in earlier), later[0][1], "no"), earlier[1]]
    queries = [NEAR, *(t for t, _, _ in later[:4])]

    def indexed(linker: Linker) -> tuple[object, ...]:
        index = linker._mention_index
        assert index is not None
        arrays = [getattr(index, name).tolist() for name in ("text_of", "concept_of", "starts", "form_slot")]
        return index.mentions, index.texts, arrays, [ranking(linker, q) for q in queries]

    def given_at_once(mentions: list[tuple[str, str, str | None]]) -> tuple[object, ...]:
        linker = Linker(small_taxonomy, scorer, cache_dir=cache)
        linker.set_mentions(mentions)
        return indexed(linker)

    linker = Linker(small_taxonomy, scorer, cache_dir=cache)
    linker.set_mentions(earlier)
    before = indexed(linker)  # the components now hold the earlier forms
    for one in later:  # as on the Link page: a decision, then the next term linked
        assert linker.set_mentions([*linker._mentions_given, one]) == (0 if one is later[-1] else 1, 0)
        ranking(linker, NEAR)
    after = indexed(linker)
    assert after == given_at_once([*earlier, *later])
    assert len(after[1]) > len(before[1]) and after[3] != before[3]  # type: ignore[arg-type]
    # Undos: the last decisions taken back, one or two at a time. The repeat and the form already
    # known remove no form; the index shortens, and the components cut what they hold.
    for cut in (1, 2, 1):
        given = linker._mentions_given[:-cut]
        linker.set_mentions(given)
        assert indexed(linker) == given_at_once(given)
    linker.set_mentions([*linker._mentions_given, *later[-4:]])  # decided again after the undos
    assert indexed(linker) == after
    linker.set_mentions(linker._mentions_given[:-2])
    # Other decisions: a repeat, a concept not in the taxonomy (dropped), a known mention in
    # another language (no new mention), a new one.
    other = [earlier[2], ("Fisker", "http://example.org/no-such-concept", "no"), (*later[0][:2], "en"),
             (ALIAS, later[1][1], "no")]  # fmt: skip
    assert linker.set_mentions([*linker._mentions_given, *other]) == (1, 0)
    for cut in (1, 2):
        linker.set_mentions(linker._mentions_given[:-cut])
        assert indexed(linker) == given_at_once(linker._mentions_given)
    # Undos after other curators' decisions: one taken back from before the last two (theirs, which
    # stay); then one more taken back and a new one after theirs. Neither rebuilds the index.
    linker.set_mentions([*earlier, *later[:5]])
    builds: list[int] = []
    build = MentionIndex.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[MentionIndex], *a: Any, **k: Any) -> MentionIndex:
        builds.append(1)
        return build(cls, *a, **k)

    monkeypatch.setattr(MentionIndex, "build", classmethod(counted))
    for given in ([*earlier, *later[:2], *later[3:5]], [*earlier, later[0], *later[3:5], (ALIAS, later[2][1], "no")]):
        keys_before = {(m.form, m.concept_uri) for m in linker.mentions}
        changed = linker.set_mentions(given)
        assert not builds
        keys_after = {(m.form, m.concept_uri) for m in linker.mentions}
        assert changed == (len(keys_after - keys_before), len(keys_before - keys_after)) != (0, 0)
        assert indexed(linker) == given_at_once(given)
        builds.clear()
    linker.set_mentions(earlier)  # every later one taken back
    assert indexed(linker) == before
    moved = [*earlier[1:], *later, earlier[0], (ALIAS, later[0][1], "no")]  # longer, not the same ones and more
    linker.set_mentions(moved)
    assert indexed(linker) == given_at_once(moved)
    linker.set_mentions(earlier)
    assert indexed(linker) == before


def test_gender_markers_are_left_out_of_mention_forms() -> None:
    assert mention_form("Technicien de scène polyvalent (h/f/x)") == "Technicien de scène polyvalent"
    assert mention_form("Bäcker (m/w/d) Filiale") == "Bäcker Filiale"
    assert mention_form("Dorfhelfer (m./w.)") == "Dorfhelfer"
    assert mention_form("Ingenieur (DI)") == "Ingenieur (DI)"  # a title, not a gender marker


def test_a_shared_gender_marker_does_not_pull_other_terms_to_an_alias(taxonomy: Taxonomy, cache: Path) -> None:
    linker = Linker(taxonomy, "char-tfidf", cache_dir=cache)
    uri = target(taxonomy)
    linker.add_mentions([(f"{ALIAS} (h/f/x)", uri, "no")])
    [top, *_] = linker.link(["Sykepleier (h/f/x)"], top_k=3)[0]
    assert top.concept_uri != uri
    [top, *_] = linker.link([f"{ALIAS} (h/f/x)"], top_k=3)[0]
    assert (top.concept_uri, top.matched_label) == (uri, f"{ALIAS} (h/f/x)")


# -- from the store -------------------------------------------------------------------------------


def test_accepted_aliases_are_the_current_exact_and_narrow_matches(store: Store, tmp_path: Path) -> None:
    rows = ["code,label,lang"] + [f"T{i},Term {i}," for i in range(1, 9)] + ["T9,Termo nove,pt"]
    (tmp_path / "terms.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    import_terms(store, "tst", read_terms_csv(tmp_path / "terms.csv"), language="no")
    (tmp_path / "other.csv").write_text("code,label\nX1,Other term\n", encoding="utf-8")
    import_terms(store, "other", read_terms_csv(tmp_path / "other.csv"), language="de")

    def uri(n: int) -> str:
        return f"http://data.europa.eu/esco/occupation/c{n}"

    def decide(code: str, concept: str, outcome: str, scheme: str = "tst") -> None:
        term = store.term(scheme, code)
        assert term is not None
        store.decide(term.id, concept, outcome, "alice")

    decide("T1", uri(1), "exactMatch")
    decide("T2", uri(2), "narrowMatch")
    for code, outcome in (("T3", "broadMatch"), ("T4", "closeMatch"), ("T5", "relatedMatch"), ("T6", "rejected")):
        decide(code, uri(3), outcome)
    decide("T7", uri(7), "exactMatch")
    store.undo(store.term("tst", "T7").id, uri(7), "alice")  # type: ignore[union-attr]
    decide("T8", uri(8), "exactMatch")
    decide("T8", uri(8), "broadMatch")  # changed its mind: no longer an alias
    decide("T9", uri(9), "exactMatch")
    decide("X1", uri(1), "narrowMatch", scheme="other")
    assert accepted_aliases(store) == [
        ("Term 1", uri(1), "no"),
        ("Term 2", uri(2), "no"),
        ("Termo nove", uri(9), "pt"),  # the term's own language
        ("Other term", uri(1), "de"),
    ]
    assert accepted_aliases(store, "other") == [("Other term", uri(1), "de")]


# -- the simulated curator ---------------------------------------------------------------------------


@pytest.fixture
def sim_env(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("MELO_CACHE", str(cache))


def test_simulate_command_on_a_crosswalk_slice(nor_data: Path, tmp_path: Path, sim_env: None) -> None:
    out = tmp_path / "steps.csv"
    code, stdout, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--limit", "40",
                                   "--seed", "3", "--out", str(out), "--pipeline", "lexical")  # fmt: skip
    assert code == 0, stderr
    lines = stdout.strip().splitlines()
    assert lines[0].startswith("nor_no: 40 terms in random order (seed 3") and "ESCO labels in no" in lines[0]
    assert lines[1].startswith("learning") and lines[2].startswith("static")
    assert "MRR of the undecided terms after 0%" in lines[1]
    assert "simulating nor_no" in stderr  # the progress bar
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 40 and [r["step"] for r in rows] == [str(i) for i in range(1, 41)]
    assert {r["relation"] for r in rows} <= {"exactMatch", "narrowMatch", "broadMatch", "closeMatch"}
    # The pipeline's mention relations teach (lexical: all four, as on the Link page), but not a
    # term that is mostly the scheme's boilerplate (melo_core.linking.scheme_learning).
    boilerplate = Boilerplate.of([t.title for t in load_crosswalk(crosswalk_path(nor_data, "nor_no")).terms])
    assert all(r["taught"] == str(int(boilerplate.teaches_mention(r["title"]))) for r in rows)
    assert sum(r["taught"] == "1" for r in rows) > 30
    assert "effort" in lines[1] and "acc@1" in lines[1]
    for r in rows:
        assert r["static_rank"] == "inf" or 1 <= int(r["static_rank"]) <= 100
    # The same seed gives the same order.
    _, again, _ = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--limit", "40", "--seed",
                          "3", "--quiet", "--pipeline", "lexical")  # fmt: skip
    assert again.splitlines()[1:] == lines[1:]


def test_simulate_command_with_batch_proposals(nor_data: Path, tmp_path: Path, sim_env: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from tests.test_proposals import write_calibrator

    out = tmp_path / "steps.csv"
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    code, _, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--limit", "40",
                              "--pipeline", "lexical", "--proposals")  # fmt: skip
    assert code == 2 and "lexical-without-nor.json" in stderr and "prepare --pipeline lexical" in stderr
    write_calibrator(tmp_path / "models", "lexical", "nor")
    code, stdout, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--limit", "40",
                                   "--pipeline", "lexical", "--proposals", "--out", str(out), "--quiet")  # fmt: skip
    assert code == 0, stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    proposed = [r for r in rows if r["proposed"] == "1"]
    confirmed = [r for r in proposed if r["static_rank"] == "1"]
    assert proposed and f"{len(proposed)} proposed in a batch first ({len(confirmed)} confirmed" in stdout
    assert all(r["learning_rank"] == "1" for r in confirmed)
    code, _, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--scorer", "char-tfidf",
                              "--proposals")  # fmt: skip
    assert code == 2 and "--proposals needs a pipeline" in stderr


def write_crosswalk(folder: Path, terms: dict[str, tuple[str, str, str]]) -> Path:
    path = folder / "tst_no" / "crosswalk.json"
    path.parent.mkdir(parents=True)
    raw = {code: {"title": title, "description": "", "matches": {uri: relation}}
           for code, (title, uri, relation) in terms.items()}  # fmt: skip
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    return path


def test_the_learning_linker_gains_where_later_terms_repeat_earlier_wording(
    nor_data: Path, taxonomy: Taxonomy, tmp_path: Path, sim_env: None
) -> None:
    # Pairs of terms worded alike, each pair mapped to a concept no label of which resembles them;
    # a broad match repeats a pair's wording for another concept, but teaches nothing.
    wordings = ["Nattevakt ved fiskeoppdrett på kysten", "Fagarbeider i røkeri for laks og ørret",
                "Koordinator for frivillige på festival", "Sjåfør av feiebil i sentrum"]  # fmt: skip
    terms: dict[str, tuple[str, str, str]] = {}
    for i, wording in enumerate(wordings):
        uri = taxonomy.concepts[100 + 50 * i].uri
        terms[f"A{i}"] = (wording, uri, "exactMatch")
        terms[f"B{i}"] = (f"{wording}, nattskift", uri, "narrowMatch")
    terms["C0"] = (f"{wordings[0]} (vikar)", taxonomy.concepts[90].uri, "broadMatch")
    path = write_crosswalk(tmp_path, terms)
    out = tmp_path / "steps.csv"
    for seed in (0, 1, 2):
        code, stdout, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", str(path), "--seed",
                                       str(seed), "--out", str(out), "--quiet", "--pipeline", "lexical")  # fmt: skip
        assert code == 0, stderr
        assert "left out: 1 vague" in stdout  # the broad match: not kept by the benchmark's rule
        steps = list(csv.DictReader(out.open(encoding="utf-8")))
        assert len(steps) == 8
        learning_ranks = [float(s["learning_rank"]) for s in steps]
        static_ranks = [float(s["static_rank"]) for s in steps]
        assert all(a <= b for a, b in zip(learning_ranks, static_ranks, strict=True))
        seen: set[str] = set()
        for step in steps:  # the second of each pair is found first by the learner
            pair = step["code"][1:]
            if pair in seen:
                assert step["learning_rank"] == "1" and step["static_rank"] != "1"
            seen.add(pair)

    result = simulate(load_crosswalk(path), taxonomy, "char-tfidf", seed=0, cache_dir=tmp_path / "cache")
    learning, static = result.summaries["learning"], result.summaries["static"]
    assert learning.mrr > static.mrr and learning.remaining_mrr[0.5] > static.remaining_mrr[0.5]
    assert learning.remaining_mrr[0.0] == static.remaining_mrr[0.0]
    assert result.taught == 8 and result.languages == ("no",)
    assert math.isfinite(learning.mean_rank)


def test_simulate_input_errors(nor_data: Path, tmp_path: Path, sim_env: None) -> None:
    code, _, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "xyz_zz", "--pipeline", "lexical")
    assert code == 2 and "crosswalk 'xyz_zz' not found" in stderr and "Traceback" not in stderr
    code, _, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--scorer", "nope")
    assert code == 2 and "unknown scorer" in stderr
    code, _, stderr = run_cli("simulate", "--data", str(nor_data), "--crosswalk", "nor_no", "--langs", "de",
                              "--pipeline", "lexical")  # fmt: skip
    assert code == 2 and "no labels in de" in stderr


# -- the Link page -----------------------------------------------------------------------------------


def test_the_link_page_learns_from_accepted_decisions(
    nor_data: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    from db.quickstart import start_curation

    root = Path(__file__).resolve().parent.parent
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    for name, value in (("MELO_DATA", nor_data), ("MELO_ESCO", esco_csv), ("MELO_CACHE", tmp_path / "cache"),
                        ("MELO_DB_URL", url)):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(root)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    app = AppTest.from_file(str(root / "pages/2_Link.py"), default_timeout=60)
    app.session_state["curator"] = "alice"
    app.session_state["link_pipeline"] = "lexical"
    app.run()
    # A term that is no ESCO label word for word (some Norwegian titles are ISCO group labels).
    for _ in range(30):
        if app.dataframe[0].value.iloc[0]["score"] < 0.99:
            break
        next(b for b in app.button if b.label == "Skip ▶").click().run()
    label = app.subheader[0].value
    table = app.dataframe[0].value
    assert not any("known mention" in matched for matched in table["matched label"])
    chosen = table.iloc[2]["uri"]
    next(r for r in app.radio if r.label == "Concept").set_value(f"3|{chosen}")  # what key 3 checks
    next(b for b in app.button if b.label == "Exact").click().run()
    assert not app.exception and app.subheader[0].value != label

    app.radio(key="link_status").set_value("done").run()  # back to the decided term
    assert not app.exception and app.subheader[0].value == label
    top = app.dataframe[0].value.iloc[0]
    assert top["uri"] == chosen and top["matched label"] == f"{label} (no, known mention)"


def test_a_new_linker_reads_the_known_mentions_vectors_a_process_built_before(
    taxonomy: Taxonomy, nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`link` and the Link page start with the same crosswalk titles as mentions each time: their
    vectors are kept whole per set of mentions, and a new linker reads them instead of looking up
    each in the embedding cache. Another set gets its own file; the newest two stay."""
    from melo_core.linking.linker import _Component

    spec = "wsum:0.5*char-tfidf+0.5*muse"
    relations = ("exactMatch", "narrowMatch", "broadMatch", "closeMatch")
    pairs = crosswalk_decisions(nor_data, "nor_no", relations=relations)[::15]  # 201, 167 distinct titles
    mentioned = {uri for _, uri, _ in pairs}
    small_taxonomy = Taxonomy(c for c in taxonomy.concepts if c.uri in mentioned or c.number % 20 == 0)
    sets = [pairs[:150], pairs[:120], pairs[60:]]
    first = Linker(small_taxonomy, spec, cache_dir=tmp_path)
    first.set_mentions(sets[0])
    expected = ranking(first, NEAR)
    [folder] = (tmp_path / "linker").glob("*.mentions")
    assert first._mention_index is not None
    assert [p.name.split("-")[1] for p in folder.glob("*.npy")] == [f"{len(first._mention_index.texts)}.npy"]

    def no_lookup(self: _Component, texts: list[str]) -> np.ndarray:
        raise AssertionError(f"{len(texts)} mentions looked up again")

    with monkeypatch.context() as patch:
        patch.setattr(_Component, "_vectors_of", no_lookup)
        second = Linker(small_taxonomy, spec, cache_dir=tmp_path)
        second.set_mentions(sets[0])
        assert ranking(second, NEAR) == expected
        [read] = [c for c in second.components if c.dense]
        [built] = [c for c in first.components if c.dense]
        np.testing.assert_array_equal(read._mention_rows[1], built._mention_rows[1])
    for mentions in sets[1:]:
        linker = Linker(small_taxonomy, spec, cache_dir=tmp_path)
        linker.set_mentions(mentions)
        ranking(linker, NEAR)
    assert len(list(folder.glob("*.npy"))) == 2
    # Without persistence (the benchmarks' option) nothing is written.
    other = tmp_path / "other"
    quiet = Linker(small_taxonomy, spec, cache_dir=other, persist=False)
    quiet.set_mentions(sets[0])
    assert ranking(quiet, NEAR) == expected and not list(other.rglob("*.mentions"))
