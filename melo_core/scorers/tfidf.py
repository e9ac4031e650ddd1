"""Word and character TF-IDF baselines (scikit-learn, cosine similarity)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.lexical import paper_text_prep
from melo_core.scorers.registry import register
from melo_core.text import TextPrep


class TfidfScorer:
    """Cosine similarity of TF-IDF vectors; rows are L2-normalised, so it is a dot product."""

    def __init__(self, name: str, prep: TextPrep, analyzer: str = "word", ngram_range: tuple[int, int] = (1, 1)):
        self.name = name
        self._prepare = prep.build()
        # Paper settings: word = TfidfVectorizer() defaults; char = analyzer="char", (1, 3).
        self._vectorizer = TfidfVectorizer(analyzer=analyzer, ngram_range=ngram_range, dtype=np.float64)
        self._matrix_t = None

    def fit(self, corpus: Sequence[str]) -> None:
        self._matrix_t = self._vectorizer.fit_transform([self._prepare(c) for c in corpus]).T.tocsr()

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self._matrix_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        query_matrix = self._vectorizer.transform([self._prepare(q) for q in queries])
        return (query_matrix @ self._matrix_t).toarray()


def _word(name: str, lemmatize: bool):
    @register(name)
    def create(context: ScorerContext) -> TfidfScorer:
        return TfidfScorer(name, paper_text_prep(context, lemmatize))

    return create


def _char(name: str, lemmatize: bool):
    @register(name)
    def create(context: ScorerContext) -> TfidfScorer:
        return TfidfScorer(name, paper_text_prep(context, lemmatize), analyzer="char", ngram_range=(1, 3))

    return create


_word("word-tfidf", lemmatize=False)
_word("word-tfidf-lemmas", lemmatize=True)
_char("char-tfidf", lemmatize=False)
_char("char-tfidf-lemmas", lemmatize=True)
