"""Scorers by name. Each scorer module registers its own names, so a new scorer is one file, and
may declare the languages a scorer reads (``languages=``; undeclared: any language, see
``melo_core.encoders.coverage``) and the options it takes (``melo_core.spec``, which parses every spec)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from melo_core import spec as specs
from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.known_mentions import KnownMentionScorer
from melo_core.spec import OptionSpec, Spec

Factory = Callable[[ScorerContext], Scorer]
SpecFactory = Callable[[Spec, ScorerContext], Scorer]
LanguagesOf = Callable[[Spec], "frozenset[str] | None"]  # spec -> the languages it reads (None: any)
_FACTORIES: dict[str, Factory] = {}
_LANGUAGES: dict[str, LanguagesOf] = {}
HelpText = str | Callable[[], str]  # a callable when what it names is registered later (encoder kinds)
# Families of scorers named by a spec (encoders, fusions): (accepts(spec), factory, help, languages).
_SPEC_FAMILIES: list[tuple[Callable[[Spec], bool], SpecFactory, HelpText, LanguagesOf | None]] = []


def register(name: str, languages: LanguagesOf | None = None,
             options: Sequence[OptionSpec] = ()) -> Callable[[Factory], Factory]:  # fmt: skip
    def decorate(factory: Factory) -> Factory:
        if name in _FACTORIES:
            raise ValueError(f"scorer {name!r} registered twice")
        _FACTORIES[name] = factory
        specs.declare(name, "scorer", options)
        if languages is not None:
            _LANGUAGES[name] = languages
        return factory

    return decorate


def register_family(accepts: Callable[[Spec], bool], help_text: HelpText,
                    languages: LanguagesOf | None = None) -> Callable[[SpecFactory], SpecFactory]:  # fmt: skip
    """Register scorers named by a spec (e.g. every encoder spec is a dense scorer)."""

    def decorate(factory: SpecFactory) -> SpecFactory:
        _SPEC_FAMILIES.append((accepts, factory, help_text, languages))
        return factory

    return decorate


def scorer_languages(spec: str | Spec) -> frozenset[str] | None:
    """The languages the scorer of ``spec`` reads, as it declares them; None: any (or unknown).
    Builds nothing."""
    parsed = specs.parse(spec)
    named = str(parsed)
    if named in _FACTORIES:
        declared = _LANGUAGES.get(named)
        return declared(parsed) if declared is not None else None
    for accepts, _, _, family_languages in _SPEC_FAMILIES:
        if accepts(parsed):
            return family_languages(parsed) if family_languages is not None else None
    return None


def scorer_names() -> list[str]:
    return sorted(_FACTORIES)


def scorer_families() -> list[str]:
    return [text if isinstance(text, str) else text() for _, _, text, _ in _SPEC_FAMILIES]


def is_scorer_spec(spec: str | Spec) -> bool:
    """Whether ``spec`` parses and names a scorer (its options are ``check_scorer``'s)."""
    try:
        parsed = specs.parse(spec)
    except specs.SpecError:
        return False
    return str(parsed) in _FACTORIES or any(accepts(parsed) for accepts, _, _, _ in _SPEC_FAMILIES)


def check_scorer(spec: str | Spec) -> Spec:
    """``spec`` parsed and checked: every family known, every option declared and in range
    (``melo_core.spec.check``); raises SpecError with a suggestion, and for an unknown scorer
    what there is."""
    try:
        return specs.check(spec)
    except specs.UnknownFamily as exc:
        available = f"available: {', '.join(scorer_names())}; or {'; or '.join(scorer_families())}"
        raise specs.UnknownFamily(exc.what, f"{exc.hint} {available[0].upper()}{available[1:]}" if exc.hint else "",
                                  available.removeprefix("available: ")) from None  # fmt: skip


def create_scorer(name: str | Spec, context: ScorerContext | None = None) -> Scorer:
    """The scorer a name or spec stands for. With ``context.mentions`` every scorer that scores
    the corpus itself (not a fusion of others, whose parts are lifted instead) is wrapped so
    that known mentions lift its concepts."""
    context = context or ScorerContext()
    scorer = _create_bare(check_scorer(name), context)
    if context.mentions is not None and not getattr(scorer, "fuses_scorers", False):
        return KnownMentionScorer(scorer, context.mentions, context.concepts)  # type: ignore[arg-type]
    return scorer


def _create_bare(spec: Spec, context: ScorerContext) -> Scorer:
    factory = _FACTORIES.get(str(spec))
    if factory is not None:
        return factory(context)
    for accepts, spec_factory, _, _ in _SPEC_FAMILIES:
        if accepts(spec):
            return spec_factory(spec, context)
    raise specs.SpecError(f"unknown scorer {str(spec)!r}; see `python -m melo_core scorers`")
