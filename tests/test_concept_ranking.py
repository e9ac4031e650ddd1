"""concepts:SPEC ranks one form per concept first, as the linker shows candidates."""

from pathlib import Path

import numpy as np
import pytest

from melo_core.esco.datasets import load_dataset
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.concept_ranking import ConceptRankingScorer, one_form_per_concept
from melo_core.scorers.known_mentions import KnownMentions, KnownMentionScorer


def test_each_concepts_best_form_keeps_its_score_and_the_others_go_below_all_concepts() -> None:
    groups = np.array([0, 0, 1, 1, 2, 3, 3])
    scores = np.array([[0.9, 0.8, 0.85, 0.5, 0.1, 0.7, 0.7]])
    out = one_form_per_concept(scores, groups)
    order = list(np.argsort(-out[0], kind="stable"))
    # concepts by their best form (0.9, 0.85, 0.7, 0.1), then the second forms in their own order
    assert order[:4] == [0, 2, 5, 4]
    assert order[4:] == [1, 6, 3]
    assert out[0, [0, 2, 4, 5]].tolist() == [0.9, 0.85, 0.1, 0.7]


def test_unscored_forms_stay_unscored() -> None:
    groups = np.array([0, 0, 1])
    out = one_form_per_concept(np.array([[0.4, -np.inf, -np.inf]]), groups)
    assert out[0, 0] == 0.4
    assert np.isneginf(out[0, 1:]).all()


@pytest.fixture(scope="module")
def aut_slice(datasets_dir: Path):
    return load_dataset(datasets_dir / "aut_q_de_c_de").subset(150)


def test_on_real_data_no_query_ranks_its_first_relevant_form_lower(aut_slice) -> None:
    context = ScorerContext.for_dataset(aut_slice, show_progress=False)
    protocol = Protocol("trec", 0)
    forms = evaluate(aut_slice, create_scorer("char-tfidf", context), protocol).first_ranks()
    concepts = evaluate(aut_slice, create_scorer("concepts:char-tfidf", context), protocol).first_ranks()
    assert (concepts <= forms).all()
    assert (concepts < forms).sum() > 10  # the corpus lists most concepts under several labels


def test_the_head_of_the_ranking_has_distinct_concepts(aut_slice) -> None:
    context = ScorerContext.for_dataset(aut_slice, show_progress=False)
    scorer = create_scorer("concepts:char-tfidf", context)
    scorer.fit(aut_slice.corpus)
    scores = scorer.score(aut_slice.queries[:20])
    concepts = np.asarray(context.concepts)
    for row in scores:
        head = concepts[np.argsort(-row, kind="stable")[:50]]
        assert len(set(head)) == 50


def test_known_mentions_lift_the_inner_scorer_not_the_wrapper(aut_slice) -> None:
    mentions = KnownMentions(("Koch",), (aut_slice.concept_of[aut_slice.corpus_ids[0]],), 0.85)
    context = ScorerContext.for_dataset(aut_slice, show_progress=False, mentions=mentions)
    scorer = create_scorer("concepts:char-tfidf", context)
    assert isinstance(scorer, ConceptRankingScorer)
    assert isinstance(scorer.inner, KnownMentionScorer)


def test_it_needs_the_concept_of_every_corpus_form() -> None:
    scorer = create_scorer("concepts:char-tfidf", ScorerContext())
    with pytest.raises(ValueError, match="concept of each of the 2 corpus forms"):
        scorer.fit(["cook", "baker"])
    with pytest.raises(ValueError, match="needs the scorer to wrap"):
        create_scorer("concepts:", ScorerContext())
