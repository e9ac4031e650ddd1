"""Encoder kinds by name; ``load_encoder(spec)`` builds one from its spec string.

A kind may declare the languages it reads (``register_encoder(kind, languages=...)``: a function
of the spec, so that ``st:PATH`` can read its model's card without loading the model); an
undeclared kind reads any language (``melo_core.encoders.coverage``), and the options it takes beyond
``ENCODER_OPTIONS`` (``options=``; ``melo_core.spec`` checks them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from melo_core import spec as specs
from melo_core.encoders.base import ENCODER_OPTIONS, Encoder, EncoderSpec
from melo_core.spec import ComponentSpec, OptionSpec

EncoderFactory = Callable[[EncoderSpec], Encoder]
LanguagesOf = Callable[[EncoderSpec], "frozenset[str] | None"]
_FACTORIES: dict[str, EncoderFactory] = {}
_LANGUAGES: dict[str, LanguagesOf] = {}


def register_encoder(kind: str, languages: LanguagesOf | None = None,
                     options: Sequence[OptionSpec] = ()) -> Callable[[EncoderFactory], EncoderFactory]:  # fmt: skip
    def decorate(factory: EncoderFactory) -> EncoderFactory:
        _FACTORIES[kind] = factory
        specs.declare(kind, "encoder", (*ENCODER_OPTIONS, *options), argument=True)
        if languages is not None:
            _LANGUAGES[kind] = languages
        return factory

    return decorate


def is_model_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a whole sentence-transformers model (its last file is written by a rename)."""
    return (folder / "modules.json").is_file()


def build_model_folder(folder: Path, write: Callable[[Path], None]) -> Path:
    """``folder``, written first by ``write(temporary)`` when it holds no model. One build of a folder
    at a time, across processes: a second waits, then finds it built. Written to a temporary folder
    beside it and renamed, so an interrupted build leaves nothing half-made; temporary folders left
    by killed builds are removed first."""
    import os
    import shutil

    from melo_core.runtime.preparing import held

    if is_model_folder(folder):
        return folder
    with held(folder.with_name(f".{folder.name}.build.lock")):
        if is_model_folder(folder):
            return folder
        for stale in folder.parent.glob(f".tmp-*-{folder.name}"):  # left by a killed build: none runs now
            shutil.rmtree(stale, ignore_errors=True)
        temporary = folder.with_name(f".tmp-{os.getpid()}-{folder.name}")
        try:
            write(temporary)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(temporary, folder)
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
    return folder


@dataclass(frozen=True)
class BuiltModel:
    """A model MELO Studio builds itself (on first use, or by `prepare`) for an encoder kind."""

    kind: str
    what: str  # how readiness names it: "domain model"
    folder: Callable[[], Path]
    build: Callable[..., Path]  # build(data_dir, on_progress=(step, steps, loss) -> None) -> folder
    seconds: float  # to build it on 2 cores, measured

    def ready(self) -> bool:
        return is_model_folder(self.folder())

    def on_first_use(self, verb: str) -> Path:
        """The model's folder, built first with a progress bar when it is missing; a clear error
        when it is missing and there is no MELO data to build it from."""
        import sys

        from tqdm import tqdm

        from melo_core import config
        from melo_core.errors import MeloInputError
        from melo_core.esco.datasets import datasets_root

        if self.ready():
            return self.folder()
        try:
            datasets_root(config.data_dir())
        except MeloInputError:
            raise MeloInputError(f"the {self.what} is not in {self.folder()} and there is no MELO data to train "
                                 f"it on. {config.DATA_HELP}") from None  # fmt: skip
        with tqdm(unit="step", desc=f"{verb} the {self.what} (first use)", file=sys.stderr, disable=None) as bar:

            def progress(step: int, steps: int, loss: float) -> None:
                bar.total = steps
                bar.update(step - bar.n)

            return self.build_apart(config.data_dir(), on_progress=progress)

    def build_apart(self, data_dir: str | Path, on_progress: Callable[[int, int, float], None] | None = None) -> Path:
        """``build`` in a process of its own: the gigabytes a training takes are given back when it
        ends, not kept by the process that goes on to serve or embed (docs/experiments/first-use-and-memory.md, memory)."""
        from melo_core.runtime.processes import build_apart

        return build_apart(self.build, data_dir, on_progress)


_BUILT: dict[str, BuiltModel] = {}


def register_built_model(model: BuiltModel) -> None:
    _BUILT[model.kind] = model


def built_model(kind: str) -> BuiltModel | None:
    """The model the encoder kind builds itself, if it does."""
    return _BUILT.get(kind)


def encoder_kinds() -> list[str]:
    return sorted(_FACTORIES)


def is_encoder_spec(spec: str | ComponentSpec) -> bool:
    """Whether ``spec`` is one component whose family is an encoder kind."""
    try:
        parsed = specs.parse(spec)
    except specs.SpecError:
        return False
    return isinstance(parsed, ComponentSpec) and parsed.family in _FACTORIES


def encoder_languages(spec: str | EncoderSpec) -> frozenset[str] | None:
    """The languages the encoder of ``spec`` reads, as its kind declares them; None: any (or
    unknown). Loads no model."""
    parsed = spec if isinstance(spec, EncoderSpec) else EncoderSpec.parse(spec)
    declared = _LANGUAGES.get(parsed.kind)
    return declared(parsed) if declared is not None else None


def load_encoder(spec: str | EncoderSpec) -> Encoder:
    """The encoder of ``spec``, its kind and options checked first (``melo_core.spec.check``)."""
    parsed = spec if isinstance(spec, EncoderSpec) else EncoderSpec.parse(spec)
    specs.check(ComponentSpec(parsed.kind, parsed.argument, tuple(parsed.options.items())), kind="encoder")
    factory = _FACTORIES.get(parsed.kind)
    if factory is None:
        raise ValueError(f"unknown encoder {parsed.kind!r}; available: {', '.join(encoder_kinds())}")
    return factory(parsed)
