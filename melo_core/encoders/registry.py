"""Encoder kinds by name; ``load_encoder(spec)`` builds one from its spec string."""

from __future__ import annotations

from collections.abc import Callable

from melo_core.encoders.base import Encoder, EncoderSpec

EncoderFactory = Callable[[EncoderSpec], Encoder]
_FACTORIES: dict[str, EncoderFactory] = {}


def register_encoder(kind: str) -> Callable[[EncoderFactory], EncoderFactory]:
    def decorate(factory: EncoderFactory) -> EncoderFactory:
        _FACTORIES[kind] = factory
        return factory

    return decorate


def encoder_kinds() -> list[str]:
    return sorted(_FACTORIES)


def is_encoder_spec(spec: str) -> bool:
    return EncoderSpec.parse(spec).kind in _FACTORIES


def load_encoder(spec: str | EncoderSpec) -> Encoder:
    parsed = spec if isinstance(spec, EncoderSpec) else EncoderSpec.parse(spec)
    factory = _FACTORIES.get(parsed.kind)
    if factory is None:
        raise ValueError(f"unknown encoder {parsed.kind!r}; available: {', '.join(encoder_kinds())}")
    return factory(parsed)
