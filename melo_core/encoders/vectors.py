"""Vector helpers shared by the dense scorers and training (numpy and scipy only: no encoder)."""

from __future__ import annotations

import numpy as np
from scipy import sparse


def concept_centroids(vectors: np.ndarray, groups: np.ndarray, n_concepts: int) -> np.ndarray:
    """Unit mean vector of each concept's forms (``groups``: the concept index of each row).

    Summed by a sparse product, which adds each concept's rows in order in float32 as np.add.at
    did (the same bits), 0.15 s instead of 0.72 s for the 366,000 labels of the MELO union."""
    rows = np.asarray(vectors, dtype=np.float32)
    members = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (np.asarray(groups), np.arange(len(rows)))),
                                shape=(n_concepts, len(rows)))  # fmt: skip
    sums = np.asarray(members @ rows, dtype=np.float32)
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
