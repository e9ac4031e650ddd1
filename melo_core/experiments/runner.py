"""``python -m melo_core experiment run NAME``: run an experiment file through the product's
engine (``melo_core.benchmarking.evaluate_one``) and append its rows to the results table.

Rows are appended after each dataset, so an interrupted run keeps what it finished; the means
(``mean:all``, ``mean:monolingual``, ``mean:cross-lingual`` over the MELO datasets run) are
appended at the end. A leave-one-out experiment reports, for each dataset, the configuration
with the best mean over the *other* datasets (of the same kind with ``within = "kind"``), so no
dataset's queries or annotations choose its own configuration.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from melo_core.benchmarking import evaluate_one, protocol_for
from melo_core.config import PROJECT_ROOT
from melo_core.datasets import MeloDataset, list_datasets, load_dataset, parse_dataset_name, resolve_dataset
from melo_core.errors import MeloInputError
from melo_core.evaluation import EvaluationResult
from melo_core.experiments.config import Evaluate, Experiment, LeaveOneOut
from melo_core.experiments.grids import create_grid
from melo_core.experiments.results import RESULTS_FILE, append_results, provenance
from melo_core.significance import mean_interval
from melo_core.titles import is_titles_dataset, titles_dataset

REPORTED = ("mrr", "acc@1", "acc@5", "acc@10", "acc@100", "pool_mrr")  # pool_mrr: a grid's pool-only score
# The MRR's 95% bootstrap interval over the queries; for job-ad titles also over their gold concepts
# (each drawn with all its titles: `eval --resample concepts`).
INTERVAL_METRICS = ("mrr_low", "mrr_high", "mrr_low_concepts", "mrr_high_concepts")
LEFT_OUT = "chosen leave-one-out"  # the "pipeline" of a leave-one-out experiment's means
Say = Callable[[str], None]


def dataset_names(data_dir: Path, chosen: str | tuple[str, ...]) -> list[str]:
    if isinstance(chosen, tuple):
        return list(chosen)
    names = list_datasets(data_dir)
    if chosen == "all":
        return names
    return [n for n in names if (parsed := parse_dataset_name(n)) and parsed.kind == chosen]


def titles_path(data_dir: Path, titles: str) -> Path:
    """A relative path names a file beside the data folder (``jobbert/titles.csv`` next to
    ``melo/``), else in the project or the working folder."""
    path = Path(titles)
    if path.is_absolute():
        return path
    for base in (Path(data_dir).resolve().parent, PROJECT_ROOT, Path.cwd()):
        if (base / path).is_file():
            return base / path
    raise MeloInputError(f"titles file {titles!r} not found beside {data_dir}, in the project or here")


def _rows(result: EvaluationResult, pipeline: str, dataset: MeloDataset | None = None) -> list[dict[str, object]]:
    """The reported metrics, and the MRR's 95% bootstrap interval over the queries (``mrr_low``,
    ``mrr_high``); for titles (from ``dataset``), over their gold concepts too."""
    metrics = {m: result.metrics[m] for m in REPORTED if m in result.metrics}
    if "mrr" in metrics and result.query_ids:
        ranks = result.reciprocal_ranks()
        interval = mean_interval([ranks])
        metrics |= {"mrr_low": interval.low, "mrr_high": interval.high}
        if dataset is not None and is_titles_dataset(dataset.name):
            by_concept = mean_interval([ranks], clusters=[dataset.gold_concepts(result.query_ids)])
            metrics |= {"mrr_low_concepts": by_concept.low, "mrr_high_concepts": by_concept.high}
    return [{"dataset": result.dataset, "pipeline": pipeline, "metric": m, "value": round(v, 6),
             "queries": len(result.query_ids), "seconds": round(result.seconds, 1)}
            for m, v in metrics.items()]  # fmt: skip


def _kind(name: str) -> str:
    if is_titles_dataset(name):
        return "titles"
    parsed = parse_dataset_name(name)
    return parsed.kind if parsed else "other"


def mean_rows(rows: list[dict[str, object]], reciprocal: dict[tuple[str, str], np.ndarray] | None = None,
              ) -> list[dict[str, object]]:  # fmt: skip
    """Per pipeline and metric: the mean over all MELO datasets run and over each kind; with the
    per-query reciprocal ranks of each (dataset, pipeline), the mean MRR's bootstrap interval too
    (each dataset's queries resampled on their own: a mean of the datasets' bounds is no interval)."""
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    strata: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for row in rows:
        kind = _kind(str(row["dataset"]))
        if kind in ("titles", "other") or str(row["metric"]) in INTERVAL_METRICS:
            continue
        for scope in ("all", kind):
            groups[(scope, str(row["pipeline"]), str(row["metric"]))].append(float(row["value"]))  # type: ignore[arg-type]
            ranks = (reciprocal or {}).get((str(row["dataset"]), str(row["pipeline"])))
            if row["metric"] == "mrr" and ranks is not None and len(ranks):
                strata[(scope, str(row["pipeline"]))].append(ranks)
    means = [{"dataset": f"mean:{scope}", "pipeline": pipeline, "metric": metric,
              "value": round(sum(values) / len(values), 6), "queries": len(values), "seconds": ""}
             for (scope, pipeline, metric), values in sorted(groups.items())]  # fmt: skip
    for (scope, pipeline), arrays in sorted(strata.items(), key=lambda item: item[0]):
        interval = mean_interval(arrays)
        means += [{"dataset": f"mean:{scope}", "pipeline": pipeline, "metric": metric, "value": round(value, 6),
                   "queries": len(arrays), "seconds": ""}
                  for metric, value in (("mrr_low", interval.low), ("mrr_high", interval.high))]  # fmt: skip
    return means


def _datasets(data_dir: Path, plan: Evaluate, limit: int, only: list[str] | None, say: Say) -> list[MeloDataset]:
    names = only if only is not None else dataset_names(data_dir, plan.datasets) if plan.datasets else []
    datasets = [load_dataset(resolve_dataset(data_dir, n)) for n in names if not is_titles_dataset(n)]
    if plan.titles and (only is None or any(is_titles_dataset(n) for n in only)):
        from melo_core.taxonomy import cached_taxonomy_from_melo

        dataset, report = titles_dataset(titles_path(data_dir, plan.titles), cached_taxonomy_from_melo(data_dir),
                                         list(plan.langs), title_column=plan.title_column,
                                         uri_column=plan.uri_column)  # fmt: skip
        say(f"{dataset.name}: {report.describe()}")
        datasets.append(dataset)
    limit = limit or plan.limit_queries
    return [d.subset(limit) for d in datasets] if limit else datasets


def _data_files(data_dir: Path, datasets: list[MeloDataset], plan: Evaluate | None) -> list[Path]:
    files = [f for d in datasets if d.path is not None for f in sorted(Path(d.path).glob("*.tsv"))]
    if plan is not None and plan.titles:
        files.append(titles_path(data_dir, plan.titles))
    return files


def run_experiment(experiment: Experiment, data_dir: str | Path, *, results: Path = RESULTS_FILE, command: str = "",
                   limit_queries: int = 0, only_datasets: list[str] | None = None, show_progress: bool = True,
                   say: Say = print) -> list[dict[str, object]]:  # fmt: skip
    """Run ``experiment`` and append its rows to ``results``; returns the rows (means included)."""
    data_dir = Path(data_dir)
    started = time.perf_counter()
    if experiment.evaluate is not None:
        rows = _run_evaluate(experiment, experiment.evaluate, data_dir, results, command, limit_queries,
                             only_datasets, show_progress, say)  # fmt: skip
    else:
        assert experiment.leave_one_out is not None
        rows = _run_leave_one_out(experiment, experiment.leave_one_out, data_dir, results, command, limit_queries,
                                  only_datasets, show_progress, say)  # fmt: skip
    say(f"{experiment.name}: {len(rows)} rows appended to {results} in {time.perf_counter() - started:.0f} s")
    return rows


def _run_evaluate(experiment: Experiment, plan: Evaluate, data_dir: Path, results: Path, command: str, limit: int,
                  only: list[str] | None, show_progress: bool, say: Say) -> list[dict[str, object]]:  # fmt: skip
    datasets = _datasets(data_dir, plan, limit, only, say)
    if not datasets:
        raise MeloInputError(f"experiment {experiment.name!r}: no dataset to run")
    for spec in plan.scorers:  # a bad spec or protocol fails before any work
        protocol_for(spec, datasets[0], plan.mode, plan.depth)
    origin = provenance(plan.scorers, _data_files(data_dir, datasets, plan), command)
    rows: list[dict[str, object]] = []
    reciprocal: dict[tuple[str, str], np.ndarray] = {}
    total = sum(len(d.query_ids) for d in datasets) * len(plan.scorers)
    with tqdm(total=total, unit="query", desc=experiment.name, disable=not show_progress) as bar:
        for dataset in datasets:
            done: list[dict[str, object]] = []
            for spec in plan.scorers:
                bar.set_postfix_str(f"{dataset.name} / {spec}")
                result = evaluate_one(data_dir, dataset, spec, protocol_for(spec, dataset, plan.mode, plan.depth),
                                      on_progress=bar.update)  # fmt: skip
                done += _rows(result, spec, dataset)
                reciprocal[(dataset.name, spec)] = result.reciprocal_ranks()
                bar.write(f"{dataset.name:<24} {spec:<16} MRR {result.metrics['mrr']:.4f}")
            append_results(results, experiment.name, done, origin)
            rows += done
    means = mean_rows(rows, reciprocal)
    append_results(results, experiment.name, means, origin)
    bounds = {(r["dataset"], r["pipeline"], r["metric"]): float(str(r["value"])) for r in means}
    for row in means:
        if row["metric"] == "mrr":
            key = (row["dataset"], row["pipeline"])
            interval = (f" [{bounds[(*key, 'mrr_low')]:.4f}, {bounds[(*key, 'mrr_high')]:.4f}]"
                        if (*key, "mrr_low") in bounds else "")  # fmt: skip
            say(f"{row['dataset']:<20} {row['pipeline']:<16} MRR {float(str(row['value'])):.4f}{interval} over "
                f"{row['queries']} datasets")  # fmt: skip
    return rows + means


def choose_left_out(scores: dict[str, dict[str, float]], within: str) -> dict[str, str]:
    """Per dataset: the configuration with the best mean score over the other datasets (of the
    same kind with ``within="kind"``); ties go to the configuration listed first."""
    chosen = {}
    for name in scores:
        others = [o for o in scores if o != name and (within == "all" or _kind(o) == _kind(name))]
        if not others:
            raise MeloInputError(f"leave-one-out: {name} has no other dataset{' of its kind' if within == 'kind' else ''} "
                                 "to choose on")  # fmt: skip
        configurations = [c for c in scores[name] if all(c in scores[o] for o in others)]
        chosen[name] = max(configurations, key=lambda c: sum(scores[o][c] for o in others) / len(others))
    return chosen


def _run_leave_one_out(experiment: Experiment, plan: LeaveOneOut, data_dir: Path, results: Path, command: str,
                       limit: int, only: list[str] | None, show_progress: bool,
                       say: Say) -> list[dict[str, object]]:  # fmt: skip
    grid = create_grid(plan.grid, plan.options, data_dir)
    names = only if only is not None else dataset_names(data_dir, plan.datasets)
    datasets = [load_dataset(resolve_dataset(data_dir, n)) for n in names]
    if limit:
        datasets = [d.subset(limit) for d in datasets]
    scores: dict[str, dict[str, float]] = {}
    for dataset in tqdm(datasets, unit="dataset", desc=f"{experiment.name}: grid", disable=not show_progress):
        scores[dataset.name] = grid.score(dataset)
    chosen = choose_left_out(scores, plan.within)
    label = getattr(grid, "label", lambda configuration: configuration)  # what was evaluated, if not the choice
    origin = provenance(sorted({label(c) for c in chosen.values()}), _data_files(data_dir, datasets, None), command)
    rows: list[dict[str, object]] = []
    reciprocal: dict[tuple[str, str], np.ndarray] = {}
    for dataset in datasets:
        result = grid.evaluate(dataset, chosen[dataset.name])
        done = _rows(result, label(chosen[dataset.name]))
        reciprocal[(dataset.name, LEFT_OUT)] = result.reciprocal_ranks()
        append_results(results, experiment.name, done, origin)
        rows += done
        metric = "mrr" if "mrr" in result.metrics else "pool_mrr"
        say(f"{dataset.name:<24} chose {chosen[dataset.name]}  {metric} {result.metrics[metric]:.4f}")
    # the means of what each dataset chose: one "pipeline" per experiment
    means = mean_rows([{**r, "pipeline": LEFT_OUT} for r in rows], reciprocal)
    append_results(results, experiment.name, means, origin)
    for row in means:
        if row["metric"] in ("mrr", "pool_mrr"):
            say(f"{row['dataset']:<20} {row['metric']} {float(row['value']):.4f} over {row['queries']} datasets")  # type: ignore[arg-type]
    return rows + means
