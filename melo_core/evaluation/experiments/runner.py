"""``python -m melo_core experiment run NAME``: run an experiment file through the product's
engine (``melo_core.evaluation.benchmarking.evaluate_one``) and append its rows to the results table.

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
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from melo_core.config import PROJECT_ROOT
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset, list_datasets, load_dataset, parse_dataset_name, resolve_dataset
from melo_core.esco.titles import is_titles_dataset, titles_dataset
from melo_core.evaluation.benchmarking import evaluate_one, protocol_for
from melo_core.evaluation.effort import PROPOSAL_PRECISION, PROPOSAL_SHORTFALL
from melo_core.evaluation.experiments.config import (
    CalibrationPlan,
    Evaluate,
    Experiment,
    Graded,
    LeaveOneOut,
    ProposalsPlan,
    SimulationPlan,
)
from melo_core.evaluation.experiments.grids import create_grid
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance
from melo_core.evaluation.protocol import EvaluationResult
from melo_core.evaluation.significance import mean_interval

if TYPE_CHECKING:
    from melo_core.esco.crosswalk import Crosswalk
    from melo_core.esco.taxonomy import Taxonomy
    from melo_core.evaluation.calibration import CandidateRows, Fits
    from melo_core.evaluation.simulate import Replay, Simulation
    from melo_core.linking.pipeline import PipelineDefinition

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
        from melo_core.esco.taxonomy import cached_taxonomy_from_melo

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
    elif experiment.simulation is not None:
        rows = _run_simulation(experiment, experiment.simulation, data_dir, results, command, limit_queries,
                               only_datasets, show_progress, say)  # fmt: skip
    elif experiment.calibration is not None:
        rows = _run_calibration(experiment, experiment.calibration, data_dir, results, command, limit_queries,
                                only_datasets, show_progress, say)  # fmt: skip
    elif experiment.proposals is not None:
        rows = _run_proposals(experiment, experiment.proposals, data_dir, results, command, limit_queries,
                              only_datasets, show_progress, say)  # fmt: skip
    elif experiment.graded is not None:
        rows = _run_graded(experiment, experiment.graded, data_dir, results, command, limit_queries, only_datasets,
                           show_progress, say)  # fmt: skip
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


GRADED_MEAN = "mean:crosswalks"  # a graded experiment's mean over the crosswalks run


def _chosen_crosswalks(experiment: Experiment, crosswalks: str | tuple[str, ...], only: list[str] | None,
                       data_dir: Path) -> tuple[list[str], list[Path]]:  # fmt: skip
    """The crosswalk codes a crosswalk experiment runs (``only``: `--datasets`; else the file's, or
    all of the data folder) and their files: an unknown code fails before any work."""
    from melo_core.esco.crosswalk import crosswalk_path, list_crosswalks

    codes = only if only is not None else list(crosswalks) if crosswalks != "all" else list_crosswalks(data_dir)
    if not codes:
        raise MeloInputError(f"experiment {experiment.name!r}: no crosswalk to run")
    return codes, [crosswalk_path(data_dir, code) for code in codes]


def _leave_one_country_out(experiment: Experiment, crosswalks: str | tuple[str, ...], pipelines: tuple[str, ...],
                           only: list[str] | None, data_dir: Path, countries: int,
                           what: str) -> tuple[list[str], list[Path]]:  # fmt: skip
    """``_chosen_crosswalks`` for a leave-one-country-out kind (calibration, proposals): fails
    before any work unless they span ``countries`` countries and every one of ``pipelines`` is a
    pipeline (``what``: "calibration is", "proposals are")."""
    from melo_core.esco.crosswalk import crosswalk_country
    from melo_core.linking.pipeline import is_pipeline

    codes, files = _chosen_crosswalks(experiment, crosswalks, only, data_dir)
    if len({crosswalk_country(c) for c in codes}) < countries:
        raise MeloInputError(f"experiment {experiment.name!r}: leave one country out needs crosswalks of "
                             f"{_COUNT_WORDS[countries]} countries or more")  # fmt: skip
    unknown = [p for p in pipelines if not is_pipeline(p)]
    if unknown:
        raise MeloInputError(f"experiment {experiment.name!r}: {what} per pipeline, not {', '.join(unknown)}")
    return codes, files


_COUNT_WORDS = {2: "two", 3: "three"}


def _run_graded(experiment: Experiment, plan: Graded, data_dir: Path, results: Path, command: str, limit: int,
                only: list[str] | None, show_progress: bool, say: Say) -> list[dict[str, object]]:  # fmt: skip
    """Per crosswalk and scorer: metric ``spearman_grade`` of the fused score (pipeline column: the
    pipeline or spec) and of each component (``best/domain``). ``limit`` (``--limit-queries``)
    draws that many terms per crosswalk instead of the file's ``terms``; ``only``: crosswalk codes."""
    import math

    from melo_core.esco.crosswalk import load_crosswalk
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.evaluation.graded import graded_similarity
    from melo_core.linking.pipeline import is_pipeline, load_pipeline

    codes, files = _chosen_crosswalks(experiment, plan.crosswalks, only, data_dir)
    scorers = {spec: load_pipeline(spec) if is_pipeline(spec) else spec for spec in plan.scorers}
    taxonomy = cached_taxonomy_from_melo(data_dir)
    origin = provenance(plan.scorers, files, command)
    rows: list[dict[str, object]] = []
    for code, path in tqdm(list(zip(codes, files, strict=True)), unit="crosswalk", desc=experiment.name,
                           disable=not show_progress):  # fmt: skip
        crosswalk = load_crosswalk(path)
        for scorer in scorers.values():
            result = graded_similarity(crosswalk, taxonomy, scorer, data_dir=data_dir, seed=plan.seed,
                                       terms=limit or plan.terms, on_status=say)  # fmt: skip
            done: list[dict[str, object]] = [
                {"dataset": code, "pipeline": name, "metric": "spearman_grade", "value": round(value, 6),
                 "queries": len(result.pairs), "seconds": round(result.seconds, 1)}
                for name, value in result.spearman.items() if not math.isnan(value)
            ]  # fmt: skip
            append_results(results, experiment.name, done, origin)
            rows += done
            say(f"{code:<8} {len(result.pairs):>6} pairs  "
                + "  ".join(f"{name} {value:.4f}" for name, value in result.spearman.items()))  # fmt: skip
    by_pipeline: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_pipeline[str(row["pipeline"])].append(float(str(row["value"])))
    means: list[dict[str, object]] = [
        {"dataset": GRADED_MEAN, "pipeline": name, "metric": "spearman_grade",
         "value": round(sum(values) / len(values), 6), "queries": len(values), "seconds": ""}
        for name, values in by_pipeline.items()
    ]  # fmt: skip
    append_results(results, experiment.name, means, origin)
    for row in means:
        value = float(str(row["value"]))
        say(f"{GRADED_MEAN} {row['pipeline']:<28} Spearman {value:.4f} over {row['queries']} crosswalks")
    return rows + means


