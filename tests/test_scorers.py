"""Lexical scorers behind the one protocol, on real MELO data."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from melo_core import Protocol, Scorer, ScorerContext, create_scorer, evaluate, load_dataset, scorer_names
from melo_core.scorers.text import TextPrep
from melo_core.scorers.tfidf import TfidfScorer

LEXICAL = ["edit-distance", "word-tfidf", "char-tfidf", "bm25", "word-tfidf-lemmas", "char-tfidf-lemmas", "bm25-lemmas"]


def test_registry_names() -> None:
    assert set(LEXICAL) | {"random"} <= set(scorer_names())
    with pytest.raises(ValueError, match="unknown scorer 'nope'"):
        create_scorer("nope")


@pytest.mark.parametrize("name", LEXICAL)
def test_every_scorer_follows_the_protocol_and_ranks_an_exact_match_first(name: str) -> None:
    scorer = create_scorer(name, ScorerContext("de", ("de",)))
    assert isinstance(scorer, Scorer) and scorer.name == name
    corpus = ["Bäckerin", "Bäcker", "Konditor", "Krankenpfleger", "Softwareentwickler"]
    scorer.fit(corpus)
    scores = scorer.score(["Bäcker", "Softwareentwickler"])
    assert scores.shape == (2, len(corpus)) and scores.dtype == np.float64
    assert corpus[int(np.argmax(scores[0]))] in {"Bäcker", "Bäckerin"}  # lemmas may merge the two
    assert int(np.argmax(scores[1])) == 4


def test_edit_distance_is_normalised_indel_similarity_in_percent() -> None:
    scorer = create_scorer("edit-distance", ScorerContext("en", ("en",)))
    scorer.fit(["baker", "bakers", "nurse"])
    s = scorer.score(["Baker"])[0]
    assert s[0] == pytest.approx(100.0)  # lowercased before comparing; 0-100 as published
    assert s[1] == pytest.approx(100 * (1 - 1 / 11))  # one insertion over 5 + 6 characters
    assert s[2] < s[1]


def test_bm25_matches_rank_bm25_exactly(datasets_dir: Path) -> None:
    rank_bm25 = pytest.importorskip("rank_bm25")
    ds = load_dataset(datasets_dir / "nor_q_no_c_no")
    context = ScorerContext(ds.query_language, ds.corpus_languages)
    prepare = TextPrep(lowercase=True, fold_ascii=True).build()
    reference = rank_bm25.BM25Okapi([prepare(t).split(" ") for t in ds.corpus])
    ours = create_scorer("bm25", context)
    ours.fit(ds.corpus)
    queries = ds.queries[:20]
    expected = np.array([reference.get_scores(prepare(q).split(" ")) for q in queries])
    np.testing.assert_allclose(ours.score(queries), expected, rtol=0, atol=1e-12)


def test_ascii_folding_is_skipped_for_bulgarian() -> None:
    latin = create_scorer("char-tfidf", ScorerContext("bg", ("en",)))
    latin.fit(["медицинска сестра", "nurse"])
    scores = latin.score(["медицинска сестра"])[0]
    assert scores[0] == pytest.approx(1.0) and scores[1] == pytest.approx(0.0)


def test_lemmatised_scorer_needs_a_language() -> None:
    with pytest.raises(ValueError, match="query language"):
        create_scorer("bm25-lemmas", ScorerContext())


def test_random_scorer_is_seeded_and_near_chance(datasets_dir: Path) -> None:
    ds = load_dataset(datasets_dir / "nor_q_no_c_no")
    a = evaluate(ds, create_scorer("random"), Protocol("trec", 0)).metrics["mrr"]
    b = evaluate(ds, create_scorer("random"), Protocol("trec", 0)).metrics["mrr"]
    lexical = evaluate(ds, create_scorer("char-tfidf", ScorerContext("no", ("no",)))).metrics["mrr"]
    assert a == b
    assert a < 0.05 < lexical


@pytest.mark.parametrize("name", ["word-tfidf", "char-tfidf"])
def test_pickled_tfidf_scores_like_scikit_learn_without_it(name: str, datasets_dir: Path) -> None:
    """The linker caches fitted scorers; the pickle carries a scikit-learn-free transformer."""
    corpus = (
        load_dataset(datasets_dir / "bgr_q_bg_c_bg").corpus[:3000]
        + load_dataset(datasets_dir / "deu_q_de_c_de").corpus[:3000]
    )
    queries = ["медицинска  сестра", "Bäcker /  Konditor", "software-entwickler (m/w/d)", "", "  x  "]
    scorer = create_scorer(name, ScorerContext(None, ("bg", "de")))
    scorer.fit(corpus)
    restored = pickle.loads(pickle.dumps(scorer))
    assert type(restored._vectorizer).__name__ == "FittedTfidf"
    np.testing.assert_array_equal(restored.score(queries), scorer.score(queries))  # ties rank alike
    reference = TfidfVectorizer(analyzer="char" if name == "char-tfidf" else "word",
                                ngram_range=(1, 3) if name == "char-tfidf" else (1, 1))  # fmt: skip
    assert isinstance(scorer, TfidfScorer)
    prepare = scorer._prepare
    expected = (
        reference.fit_transform([prepare(c) for c in corpus]) @ reference.transform([prepare(q) for q in queries]).T
    )
    np.testing.assert_allclose(scorer.score(queries), expected.T.toarray(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("ngram_range", [(1, 3), (2, 3), (1, 1)])
def test_character_ngrams_looked_up_at_once_are_those_looked_up_one_by_one(
    ngram_range: tuple[int, int], datasets_dir: Path
) -> None:
    """The character analyzer packs each n-gram into an integer and looks them all up at once: the
    same (text, vocabulary column) pairs as looking each n-gram up in turn (the counts and the
    matrix follow from these pairs alone), on Cyrillic, CJK, emoji, tabs and texts shorter than n."""
    from melo_core.scorers.tfidf import FittedTfidf

    corpus = [*load_dataset(datasets_dir / "bgr_q_bg_c_bg").corpus[:2000], "日本語 教師", "chef 👩‍🍳 de cuisine"]
    vectorizer = TfidfVectorizer(analyzer="char", ngram_range=ngram_range).fit(corpus)
    fitted = FittedTfidf(vectorizer)
    texts = [*corpus[:500], "", "a", "ab", "Медицинска\t\tсестра", "  x  ", "料理 👩‍🍳 chef", "\U0010ffff q", "zzz"]
    assert fitted._packable()
    at_once = sorted(zip(*(a.tolist() for a in fitted._char_columns(texts)), strict=True))
    one_by_one = sorted(zip(*(a.tolist() for a in fitted._columns_one_by_one(texts)), strict=True))
    assert at_once == one_by_one and len(at_once) > 10 * len(texts)
    np.testing.assert_allclose(
        fitted.transform(texts).toarray(), vectorizer.transform(texts).toarray(), rtol=0, atol=1e-12
    )
    few = fitted.transform(texts[-3:])  # fewer than AT_ONCE_FROM texts: looked up one by one
    np.testing.assert_array_equal(few.toarray(), fitted.transform(texts)[-3:].toarray())
    restored = pickle.loads(pickle.dumps(fitted))  # the packed keys are rebuilt, not pickled
    assert "_char_keys" in fitted.__dict__ and "_char_keys" not in restored.__dict__
    np.testing.assert_array_equal(restored.transform(texts).toarray(), fitted.transform(texts).toarray())


@pytest.mark.parametrize("name", ["char-tfidf-lemmas", "bm25"])
def test_the_known_mentions_matrix_kept_on_disk_serves_the_next_process(
    name: str, melo_data: Path, tmp_path: Path
) -> None:
    """A linker's lexical component transforms all its known mentions at the first query (70,707
    for `best`: 4.5 s); with ``memo_folder`` the next process reads that matrix instead, and still
    rebuilds from its memo when a mention is later taken out of the middle."""
    dataset = load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_no")
    corpus, mentions, queries = dataset.corpus[:2000], dataset.corpus[2000:2600], dataset.queries[:20]

    def fitted(folder: Path | None) -> tuple[Scorer, list[str]]:
        scorer = create_scorer(name, ScorerContext("no", ("no",)))
        scorer.fit(corpus)
        scorer.memo_folder = folder  # type: ignore[attr-defined]
        prepared: list[str] = []
        prepare = scorer._prepare  # type: ignore[attr-defined]

        def recording(text: str) -> str:
            prepared.append(text)
            return prepare(text)

        scorer._prepare = recording  # type: ignore[attr-defined]
        return scorer, prepared

    folder = tmp_path / "memo"
    first, prepared = fitted(folder)
    expected = first.score_against(queries, mentions)  # type: ignore[attr-defined]
    assert set(mentions) <= set(prepared) and len(list(folder.glob("*.npz"))) == 1
    second, prepared = fitted(folder)
    assert np.array_equal(second.score_against(queries, mentions), expected)  # type: ignore[attr-defined]
    fewer = mentions[:100] + mentions[101:]  # another curator's decision undone: not the last mention
    fresh, _ = fitted(None)
    assert np.array_equal(second.score_against(queries, fewer), fresh.score_against(queries, fewer))  # type: ignore[attr-defined]
    assert not set(prepared) - set(queries)  # no mention transformed again, in either call
    assert len(list(folder.glob("*.npz"))) == 1  # a rebuild from the memo writes nothing
    for other in (dataset.corpus[3000:3100], dataset.corpus[3100:3200]):
        fitted(folder)[0].score_against(queries, other)  # type: ignore[attr-defined]
    assert len(list(folder.glob("*.npz"))) == 2  # the newest two are kept


@pytest.mark.parametrize("name", ["char-tfidf", "bm25"])
def test_known_mentions_appended_one_by_one_score_as_if_built_whole(
    name: str, melo_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decisions append one column at a time to a tail (restacking 130,000 mentions' columns per
    decision cost 25 ms); the tail joins the main block at ``TAIL_LIMIT``; undos cut either."""
    from melo_core.scorers import lexical

    monkeypatch.setattr(lexical, "TAIL_LIMIT", 3)
    dataset = load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_no")
    corpus, mentions, queries = dataset.corpus[:1500], dataset.corpus[1500:1520], dataset.queries[:10]

    def fitted() -> Scorer:
        scorer = create_scorer(name, ScorerContext("no", ("no",)))
        scorer.fit(corpus)
        return scorer

    kept = fitted()
    sequence = [mentions[:10]] + [mentions[:n] for n in range(11, 21)]  # ten decisions, one at a time
    sequence += [mentions[:19], mentions[:12], mentions[:8], mentions[:8] + mentions[15:17]]  # undos, then others
    for texts in sequence:
        scores = kept.score_against(queries, texts)  # type: ignore[attr-defined]
        assert np.array_equal(scores, fitted().score_against(queries, texts))  # type: ignore[attr-defined]
        columns = kept._text_rows[lexical.LAST][1]  # type: ignore[attr-defined]
        assert columns.width == len(texts) and (columns.tail is None or columns.tail.shape[1] <= 3)
