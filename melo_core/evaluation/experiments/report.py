"""``experiment report``: docs/benchmarks.md written from the results table. Each experiment's
current figure is its latest run per (dataset, pipeline, metric), among the metrics that run of the
(dataset, pipeline) recorded; the rerun history stays in
``experiments/results.csv`` and the prose in ``docs/experiments/``. The output depends on the rows,
the experiment files and the hand-written head only, so two runs give the same bytes."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from melo_core.config import PROJECT_ROOT
from melo_core.errors import MeloInputError
from melo_core.evaluation.experiments.config import EXPERIMENTS_DIR, Experiment, experiment_names, load_experiment
from melo_core.evaluation.experiments.results import RESULTS_FILE, latest_rows, read_results

REPORT_FILE = PROJECT_ROOT / "docs" / "benchmarks.md"
HEAD_FILE = PROJECT_ROOT / "docs" / "benchmarks.head.md"
TIMINGS_DIR = PROJECT_ROOT / "benchmarks" / "results"
MELO_DATASET = re.compile(r"^[a-z]{3}_q_([a-z]{2})_c_([a-z]{2})$")
MEANS = ("mean:all", "mean:monolingual", "mean:cross-lingual")
TITLE_SETS = ("titles-", "titles_")  # datasets of job-ad titles (benchmarks' samples, `eval --titles`)
QUALITY = ("mrr", "acc@1", "acc@5", "acc@10", "acc@100")
CLAIM_PAGE = re.compile(r"docs/experiments/([\w.-]+)\.md")  # a claim's page: its link in the settled list
MAX_ROWS = 12  # rows of one "other" experiment's table before it shows means per pipeline
# The rows that measure each shipped pipeline as it is now (the runs its [measured] figures name):
# a row called `fast` from before fast took the mention prior is not today's `fast`.
SHIPPED_MELO = {
    "best": (("melo-best-mono", "best"), ("melo-best-cross", "best")),
    "fast": (("melo-fast-prior", "experiments/pipelines/fast-prior.toml"),),
    "lexical": (("melo-lexical-prior", "experiments/pipelines/lexical-prior.toml"),),
}
SHIPPED_TITLES = {
    "best": (("titles-best", "best"),),
    "fast": (("titles-fast-prior", "experiments/pipelines/fast-prior.toml"),),
    "lexical": (("titles-lexical-prior", "experiments/pipelines/lexical-prior.toml"),),
}
Row = dict[str, str]
Key = tuple[str, str, str, str]  # experiment, dataset, pipeline, metric


def _number(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        return text
    if value.is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"


def _pipeline(name: str) -> str:
    """A pipeline file as a link from docs/, a pipeline or scorer name as code."""
    if name.endswith(".toml") and "/" in name:
        return f"[{Path(name).stem}](../{name})"
    return f"`{name}`"


def _table(header: Sequence[str], body: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines


def _kind(dataset: str) -> str:
    match = MELO_DATASET.match(dataset)
    if not match:
        return ""
    return "monolingual" if match.group(1) == match.group(2) else "cross-lingual"


class Report:
    def __init__(self, rows: Iterable[Row]) -> None:
        self.latest: dict[Key, Row] = latest_rows(
            rows, lambda r: (r["experiment"], r["dataset"], r["pipeline"], r["metric"]), group=lambda key: key[:3]
        )
        self.by_experiment: dict[str, dict[Key, Row]] = defaultdict(dict)
        for key, row in self.latest.items():
            self.by_experiment[key[0]][key] = row

    def value(self, experiment: str, dataset: str, pipeline: str, metric: str) -> str:
        row = self.latest.get((experiment, dataset, pipeline, metric))
        return _number(row["value"]) if row else ""

    def pipelines(self, experiment: str) -> list[str]:
        return sorted({key[2] for key in self.by_experiment[experiment]})

    def datasets(self, experiment: str) -> set[str]:
        return {key[1] for key in self.by_experiment[experiment]}

    def runs(self, experiment: str) -> list[Row]:
        """One row per run still current in the experiment, oldest first."""
        first: dict[str, Row] = {}
        for row in self.by_experiment[experiment].values():
            first.setdefault(row["run"], row)
        return [first[run] for run in sorted(first, key=lambda run: (first[run]["date"], run))]

    def stamp(self, experiment: str, pipeline: str) -> tuple[str, str]:
        """The date and commit of the pipeline's latest run in the experiment."""
        rows = [row for key, row in self.by_experiment[experiment].items() if key[2] == pipeline]
        latest = max(rows, key=lambda row: (row["date"], row["run"]))
        return latest["date"][:10], f"`{latest['commit']}`"

    def kind(self, experiment: str) -> str:
        """melo: MELO datasets; titles: job-ad titles; other: anything else (timings, store, ...)."""
        datasets = self.datasets(experiment)
        metrics = {key[3] for key in self.by_experiment[experiment]}
        if not metrics & set(QUALITY):
            return "other"
        if any(_kind(d) or d in MEANS for d in datasets):
            return "melo"
        return "titles" if all(d.startswith("titles") for d in datasets) else "other"


