"""Evaluation runs in the crosswalk store: ours (with per-query rows) and the published baselines.

A run of ours keeps the scorer spec, the dataset name, the protocol, every metric, the time it
took, the code version, and per evaluated query the rank of its first relevant element and its
top 10 predictions. The published baselines of ``results/`` are imported as read-only runs with
metrics only. Both use our metric names (``mrr``, ``acc@1``, ``map``, ``rprec``, ``p@5``,
``r@10``, ``ndcg@10``...; ``melo_core.metrics.summarize``); ``melo_core.evaluation.published`` already reads
the trec_eval names of the published files (``recip_rank``, ``success_1``...) under those names.

``evaluate_and_store`` is what ``eval --store`` and the analyst pages call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import delete, func, insert, select, text

from db.models import RunQueryRow, RunRow, utcnow
from db.store import Store
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset, load_dataset, resolve_dataset
from melo_core.evaluation.benchmarking import evaluate_one, protocol_for
from melo_core.evaluation.protocol import EvaluationResult
from melo_core.evaluation.published import default_protocol, load_all_published
from melo_core.metrics import TREC_NAMES, reciprocal_rank
from melo_core.scorers import check_scorer
from melo_core.version import code_version as current_code_version

OURS = "ours"
PUBLISHED = "published"
# (queries done, queries in all, "dataset / scorer" being evaluated)
Progress = Callable[[int, int, str], object]  # what it returns is ignored (a Streamlit bar's element)

RUN_COLUMNS = ["run_id", "scorer", "dataset", "source", "read_only", "mode", "depth", "n_queries", "created_at"]
QUERY_COLUMNS = ["position", "query_id", "query_text", "first_rank", "reciprocal_rank", "gold", "top"]
_METRIC_FAMILIES = ("mrr", "map", "rprec", "acc", "p", "r", "ndcg")

__all__ = [
    "QUERY_COLUMNS",
    "RUN_COLUMNS",
    "RunInfo",
    "delete_run",
    "evaluate_and_store",
    "get_run",
    "import_published",
    "list_runs",
    "metric_names",
    "run_metrics_frame",
    "run_queries",
    "save_run",
]


@dataclass(frozen=True)
class RunInfo:
    id: int
    scorer: str
    dataset: str
    source: str  # ours or published
    read_only: bool
    mode: str | None  # None for published runs
    depth: int | None  # 0 ranks the whole corpus; None for published runs
    metrics: dict[str, float]
    n_queries: int | None  # queries evaluated; None for published runs
    skipped_queries: int | None
    seconds: float | None
    code_version: str | None
    created_at: datetime


def _metric_order(name: str) -> tuple[int, int, str]:
    family, _, k = name.partition("@")
    rank = _METRIC_FAMILIES.index(family) if family in _METRIC_FAMILIES else len(_METRIC_FAMILIES)
    return rank, int(k) if k.isdigit() else 0, name


def metric_names(names: Sequence[str] | set[str]) -> list[str]:
    """Metric keys in reading order: mrr, map, rprec, acc@k, p@k, r@k, ndcg@k (k ascending)."""
    return sorted(set(names), key=_metric_order)


def _our_names(metrics: dict[str, float]) -> dict[str, float]:
    """Metrics under our names, whether given ours or trec_eval's (recip_rank -> mrr, ...)."""
    return {TREC_NAMES.get(key, key): float(value) for key, value in metrics.items()}


def _info(row: RunRow) -> RunInfo:
    return RunInfo(
        id=row.id,
        scorer=row.scorer,
        dataset=row.dataset,
        source=row.source,
        read_only=row.read_only,
        mode=row.mode,
        depth=row.depth,
        metrics=dict(row.metrics),
        n_queries=row.n_queries,
        skipped_queries=row.skipped_queries,
        seconds=row.seconds,
        code_version=row.code_version,
        created_at=row.created_at,
    )


