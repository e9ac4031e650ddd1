"""Text preparation choice shared by the lexical scorers (the paper's rules), and the memo of
extra texts' sparse rows behind their ``score_against``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from melo_core.runtime.disk_cache import keep_newest, texts_digest
from melo_core.scorers.base import ScorerContext
from melo_core.scorers.mention_index import APPEND_LIMIT, shared_head
from melo_core.scorers.text import TextPrep, folding_applies, lemmatiser_languages
from melo_core.spec import Spec

MEMO_LIMIT = 200_000  # texts; past this the memo starts over rather than grow without bound


def paper_text_prep(context: ScorerContext, lemmatize: bool) -> TextPrep:
    """Lowercase; lemmatise in the query language when asked; fold to ASCII unless a
    non-Latin-script language is involved (the paper: all but Bulgarian)."""
    lemma_language = None
    if lemmatize:
        if context.query_language is None:
            raise ValueError("lemmatised scorers need the query language (dataset name or --query-lang)")
        lemma_language = context.query_language
    return TextPrep(lowercase=True, fold_ascii=folding_applies(context.languages), lemma_language=lemma_language)


def lemma_languages(spec: Spec) -> frozenset[str] | None:
    """What a lemmatised scorer reads: the languages its lemmatiser knows (it lemmatises queries
    and labels in the query's language); a scorer without lemmas reads any language."""
    return lemmatiser_languages()


LAST = "\x00last"  # memo key of the last texts' matrix (no text holds a NUL)
TAIL_LIMIT = 2048  # columns appended after the main block before the two are stacked into one


@dataclass(frozen=True)
class Columns:
    """Sparse columns of texts, shape (width, n): a main block and a tail of the columns appended
    since it was stacked. A decision appends one column: stacking it onto 130,000 mentions' columns
    took 25 ms (a third of a simulated decision with `best`); the tail is restacked instead, and
    joins the main block once it holds ``TAIL_LIMIT`` columns."""

    main: sparse.csr_matrix
    tail: sparse.csr_matrix | None = None

    @property
    def width(self) -> int:
        return int(self.main.shape[1]) + (int(self.tail.shape[1]) if self.tail is not None else 0)

    def scores(self, queries: sparse.spmatrix) -> np.ndarray:
        """``queries @ columns`` as a dense float64 array."""
        parts = [self.main] if self.tail is None else [self.main, self.tail]
        return np.hstack([np.asarray((queries @ part).toarray(), dtype=np.float64) for part in parts])

    def first(self, n: int) -> Columns:
        """The first ``n`` columns (slicing copies: only the block that is cut)."""
        main = int(self.main.shape[1])
        if n <= main:
            return Columns(self.main if n == main else self.main[:, :n])
        assert self.tail is not None
        return Columns(self.main, self.tail if n == self.width else self.tail[:, : n - main])

    def appended(self, more: sparse.csr_matrix) -> Columns:
        tail = more if self.tail is None else sparse.hstack([self.tail, more], format="csr")
        if tail.shape[1] > TAIL_LIMIT:
            return Columns(sparse.hstack([self.main, tail], format="csr"))
        return Columns(self.main, tail)


def memo_columns(
    memo: dict[str, Any],
    texts: Sequence[str],
    transform: Callable[[list[str]], sparse.spmatrix],
    width: int,
    folder: Path | None = None,
) -> Columns:
    """Corpus-side sparse columns of ``texts``, shape (width, len(texts)), each text transformed once.

    The linker scores every query against all its known mentions; re-transforming or even
    re-stacking a hundred thousand of them per query would cost more than scoring the query
    against the whole taxonomy. The matrix of the last ``texts`` object is kept as a whole
    (callers pass the same list while the mentions stay the same, and never change it in place),
    and extended (or cut) when the next texts are the same ones and more (or fewer). With
    ``folder``, a matrix built whole is kept there too, keyed by the texts: a new process linking
    with the same known mentions reads it instead of transforming them again (70,707 mentions:
    4.5 s of lemmatising and counting n-grams, against 0.2 s)."""
    last = memo.get(LAST)
    if last is not None and last[0] is texts:
        return last[1]
    if len(memo) > MEMO_LIMIT:
        memo.clear()
        last = None
    head = shared_head(last[0], texts) if last is not None else 0
    if last is not None and head and head == len(texts):  # the same or fewer: an undo
        columns = last[1].first(len(texts))
    elif last is not None and head and (head == len(last[0]) or len(texts) - head <= APPEND_LIMIT):
        # The last texts and a few more (the Link page after a decision; after an undo with other
        # curators' decisions since, fewer and then theirs): restacking them all took 0.15 s.
        columns = last[1].first(head).appended(_stacked(memo, texts[head:], transform, width))
    else:
        main = _on_disk(memo, texts, transform, width, folder) if folder else _stacked(memo, texts, transform, width)
        columns = Columns(main)
    memo[LAST] = (texts, columns)
    return columns


def _on_disk(memo: dict[str, Any], texts: Sequence[str], transform: Callable[[list[str]], sparse.spmatrix],
             width: int, folder: Path) -> sparse.csr_matrix:  # fmt: skip
    """``_stacked``, read from ``folder`` when these texts were built before (and each text then
    memoised, for a later rebuild), else built, and written there when most texts were new to
    this process."""
    digest = texts_digest(texts)
    path = folder / f"{digest}-{len(texts)}-{width}.npz"
    try:
        columns = sparse.load_npz(path).tocsr()
    except (OSError, ValueError, KeyError):
        columns = None
    if columns is not None and columns.shape == (width, len(texts)):
        _memoise(memo, texts, columns.T.tocsr())
        return columns
    memoised = len(memo)
    columns = _stacked(memo, texts, transform, width)
    if (len(memo) - memoised) * 2 <= len(texts):  # mostly rebuilt from the memo (a mention taken out
        return columns  # of the middle): nothing worth writing; a cold build transformed most texts
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".tmp-{os.getpid()}-{path.name}"
        sparse.save_npz(temporary, columns, compressed=False)
        os.replace(temporary, path)
        keep_newest(folder, "*.npz")
    except OSError:
        pass  # a read-only or full cache: the next process builds it again
    return columns


def _stacked(memo: dict[str, Any], texts: Sequence[str], transform: Callable[[list[str]], sparse.spmatrix],
             width: int) -> sparse.csr_matrix:  # fmt: skip
    missing = [t for t in dict.fromkeys(texts) if t not in memo]
    if missing:
        _memoise(memo, missing, sparse.csr_matrix(transform(missing)))
    parts = [memo[t] for t in texts]
    indptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p[0]) for p in parts], out=indptr[1:])
    indices = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int32)
    data = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(parts), width)).T.tocsr()


def _memoise(memo: dict[str, Any], texts: Sequence[str], rows: sparse.csr_matrix) -> None:
    """Each text's sparse row (row i of ``rows`` is ``texts[i]``'s), for restacking without a transform."""
    for i, text in enumerate(texts):
        low, high = rows.indptr[i], rows.indptr[i + 1]
        memo[text] = (rows.indices[low:high].copy(), np.asarray(rows.data[low:high], dtype=np.float64))
