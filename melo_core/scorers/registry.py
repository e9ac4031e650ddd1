"""Scorers by name. Each scorer module registers its own names, so a new scorer is one file."""

from __future__ import annotations

from collections.abc import Callable

from melo_core.scorers.base import Scorer, ScorerContext

Factory = Callable[[ScorerContext], Scorer]
_FACTORIES: dict[str, Factory] = {}


def register(name: str) -> Callable[[Factory], Factory]:
    def decorate(factory: Factory) -> Factory:
        if name in _FACTORIES:
            raise ValueError(f"scorer {name!r} registered twice")
        _FACTORIES[name] = factory
        return factory

    return decorate


def scorer_names() -> list[str]:
    return sorted(_FACTORIES)


def create_scorer(name: str, context: ScorerContext | None = None) -> Scorer:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; available: {', '.join(scorer_names())}") from None
    return factory(context or ScorerContext())