def save_run(
    store: Store,
    result: EvaluationResult,
    dataset: MeloDataset,
    *,
    scorer: str | None = None,
    code_version: str | None = None,
) -> int:
    """Store one evaluation of ours with its per-query rows (one transaction); returns the run id.

    ``dataset`` is the dataset that was evaluated (for the query texts and surface forms);
    ``scorer`` is the spec to record (default ``result.scorer``, the scorer's own name);
    ``code_version`` default: ``melo_core.version.code_version()`` now.
    """
    if result.dataset != dataset.name:
        raise MeloInputError(f"the result is for dataset {result.dataset!r}, not {dataset.name!r}")
    query_text = dict(zip(dataset.query_ids, dataset.queries, strict=True))
    surface = dict(zip(dataset.corpus_ids, dataset.corpus, strict=True))
    missing = [q for q in result.query_ids if q not in query_text]
    if missing:
        raise MeloInputError(f"query {missing[0]!r} of the result is not in dataset {dataset.name!r}")
    first_ranks = result.first_ranks()
    rows: list[dict[str, Any]] = []
    per_query = zip(result.query_ids, first_ranks, result.top_ids, strict=True)
    for position, (query_id, first, top_ids) in enumerate(per_query):
        rows.append(
            {
                "position": position,
                "query_id": query_id,
                "query_text": query_text[query_id],
                "first_rank": int(first) if math.isfinite(first) else None,
                "gold": [[cid, surface[cid]] for cid in dataset.relevant.get(query_id, ())],
                "top": [[cid, surface[cid]] for cid in top_ids],
            }
        )
    with store.write() as s:
        run = RunRow(
            scorer=scorer or result.scorer,
            dataset=result.dataset,
            source=OURS,
            read_only=False,
            mode=result.protocol.mode,
            depth=result.protocol.depth,
            metrics={key: float(value) for key, value in result.metrics.items()},
            n_queries=len(result.query_ids),
            skipped_queries=result.skipped_queries,
            seconds=float(result.seconds),
            code_version=code_version or current_code_version(),
            created_at=utcnow(),
        )
        s.add(run)
        s.flush()
        if rows:
            # One executemany (batched multi-row INSERTs): thousands of queries in a few statements.
            s.execute(insert(RunQueryRow), [{"run_id": run.id, **row} for row in rows])
        return run.id


def import_published(store: Store, data_dir: str | Path) -> int:
    """One read-only run per published (model, dataset) under ``data_dir/results``; returns how
    many were added (runs already in the store are left as they are)."""
    published = load_all_published(data_dir)
    with store.write() as s:
        if s.get_bind().dialect.name == "postgresql":
            # Two imports at once: the second waits, then finds the runs there (SQLite: BEGIN IMMEDIATE).
            s.execute(text("SELECT pg_advisory_xact_lock(4201838)"))
        query = select(RunRow.scorer, RunRow.dataset).where(RunRow.source == PUBLISHED)
        known = {(scorer, dataset) for scorer, dataset in s.execute(query)}
        now = utcnow()
        new = [
            {
                "scorer": model,
                "dataset": dataset,
                "source": PUBLISHED,
                "read_only": True,
                "mode": None,
                "depth": None,
                "metrics": _our_names(metrics),
                "n_queries": None,
                "skipped_queries": None,
                "seconds": None,
                "code_version": None,
                "created_at": now,
            }
            for (model, dataset), metrics in sorted(published.items())
            if (model, dataset) not in known
        ]
        if new:
            s.execute(insert(RunRow), new)
    return len(new)


def list_runs(store: Store, source: str | None = None, *, latest: bool = False) -> list[RunInfo]:
    """Runs in the order they were stored; ``source`` ours or published; ``latest``: only the
    newest run per (scorer, dataset)."""
    if source is not None and source not in (OURS, PUBLISHED):
        raise MeloInputError(f"unknown run source {source!r} (ours or published)")
    query = select(RunRow).order_by(RunRow.id)
    if source is not None:
        query = query.where(RunRow.source == source)
    if latest:
        newest = select(func.max(RunRow.id)).group_by(RunRow.scorer, RunRow.dataset)
        query = query.where(RunRow.id.in_(newest))
    with store.read() as s:
        return [_info(row) for row in s.scalars(query)]


def run_metrics_frame(store: Store, source: str | None = None, *, latest: bool = False) -> pd.DataFrame:
    """One row per run: ``RUN_COLUMNS`` then one column per metric (ordered as ``metric_names``;
    NaN where a run lacks the metric, e.g. ``ndcg@10`` for published runs)."""
    runs = list_runs(store, source, latest=latest)
    metrics = metric_names({key for run in runs for key in run.metrics})
    records = [
        {
            "run_id": r.id,
            "scorer": r.scorer,
            "dataset": r.dataset,
            "source": r.source,
            "read_only": r.read_only,
            "mode": r.mode,
            "depth": r.depth,
            "n_queries": r.n_queries,
            "created_at": r.created_at,
            **{key: r.metrics.get(key, math.nan) for key in metrics},
        }
        for r in runs
    ]
    return pd.DataFrame.from_records(records, columns=[*RUN_COLUMNS, *metrics])


def _run_row(s: Any, run_id: int) -> RunRow:
    row = s.get(RunRow, run_id)
    if row is None:
        raise MeloInputError(f"no evaluation run with id {run_id}")
    return row


def get_run(store: Store, run_id: int) -> RunInfo:
    with store.read() as s:
        return _info(_run_row(s, run_id))


