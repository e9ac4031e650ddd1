"""``domain``: MELO Studio's own encoder, trained on ESCO labels (melo_core.encoders.training) and kept in
``models/esco-static``. When it is missing and MELO data is present, the first use trains it
(a few minutes on 2 cores, with a progress bar) — nothing is downloaded. Options as ``st:``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from melo_core.encoders.base import PROMPT_OPTIONS, Encoder, EncoderSpec
from melo_core.encoders.registry import BuiltModel, register_built_model, register_encoder
from melo_core.encoders.st_encoder import sentence_transformer_encoder


def _languages(spec: EncoderSpec) -> frozenset[str] | None:
    """The languages on the default model's card; None (any) while it is not trained yet: the
    first use trains it on every language of the MELO corpora."""
    from melo_core.encoders.coverage import card_languages
    from melo_core.encoders.training import default_model_dir

    return card_languages(default_model_dir())


def _build(data_dir: str | Path, on_progress: Callable[[int, int, float], None] | None = None) -> Path:
    from melo_core.encoders.training import ensure_default_model

    return ensure_default_model(data_dir, on_progress=on_progress)


def _folder() -> Path:
    from melo_core.encoders.training import default_model_dir

    return default_model_dir()


# `train` with its defaults (180 rounds, job-ad noise) on 2 idle cores: 252 s (docs/experiments/first-use-and-memory.md).
# (160 s, the 120-round model's, stretched the ETA that `prepare` extrapolates while it trains.)
TRAINING_SECONDS = 252
DOMAIN_MODEL = BuiltModel("domain", "domain model", _folder, _build, TRAINING_SECONDS)
register_built_model(DOMAIN_MODEL)


@register_encoder("domain", languages=_languages, options=PROMPT_OPTIONS)
def _create(spec: EncoderSpec) -> Encoder:
    folder = DOMAIN_MODEL.on_first_use("training")
    return sentence_transformer_encoder(EncoderSpec("st", str(folder), spec.options))
