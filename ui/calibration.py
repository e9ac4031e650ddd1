"""The Benchmark page's "Calibration" section: the ``ece`` rows of the results table (``experiment run
calibration``, melo_core.evaluation.calibration) as one table, crosswalk by pipeline, and the reliability
diagram of the latest run of each pipeline."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pandas as pd
import streamlit as st

from db.proposals import (
    Relinked,
    SchemeDecisions,
    UnshownDecision,
    decisions_offset,
    relink,
    scheme_decisions,
    without_scheme_decisions,
)
from db.store import Scheme, Store
from melo_core.evaluation.calibration import Calibrator
from melo_core.evaluation.experiments import results
from melo_core.linking.pipeline import Pipeline
from ui.common import known_mentions

ECE_METRICS = ("ece", "ece_first", "ece_adapted")
COLUMN_SUFFIX = {"ece": "", "ece_first": " (first candidate)", "ece_adapted": " (after 25 decided terms)"}
BIN_METRICS = ("bin_probability", "bin_accuracy")
RELIABILITY = "reliability:"  # the runner's dataset of a diagram bin (melo_core.evaluation.experiments.runner)
MEAN = "mean"


def calibration_rows() -> list[dict[str, str]]:
    return [r for r in results.read_results(results.RESULTS_FILE) if r["metric"] in ECE_METRICS + BIN_METRICS]


def ece_table(rows: Iterable[dict[str, str]]) -> pd.DataFrame:
    """One row per crosswalk, one column per pipeline (ECE of the top 10 candidates), per pipeline's
    first candidates and per pipeline after a scheme's first 25 decided terms (``scheme_offset``), each cell the latest run's value; a last row, the mean over the
    crosswalks shown (the runner's mean rows are left out: a partial run's would stand for the whole)."""
    shown = (r for r in rows if r["metric"] in ECE_METRICS and not r["dataset"].startswith(("mean:", RELIABILITY)))
    latest = results.latest_rows(shown, lambda r: (r["dataset"], r["pipeline"], r["metric"]))
    if not latest:
        return pd.DataFrame()
    frame = pd.DataFrame([{"crosswalk": c, "column": p + COLUMN_SUFFIX[m],
                           "value": float(r["value"])} for (c, p, m), r in latest.items()])  # fmt: skip
    table = frame.pivot(index="crosswalk", columns="column", values="value").sort_index()
    table = table[sorted(table.columns)]
    table.loc[MEAN] = table.mean(axis=0)
    return table.reset_index().rename_axis(columns=None)


def reliability_frame(rows: Iterable[dict[str, str]]) -> pd.DataFrame:
    """Per pipeline and bin of its latest run: mean probability, share right, candidates."""
    by_run: dict[str, str] = {}  # pipeline -> its latest run with bins
    kept = [r for r in rows if r["metric"] in BIN_METRICS and r["dataset"].startswith(RELIABILITY)]
    for row in kept:
        if row["pipeline"] not in by_run or row["run"] > by_run[row["pipeline"]]:
            by_run[row["pipeline"]] = row["run"]
    cells: dict[tuple[str, str], dict[str, object]] = {}
    for row in kept:
        if row["run"] == by_run[row["pipeline"]]:
            cell = cells.setdefault((row["pipeline"], row["dataset"]), {"pipeline": row["pipeline"],
                                                                         "candidates": int(row["queries"] or 0)})  # fmt: skip
            cell[row["metric"]] = float(row["value"])
    frame = pd.DataFrame([c for c in cells.values() if all(m in c for m in BIN_METRICS)])
    if frame.empty:
        return frame
    frame = frame.rename(columns={"bin_probability": "mean probability", "bin_accuracy": "share accepted"})
    return frame.sort_values(["pipeline", "mean probability"]).reset_index(drop=True)


def scheme_shift(store: Store, scheme: str, pipeline: str, spread: float | None = None,
                 relinker: Callable[[tuple[UnshownDecision, ...]], Relinked] | None = None) -> tuple[float, int]:  # fmt: skip
    """(the logit shift that fits the scheme's own decisions, the decided terms it rests on):
    ``db.proposals.decisions_offset``, as `propose` reads it, the store read again only when the
    scheme's decisions change; the decided terms the page never showed count once ``relinker``
    (``relinked_decisions``) has linked them again."""
    decisions = _decisions(store, str(store.engine.url), scheme, pipeline, store.fingerprint(scheme))
    relinked = relinker(decisions.unshown) if relinker and decisions.unshown else None
    return decisions_offset(decisions, spread, relinked)


@st.cache_data(show_spinner=False, max_entries=32)
def _decisions(_store: Store, url: str, scheme: str, pipeline: str, fingerprint: str) -> SchemeDecisions:
    return scheme_decisions(_store, scheme, pipeline)


def relinked_decisions(store: Store, scheme: Scheme, pipeline: Pipeline, serving: str, calibrator: Calibrator,
                       complete: bool, unshown: tuple[UnshownDecision, ...]) -> dict[int, list[tuple[float, str]]]:  # fmt: skip
    """The scheme's decided terms this page never showed with ``serving``'s probabilities (imported
    with their decisions, or decided while another pipeline served), linked again without the
    scheme's own decisions as known mentions (``db.proposals.relink``, as `propose` does), so that
    they count for the shift. Linked again only when they or the calibrator change."""
    return _relinked(store, pipeline, calibrator, str(store.engine.url), scheme.name, scheme.language, scheme.terms,
                     serving, unshown, calibrator.to_json(), complete)  # fmt: skip


@st.cache_data(show_spinner="Checking the probabilities on the decided terms this page never showed…", max_entries=8)
def _relinked(_store: Store, _pipeline: Pipeline, _calibrator: Calibrator, url: str, scheme: str, language: str | None,
              terms: int, serving: str, unshown: tuple[UnshownDecision, ...], calibrator: str,
              complete: bool) -> dict[int, list[tuple[float, str]]]:  # fmt: skip
    definition = _pipeline.definition
    others = without_scheme_decisions(_store, scheme, known_mentions(_store, definition, scheme),
                                      definition.mention_relations)  # fmt: skip
    with _pipeline.holding_mentions(others, embedded_only=not complete):
        linker = _pipeline.linker(language)
        return relink(unshown, lambda labels, _language: linker.link(list(labels), top_k=10), _calibrator, terms)