def _shipped_melo(report: Report) -> list[str]:
    columns = [name for name in SHIPPED_MELO if any(report.by_experiment.get(e) for e, _ in SHIPPED_MELO[name])]
    if not columns:
        return []
    per: dict[str, dict[str, float]] = {name: {} for name in columns}
    for name in columns:
        for experiment, pipeline in SHIPPED_MELO[name]:
            for (_, dataset, row_pipeline, metric), row in report.by_experiment.get(experiment, {}).items():
                if row_pipeline == pipeline and metric == "mrr" and _kind(dataset):
                    per[name][dataset] = float(row["value"])
    datasets = sorted({d for values in per.values() for d in values}, key=lambda d: (_kind(d) != "monolingual", d))
    body = [[f"`{d}`", _kind(d)] + [f"{per[n][d]:.4f}" if d in per[n] else "" for n in columns] for d in datasets]
    for label, kind in (("**mean**", ""), ("**monolingual**", "monolingual"), ("**cross-lingual**", "cross-lingual")):
        cells = []
        for name in columns:
            values = [v for d, v in per[name].items() if not kind or _kind(d) == kind]
            cells.append(f"**{sum(values) / len(values):.4f}** ({len(values)})" if values else "")
        body.append([label, "", *cells])
    sources = "; ".join(
        f"`{name}`: " + ", ".join(f"`{e}` {_pipeline(p)}" for e, p in SHIPPED_MELO[name]) for name in columns
    )
    return [
        "## The shipped pipelines on MELO, per dataset",
        "",
        "Concept-level MRR, trec order, whole corpus; the means are over the datasets shown (their number in",
        f"brackets). Rows: {sources} (the runs that measure each pipeline as shipped; their commands are below).",
        "",
        *_table(["dataset", "kind", *(f"`{n}`" for n in columns)], body),
        "",
    ]


def _shipped_titles(report: Report) -> list[str]:
    body = []
    for name, sources in SHIPPED_TITLES.items():
        for experiment, pipeline in sources:
            for dataset in sorted(report.datasets(experiment)):
                if (experiment, dataset, pipeline, "mrr") in report.latest:
                    date, commit = report.stamp(experiment, pipeline)
                    body.append([f"`{name}`", f"`{dataset}`",
                                 *(report.value(experiment, dataset, pipeline, m) for m in QUALITY),
                                 f"`{experiment}`", date, commit])  # fmt: skip
    if not body:
        return []
    return [
        "## The shipped pipelines on the job-ad titles",
        "",
        *_table(["pipeline", "titles", *QUALITY, "experiment", "date", "commit"], body),
        "",
    ]


def _melo_means(report: Report, experiments: Sequence[str]) -> list[str]:
    body = []
    for experiment in experiments:
        datasets = report.datasets(experiment)
        kinds = {_kind(d) for d in datasets} - {""}
        for pipeline in report.pipelines(experiment):
            if not any((experiment, m, pipeline, "mrr") in report.latest for m in MEANS):
                # no means (a slice of datasets): each dataset's own figure
                for dataset in sorted(d for d in datasets if _kind(d)):
                    cell = report.value(experiment, dataset, pipeline, "mrr")
                    if cell:
                        body.append([f"`{experiment}`", _pipeline(pipeline), f"{cell} (`{dataset}` only)", "", "",
                                     report.value(experiment, dataset, pipeline, "acc@1"),
                                     report.value(experiment, dataset, pipeline, "acc@10"),
                                     *report.stamp(experiment, pipeline)])  # fmt: skip
                continue
            overall = "mean:all" if len(kinds) > 1 else f"mean:{next(iter(kinds), 'all')}"
            body.append([f"`{experiment}`", _pipeline(pipeline),
                         report.value(experiment, "mean:all", pipeline, "mrr") if len(kinds) > 1 else "",
                         report.value(experiment, "mean:monolingual", pipeline, "mrr"),
                         report.value(experiment, "mean:cross-lingual", pipeline, "mrr"),
                         report.value(experiment, overall, pipeline, "acc@1"),
                         report.value(experiment, overall, pipeline, "acc@10"),
                         *report.stamp(experiment, pipeline)])  # fmt: skip
    if not body:
        return []
    return [
        "## MELO: every experiment's means",
        "",
        # one line a paragraph: the page keeps to 300 lines
        "Concept-level MRR averaged over the datasets each experiment ran (47: 24 monolingual, 23 cross-lingual); "
        "acc@k over the same datasets. A pipeline file is a variant tried beside the shipped one; what each "
        "experiment asked is on its page under [experiments/](experiments/README.md).",
        "",
        *_table(
            ["experiment", "pipeline", "mean", "monolingual", "cross-lingual", "acc@1", "acc@10", "date", "commit"],
            body,
        ),
        "",
    ]


