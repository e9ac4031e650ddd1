"""``domain``: MELO Studio's own encoder, trained on ESCO labels (melo_core.training) and kept in
``models/esco-static``. When it is missing and MELO data is present, the first use trains it
(a few minutes on 2 cores, with a progress bar) — nothing is downloaded. Options as ``st:``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from melo_core import config
from melo_core.encoders.base import EncoderSpec
from melo_core.encoders.registry import BuiltModel, register_built_model, register_encoder
from melo_core.encoders.st_encoder import SentenceTransformerEncoder
from melo_core.errors import MeloInputError


def _languages(spec: EncoderSpec) -> frozenset[str] | None:
    """The languages on the default model's card; None (any) while it is not trained yet: the
    first use trains it on every language of the MELO corpora."""
    from melo_core.coverage import card_languages
    from melo_core.training import default_model_dir

    return card_languages(default_model_dir())


def _build(data_dir: str | Path, on_progress: Callable[[int, int, float], None] | None = None) -> Path:
    from melo_core.training import ensure_default_model

    return ensure_default_model(data_dir, on_progress=on_progress)


def _folder() -> Path:
    from melo_core.training import default_model_dir

    return default_model_dir()


TRAINING_SECONDS = 160  # `train` with its defaults on 2 cores (about 2.6 min in benchmarks/first_use.py)
register_built_model(BuiltModel("domain", "domain model", _folder, _build, TRAINING_SECONDS))


@register_encoder("domain", languages=_languages)
def _create(spec: EncoderSpec) -> SentenceTransformerEncoder:
    from tqdm import tqdm

    from melo_core.datasets import datasets_root
    from melo_core.training import default_model_dir, ensure_default_model

    if not (default_model_dir() / "modules.json").is_file():
        try:
            datasets_root(config.data_dir())
        except MeloInputError:
            raise MeloInputError(
                f"the domain model is not in {default_model_dir()} and there is no MELO data to train it on. "
                f"{config.DATA_HELP}"
            ) from None
    with tqdm(unit="step", desc="training the domain model (first use)", file=sys.stderr, disable=None) as bar:

        def progress(step: int, steps: int, loss: float) -> None:
            bar.total = steps
            bar.update(step - bar.n)

        folder = ensure_default_model(config.data_dir(), on_progress=progress)
    return SentenceTransformerEncoder(EncoderSpec("st", str(folder), spec.options))
