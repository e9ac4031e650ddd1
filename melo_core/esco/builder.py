"""Build a MELO dataset from a crosswalk and a taxonomy, as the benchmark was built.

A term is kept when its closest relation is acceptable and unambiguous: exactly one
exactMatch, or no exactMatch and exactly one narrowMatch (the benchmark's rule). Norway's
crosswalk was built accepting relations up to closeMatch; that setting is kept per crosswalk.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from melo_core.esco.crosswalk import RELATIONS, Crosswalk
from melo_core.esco.datasets import MeloDataset
from melo_core.esco.taxonomy import Taxonomy

DEFAULT_LOOSEST_RELATION = "narrowMatch"
# Per-crosswalk settings of the official benchmark build.
LOOSEST_RELATION_BY_CROSSWALK = {"nor_no": "closeMatch"}


@dataclass
class BuildReport:
    accepted: int
    ambiguous: int
    vague: int
    unknown_concept: int
    corpus_elements: int
    median_relevant: float

    def as_stats_text(self) -> str:
        rejected = self.ambiguous + self.vague
        return (
            "\n=============== Statistics Log ===============\n\n"
            "Processed queries\n"
            f"    Accepted:                   {self.accepted + self.unknown_concept}\n"
            f"    Total Rejected:             {rejected}\n"
            f"     - Rejected (ambiguous):    {self.ambiguous}\n"
            f"     - Rejected (vague):        {self.vague}\n\n"
            "----------------------------------------------\n\n"
            f"Corpus elements:                {self.corpus_elements}\n\n"
            "----------------------------------------------\n\n"
            f"Median relevant per query:      {self.median_relevant}\n\n"
            "==============================================\n"
        )


def dataset_name(crosswalk: Crosswalk, languages: list[str]) -> str:
    return f"{crosswalk.country}_q_{crosswalk.language}_c_{'_'.join(sorted(set(languages)))}"


def select_target(matches: dict[str, str], loosest: str) -> tuple[str | None, str]:
    """The single gold concept of a term, or None with the reason ('vague' or 'ambiguous')."""
    if not matches:
        return None, "vague"
    best = min(RELATIONS.index(r) for r in matches.values())
    if best > RELATIONS.index(loosest):
        return None, "vague"
    targets = [uri for uri, r in matches.items() if RELATIONS.index(r) == best]
    if len(targets) > 1:
        return None, "ambiguous"
    return targets[0], "ok"


@dataclass(frozen=True)
class LabelCorpus:
    """A taxonomy's labels in some languages as a MELO corpus: element ids, texts, each element's
    concept and each concept's elements."""

    languages: tuple[str, ...]
    ids: list[str]
    texts: list[str]
    concept_of: dict[str, str]
    elements_of: dict[str, list[str]]

    @classmethod
    def of(cls, taxonomy: Taxonomy, languages: list[str]) -> LabelCorpus:
        ids, texts, concept_of = [], [], {}
        elements_of: dict[str, list[str]] = {}
        for form in taxonomy.surface_forms(languages):
            ids.append(form.element_id)
            texts.append(form.text)
            concept_of[form.element_id] = form.concept_uri
            elements_of.setdefault(form.concept_uri, []).append(form.element_id)
        return cls(tuple(languages), ids, texts, concept_of, elements_of)

    def dataset(self, name: str, queries: list[tuple[str, str]], query_language: str | None,
                prefix: str = "Q") -> MeloDataset:  # fmt: skip
        """(text, concept URI) queries over this corpus; each query's relevant elements are all
        labels of its concept."""
        query_ids = [f"{prefix}{i:06d}" for i in range(1, len(queries) + 1)]
        relevant = {q: sorted(self.elements_of.get(uri, [])) for q, (_, uri) in zip(query_ids, queries, strict=True)}
        return MeloDataset(name=name, path=None, query_ids=query_ids, queries=[text for text, _ in queries],
                           corpus_ids=self.ids, corpus=self.texts, relevant=relevant, concept_of=self.concept_of,
                           query_language=query_language, corpus_languages=self.languages)  # fmt: skip


def build_dataset(
    crosswalk: Crosswalk,
    taxonomy: Taxonomy,
    languages: list[str],
    loosest_relation: str | None = None,
) -> tuple[MeloDataset, BuildReport]:
    languages = sorted(set(languages))
    if lacking := taxonomy.lacking(languages):
        raise ValueError(lacking)
    loosest = loosest_relation or LOOSEST_RELATION_BY_CROSSWALK.get(crosswalk.name, DEFAULT_LOOSEST_RELATION)
    if loosest not in RELATIONS:
        raise ValueError(f"unknown relation {loosest!r}; expected one of {', '.join(RELATIONS)}")

    corpus = LabelCorpus.of(taxonomy, languages)
    queries: list[tuple[str, str]] = []
    counts = {"ok": 0, "vague": 0, "ambiguous": 0, "unknown": 0}
    for term in crosswalk.terms:
        target, verdict = select_target(term.matches, loosest)
        if target is not None and target not in taxonomy:
            verdict = "unknown"  # e.g. a URI retired from ESCO
        counts[verdict] += 1
        if verdict == "ok":
            assert target is not None
            queries.append((term.title, target))
    dataset = corpus.dataset(dataset_name(crosswalk, languages), queries, crosswalk.language)
    per_query = [len(dataset.relevant[q]) for q in dataset.query_ids]
    report = BuildReport(
        accepted=counts["ok"],
        ambiguous=counts["ambiguous"],
        vague=counts["vague"],
        unknown_concept=counts["unknown"],
        corpus_elements=len(corpus.ids),
        median_relevant=statistics.median(per_query) if per_query else 0,
    )
    return dataset, report
