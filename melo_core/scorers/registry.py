"""Scorers by name. Each scorer module registers its own names, so a new scorer is one file, and
may declare the languages a scorer reads (``languages=``; undeclared: any language, see
``melo_core.coverage``)."""

from __future__ import annotations

from collections.abc import Callable

from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.known_mentions import KnownMentionScorer

Factory = Callable[[ScorerContext], Scorer]
SpecFactory = Callable[[str, ScorerContext], Scorer]
LanguagesOf = Callable[[str], "frozenset[str] | None"]  # spec -> the languages it reads (None: any)
_FACTORIES: dict[str, Factory] = {}
_LANGUAGES: dict[str, LanguagesOf] = {}
HelpText = str | Callable[[], str]  # a callable when what it names is registered later (encoder kinds)
# Families of scorers named by a spec string (encoders, fusions): (accepts(spec), factory, help, languages).
_SPEC_FAMILIES: list[tuple[Callable[[str], bool], SpecFactory, HelpText, LanguagesOf | None]] = []


def register(name: str, languages: LanguagesOf | None = None) -> Callable[[Factory], Factory]:
    def decorate(factory: Factory) -> Factory:
        if name in _FACTORIES:
            raise ValueError(f"scorer {name!r} registered twice")
        _FACTORIES[name] = factory
        if languages is not None:
            _LANGUAGES[name] = languages
        return factory

    return decorate


def register_family(accepts: Callable[[str], bool], help_text: HelpText,
                    languages: LanguagesOf | None = None) -> Callable[[SpecFactory], SpecFactory]:  # fmt: skip
    """Register scorers named by a spec (e.g. every encoder spec is a dense scorer)."""

    def decorate(factory: SpecFactory) -> SpecFactory:
        _SPEC_FAMILIES.append((accepts, factory, help_text, languages))
        return factory

    return decorate


def scorer_languages(spec: str) -> frozenset[str] | None:
    """The languages the scorer of ``spec`` reads, as it declares them; None: any (or unknown).
    Builds nothing."""
    if spec in _FACTORIES:
        declared = _LANGUAGES.get(spec)
        return declared(spec) if declared is not None else None
    for accepts, _, _, family_languages in _SPEC_FAMILIES:
        if accepts(spec):
            return family_languages(spec) if family_languages is not None else None
    return None


def scorer_names() -> list[str]:
    return sorted(_FACTORIES)


def scorer_families() -> list[str]:
    return [text if isinstance(text, str) else text() for _, _, text, _ in _SPEC_FAMILIES]


def is_scorer_spec(spec: str) -> bool:
    return spec in _FACTORIES or any(accepts(spec) for accepts, _, _, _ in _SPEC_FAMILIES)


def create_scorer(name: str, context: ScorerContext | None = None) -> Scorer:
    """The scorer a name or spec stands for. With ``context.mentions`` every scorer that scores
    the corpus itself (not a fusion of others, whose parts are lifted instead) is wrapped so
    that known mentions lift its concepts."""
    context = context or ScorerContext()
    scorer = _create_bare(name, context)
    if context.mentions is not None and not getattr(scorer, "fuses_scorers", False):
        return KnownMentionScorer(scorer, context.mentions, context.concepts)  # type: ignore[arg-type]
    return scorer


def _create_bare(name: str, context: ScorerContext) -> Scorer:
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory(context)
    for accepts, spec_factory, _, _ in _SPEC_FAMILIES:
        if accepts(name):
            return spec_factory(name, context)
    families = "; ".join(scorer_families())
    raise ValueError(f"unknown scorer {name!r}; available: {', '.join(scorer_names())}; or {families}")