def run_queries(store: Store, run_id: int) -> pd.DataFrame:
    """The evaluated queries of a run, in order (``QUERY_COLUMNS``). ``first_rank`` is a float:
    ``inf`` when no relevant element was retrieved within the run's depth (as
    ``EvaluationResult.first_ranks()``), so it sorts last and ``1 / first_rank`` is 0;
    ``reciprocal_rank`` is that. ``gold`` and ``top`` are lists of (corpus id, surface form).
    Published runs have no query rows: an empty frame."""
    with store.read() as s:
        _run_row(s, run_id)
        rows = s.execute(
            select(
                RunQueryRow.position,
                RunQueryRow.query_id,
                RunQueryRow.query_text,
                RunQueryRow.first_rank,
                RunQueryRow.gold,
                RunQueryRow.top,
            )
            .where(RunQueryRow.run_id == run_id)
            .order_by(RunQueryRow.position)
        ).all()
    records = []
    for position, query_id, query_text, first_rank, gold, top in rows:
        first = math.inf if first_rank is None else float(first_rank)
        records.append(
            {
                "position": position,
                "query_id": query_id,
                "query_text": query_text,
                "first_rank": first,
                "reciprocal_rank": float(reciprocal_rank(first)),
                "gold": [(cid, form) for cid, form in gold],
                "top": [(cid, form) for cid, form in top],
            }
        )
    frame = pd.DataFrame.from_records(records, columns=QUERY_COLUMNS)
    return frame.astype({"position": "int64", "first_rank": "float64", "reciprocal_rank": "float64"})


def delete_run(store: Store, run_id: int) -> None:
    """Delete a run of ours with its query rows; published (read-only) runs are refused."""
    with store.write() as s:
        row = _run_row(s, run_id)
        if row.read_only:
            raise MeloInputError(f"run {run_id} ({row.scorer} on {row.dataset}) is read-only: a published result")
        # Explicit, so it holds on a connection without SQLite's foreign_keys pragma too.
        s.execute(delete(RunQueryRow).where(RunQueryRow.run_id == run_id))
        s.execute(delete(RunRow).where(RunRow.id == run_id))


def _check_scorer_specs(specs: Sequence[str]) -> None:
    for spec in specs:
        check_scorer(spec)  # a SpecError (a MeloInputError) with a suggestion and what there is


def evaluate_and_store(
    store: Store,
    data_dir: str | Path,
    dataset_names: Sequence[str],
    scorer_specs: Sequence[str],
    on_progress: Progress | None = None,
    limit_queries: int = 0,
    *,
    extra_datasets: Sequence[MeloDataset] = (),
    mode: str | None = None,
    depth: int | str | None = None,
    show_progress: bool = False,
) -> list[int]:
    """Evaluate every scorer spec on every dataset (names under ``data_dir`` or folder paths, and
    ``extra_datasets`` already loaded, such as a job-titles set) and store each result as soon as
    it is done; returns the run ids in (dataset, scorer) order.

    Evaluated as ``eval`` does (``melo_core.evaluation.benchmarking.evaluate_one``: a pipeline's known
    mentions, concept-level ranking of titles); ``mode`` default trec, ``depth`` None/'auto' = the
    published depth of the same method, else 0 (100 on titles). ``limit_queries`` keeps the first N
    queries of each dataset. ``on_progress(done, total, "dataset / scorer")`` is called as queries
    are scored (for a progress bar). Specs and datasets are checked before anything is evaluated.
    """
    specs = [spec.strip() for spec in scorer_specs if spec.strip()]
    if not specs:
        raise MeloInputError("no scorer given")
    if not dataset_names and not extra_datasets:
        raise MeloInputError("no dataset given")
    if limit_queries < 0:
        raise MeloInputError("limit_queries must be >= 0 (0: every query)")
    _check_scorer_specs(specs)
    for spec in specs:
        default_protocol(spec, mode, depth)  # a bad mode or depth fails before any work
    datasets = [load_dataset(resolve_dataset(data_dir, name)) for name in dataset_names] + list(extra_datasets)
    if limit_queries:
        datasets = [d.subset(limit_queries) for d in datasets]
    total = sum(len(d.query_ids) for d in datasets) * len(specs)
    version = current_code_version()
    done = 0
    run_ids: list[int] = []
    for dataset in datasets:
        for spec in specs:
            label = f"{dataset.name} / {spec}"
            if on_progress:
                on_progress(done, total, label)

            def advance(n: int, label: str = label) -> None:
                nonlocal done
                done += n
                if on_progress:
                    on_progress(done, total, label)

            result = evaluate_one(data_dir, dataset, spec, protocol_for(spec, dataset, mode, depth),
                                  show_progress=show_progress, on_progress=advance)  # fmt: skip
            run_ids.append(save_run(store, result, dataset, scorer=spec, code_version=version))
    return run_ids
