"""Build a MELO dataset from a crosswalk and a taxonomy, as the benchmark was built.

A term is kept when its closest relation is acceptable and unambiguous: exactly one
exactMatch, or no exactMatch and exactly one narrowMatch (the benchmark's rule). Norway's
crosswalk was built accepting relations up to closeMatch; that setting is kept per crosswalk.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from melo_core.crosswalk import RELATIONS, Crosswalk
from melo_core.datasets import MeloDataset
from melo_core.taxonomy import Taxonomy

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


def label_corpus(taxonomy: Taxonomy, languages: list[str]
                 ) -> tuple[list[str], list[str], dict[str, str], dict[str, list[str]]]:  # fmt: skip
    """The taxonomy's labels in ``languages`` as a MELO corpus: element ids, texts, each element's
    concept, and each concept's elements."""
    corpus_ids, corpus, concept_of = [], [], {}
    elements_of: dict[str, list[str]] = {}
    for form in taxonomy.surface_forms(languages):
        corpus_ids.append(form.element_id)
        corpus.append(form.text)
        concept_of[form.element_id] = form.concept_uri
        elements_of.setdefault(form.concept_uri, []).append(form.element_id)
    return corpus_ids, corpus, concept_of, elements_of


def build_dataset(
    crosswalk: Crosswalk,
    taxonomy: Taxonomy,
    languages: list[str],
    loosest_relation: str | None = None,
) -> tuple[MeloDataset, BuildReport]:
    languages = sorted(set(languages))
    missing = [lang for lang in languages if lang not in taxonomy.languages]
    if missing:
        raise ValueError(f"the taxonomy has no labels in {', '.join(missing)} (it has {', '.join(taxonomy.languages)})")
    loosest = loosest_relation or LOOSEST_RELATION_BY_CROSSWALK.get(crosswalk.name, DEFAULT_LOOSEST_RELATION)
    if loosest not in RELATIONS:
        raise ValueError(f"unknown relation {loosest!r}; expected one of {', '.join(RELATIONS)}")

    corpus_ids, corpus, concept_of, elements_of = label_corpus(taxonomy, languages)

    query_ids, queries, relevant = [], [], {}
    counts = {"ok": 0, "vague": 0, "ambiguous": 0, "unknown": 0}
    for term in crosswalk.terms:
        target, verdict = select_target(term.matches, loosest)
        if target is not None and target not in taxonomy:
            verdict = "unknown"  # e.g. a URI retired from ESCO
        counts[verdict] += 1
        if verdict != "ok":
            continue
        qid = f"Q{len(query_ids) + 1:06d}"
        query_ids.append(qid)
        queries.append(term.title)
        relevant[qid] = sorted(elements_of.get(target, []))

    per_query = [len(relevant[q]) for q in query_ids]
    report = BuildReport(
        accepted=counts["ok"],
        ambiguous=counts["ambiguous"],
        vague=counts["vague"],
        unknown_concept=counts["unknown"],
        corpus_elements=len(corpus_ids),
        median_relevant=statistics.median(per_query) if per_query else 0,
    )
    dataset = MeloDataset(
        name=dataset_name(crosswalk, languages),
        path=None,
        query_ids=query_ids,
        queries=queries,
        corpus_ids=corpus_ids,
        corpus=corpus,
        relevant=relevant,
        concept_of=concept_of,
        query_language=crosswalk.language,
        corpus_languages=tuple(languages),
    )
    return dataset, report