SIMULATION_MEAN = "mean:crosswalks"  # a simulation's mean over the crosswalks run
SIMULATION_METRICS = ("effort_per_100", "acc_at_1", "acc_at_10", "mrr", "not_found_100")


def simulation_label(pipeline: str, variant: str, order: str, precision: float = PROPOSAL_PRECISION) -> str:
    """The pipeline column of a simulation row: ``best`` (learning, random order), ``best/static``,
    ``best/mentions-only``, ``best/most-confident``, ``best/proposals`` (at 0.95),
    ``best/proposals-80`` (at another target), ..."""
    if variant == "proposals" and precision != PROPOSAL_PRECISION:
        variant = f"proposals-{precision * 100:g}"
    return "/".join([pipeline, *([variant] if variant != "learning" else []), *([order] if order != "random" else [])])


def _replay(crosswalk: Crosswalk, taxonomy: Taxonomy, scorer: PipelineDefinition | str, replays: list[Replay], *,
            label: str, show_progress: bool, **options: Any) -> list[Simulation]:  # fmt: skip
    """``simulate_many`` with a bar of the terms replayed: one crosswalk with `best` takes minutes.
    No MRR of the undecided terms at checkpoints: no row holds it, and it was a third of the work."""
    from melo_core.evaluation.simulate import simulate_many

    with tqdm(unit="term", desc=label, disable=not show_progress, leave=False) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        return simulate_many(crosswalk, taxonomy, scorer, replays, checkpoints=(), on_progress=progress, **options)


