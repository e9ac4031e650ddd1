"""How sure a ranking metric is: bootstrap confidence intervals over the queries.

One function serves every case, through ``scipy.stats.bootstrap`` (BCa):
- a dataset's MRR: the mean of its queries' reciprocal ranks;
- a mean over datasets (the MELO mean): every dataset's queries are resampled on their own, so each
  dataset keeps its weight of one, as in the paper's means;
- the difference between two scorers on the same queries: the mean of the per-query differences
  (paired, so what the queries share cancels out).

Queries are resampled one by one, or by cluster (``clusters``: e.g. each query's gold concept, where
many job titles share one): a cluster is drawn with all its queries, so the interval says how far
the number could move with other concepts, not only other titles of the same concepts.

An interval says how far the number could move with other queries of the same kind; it does not
cover what was tuned on those queries.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap confidence interval."""

    value: float
    low: float
    high: float
    confidence: float

    def describe(self, signed: bool = False) -> str:
        """``0.4233 [0.4167, 0.4301]``; ``signed`` for a difference: ``+0.0120 [+0.0050, +0.0190]``."""
        form = "{:+.4f}" if signed else "{:.4f}"
        return f"{form.format(self.value)} [{form.format(self.low)}, {form.format(self.high)}]"

    def excludes(self, value: float = 0.0) -> bool:
        return not self.low <= value <= self.high


def mean_interval(strata: Sequence[np.ndarray | Sequence[float]], confidence: float = CONFIDENCE,
                  resamples: int = RESAMPLES, seed: int = SEED,
                  clusters: Sequence[Sequence[Hashable]] | None = None) -> Interval:  # fmt: skip
    """The mean over ``strata`` of each stratum's mean, with a BCa bootstrap interval that resamples
    each stratum's values (a dataset's per-query reciprocal ranks, or their paired differences)
    on their own. One stratum: a dataset's MRR. ``clusters``: per stratum, a label per value; values
    of one label are resampled together (the stratum's mean stays the mean of its values)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence:g}")
    arrays = tuple(np.asarray(s, dtype=np.float64) for s in strata)
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every stratum needs at least one value")
    if clusters is None:
        samples = list(arrays)
    else:
        if len(clusters) != len(arrays) or any(len(c) != a.size for c, a in zip(clusters, arrays, strict=False)):
            raise ValueError("clusters need one label per value of every stratum")
        samples = [_cluster_totals(a, c) for a, c in zip(arrays, clusters, strict=True)]
    value = float(np.mean([a.mean() for a in arrays]))
    # A stratum whose values are all equal (one query, or all missed), or of one cluster, resamples
    # to itself: it adds a constant, and scipy refuses a sample of one value.
    constant = [sample.size == 1 or not np.any(a != a[0]) for a, sample in zip(arrays, samples, strict=True)]
    varying = tuple(s for s, fixed in zip(samples, constant, strict=True) if not fixed)
    if not varying:  # nothing to resample: BCa is undefined, the mean is certain
        return Interval(value, value, value, confidence)
    fixed_sum = sum(float(a.mean()) for a, fixed in zip(arrays, constant, strict=True) if fixed)

    def mean_of_means(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        return (fixed_sum + np.sum([_mean(s, axis) for s in resampled], axis=0)) / len(arrays)

    from scipy import stats  # a second's import, only where intervals are asked for

    with warnings.catch_warnings():
        # A stratum of a few values makes BCa warn that its interval may be unreliable; the interval
        # stays as wide as those values allow.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(varying, mean_of_means, n_resamples=resamples, confidence_level=confidence,
                                 method="BCa", random_state=np.random.default_rng(seed), batch=200)  # fmt: skip
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # BCa gave up (too few distinct values): percentiles
        values = result.bootstrap_distribution
        low, high = (float(v) for v in np.percentile(values, [50 * (1 - confidence), 50 * (1 + confidence)]))
    return Interval(value, min(low, value), max(high, value), confidence)


def _mean(sample: np.ndarray, axis: int) -> np.ndarray:
    """A resampled stratum's mean: of its values, or of its clusters' totals (``_cluster_totals``)."""
    if np.iscomplexobj(sample):
        totals = sample.sum(axis=axis)
        return totals.real / totals.imag
    return sample.mean(axis=axis)


def _cluster_index(labels: Sequence[Hashable]) -> np.ndarray:
    """Per value, its cluster's number (0, 1, …)."""
    return np.unique(np.array([str(label) for label in labels]), return_inverse=True)[1]


def _cluster_totals(values: np.ndarray, labels: Sequence[Hashable]) -> np.ndarray:
    """One complex number per cluster, its values' sum + its size × 1j: scipy resamples the two as one
    observation, and a resample's mean is the real sum over the imaginary one."""
    cluster = _cluster_index(labels)
    return np.bincount(cluster, weights=values) + 1j * np.bincount(cluster)


@dataclass(frozen=True)
class PairedTest:
    """Scorer b against scorer a on the same queries ("better": b ranks the gold higher)."""

    difference: Interval  # mean of b - a, with its interval
    better: int
    worse: int
    same: int
    statistic: float  # Wilcoxon signed-rank statistic (NaN when every difference is zero)
    p_value: float  # two-sided; 1.0 when every difference is zero, NaN without pairs


def _wilcoxon(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test on paired values, scipy's defaults (zero differences
    dropped, as the MELO code's significance test): (statistic, p)."""
    if not np.any(np.asarray(b) - np.asarray(a)):  # scipy has no answer; the two are indistinguishable
        return float("nan"), 1.0
    from scipy import stats

    test = stats.wilcoxon(a, b)
    return float(test.statistic), float(test.pvalue)


def paired_test(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float], confidence: float = CONFIDENCE,
                resamples: int = RESAMPLES, seed: int = SEED,
                clusters: Sequence[Hashable] | None = None) -> PairedTest:  # fmt: skip
    """b against a, per query values of the same queries in the same order (reciprocal ranks);
    ``clusters``: a label per query, for an interval that resamples clusters (see ``mean_interval``)
    and a Wilcoxon test over the clusters' means (the counts stay per query)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same queries: {a.shape} against {b.shape}")
    delta = b - a
    if clusters is None:
        statistic, p_value = _wilcoxon(a, b)
    else:  # one pair per cluster, its queries' means: the test's pairs must be independent too
        cluster = _cluster_index(clusters)
        sizes = np.bincount(cluster)
        statistic, p_value = _wilcoxon(np.bincount(cluster, weights=a) / sizes, np.bincount(cluster, weights=b) / sizes)
    return PairedTest(
        difference=mean_interval([delta], confidence, resamples, seed, None if clusters is None else [clusters]),
        better=int((delta > 0).sum()),
        worse=int((delta < 0).sum()),
        same=int((delta == 0).sum()),
        statistic=statistic,
        p_value=p_value,
    )
