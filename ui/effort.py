"""The Benchmark page's "Curator effort" section: the simulated curator's rows of the results table
(``experiment run curator-effort``, melo_core.evaluation.simulate) as one table, crosswalk by pipeline."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from melo_core.evaluation.experiments import results

EXPERIMENT_PREFIX = "curator-effort"  # curator-effort, curator-effort-lexical, curator-effort-orders, ...
METRICS = {"effort_per_100": "s/100 terms", "acc_at_1": "acc@1"}
MEAN = "mean"


def effort_rows() -> list[dict[str, str]]:
    return [r for r in results.read_results(results.RESULTS_FILE)
            if r["experiment"].startswith(EXPERIMENT_PREFIX) and r["metric"] in METRICS]  # fmt: skip


def effort_table(rows: Iterable[dict[str, str]]) -> pd.DataFrame:
    """One row per crosswalk, per pipeline (``best``: learning; ``best/static``; ...) a column of
    effort per 100 terms and one of acc@1, each cell the latest run's; a last row, the mean over the
    crosswalks shown (the runner's own mean rows are left out: a partial run's would stand for all)."""
    shown = (r for r in rows if r["metric"] in METRICS and not r["dataset"].startswith("mean:"))
    latest = results.latest_rows(shown, lambda r: (r["dataset"], r["pipeline"], r["metric"]))
    if not latest:
        return pd.DataFrame()
    frame = pd.DataFrame([{"crosswalk": c, "column": f"{p} {METRICS[m]}", "value": float(r["value"])}
                          for (c, p, m), r in latest.items()])  # fmt: skip
    table = frame.pivot(index="crosswalk", columns="column", values="value").sort_index()
    table = table[sorted(table.columns, key=lambda c: (c.split(" ")[0].split("/")[0], "/" in c, c))]
    table.loc[MEAN] = table.mean(axis=0)
    return table.reset_index().rename_axis(columns=None)