def _run_simulation(experiment: Experiment, plan: SimulationPlan, data_dir: Path, results: Path, command: str,
                    limit: int, only: list[str] | None, show_progress: bool,
                    say: Say) -> list[dict[str, object]]:  # fmt: skip
    """Per crosswalk, pipeline, order and variant: the simulated curator's effort per 100 terms,
    acc@1, acc@10, MRR and share not in the first 100, each the mean over the seeds (the random
    order; the others are run once). ``limit`` (``--limit-queries``): the first N terms of each
    order instead of the file's ``limit``; ``only``: crosswalk codes."""
    from melo_core.esco.crosswalk import load_crosswalk
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.evaluation.simulate import LinkerSummary, Replay, page_calibrator
    from melo_core.linking.pipeline import is_pipeline, load_pipeline

    codes, files = _chosen_crosswalks(experiment, plan.crosswalks, only, data_dir)
    scorers = {spec: load_pipeline(spec) if is_pipeline(spec) else spec for spec in plan.pipelines}
    taxonomy = cached_taxonomy_from_melo(data_dir)
    origin = provenance(plan.pipelines, files, command)
    rows: list[dict[str, object]] = []
    for code, path in tqdm(list(zip(codes, files, strict=True)), unit="crosswalk", desc=experiment.name,
                           disable=not show_progress):  # fmt: skip
        crosswalk = load_crosswalk(path)
        for name, scorer in scorers.items():
            for order in plan.orders:
                runs: dict[str, list[LinkerSummary]] = defaultdict(list)
                started = time.perf_counter()
                seeds = plan.seeds if order == "random" else plan.seeds[:1]
                learnt = ("learning", "static")
                replays = [Replay(seed) for seed in seeds] if any(v in plan.variants for v in learnt) else []
                if "mentions-only" in plan.variants:
                    replays += [Replay(seed, learn_kinds=False, skip_boilerplate=False) for seed in seeds]
                if "proposals" in plan.variants:
                    replays += [Replay(seed, proposals=True) for seed in seeds]
                calibrator = page_calibrator(scorer, crosswalk, "proposals" in plan.variants,
                                             "the proposals variant", say)  # fmt: skip
                simulations = _replay(crosswalk, taxonomy, scorer, replays, limit=limit or plan.limit,
                                      data_dir=data_dir, order=order, on_status=say, show_progress=show_progress,
                                      label=f"{code} {name} {order}", calibrator=calibrator,
                                      precision=plan.precision)  # fmt: skip
                for replay, result in zip(replays, simulations, strict=True):
                    if replay.proposals:
                        runs["proposals"].append(result.summaries["learning"])
                    elif replay.learn_kinds:
                        for variant in learnt:
                            runs[variant].append(result.summaries[variant])
                    else:
                        runs["mentions-only"].append(result.summaries["learning"])
                seconds = round(time.perf_counter() - started, 1)
                done: list[dict[str, object]] = []
                for variant in plan.variants:
                    summaries = runs[variant]
                    values = {
                        "effort_per_100": [s.effort_per_100 for s in summaries],
                        "acc_at_1": [s.acc_at_1 for s in summaries],
                        "acc_at_10": [s.acc_at_10 for s in summaries],
                        "mrr": [s.mrr for s in summaries],
                        "not_found_100": [s.not_found / s.terms if s.terms else 0.0 for s in summaries],
                    }
                    if variant == "proposals":  # the share of terms proposed, and of them the share right
                        values["proposal_coverage"] = [s.proposed / s.terms if s.terms else 0.0 for s in summaries]
                        if all(s.proposed for s in summaries):
                            values["proposal_precision"] = [s.confirmed / s.proposed for s in summaries]
                    label = simulation_label(name, variant, order, plan.precision)
                    done += [{"dataset": code, "pipeline": label, "metric": metric,
                              "value": round(sum(v) / len(v), 6), "queries": summaries[0].terms, "seconds": seconds}
                             for metric, v in values.items()]  # fmt: skip
                    say(f"{code:<8} {label:<28} effort {sum(values['effort_per_100']) / len(summaries):.0f} s/100  "
                        f"acc@1 {sum(values['acc_at_1']) / len(summaries):.3f}  over {len(summaries)} run(s)")  # fmt: skip
                append_results(results, experiment.name, done, origin)
                rows += done
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        groups[(str(row["pipeline"]), str(row["metric"]))].append(float(str(row["value"])))
    means: list[dict[str, object]] = [
        {"dataset": SIMULATION_MEAN, "pipeline": label, "metric": metric,
         "value": round(sum(values) / len(values), 6), "queries": len(values), "seconds": ""}
        for (label, metric), values in groups.items()
    ]  # fmt: skip
    append_results(results, experiment.name, means, origin)
    for row in means:
        if row["metric"] == "effort_per_100":
            say(f"{SIMULATION_MEAN} {row['pipeline']:<28} effort {float(str(row['value'])):.0f} s/100 terms over "
                f"{row['queries']} crosswalks")  # fmt: skip
    return rows + means


