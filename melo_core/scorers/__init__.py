"""Scorers behind one protocol. Importing this package registers every built-in scorer."""

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
