"""benchmarks/tie_order.py: the first relevant element's reciprocal rank with ties in random order
(computed exactly) and with ties last, against every order of small tied rankings."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "tie_order.py"


@pytest.fixture(scope="module")
def first_relevant():
    spec = importlib.util.spec_from_file_location("tie_order", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.first_relevant


def _every_order(scores: np.ndarray, relevant: np.ndarray) -> tuple[float, float, float, float]:
    """Mean RR and acc@1 over every order of the tied elements; the worst order's RR and acc@1."""
    rounded = np.round(scores, 5)
    rr = []
    for order in itertools.permutations(range(len(scores))):
        ranked = sorted(range(len(scores)), key=lambda i: (-rounded[i], order[i]))
        first = min(ranked.index(j) for j in relevant) + 1
        rr.append(1.0 / first)
    return float(np.mean(rr)), float(np.mean([r == 1.0 for r in rr])), min(rr), float(min(rr) == 1.0)


@pytest.mark.parametrize(
    ("scores", "relevant"),
    [
        ([0.9, 0.9, 0.9, 0.1], [2]),  # one relevant element in a three-way tie at the top
        ([0.9, 0.5, 0.5, 0.5, 0.5, 0.1], [2, 4]),  # two relevant in a four-way tie below another
        ([0.5, 0.5, 0.7, 0.500001], [0, 3]),  # equal once rounded to 5 decimals, as trec_eval rounds
        ([0.9, 0.8, 0.7], [1]),  # no tie
        ([0.4, 0.4, 0.4], [0, 1, 2]),  # everything relevant
    ],
)
def test_random_order_and_ties_last_match_every_order(first_relevant, scores: list[float], relevant: list[int]) -> None:
    got = first_relevant(np.array(scores), np.array(relevant))
    assert got == pytest.approx(_every_order(np.array(scores), np.array(relevant)))


def test_a_tie_that_trec_order_settles_either_way_counts_half(first_relevant) -> None:
    expected_rr, expected_at1, last_rr, last_at1 = first_relevant(np.array([1.0, 1.0, 0.2]), np.array([1]))
    assert (expected_rr, expected_at1, last_rr, last_at1) == pytest.approx((0.75, 0.5, 0.5, 0.0))