CALIBRATION_MEAN = "mean:crosswalks"  # a calibration experiment's mean over the crosswalks run
RELIABILITY_BIN = "reliability:"  # dataset of a reliability-diagram bin: reliability:00 .. reliability:14


def _measured_terms(plan: CalibrationPlan | ProposalsPlan, limit: int) -> int | None:
    """Terms per held-out crosswalk a calibration plan measures on, where not those it fits on
    (``--limit-queries`` sets both)."""
    return None if limit or plan.measured_terms in (None, plan.terms) else plan.measured_terms


def _calibration_rows(plan: CalibrationPlan | ProposalsPlan, limit: int, name: str, taxonomy: Taxonomy,
                      data_dir: Path, codes: list[str],
                      on_progress: Callable[[str], None]) -> tuple[CandidateRows, CandidateRows]:  # fmt: skip
    """The rows a calibration plan fits on (``terms`` per crosswalk, as `prepare` does) and those it
    measures on (``measured_terms`` per held-out crosswalk; without it, the same rows)."""
    from melo_core.evaluation.calibration import collect_rows
    from melo_core.linking.pipeline import load_pipeline

    definition = load_pipeline(name)
    training = collect_rows(definition, taxonomy, data_dir, codes, limit or plan.terms, on_progress=on_progress)
    measured_terms = _measured_terms(plan, limit)
    if measured_terms is None:
        return training, training
    return training, collect_rows(definition, taxonomy, data_dir, codes, measured_terms, on_progress=on_progress)


