"""The fallback that serves while `best` is prepared (`lexical`; issue 90): a term is not lifted by
another language's known mention above the scheme's and English labels. Real MELO corpora and
crosswalks; docs/experiments/fallback-mentions.md has the measurements."""

from __future__ import annotations

from pathlib import Path

import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_datasets
from melo_core.evaluation.benchmarking import scorer_context
from melo_core.linking.linker import Candidate
from melo_core.linking.pipeline import Pipeline, PipelineScorer, crosswalk_mentions_of, load_pipeline

ROOT = Path(__file__).resolve().parent.parent


def _taxonomy(melo_data: Path, *names: str) -> Taxonomy:
    return taxonomy_from_datasets([load_dataset(melo_data / "processed" / "melo" / name) for name in names])


def _foreign_lifts(candidates: list[Candidate], readable: set[str]) -> list[str]:
    """The candidates a known mention in a language outside ``readable`` lifted."""
    return [f"{c.rank}. {c.label} <- {c.matched_language}: {c.matched_label}"
            for c in candidates if c.via_mention and c.matched_language not in readable]  # fmt: skip


@pytest.mark.parametrize("name", ["lexical", "fast"])
def test_the_fallbacks_keep_only_mentions_in_the_query_and_label_languages_and_best_keeps_all(name: str) -> None:
    for variant in (load_pipeline(name).monolingual, load_pipeline(name).cross_lingual):
        assert variant.mention_languages == "query_and_labels"
    best = load_pipeline("best")
    assert best.monolingual.mention_languages == best.cross_lingual.mention_languages == "all"


# lexical-own-languages.toml: the same with best's mention prior, which must count the same mentions.
@pytest.mark.parametrize("name", ["lexical", str(ROOT / "experiments" / "pipelines" / "lexical-own-languages.toml")])
def test_an_english_job_title_is_not_lifted_by_bulgarian_or_dutch_titles(melo_data: Path, tmp_path: Path,
                                                                         name: str) -> None:  # fmt: skip
    # Before: 7 of 10 candidates for this title came through other languages' crosswalk titles (a
    # Bulgarian plumber title folded to ASCII kept only its brackets, which matched "(m/f)").
    taxonomy = _taxonomy(melo_data, "usa_q_en_c_en")
    pipeline = Pipeline(name, taxonomy, ["en"], index_kind="exact", cache_dir=tmp_path, show_progress=False)
    pipeline.set_mentions(crosswalk_mentions_of(melo_data, pipeline.definition.mention_relations, None, tmp_path))
    candidates = pipeline.link(["Senior Baker (m/f)"], top_k=10, query_language="en")[0]
    assert _foreign_lifts(candidates, {"en"}) == []
    assert "baker" in [c.label for c in candidates[:3]]
    assert any(c.via_mention for c in candidates)  # English mentions still lift
    # The mention prior, where on, counts the same mentions: other languages' titles raise no concept.
    mentioned = {m.concept_uri for m in pipeline.linker("en").mentions}
    assert [c.label for c in candidates if c.prior > 0 and c.concept_uri not in mentioned] == []
    assert pipeline.linker("en").mention_prior == 0 or any(c.prior > 0 for c in candidates)


def test_norwegian_terms_rank_norwegian_and_english_labels_above_other_languages_mentions(
    melo_data: Path, tmp_path: Path
) -> None:
    # As the Link page links the Norwegian scheme: Norway's own crosswalk held out. Before: a Danish
    # title lifted bricklayer above the scheme's "Murere", Romanian, French and Estonian ones
    # followed at ranks 5-10.
    taxonomy = _taxonomy(melo_data, "nor_q_no_c_no", "nor_q_no_c_en")
    pipeline = Pipeline("lexical", taxonomy, ["en", "no"], index_kind="exact", cache_dir=tmp_path, show_progress=False)
    pipeline.set_mentions(crosswalk_mentions_of(melo_data, pipeline.definition.mention_relations, "nor", tmp_path))
    terms = ["Murere", "Kokker", "Vinduspussere", "Skogteknikere", "Dørselgere"]
    for term, candidates in zip(terms, pipeline.link(terms, top_k=10, query_language="no"), strict=True):
        assert _foreign_lifts(candidates, {"no", "en"}) == [], term
    assert {m.language for m in pipeline.linker("no").mentions} == {"en"}  # Norway's own "no" titles held out


def test_evaluation_gives_the_pipeline_each_mentions_language(melo_data: Path) -> None:
    # A Norwegian query over English labels, Norway held out: only English crosswalk titles remain.
    dataset = load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_en")
    context = scorer_context(melo_data, dataset, "lexical")
    assert context.mentions is not None and set(context.mentions.languages) > {"en", "da", "bg"}
    scorer = PipelineScorer(load_pipeline("lexical"), context)
    scorer.fit(dataset.corpus)
    assert scorer.pipeline is not None
    assert {m.language for m in scorer.pipeline.linker("no").mentions} == {"en"}


def test_a_bad_mention_languages_value_names_the_key_and_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    variant = 'mention_languages = "{}"\ncomponents = [{{ scorer = "char-tfidf" }}]\n'
    path.write_text("[monolingual]\n" + variant.format("query_and_labels") + "[cross_lingual]\n"
                    + variant.format("labels"), encoding="utf-8")  # fmt: skip
    with pytest.raises(MeloInputError, match=r"cross_lingual\.mention_languages.*all, query_and_labels.*'labels'"):
        load_pipeline(str(path))
