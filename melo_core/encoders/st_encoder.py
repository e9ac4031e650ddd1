"""Any sentence-transformers model: a Hugging Face id already in the local cache, or a folder.

Nothing is downloaded: the model is loaded with ``local_files_only``. Options: ``@batch=64``,
``@device=cpu|cuda`` (default: cuda when torch sees a GPU), ``@template=paper``, ``@query_prompt=...``/``@passage_prompt=...``
(prompt names the model defines, e.g. JobBERT-V3's asymmetric heads). Unless ``@device`` is named,
a folder of one StaticEmbedding is read with numpy (``static_embedding.py``), and a BERT-family
transformer with mean pooling runs in ONNX Runtime (``onnx_transformer.py``; on a machine with an
NVIDIA GPU it runs there through sentence-transformers instead), both on the CPU and without
importing torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from melo_core.encoders.base import PROMPT_OPTIONS, Encoder, EncoderSpec, Role, normalise_rows
from melo_core.encoders.onnx_transformer import nvidia_gpu_present, onnx_encoder
from melo_core.encoders.registry import register_encoder
from melo_core.encoders.static_embedding import static_encoder
from melo_core.errors import MeloInputError

MISSING_MODEL_HELP = (
    "sentence-transformers model {name!r} is neither a local folder nor in the Hugging Face cache, "
    "and MELO Studio never downloads at run time. Give the path of a saved model "
    "(st:path/to/model, e.g. one made by `python -m melo_core train`), or download it once on a "
    "connected machine (`huggingface-cli download {name}`) and copy the cache (~/.cache/huggingface)."
)


def _default_device() -> str:
    """A GPU when torch sees one (``@device=cpu`` overrides), else the CPU: as `train` chooses."""
    from melo_core.encoders.training import training_device

    return training_device("auto")


class SentenceTransformerEncoder:
    def __init__(self, spec: EncoderSpec):
        if not spec.argument:
            raise ValueError("st: needs a model, e.g. st:models/esco-static or st:BAAI/bge-m3")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # "Loading weights" on every load of a local model: noise

        self._template = spec.template()
        self._batch = int(spec.options.get("batch", 64))
        self._prompts = spec.prompt_names()
        self.symmetric = self._prompts["query"] == self._prompts["passage"]  # the cache shares both roles' vectors
        name = str(spec.path())
        if (
            Path(name).exists()
            and not (Path(name) / "modules.json").is_file()
            and not (Path(name) / "config.json").is_file()
        ):
            raise MeloInputError("not a sentence-transformers model folder (no modules.json or config.json)", name)
        try:
            self._model = SentenceTransformer(name, device=spec.options.get("device") or _default_device(),
                                              local_files_only=True)  # fmt: skip
        except Exception as exc:
            if name.startswith((".", "/", "~")) and not Path(name).exists():
                raise MeloInputError("sentence-transformers model folder not found", name) from None
            if Path(name).exists():
                raise MeloInputError(f"cannot load the sentence-transformers model: {exc}", name) from None
            raise MeloInputError(MISSING_MODEL_HELP.format(name=name)) from None
        dim = self._model.get_embedding_dimension()
        if not dim:
            raise MeloInputError("the model does not declare its embedding dimension", name)
        self.dim = int(dim)
        self.spec = spec.stamped_key()

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        wrapped = [self._template.format(t) for t in texts]
        vectors = self._model.encode(
            wrapped,
            batch_size=self._batch,
            prompt_name=self._prompts[role],
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise_rows(vectors)


def sentence_transformer_encoder(spec: EncoderSpec) -> Encoder:
    """A folder holding one StaticEmbedding, or a mean-pooled BERT-family transformer, is read
    without sentence-transformers (unless a device is named: then it runs there; a transformer also
    goes to a machine's NVIDIA GPU); any other model loads through it."""
    if spec.argument and "device" not in spec.options:
        reader = static_encoder(spec) or (None if nvidia_gpu_present() else onnx_encoder(spec))
        if reader is not None:
            return reader
    return SentenceTransformerEncoder(spec)


def _languages(spec: EncoderSpec) -> frozenset[str] | None:
    """The languages on the model card ``melo_core.encoders.training`` wrote next to the model; None (any
    language: unknown is not taken to mean unreadable) for a model without one, e.g. a Hugging
    Face id."""
    from melo_core.encoders.coverage import card_languages

    return card_languages(spec.path()) if spec.argument else None


@register_encoder("st", languages=_languages, options=PROMPT_OPTIONS)
def _create(spec: EncoderSpec) -> Encoder:
    return sentence_transformer_encoder(spec)