def _run_calibration(experiment: Experiment, plan: CalibrationPlan, data_dir: Path, results: Path, command: str,
                     limit: int, only: list[str] | None, show_progress: bool,
                     say: Say) -> list[dict[str, object]]:  # fmt: skip
    """Per crosswalk and pipeline, leave one country out: ``ece`` of every shown candidate (the top
    ``TOP_K``) and ``ece_first`` of the first ones, each predicted by a calibrator fit without the
    crosswalk's country; their means; and the reliability diagram of all of them pooled (datasets
    ``reliability:NN``: ``bin_probability`` and ``bin_accuracy``, the bin's candidates as queries).
    ``limit`` (``--limit-queries``): terms linked per crosswalk instead of the file's ``terms``."""
    from melo_core.esco.crosswalk import crosswalk_country
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.evaluation.calibration import (
        ECE_BINS,
        MIN_SCHEME_TERMS,
        expected_calibration_error,
        fit_calibrator,
        out_of_fold,
        reliability,
        scheme_offset,
        shift_probabilities,
    )

    codes, files = _leave_one_country_out(experiment, plan.crosswalks, plan.pipelines, only, data_dir, 2,
                                          "calibration is")  # fmt: skip
    taxonomy = cached_taxonomy_from_melo(data_dir)
    origin = provenance(plan.pipelines, files, command)
    out: list[dict[str, object]] = []
    for name in plan.pipelines:
        started = time.perf_counter()
        measured_terms = _measured_terms(plan, limit)
        with tqdm(total=len(codes) * (1 if measured_terms is None else 2), unit="crosswalk",
                  desc=f"{experiment.name}: {name}", disable=not show_progress) as bar:  # fmt: skip

            def linked(message: str) -> None:
                bar.set_postfix_str(message)
                bar.update(1)

            training, rows = _calibration_rows(plan, limit, name, taxonomy, data_dir, codes, linked)
        fits: Fits = {}
        predicted = out_of_fold(training, name, fits, measured=rows)
        # the prior of a scheme's offset, per held-out country (Belgium's two crosswalks share one)
        spreads = {country: fit_calibrator(training, name, country, fits).offset_spread
                   for country in sorted({crosswalk_country(code) for code in codes})}  # fmt: skip
        seconds = round(time.perf_counter() - started, 1)
        done: list[dict[str, object]] = []
        term_number = np.cumsum(rows.ranks == 1)  # a crosswalk's rows are its terms' lists, one after another
        for code in codes:
            mine = np.array([d == code for d in rows.datasets])
            first = mine & (rows.ranks == 1)
            # ece_adapted: the terms after the scheme's first MIN_SCHEME_TERMS, shifted by its offset on
            # those, under the prior of the calibrator without the crosswalk's country (the Link page's)
            decided = mine & (term_number - term_number[np.argmax(mine)] < MIN_SCHEME_TERMS)
            later = mine & ~decided
            offset = scheme_offset(predicted[decided], rows.labels[decided], spreads[crosswalk_country(code)])
            adapted = shift_probabilities(predicted[later], offset)
            for metric, probabilities, labels in (("ece", predicted[mine], rows.labels[mine]),
                                                  ("ece_first", predicted[first], rows.labels[first]),
                                                  ("ece_adapted", adapted, rows.labels[later])):  # fmt: skip
                done.append({"dataset": code, "pipeline": name, "metric": metric,
                             "value": round(expected_calibration_error(probabilities, labels), 6),
                             "queries": int(first.sum()), "seconds": seconds})  # fmt: skip
            say(f"{code:<8} {name:<10} ECE {done[-3]['value']:.4f}  first candidates {done[-2]['value']:.4f}  "
                f"after {MIN_SCHEME_TERMS} decided terms {done[-1]['value']:.4f}")  # fmt: skip
        append_results(results, experiment.name, done, origin)
        means: list[dict[str, object]] = [{"dataset": CALIBRATION_MEAN, "pipeline": name, "metric": metric,
                  "value": round(float(np.mean([float(str(r["value"])) for r in done if r["metric"] == metric])), 6),
                  "queries": len(codes), "seconds": ""} for metric in ("ece", "ece_first", "ece_adapted")]  # fmt: skip
        diagram = reliability(predicted, rows.labels)
        bins: list[dict[str, object]] = [{"dataset": f"{RELIABILITY_BIN}{b:02d}", "pipeline": name, "metric": metric, "value": round(value, 6),
                 "queries": diagram.counts[b], "seconds": ""}
                for b in range(ECE_BINS) if diagram.counts[b]
                for metric, value in (("bin_probability", diagram.mean_probability[b]),
                                      ("bin_accuracy", diagram.accuracy[b]))]  # fmt: skip
        append_results(results, experiment.name, means + bins, origin)
        for row in means:
            value = float(str(row["value"]))
            say(f"{CALIBRATION_MEAN} {name:<10} {row['metric']} {value:.4f} over {len(codes)} crosswalks")
        out += done + means + bins
    return out


PROPOSALS_MEAN = "mean:crosswalks"  # a proposals experiment's mean over the crosswalks run