def _titles(report: Report, experiments: Sequence[str]) -> list[str]:
    body = []
    for experiment in experiments:
        for pipeline in report.pipelines(experiment):
            for dataset in sorted(report.datasets(experiment)):
                if (experiment, dataset, pipeline, "mrr") not in report.latest:
                    continue
                body.append([f"`{experiment}`", _pipeline(pipeline), f"`{dataset}`",
                             *(report.value(experiment, dataset, pipeline, m) for m in QUALITY),
                             *report.stamp(experiment, pipeline)])  # fmt: skip
    if not body:
        return []
    return [
        "## Job-ad titles: every experiment",
        "",
        "The validation titles (`../shared/jobbert/titles.csv`) ranked against the English ESCO labels; MRR and "
        "acc@k are concept-level, acc@100 is recall@100. What was chosen on these titles is listed at the head of "
        "this page.",
        "",
        *_table(["experiment", "pipeline", "titles", *QUALITY, "date", "commit"], body),
        "",
    ]


def _rows(report: Report, experiment: str, datasets: Sequence[str], metrics: Sequence[str]) -> list[list[str]]:
    body = []
    for dataset in datasets:
        for pipeline in report.pipelines(experiment):
            cells = [report.value(experiment, dataset, pipeline, m) for m in metrics]
            if any(cells):
                body.append([f"`{dataset}`", _pipeline(pipeline), *cells, *report.stamp(experiment, pipeline)])
    return body


def _means(report: Report, experiment: str, datasets: Sequence[str], metrics: Sequence[str]) -> list[list[str]]:
    body = []
    for pipeline in report.pipelines(experiment):
        cells = []
        for metric in metrics:
            values = [float(row["value"]) for d in datasets
                      if (row := report.latest.get((experiment, d, pipeline, metric))) and _is_number(row["value"])]  # fmt: skip
            cells.append(_number(str(sum(values) / len(values))) if values else "")
        body.append([f"mean of {len(datasets)}", _pipeline(pipeline), *cells, *report.stamp(experiment, pipeline)])
    return body


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _others(report: Report, experiments: Sequence[str]) -> list[str]:
    # Experiments with the same measures (calibration and calibration-lexical) share one table, and
    # so does one whose measures are a part of another's (proposals-lexical, where nothing was
    # proposed, has no precision): empty cells, not one more table.
    measured = {e: frozenset(key[3] for key in report.by_experiment[e]) for e in experiments}
    kinds = set(measured.values())
    tables: dict[tuple[str, ...], list[list[str]]] = {}
    for experiment in experiments:
        wider = sorted((sorted(k) for k in kinds if measured[experiment] < k), key=lambda k: (-len(k), k))
        metrics = tuple(wider[0] if wider else sorted(measured[experiment]))
        datasets = sorted(report.datasets(experiment))
        means = [d for d in datasets if d.startswith("mean:")]
        plain = [d for d in datasets if not d.startswith("mean:")]
        # An experiment's own means stand for its datasets when one run wrote every current row; a
        # run over some datasets (--datasets) writes the mean of those only. Else, and past a
        # screenful, the page shows the mean per pipeline of each dataset's current row.
        partial = bool(means and plain) and len(report.runs(experiment)) > 1
        body = _rows(report, experiment, means or datasets, list(metrics))
        if partial or len(body) > MAX_ROWS:  # job-ad title sets are no crosswalks: shown apart, not averaged in
            titles = [d for d in plain if d.startswith(TITLE_SETS)]
            rest = [d for d in plain if d not in titles]
            body = [*(_means(report, experiment, rest, list(metrics)) if rest else []),
                    *_rows(report, experiment, titles, list(metrics))]  # fmt: skip
        tables.setdefault(metrics, []).extend([f"`{experiment}`", *row] for row in body)
    if not tables:
        return []
    lines: list[str] = []
    for metrics, body in tables.items():
        lines += [*_table(["experiment", "dataset", "pipeline", *metrics, "date", "commit"], body), ""]
    note = (
        "One table per set of measures. A `mean:…` row (the experiment's own) or a `mean of N` row (past "
        f"{MAX_ROWS} rows, or over runs that each covered some datasets) stands for an experiment's datasets; each "
        "dataset's rows are in `experiments/results.csv`."
    )
    return ["## Other measurements", "", note, "", *lines]


