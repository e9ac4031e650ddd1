"""Scorers behind one protocol: each scores a dataset's queries against its corpus (lexical,
BM25, TF-IDF, edit distance, dense over any encoder, fusions, known mentions, concept ranking),
registered by name in ``registry``; with the text preparation of the lexical ones (``text``) and
known mentions grouped as they are scored (``mention_index``). Importing this package registers
every built-in scorer. It builds on ``esco`` and ``encoders``; never linking or evaluation."""

from melo_core.scorers import (  # noqa: F401  (registration)
    bm25,
    concept_ranking,
    dense,
    edit_distance,
    hybrid,
    random_scorer,
    tfidf,
)
from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.registry import (
    check_scorer,
    create_scorer,
    is_scorer_spec,
    register,
    scorer_families,
    scorer_names,
)

__all__ = [
    "Scorer",
    "ScorerContext",
    "check_scorer",
    "create_scorer",
    "is_scorer_spec",
    "register",
    "scorer_families",
    "scorer_names",
]
