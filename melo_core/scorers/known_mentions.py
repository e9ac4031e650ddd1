"""Known mentions as extra surface forms of their concepts (the thesis's "known mentions as
knowledge base"): terms other crosswalks already linked to ESCO concepts.

Any scorer that can score extra texts (``ExtendableScorer``) is lifted by them: a corpus form's
score ``s`` becomes ``s + W * max(0, m - s)``, where ``m`` is the best score of the query against
the known mentions of that form's concept and ``W`` (0 < W <= 1) their weight. With ``W = 1`` a
mention counts as one more label of its concept; smaller weights trust it less. Forms of
concepts without mentions keep their score, so no concept is pushed down.

Evaluation passes mentions through ``ScorerContext.mentions``; it takes them from other
countries' crosswalks only (``crosswalk_mentions``, ``dataset_mentions``), so a dataset is never
helped by its own annotations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import ALIAS_RELATIONS, RELATIONS, crosswalk_country, crosswalk_decisions, list_crosswalks
from melo_core.esco.datasets import parse_dataset_name
from melo_core.esco.titles import is_titles_dataset
from melo_core.scorers.base import ExtendableScorer, KnownMentions, check_concepts

# Which crosswalk matches become mentions, by the name the CLI and the benchmark use.
MENTION_RELATIONS = {"alias": ALIAS_RELATIONS, "all": RELATIONS}


def crosswalk_mentions(
    data_dir: str | Path,
    hold_out_country: str | None,
    codes: str = "all",
    relations: Iterable[str] = ALIAS_RELATIONS,
    weight: float = 1.0,
    languages: Iterable[str] | None = None,
) -> KnownMentions:
    """The titles of the crosswalks ``codes`` ('all' or comma-separated) with the ESCO concepts
    they match by ``relations``, leaving out every crosswalk of ``hold_out_country`` (None: data of
    no country, such as job-ad titles); with ``languages``, only crosswalks written in one of them."""
    if hold_out_country is not None and not hold_out_country.strip():
        raise MeloInputError("known mentions: name the country whose crosswalks are held out")
    known = list_crosswalks(data_dir)
    wanted = known if codes == "all" else [c.strip() for c in codes.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise MeloInputError(f"known mentions: unknown crosswalk(s) {', '.join(unknown)} (known: {', '.join(known)})")
    readable = None if languages is None else frozenset(languages)  # an iterator is read once
    texts, concepts, languages_of = [], [], []
    for code in wanted:
        if crosswalk_country(code) == hold_out_country:
            continue
        for title, uri, language in crosswalk_decisions(data_dir, code, relations):
            if readable is None or language in readable:
                texts.append(title)
                concepts.append(uri)
                languages_of.append(language)
    return KnownMentions(tuple(texts), tuple(concepts), weight, tuple(languages_of))


def dataset_mentions(
    data_dir: str | Path, dataset_name: str, relations: Iterable[str] = ALIAS_RELATIONS, weight: float = 1.0
) -> KnownMentions:
    """Known mentions for a MELO dataset: every crosswalk but those of the dataset's country (all of
    them for a job-titles set, which has none)."""
    if is_titles_dataset(Path(dataset_name).name):
        return crosswalk_mentions(data_dir, None, relations=relations, weight=weight)
    parsed = parse_dataset_name(Path(dataset_name).name)
    if parsed is None:
        raise MeloInputError(f"dataset {dataset_name!r}: known mentions leave out the dataset's own country, "
                             "but its name does not start with one (<country>_q_<lang>_c_<langs>)")  # fmt: skip
    return crosswalk_mentions(data_dir, parsed.country, relations=relations, weight=weight)


def lift(scores: np.ndarray, best_mention: np.ndarray, weight: float) -> np.ndarray:
    """``s + W * max(0, m - s)``: each score moved ``weight`` of the way up to its concept's
    best mention score where that is higher."""
    gain = np.where(best_mention > scores, best_mention - scores, 0.0)
    return scores + weight * gain


class KnownMentionScorer:
    """Wraps a scorer; scores are lifted by the known mentions of each corpus form's concept."""

    def __init__(self, inner: ExtendableScorer, mentions: KnownMentions, corpus_concepts: Sequence[str]):
        if not isinstance(inner, ExtendableScorer):
            raise ValueError(f"scorer {inner.name!r} cannot score known mentions (it has no score_against)")
        self.inner = inner
        self.name = inner.name
        self.mentions = mentions
        self.corpus_concepts = tuple(corpus_concepts)
        self.texts: list[str] = []
        self.starts = np.zeros(0, dtype=np.int64)  # first mention of each mentioned concept
        self.form_slot = np.zeros(0, dtype=np.int64)  # per corpus form: its concept's slot, or -1

    def fit(self, corpus: Sequence[str]) -> None:
        check_concepts(self.corpus_concepts, corpus, f"{self.name}: known mentions need")
        self.inner.fit(corpus)
        self.index_mentions()

    def index_mentions(self) -> None:
        """Group the mentions by the corpus concepts they stand for. ``fit`` does it; call it
        alone when the inner scorer is already fitted (several mention sets over one scorer)."""
        in_corpus = set(self.corpus_concepts)
        pairs = sorted({(c, t) for t, c in zip(self.mentions.texts, self.mentions.concepts, strict=True)
                        if c in in_corpus})  # fmt: skip
        self.texts = [t for _, t in pairs]
        concepts = [c for c, _ in pairs]
        slot_of: dict[str, int] = {}
        starts = []
        for i, concept in enumerate(concepts):
            if concept not in slot_of:
                slot_of[concept] = len(slot_of)
                starts.append(i)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.form_slot = np.fromiter((slot_of.get(c, -1) for c in self.corpus_concepts), dtype=np.int64,
                                     count=len(self.corpus_concepts))  # fmt: skip

    def score(self, queries: Sequence[str]) -> np.ndarray:
        scores = np.asarray(self.inner.score(queries), dtype=np.float64)
        return lift(scores, self.best_mention_scores(queries), self.mentions.weight)

    def best_mention_scores(self, queries: Sequence[str]) -> np.ndarray:
        """Per query and corpus form, the best score of the query against a known mention of
        the form's concept; -inf for forms whose concept has none. Shape (queries, corpus)."""
        out = np.full((len(queries), len(self.form_slot)), -np.inf)
        if not self.texts:
            return out
        per_mention = np.asarray(self.inner.score_against(queries, self.texts), dtype=np.float64)
        per_concept = np.maximum.reduceat(per_mention, self.starts, axis=1)
        mentioned = self.form_slot >= 0
        out[:, mentioned] = per_concept[:, self.form_slot[mentioned]]
        return out

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return self.inner.score_against(queries, texts)
