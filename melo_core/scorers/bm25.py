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
from pathlib import Path

import numpy as np
from scipy import sparse

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.lexical import lemma_languages, memo_columns, paper_text_prep
from melo_core.scorers.registry import register
from melo_core.scorers.text import TextPrep


class BM25Scorer:
    def __init__(self, name: str, prep: TextPrep, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.name = name
        self._prepare = prep.build()
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._vocabulary: dict[str, int] = {}
        self._weights_t: sparse.csr_matrix | None = None
        self._idf = np.zeros(0)
        self._average_length = 1.0
        self._text_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # score_against's memo
        self.memo_folder: Path | None = None  # where score_against keeps whole matrices (the linker's cache)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_text_rows"] = {}  # the linker's known mentions are not part of the shared fitted state
        return state

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
        self._vocabulary, self._idf, self._average_length = vocabulary, idf, average_length
        self._weights_t = weights.T.tocsr()

    def _query_matrix(self, queries: Sequence[str]) -> sparse.csr_matrix:
        rows, cols, values = [], [], []
        for q, text in enumerate(queries):
            # Repeated query tokens count once per occurrence, as in rank-bm25.
            for token, count in Counter(self._prepare(text).split(" ")).items():
                column = self._vocabulary.get(token)
                if column is not None:
                    rows.append(q)
                    cols.append(column)
                    values.append(count * self._idf[column])
        return sparse.csr_matrix((values, (rows, cols)), shape=(len(queries), len(self._vocabulary)))

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self._weights_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        return (self._query_matrix(queries) @ self._weights_t).toarray()

    def _document_rows(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """Term weights of extra documents with the fitted IDF's vocabulary and average length."""
        rows, cols, values = [], [], []
        for d, text in enumerate(texts):
            tokens = self._prepare(text).split(" ")
            norm = self.k1 * (1 - self.b + self.b * len(tokens) / self._average_length)
            for token, count in Counter(tokens).items():
                column = self._vocabulary.get(token)
                if column is not None:  # a word the taxonomy never uses has no IDF: it cannot match
                    rows.append(d)
                    cols.append(column)
                    values.append(count * (self.k1 + 1) / (count + norm))
        return sparse.csr_matrix((values, (rows, cols)), shape=(len(texts), len(self._vocabulary)))

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """BM25 of extra documents as if they were in the fitted corpus (its IDF and average
        length unchanged: no refit)."""
        if self._weights_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        columns = memo_columns(self.__dict__.setdefault("_text_rows", {}), texts, self._document_rows,
                               len(self._vocabulary), self.__dict__.get("memo_folder"))  # fmt: skip
        return columns.scores(self._query_matrix(queries))


def _bm25(name: str, lemmatize: bool):
    @register(name, languages=lemma_languages if lemmatize else None)
    def create(context: ScorerContext) -> BM25Scorer:
        return BM25Scorer(name, paper_text_prep(context, lemmatize))

    return create


_bm25("bm25", lemmatize=False)
_bm25("bm25-lemmas", lemmatize=True)