def _run_proposals(experiment: Experiment, plan: ProposalsPlan, data_dir: Path, results: Path, command: str,
                   limit: int, only: list[str] | None, show_progress: bool,
                   say: Say) -> list[dict[str, object]]:  # fmt: skip
    """Per crosswalk and pipeline, leave one country out, as `propose` works: a calibrator fit
    without the crosswalk's country gives the threshold of ``plan.precision`` (``threshold_for``, from
    the other countries' first candidates); the crosswalk's terms whose first candidate clears it are
    proposed. Rows ``proposal_precision`` (share of those proposed whose first candidate is a
    crosswalk match; none when nothing is proposed; queries: how many were proposed) and
    ``proposal_coverage`` (share of the linked terms proposed), and their means. The linked terms
    are those of the calibration experiment (``collect_rows``, kept on disk); ``limit``
    (``--limit-queries``): terms per crosswalk instead of the file's ``terms``."""
    from melo_core.esco.crosswalk import crosswalk_country
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.evaluation.calibration import fit_calibrator

    # the threshold needs two countries besides the held-out one
    codes, files = _leave_one_country_out(experiment, plan.crosswalks, plan.pipelines, only, data_dir, 3,
                                          "proposals are")  # fmt: skip
    taxonomy = cached_taxonomy_from_melo(data_dir)
    origin = provenance(plan.pipelines, files, command)
    out: list[dict[str, object]] = []
    for name in plan.pipelines:
        started = time.perf_counter()
        with tqdm(total=len(codes), unit="crosswalk", desc=f"{experiment.name}: {name}",
                  disable=not show_progress) as bar:  # fmt: skip
            rows, measured = _calibration_rows(plan, limit, name, taxonomy, data_dir, codes, bar.set_postfix_str)
            bar.update(len(codes))
        done: list[dict[str, object]] = []
        fits: Fits = {}
        for code in codes:
            country = crosswalk_country(code)
            calibrator = fit_calibrator(rows, name, country, fits)
            threshold = calibrator.threshold_for(plan.precision)
            first = np.array([d == code for d in measured.datasets]) & (measured.ranks == 1)
            probabilities = calibrator.probabilities_of(measured.features[first])
            proposed = probabilities >= threshold if threshold is not None else np.zeros(len(probabilities), bool)
            right = measured.labels[first][proposed]
            seconds = round(time.perf_counter() - started, 1)
            coverage = float(proposed.mean()) if len(proposed) else 0.0
            done.append({"dataset": code, "pipeline": name, "metric": "proposal_coverage", "value": round(coverage, 6),
                         "queries": int(first.sum()), "seconds": seconds})  # fmt: skip
            if len(right):
                done.append({"dataset": code, "pipeline": name, "metric": "proposal_precision",
                             "value": round(float(right.mean()), 6), "queries": len(right),
                             "seconds": seconds})  # fmt: skip
            shown = f"{threshold:.3f}" if threshold is not None else "none"
            precision = f"{right.mean():.3f}" if len(right) else "-"
            say(f"{code:<8} {name:<10} threshold {shown}  proposed {len(right)}/{int(first.sum())} "
                f"(coverage {coverage:.3f})  precision {precision}")  # fmt: skip
        append_results(results, experiment.name, done, origin)
        means: list[dict[str, object]] = []
        for metric in ("proposal_precision", "proposal_coverage"):
            values = [float(str(r["value"])) for r in done if r["metric"] == metric]
            if values:
                means.append({"dataset": PROPOSALS_MEAN, "pipeline": name, "metric": metric,
                              "value": round(float(np.mean(values)), 6), "queries": len(values), "seconds": ""})  # fmt: skip
        # How many crosswalks came within PROPOSAL_SHORTFALL of the target (issue 89: 0.93 at 0.95,
        # on 20 of 24). Before, 0.93 whatever the target: a run at 0.80 counted 0.
        floor = round(plan.precision - PROPOSAL_SHORTFALL, 6)
        reached = sum(1 for r in done if r["metric"] == "proposal_precision" and float(str(r["value"])) >= floor)
        means.append({"dataset": PROPOSALS_MEAN, "pipeline": name, "metric": "proposal_precision_reached",
                      "value": reached, "queries": len(codes), "seconds": ""})  # fmt: skip
        append_results(results, experiment.name, means, origin)
        for row in means:
            value = row["value"] if isinstance(row["value"], int) else f"{float(str(row['value'])):.4f}"
            say(f"{PROPOSALS_MEAN} {name:<10} {row['metric']} {value} over {row['queries']} crosswalks")
        out += done + means
    return out
