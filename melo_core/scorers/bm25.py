"""Okapi BM25 baseline, vectorised with sparse matrices.

Same formula and defaults as rank-bm25's BM25Okapi (k1=1.5, b=0.75, epsilon=0.25: a
negative idf is replaced by epsilon times the mean idf), over whitespace tokens
(``str.split(" ")``, so doubled spaces yield empty tokens, as in the paper's runs).
rank-bm25 loops over every document in Python for each query token; this is the same
arithmetic as one sparse product.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.lexical import paper_text_prep
from melo_core.scorers.registry import register
from melo_core.text import TextPrep


class BM25Scorer:
    def __init__(self, name: str, prep: TextPrep, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.name = name
        self._prepare = prep.build()
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._vocabulary: dict[str, int] = {}
        self._weights_t: sparse.csr_matrix | None = None
        self._idf = np.zeros(0)

    def fit(self, corpus: Sequence[str]) -> None:
        vocabulary: dict[str, int] = {}
        rows, cols, counts = [], [], []
        lengths = np.zeros(len(corpus))
        for d, text in enumerate(corpus):
            tokens = self._prepare(text).split(" ")
            lengths[d] = len(tokens)
            for token, count in Counter(tokens).items():
                rows.append(d)
                cols.append(vocabulary.setdefault(token, len(vocabulary)))
                counts.append(count)
        tf = sparse.csr_matrix(
            (np.asarray(counts, dtype=np.float64), (rows, cols)), shape=(len(corpus), len(vocabulary))
        )
        n_docs = len(corpus)
        doc_freq = np.bincount(np.asarray(cols, dtype=np.int64), minlength=len(vocabulary)).astype(np.float64)
        idf = np.log(n_docs - doc_freq + 0.5) - np.log(doc_freq + 0.5)
        idf[idf < 0] = self.epsilon * idf.mean()
        average_length = lengths.sum() / n_docs
        norm = self.k1 * (1 - self.b + self.b * lengths / average_length)
        weights = tf.copy()
        row_of_entry = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        weights.data = tf.data * (self.k1 + 1) / (tf.data + norm[row_of_entry])
        self._vocabulary, self._idf = vocabulary, idf
        self._weights_t = weights.T.tocsr()

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self._weights_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        rows, cols, values = [], [], []
        for q, text in enumerate(queries):
            # Repeated query tokens count once per occurrence, as in rank-bm25.
            for token, count in Counter(self._prepare(text).split(" ")).items():
                column = self._vocabulary.get(token)
                if column is not None:
                    rows.append(q)
                    cols.append(column)
                    values.append(count * self._idf[column])
        query_matrix = sparse.csr_matrix((values, (rows, cols)), shape=(len(queries), len(self._vocabulary)))
        return (query_matrix @ self._weights_t).toarray()


def _bm25(name: str, lemmatize: bool):
    @register(name)
    def create(context: ScorerContext) -> BM25Scorer:
        return BM25Scorer(name, paper_text_prep(context, lemmatize))

    return create


_bm25("bm25", lemmatize=False)
_bm25("bm25-lemmas", lemmatize=True)
