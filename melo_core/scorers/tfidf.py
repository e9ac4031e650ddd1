"""Word and character TF-IDF baselines (scikit-learn, cosine similarity)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.lexical import lemma_languages, memo_columns, paper_text_prep
from melo_core.scorers.registry import register
from melo_core.scorers.text import TextPrep

AT_ONCE_FROM = 4  # texts: below, looking each n-gram up beats packing (one query: 19 against 70 µs)


class FittedTfidf:
    """What a fitted TfidfVectorizer needs to transform queries, without importing scikit-learn
    (its import alone takes ~2 s: the linker's cold start keeps this instead). Same analyzers
    and arithmetic as TfidfVectorizer's defaults: counts x idf, L2-normalised rows."""

    _WORD = re.compile(r"(?u)\b\w\w+\b")
    _SPACES = re.compile(r"\s\s+")

    def __init__(self, vectorizer: object):
        self.analyzer = vectorizer.analyzer  # type: ignore[attr-defined]
        self.ngram_range = vectorizer.ngram_range  # type: ignore[attr-defined]
        self.vocabulary: dict[str, int] = dict(vectorizer.vocabulary_)  # type: ignore[attr-defined]
        self.idf = np.asarray(vectorizer.idf_, dtype=np.float64)  # type: ignore[attr-defined]

    def _char_text(self, text: str) -> str:
        """What character n-grams are taken from: TfidfVectorizer's lower case, runs of white space as one."""
        return self._SPACES.sub(" ", text.lower())

    def _terms(self, text: str) -> list[str]:
        low, high = self.ngram_range
        if self.analyzer == "word":
            tokens = self._WORD.findall(text.lower())
            return [" ".join(tokens[i : i + n]) for n in range(low, high + 1) for i in range(len(tokens) - n + 1)]
        text = self._char_text(text)
        return [text[i : i + n] for n in range(low, min(high, len(text)) + 1) for i in range(len(text) - n + 1)]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_char_keys", None)  # rebuilt from the vocabulary on first use
        return state

    def transform(self, texts: Sequence[str]) -> sparse.csr_matrix:
        at_once = self._packable() and len(texts) >= AT_ONCE_FROM
        rows, columns = self._char_columns(texts) if at_once else self._columns_one_by_one(texts)
        # scipy sums repeated terms into counts and sorts each row's columns (the canonical form the
        # norms are summed in): the values are bit for bit those of counting each text's terms.
        matrix = sparse.csr_matrix((np.ones(len(columns)), (rows, columns)), shape=(len(texts), len(self.idf)))
        matrix.sum_duplicates()
        matrix.data *= self.idf[matrix.indices]
        norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
        return sparse.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix

    def _columns_one_by_one(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(row, column) of each term of the vocabulary in each text, looked up one by one."""
        vocabulary = self.vocabulary
        columns: list[int] = []
        lengths = []
        for text in texts:
            found = [c for c in map(vocabulary.get, self._terms(text)) if c is not None]
            columns.extend(found)
            lengths.append(len(found))
        return np.repeat(np.arange(len(texts)), lengths), np.asarray(columns, dtype=np.int64)

    def _packable(self) -> bool:
        """Character n-grams of up to 3 code points fit one 64-bit integer each (21 bits a code point)."""
        return self.analyzer == "char" and self.ngram_range[1] <= 3

    def _char_columns(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``_columns_one_by_one`` for character n-grams, vectorised (70,000 labels: 3.5 s one by one):
        every n-gram of every text packed into an integer and looked up among the vocabulary's."""
        keys = self.__dict__.get("_char_keys")
        if keys is None:
            terms = list(self.vocabulary)
            keys = _pack(terms)
            order = np.argsort(keys)
            columns = np.fromiter((self.vocabulary[t] for t in terms), dtype=np.int64, count=len(terms))
            keys = self._char_keys = (keys[order], columns[order])
        sorted_keys, sorted_columns = keys
        cleaned = [self._char_text(text) for text in texts]
        lengths = np.fromiter(map(len, cleaned), dtype=np.int64, count=len(cleaned))
        codes = (
            np.frombuffer("".join(cleaned).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64) + 1
        )
        row_of = np.repeat(np.arange(len(texts)), lengths)
        end_of = np.repeat(np.cumsum(lengths), lengths)  # each position's text end
        low, high = self.ngram_range
        rows, found = [], []
        for n in range(low, high + 1):
            starts = np.flatnonzero(np.arange(len(codes)) + n <= end_of)
            packed = np.zeros(len(starts), dtype=np.int64)
            for k in range(n):
                packed = (packed << 21) | codes[starts + k]
            at = np.minimum(np.searchsorted(sorted_keys, packed), len(sorted_keys) - 1)
            hit = sorted_keys[at] == packed if len(sorted_keys) else np.zeros(len(packed), dtype=bool)
            rows.append(row_of[starts[hit]])
            found.append(sorted_columns[at[hit]])
        return np.concatenate(rows), np.concatenate(found)


def _pack(grams: Sequence[str]) -> np.ndarray:
    """One integer per n-gram of code points (each + 1, so that lengths differ): ``_char_columns``'s keys."""

    def packed(gram: str) -> int:
        key = 0
        for character in gram:
            key = (key << 21) | (ord(character) + 1)
        return key

    return np.fromiter(map(packed, grams), dtype=np.int64, count=len(grams))


class TfidfScorer:
    """Cosine similarity of TF-IDF vectors; rows are L2-normalised, so it is a dot product."""

    def __init__(self, name: str, prep: TextPrep, analyzer: str = "word", ngram_range: tuple[int, int] = (1, 1)):
        from sklearn.feature_extraction.text import TfidfVectorizer  # imported only to fit

        self.name = name
        self._prepare = prep.build()
        # Paper settings: word = TfidfVectorizer() defaults; char = analyzer="char", (1, 3).
        self._vectorizer = TfidfVectorizer(analyzer=analyzer, ngram_range=ngram_range, dtype=np.float64)
        self._matrix_t = None
        self._text_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # score_against's memo
        self.memo_folder: Path | None = None  # where score_against keeps whole matrices (the linker's cache)

    def __getstate__(self) -> dict:
        # Pickle the fitted state without scikit-learn objects (see FittedTfidf), nor the memo of
        # extra texts (the linker's known mentions are not part of the shared fitted state).
        state = dict(self.__dict__)
        state["_text_rows"] = {}
        if self._matrix_t is not None and not isinstance(self._vectorizer, FittedTfidf):
            state["_vectorizer"] = FittedTfidf(self._vectorizer)
        return state

    def fit(self, corpus: Sequence[str]) -> None:
        vectorizer = self._vectorizer if not isinstance(self._vectorizer, FittedTfidf) else None
        if vectorizer is None:  # refitting a restored scorer
            from sklearn.feature_extraction.text import TfidfVectorizer

            fitted = self._vectorizer
            vectorizer = TfidfVectorizer(analyzer=fitted.analyzer, ngram_range=fitted.ngram_range, dtype=np.float64)
        self._matrix_t = vectorizer.fit_transform([self._prepare(c) for c in corpus]).T.tocsr()
        # Queries go through the same transformer a pickled scorer restores: fresh and restored
        # scorers then score bit for bit alike (scikit-learn's transform differs by ~1e-16, which
        # reordered exact ties between a run that fitted and one that loaded the fitted state).
        self._vectorizer = FittedTfidf(vectorizer)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self._matrix_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        query_matrix = self._vectorizer.transform([self._prepare(q) for q in queries])
        return (query_matrix @ self._matrix_t).toarray()

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity to extra texts in the fitted vocabulary and IDF (no refit)."""
        if self._matrix_t is None:
            raise RuntimeError("fit() the scorer on a corpus first")
        memo = self.__dict__.setdefault("_text_rows", {})
        columns = memo_columns(memo, texts, lambda batch: self._vectorizer.transform([self._prepare(t) for t in batch]),
                               self._matrix_t.shape[0], self.__dict__.get("memo_folder"))  # fmt: skip
        query_matrix = self._vectorizer.transform([self._prepare(q) for q in queries])
        return columns.scores(query_matrix)


def _word(name: str, lemmatize: bool):
    @register(name, languages=lemma_languages if lemmatize else None)
    def create(context: ScorerContext) -> TfidfScorer:
        return TfidfScorer(name, paper_text_prep(context, lemmatize))

    return create


def _char(name: str, lemmatize: bool):
    @register(name, languages=lemma_languages if lemmatize else None)
    def create(context: ScorerContext) -> TfidfScorer:
        return TfidfScorer(name, paper_text_prep(context, lemmatize), analyzer="char", ngram_range=(1, 3))

    return create


_word("word-tfidf", lemmatize=False)
_word("word-tfidf-lemmas", lemmatize=True)
_char("char-tfidf", lemmatize=False)
_char("char-tfidf-lemmas", lemmatize=True)
