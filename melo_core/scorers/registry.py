"""Scorers by name. Each scorer module registers its own names, so a new scorer is one file."""

from __future__ import annotations

from collections.abc import Callable

from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.known_mentions import KnownMentionScorer

Factory = Callable[[ScorerContext], Scorer]
SpecFactory = Callable[[str, ScorerContext], Scorer]
_FACTORIES: dict[str, Factory] = {}
# Families of scorers named by a spec string (encoders, fusions): (accepts(spec), factory).
_SPEC_FAMILIES: list[tuple[Callable[[str], bool], SpecFactory, str]] = []


def register(name: str) -> Callable[[Factory], Factory]:
    def decorate(factory: Factory) -> Factory:
        if name in _FACTORIES:
            raise ValueError(f"scorer {name!r} registered twice")
        _FACTORIES[name] = factory
        return factory

    return decorate


def register_family(accepts: Callable[[str], bool], help_text: str) -> Callable[[SpecFactory], SpecFactory]:
    """Register scorers named by a spec (e.g. every encoder spec is a dense scorer)."""

    def decorate(factory: SpecFactory) -> SpecFactory:
        _SPEC_FAMILIES.append((accepts, factory, help_text))
        return factory

    return decorate


def scorer_names() -> list[str]:
    return sorted(_FACTORIES)


def scorer_families() -> list[str]:
    return [help_text for _, _, help_text in _SPEC_FAMILIES]


def is_scorer_spec(spec: str) -> bool:
    return spec in _FACTORIES or any(accepts(spec) for accepts, _, _ in _SPEC_FAMILIES)


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
    for accepts, spec_factory, _ in _SPEC_FAMILIES:
        if accepts(name):
            return spec_factory(name, context)
    families = "; ".join(scorer_families())
    raise ValueError(f"unknown scorer {name!r}; available: {', '.join(scorer_names())}; or {families}")
