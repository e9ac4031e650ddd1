"""What the grids share: MRR on fused candidate pools (scoring hundreds of fusions without a full
evaluation each), the options of an experiment file, and the rule that keeps lexical scorers off
cross-lingual datasets.

Pool MRR: every component proposes its top ``POOL`` (200) per query, as the hybrid scorer does;
each weight vector re-weights those candidates only, so a query whose relevant elements are all
outside the pools counts 0. It agrees with the full evaluation of the same spec to a few 1e-5
(tests/test_query_forms_and_centroids.py, tests/test_experiment_grids.py).
"""

from __future__ import annotations

import time

import numpy as np

from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset
from melo_core.evaluation.protocol import EvaluationResult, Protocol
from melo_core.metrics import reciprocal_rank
from melo_core.scorers.hybrid import Pools, fuse

BATCH = 256
TREC_WHOLE_CORPUS = Protocol("trec", 0)  # what every grid reports: the published dense runs' protocol


def pool_reciprocal_ranks(pools: Pools, weights: np.ndarray, relevant: list[np.ndarray], keys: np.ndarray,
                          unique: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per weight vector and query, 1 / rank of the first relevant element among the pooled
    candidates (trec ties: scores rounded to 5 decimals, then larger corpus id first); 0 when
    no relevant element is pooled. ``weights``: (grid, components)."""
    fused = np.round(fuse("wsum", weights, pools.scores, pools.ranks), 5)  # (grid, queries, pool)
    fused[:, ~unique] = -np.inf
    is_relevant = np.stack([np.isin(c, r) for c, r in zip(pools.candidates, relevant, strict=True)]) & unique
    cand_keys = keys[pools.candidates]
    rel_score = np.where(is_relevant, fused, -np.inf).max(axis=2, keepdims=True)
    rel_key = np.where(is_relevant & (fused == rel_score), cand_keys, -1).max(axis=2, keepdims=True)
    better = (fused > rel_score) | ((fused == rel_score) & (cand_keys > rel_key))
    ranks = better.sum(axis=2) + 1
    return reciprocal_rank(np.where(is_relevant.any(axis=1), ranks, np.inf))  # 0: none pooled


def first_occurrences(candidates: np.ndarray) -> np.ndarray:
    """True where a candidate appears for the first time in its row."""
    order = np.argsort(candidates, axis=1, kind="stable")
    ordered = np.take_along_axis(candidates, order, axis=1)
    first_sorted = np.ones_like(ordered, dtype=bool)
    first_sorted[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    out = np.empty_like(first_sorted)
    np.put_along_axis(out, order, first_sorted, axis=1)
    return out


def pool_result(dataset: MeloDataset, configuration: str, pool_mrr: float, seconds: float = 0.0) -> EvaluationResult:
    """A configuration's pool MRR as a result row (metric ``pool_mrr``; no ranks kept)."""
    relevant = dataset.relevant_indices()
    evaluated = [i for i, rel in enumerate(relevant) if rel.size]
    return EvaluationResult(dataset=dataset.name, scorer=configuration, protocol=TREC_WHOLE_CORPUS,
                            query_ids=[dataset.query_ids[i] for i in evaluated], ranks=[],
                            n_relevant=np.array([relevant[i].size for i in evaluated]), top_ids=[],
                            skipped_queries=len(dataset.query_ids) - len(evaluated), seconds=seconds,
                            metrics={"pool_mrr": pool_mrr})  # fmt: skip


def lexical_applies(dataset: MeloDataset, same_language_only: bool) -> bool:
    """``lexical_same_language_only``: lexical scores count only where query and corpus share a
    language, so cross-lingual datasets (kind from the folder name, not tuned) fuse the dense
    scorers alone."""
    return not same_language_only or dataset.kind == "monolingual"


class Timer:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.started


class Options:
    """The ``[leave_one_out.options]`` of a grid, read with its name in every error."""

    def __init__(self, grid: str, options: dict, known: set[str]):
        unknown = sorted(set(options) - known)
        if unknown:
            raise MeloInputError(f"grid {grid!r}: unknown option {unknown[0]!r}; expected {', '.join(sorted(known))}")
        self.grid, self.options = grid, options

    def fail(self, key: str, what: str) -> MeloInputError:
        return MeloInputError(f"grid {self.grid!r}: option {key} must be {what}, not {self.options[key]!r}")

    def strings(self, key: str, default: list[str]) -> list[str]:
        """A list of strings; a string is read as the scripts' comma-separated flag."""
        value = self.options.get(key, default)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of strings")
        return list(value)

    def string(self, key: str, default: str, choices: tuple[str, ...] = ()) -> str:
        value = self.options.get(key, default)
        if not isinstance(value, str) or (choices and value not in choices):
            raise self.fail(key, " or ".join(map(repr, choices)) if choices else "a string")
        return value

    def numbers(self, key: str, default: list[float], low: float = 0.0, high: float = 1.0) -> list[float]:
        value = self.options.get(key, default)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high for v in value
        ) or not value:  # fmt: skip
            raise self.fail(key, f"a list of numbers in [{low:g}, {high:g}]")
        return [float(v) for v in value]

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.options.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value