def _commands(report: Report, experiments: Sequence[str], descriptions: dict[str, str]) -> list[str]:
    lines = ["## Commands", "",
             "Each experiment's current run: its command and machine. Rerun: `python -m melo_core experiment run NAME`.",
             ""]  # fmt: skip
    for experiment in experiments:
        described = f" {descriptions[experiment]}." if descriptions.get(experiment) else ""
        runs = "; ".join(
            f"`{row['command']}` ({row['machine']}, {row['date'][:10]})" for row in report.runs(experiment)
        )
        lines.append(f"- `{experiment}`:{described} {runs}")
    unrun = sorted(set(descriptions) - set(experiments))
    if unrun:
        names = ", ".join(f"`{e}`" for e in unrun)
        lines += ["", "Experiment files with no rows yet (older ones were measured by scripts before the runner; their "
                  f"pages under experiments/ hold the figures): {names}."]  # fmt: skip
    return [*lines, ""]


def _timings(files: Sequence[str]) -> list[str]:
    if not files:
        return []
    links = ", ".join(f"[{Path(f).stem}](../benchmarks/results/{f})" for f in files)
    return [
        "## Timings",
        "",
        "Speed, memory, first use and bulk linking are timed by the scripts of `benchmarks/`; their tables are CSVs "
        f"(or text) under `benchmarks/results/`, described on the pages of [experiments/](experiments/README.md): {links}.",
        "",
    ]


def _settled(experiments: Sequence[str], claims: dict[str, str]) -> list[str]:
    if not experiments:
        return []
    pages = {e: CLAIM_PAGE.search(claims[e]) for e in experiments}
    names = ", ".join(f"`{e}` ([{page[1]}](experiments/{page[1]}.md))" if (page := pages[e]) else f"`{e}`"
                      for e in experiments)  # fmt: skip
    return [
        "## Settled experiments",
        "",
        "Their choice is made and written on their pages; their rows stay in `experiments/results.csv` and their "
        f"commands below, out of the tables above: {names}.",
        "",
    ]


def render(rows: Iterable[Row], head: str = "", descriptions: dict[str, str] | None = None,
           timings: Sequence[str] = (), settled: dict[str, str] | None = None) -> str:  # fmt: skip
    """The report's markdown from the results rows, a hand-written head, the experiments'
    descriptions, the names of the timing files and the settled experiments (name: its claim),
    which the tables leave out."""
    report = Report(rows)
    names = sorted(report.by_experiment)
    settled = settled or {}
    tabled = [e for e in names if e not in settled]
    by_kind = {kind: [e for e in tabled if report.kind(e) == kind] for kind in ("melo", "titles", "other")}
    lines = [head.rstrip("\n"), ""] if head.strip() else []
    lines += _shipped_titles(report)
    lines += _shipped_melo(report)
    lines += _melo_means(report, by_kind["melo"])
    lines += _titles(report, by_kind["titles"])
    lines += _others(report, by_kind["other"])
    lines += _settled([e for e in names if e in settled], settled)
    lines += _commands(report, names, descriptions or {})
    lines += _timings(timings)
    return "\n".join(lines).rstrip("\n") + "\n"


def experiment_files(folder: Path = EXPERIMENTS_DIR) -> list[Experiment]:
    """Every experiment file that loads (one being written by someone else is left out)."""
    experiments = []
    for name in experiment_names(folder):
        try:
            experiments.append(load_experiment(name, folder))
        except MeloInputError:  # a file being written by someone else: left out, still a report
            continue
    return experiments


def write_report(results: Path = RESULTS_FILE, out: Path | None = REPORT_FILE, head: Path = HEAD_FILE) -> str:
    """Render the report from ``results``; write it to ``out`` (None: only return it)."""
    if not results.is_file():
        raise MeloInputError(f"experiment report: no results table at {results}")
    files = experiment_files()
    text = render(read_results(results), head.read_text(encoding="utf-8") if head.is_file() else "",
                  {e.name: e.description.rstrip(".") for e in files},
                  sorted(p.name for p in TIMINGS_DIR.glob("*") if p.suffix in (".csv", ".txt")),
                  {e.name: e.claim for e in files if e.settled})  # fmt: skip
    if out is not None:
        out.write_text(text, encoding="utf-8")
    return text
