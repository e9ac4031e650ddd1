"""The Benchmark page's "Graded similarity" section: the ``spearman_grade`` rows of the results
table (``experiment run graded-similarity``, melo_core.evaluation.graded) as one table, crosswalk by scorer."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from melo_core.evaluation.experiments import results

METRIC = "spearman_grade"
MEAN = "mean"


def graded_rows() -> list[dict[str, str]]:
    return [r for r in results.read_results(results.RESULTS_FILE) if r["metric"] == METRIC]


def graded_table(rows: Iterable[dict[str, str]]) -> pd.DataFrame:
    """One row per crosswalk, one column per scorer (pipelines first, then their components), each
    cell the latest run's Spearman; a last row, the mean over the crosswalks shown. The runner's own
    mean rows are left out: a partial run's mean would stand for the whole."""
    shown = (r for r in rows if r["metric"] == METRIC and not r["dataset"].startswith("mean:"))
    latest = results.latest_rows(shown, lambda r: (r["dataset"], r["pipeline"]))
    if not latest:
        return pd.DataFrame()
    frame = pd.DataFrame([{"crosswalk": c, "scorer": s, "value": float(r["value"])} for (c, s), r in latest.items()])
    table = frame.pivot(index="crosswalk", columns="scorer", values="value").sort_index()
    table = table[sorted(table.columns, key=lambda s: ("/" in s, s))]
    table.loc[MEAN] = table.mean(axis=0)
    return table.reset_index().rename_axis(columns=None)
