"""An experiment file (``experiments/NAME.toml``)::

    description = "The named pipelines on the 47 MELO datasets"
    claim = "docs/benchmarks.md, MELO 47"        # where the result is used (optional)

    [evaluate]
    scorers = ["best", "fast"]                  # pipelines or scorer specs
    datasets = "all"                            # all | monolingual | cross-lingual | [names]
    # titles = "jobbert/titles.csv"             # instead of / besides datasets: a job-ad titles CSV,
    # langs = ["en"]                            #   relative paths resolved beside the data folder
    # mode = "trec"; depth = 0                  # default: eval's

or, instead of ``[evaluate]``, a grid whose configuration is chosen per dataset::

    [leave_one_out]
    grid = "fusion"                             # a grid of melo_core.experiments.grids
    within = "kind"                             # choose over the other datasets of the same kind
    datasets = "all"
    [leave_one_out.options]                     # the grid's own options
    ...
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from melo_core.config import PROJECT_ROOT
from melo_core.errors import MeloInputError

EXPERIMENTS_DIR = PROJECT_ROOT / "experiments"
DATASET_SETS = ("all", "monolingual", "cross-lingual")
_TOP = {"description", "claim", "evaluate", "leave_one_out"}
_EVALUATE = {"scorers", "datasets", "titles", "langs", "title_column", "uri_column", "mode", "depth",
             "limit_queries"}  # fmt: skip
_LOO = {"grid", "within", "datasets", "options"}
Fail = Callable[[str], MeloInputError]


@dataclass(frozen=True)
class Evaluate:
    scorers: tuple[str, ...]
    datasets: str | tuple[str, ...] = ()
    titles: str | None = None
    langs: tuple[str, ...] = ("en",)
    title_column: str = "vacancyTitle"
    uri_column: str = "conceptUri"
    mode: str | None = None
    depth: int | str | None = None
    limit_queries: int = 0


@dataclass(frozen=True)
class LeaveOneOut:
    grid: str
    within: str = "kind"  # kind: the other datasets of the same kind; all: every other dataset
    datasets: str | tuple[str, ...] = "all"
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    name: str
    path: Path
    description: str
    claim: str = ""
    evaluate: Evaluate | None = None
    leave_one_out: LeaveOneOut | None = None


def experiment_names(folder: Path = EXPERIMENTS_DIR) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.toml"))


def load_experiment(name_or_path: str | Path, folder: Path = EXPERIMENTS_DIR) -> Experiment:
    """The experiment named (``experiments/NAME.toml``) or at a path; a bad file raises
    MeloInputError naming the key."""
    text = str(name_or_path)
    path = Path(text) if text.endswith(".toml") else folder / f"{text}.toml"
    if not path.is_file():
        known = ", ".join(experiment_names(folder)) or "none"
        raise MeloInputError(f"unknown experiment {text!r}; known: {known}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MeloInputError(f"not a valid TOML file: {exc}", path) from None

    def fail(message: str) -> MeloInputError:
        return MeloInputError(message, path)

    _no_unknown(raw, _TOP, "", fail)
    if not isinstance(raw.get("description"), str):
        raise fail("'description' (a sentence) is required")
    if ("evaluate" in raw) == ("leave_one_out" in raw):
        raise fail("give exactly one of [evaluate] and [leave_one_out]")
    evaluate = loo = None
    if "evaluate" in raw:
        table = raw["evaluate"]
        _no_unknown(table, _EVALUATE, "evaluate.", fail)
        scorers = scorer_specs(table.get("scorers"), "evaluate.scorers", fail)
        if "datasets" not in table and "titles" not in table:
            raise fail("evaluate: give datasets, titles or both")
        evaluate = Evaluate(scorers=tuple(scorers), datasets=_datasets(table.get("datasets", ()), "evaluate.", fail),
                            titles=table.get("titles"), langs=tuple(table.get("langs", ("en",))),
                            title_column=table.get("title_column", "vacancyTitle"),
                            uri_column=table.get("uri_column", "conceptUri"), mode=table.get("mode"),
                            depth=table.get("depth"), limit_queries=int(table.get("limit_queries", 0)))  # fmt: skip
    else:
        table = raw["leave_one_out"]
        _no_unknown(table, _LOO, "leave_one_out.", fail)
        if not isinstance(table.get("grid"), str):
            raise fail("leave_one_out.grid: the name of a grid")
        within = table.get("within", "kind")
        if within not in ("kind", "all"):
            raise fail(f"leave_one_out.within: 'kind' or 'all', not {within!r}")
        loo = LeaveOneOut(grid=table["grid"], within=within,
                          datasets=_datasets(table.get("datasets", "all"), "leave_one_out.", fail),
                          options=dict(table.get("options", {})))  # fmt: skip
    return Experiment(name=path.stem, path=path, description=raw["description"], claim=raw.get("claim", ""),
                      evaluate=evaluate, leave_one_out=loo)  # fmt: skip


def scorer_specs(value: object, key: str, fail: Fail) -> list[str]:
    """``value`` as a list of known scorer specs or pipeline names; else ``fail`` names ``key``."""
    from melo_core.scorers import is_scorer_spec

    if not value or not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise fail(f"{key}: a list of pipeline names or scorer specs")
    unknown = [spec for spec in value if not is_scorer_spec(spec)]
    if unknown:
        raise fail(f"{key}: unknown scorer {unknown[0]!r} (see `python -m melo_core scorers`)")
    return list(value)


def _no_unknown(table: object, known: set[str], prefix: str, fail: Fail) -> None:
    if not isinstance(table, dict):
        raise fail(f"{prefix.rstrip('.') or 'the file'} must be a table")
    unknown = sorted(set(table) - known)
    if unknown:
        raise fail(f"unknown key {prefix}{unknown[0]}; expected {', '.join(prefix + k for k in sorted(known))}")


def _datasets(value: object, prefix: str, fail: Fail) -> str | tuple[str, ...]:
    if isinstance(value, str):
        if value not in DATASET_SETS:
            raise fail(f"{prefix}datasets: {' / '.join(DATASET_SETS)} or a list of names, not {value!r}")
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise fail(f"{prefix}datasets: {' / '.join(DATASET_SETS)} or a list of names")
