"""Text preparation choice shared by the lexical scorers (the paper's rules)."""

from __future__ import annotations

from melo_core.scorers.base import ScorerContext
from melo_core.text import TextPrep, folding_applies


def paper_text_prep(context: ScorerContext, lemmatize: bool) -> TextPrep:
    """Lowercase; lemmatise in the query language when asked; fold to ASCII unless a
    non-Latin-script language is involved (the paper: all but Bulgarian)."""
    lemma_language = None
    if lemmatize:
        if context.query_language is None:
            raise ValueError("lemmatised scorers need the query language (dataset name or --query-lang)")
        lemma_language = context.query_language
    return TextPrep(lowercase=True, fold_ascii=folding_applies(context.languages), lemma_language=lemma_language)
