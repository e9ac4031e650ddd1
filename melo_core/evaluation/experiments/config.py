"""An experiment file (``experiments/NAME.toml``)::

    description = "The named pipelines on the 47 MELO datasets"
    claim = "docs/benchmarks.md, MELO 47"        # where the result is used (optional)
    settled = true                              # its choice is made and written on its claim page:
                                                #   the report names it, its tables leave it out

    [evaluate]
    scorers = ["best", "fast"]                  # pipelines or scorer specs
    datasets = "all"                            # all | monolingual | cross-lingual | [names]
    # titles = "jobbert/titles.csv"             # instead of / besides datasets: a job-ad titles CSV,
    # langs = ["en"]                            #   relative paths resolved beside the data folder
    # mode = "trec"; depth = 0                  # default: eval's

or, instead of ``[evaluate]``, a grid whose configuration is chosen per dataset::

    [leave_one_out]
    grid = "fusion"                             # a grid of melo_core.evaluation.experiments.grids
    within = "kind"                             # choose over the other datasets of the same kind
    datasets = "all"
    [leave_one_out.options]                     # the grid's own options
    ...

or graded similarity (melo_core.evaluation.graded: Spearman of each score with the crosswalk grades)::

    [graded]
    scorers = ["best"]                          # pipelines (fused and each component) or scorer specs
    crosswalks = "all"                          # all | [codes]
    terms = 200                                 # terms drawn per crosswalk (0: all); seed = 0

or calibrated confidence (melo_core.evaluation.calibration: ECE leave one country out)::

    [calibration]
    pipelines = ["best"]
    crosswalks = "all"                          # all | [codes]
    terms = 150                                 # terms linked per crosswalk (0: all)

or batch proposals at a stated precision (db.proposals, measured leave one country out)::

    [proposals]
    pipelines = ["best"]
    crosswalks = "all"                          # all | [codes]
    terms = 150                                 # terms linked per crosswalk (0: all)
    precision = 0.95                            # target precision
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from melo_core.config import PROJECT_ROOT
from melo_core.errors import MeloInputError
from melo_core.evaluation.effort import PROPOSAL_PRECISION

EXPERIMENTS_DIR = PROJECT_ROOT / "experiments"
DATASET_SETS = ("all", "monolingual", "cross-lingual")
# An experiment has exactly one of these tables.
KINDS = ("evaluate", "leave_one_out", "graded", "simulation", "calibration", "proposals")
_TOP = {"description", "claim", "settled", *KINDS}
_SIMULATION = {"pipelines", "crosswalks", "seeds", "orders", "variants", "limit", "precision"}
# mentions-only: learning as before issue 89; proposals: learning after a batch of proposals (at `precision`)
SIMULATION_VARIANTS = ("learning", "static", "mentions-only", "proposals")
_GRADED = {"scorers", "crosswalks", "terms", "seed"}
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
class Graded:
    """Graded similarity (melo_core.evaluation.graded): Spearman of each scorer's score with the crosswalk grades."""

    scorers: tuple[str, ...]
    crosswalks: str | tuple[str, ...] = "all"  # all, or crosswalk codes
    terms: int = 0  # terms drawn per crosswalk (0: all)
    seed: int = 0


@dataclass(frozen=True)
class SimulationPlan:
    """The simulated curator (melo_core.evaluation.simulate): effort per 100 terms and acc@1 per crosswalk."""

    pipelines: tuple[str, ...]
    crosswalks: str | tuple[str, ...] = "all"  # all, or crosswalk codes
    seeds: tuple[int, ...] = (0, 1, 2)  # of the random order; the other orders are run once
    orders: tuple[str, ...] = ("random",)
    variants: tuple[str, ...] = ("learning", "static")
    limit: int = 0  # only the first N terms of each order (0: all)
    precision: float = PROPOSAL_PRECISION  # of the "proposals" variant


@dataclass(frozen=True)
class CalibrationPlan:
    """Calibrated confidence (melo_core.evaluation.calibration): per crosswalk, the ECE of a calibrator fit
    without its country."""

    pipelines: tuple[str, ...]
    crosswalks: str | tuple[str, ...] = "all"  # all, or crosswalk codes
    terms: int = 150  # terms linked per crosswalk to fit on (0: all); `prepare` fits on 150
    measured_terms: int | None = None  # terms per held-out crosswalk measured on (0: all; None: those fit on)


@dataclass(frozen=True)
class ProposalsPlan:
    """Batch proposals (db.proposals): per crosswalk, the realised precision and the coverage of the
    first candidates a calibrator fit without its country proposes at ``precision``."""

    pipelines: tuple[str, ...]
    crosswalks: str | tuple[str, ...] = "all"  # all, or crosswalk codes
    terms: int = 150  # terms linked per crosswalk to fit on (0: all); `prepare` fits on 150
    precision: float = PROPOSAL_PRECISION
    measured_terms: int | None = None  # terms per held-out crosswalk measured on (0: all; None: those fit on)


@dataclass(frozen=True)
class Experiment:
    name: str
    path: Path
    description: str
    claim: str = ""
    settled: bool = False  # a choice made: docs/benchmarks.md names it and leaves its rows out
    evaluate: Evaluate | None = None
    leave_one_out: LeaveOneOut | None = None
    graded: Graded | None = None
    calibration: CalibrationPlan | None = None
    simulation: SimulationPlan | None = None
    proposals: ProposalsPlan | None = None


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
    if sum(kind in raw for kind in KINDS) != 1:
        raise fail(f"give exactly one of {', '.join(f'[{kind}]' for kind in KINDS)}")
    if not isinstance(raw.get("settled", False), bool):
        raise fail("'settled' is true or false")
    common = Experiment(name=path.stem, path=path, description=raw["description"], claim=raw.get("claim", ""),
                        settled=raw.get("settled", False))  # fmt: skip
    if "simulation" in raw:
        return replace(common, simulation=_simulation(raw["simulation"], fail))
    if "calibration" in raw:
        return replace(common, calibration=_calibration(raw["calibration"], fail))
    if "proposals" in raw:
        return replace(common, proposals=_proposals(raw["proposals"], fail))
    if "graded" in raw:
        return replace(common, graded=_graded(raw["graded"], fail))
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
    return replace(common, evaluate=evaluate, leave_one_out=loo)


def scorer_specs(value: object, key: str, fail: Fail) -> list[str]:
    """``value`` as a list of known scorer specs or pipeline names; else ``fail`` names ``key``."""
    from melo_core.scorers import check_scorer
    from melo_core.spec import SpecError

    if not value or not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise fail(f"{key}: a list of pipeline names or scorer specs")
    for spec in value:
        try:
            check_scorer(spec)
        except SpecError as exc:
            raise fail(f"{key}: {exc}") from None
    return list(value)


def _graded(table: object, fail: Fail) -> Graded:
    _no_unknown(table, _GRADED, "graded.", fail)
    assert isinstance(table, dict)
    crosswalks = _crosswalks(table, "graded.", fail)
    numbers = {key: table.get(key, 0) for key in ("terms", "seed")}
    for key, value in numbers.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise fail(f"graded.{key}: a whole number >= 0")
    return Graded(scorers=tuple(scorer_specs(table.get("scorers"), "graded.scorers", fail)),
                  crosswalks=crosswalks, **numbers)  # fmt: skip


def _simulation(table: object, fail: Fail) -> SimulationPlan:
    from melo_core.evaluation.effort import SIMULATION_ORDERS

    _no_unknown(table, _SIMULATION, "simulation.", fail)
    assert isinstance(table, dict)
    crosswalks = _crosswalks(table, "simulation.", fail)
    seeds = table.get("seeds", [0, 1, 2])
    limit = table.get("limit", 0)
    if not (isinstance(seeds, list) and seeds and all(isinstance(v, int) and not isinstance(v, bool) for v in seeds)):
        raise fail("simulation.seeds: a list of whole numbers")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise fail("simulation.limit: a whole number >= 0")
    chosen = {}
    for key, known, default in (("orders", SIMULATION_ORDERS, ["random"]),
                                ("variants", SIMULATION_VARIANTS, ["learning", "static"])):  # fmt: skip
        value = table.get(key, default)
        if not (isinstance(value, list) and value and all(v in known for v in value)):
            raise fail(f"simulation.{key}: a list of {', '.join(known)}")
        chosen[key] = tuple(value)
    precision = table.get("precision", PROPOSAL_PRECISION)
    if not isinstance(precision, float) or not 0.0 < precision < 1.0:
        raise fail("simulation.precision: a number between 0 and 1, such as 0.95")
    pipelines = table.get("pipelines", ["best"])
    return SimulationPlan(pipelines=tuple(scorer_specs(pipelines, "simulation.pipelines", fail)),
                          crosswalks=crosswalks, seeds=tuple(seeds),
                          limit=limit, precision=precision, **chosen)  # fmt: skip


def _proposals(table: object, fail: Fail) -> ProposalsPlan:
    _no_unknown(table, {"pipelines", "crosswalks", "terms", "measured_terms", "precision"}, "proposals.", fail)
    assert isinstance(table, dict)
    plan = _calibration({k: v for k, v in table.items() if k != "precision"}, fail, "proposals.")
    precision = table.get("precision", PROPOSAL_PRECISION)
    if not isinstance(precision, float) or not 0.0 < precision < 1.0:
        raise fail("proposals.precision: a number between 0 and 1, such as 0.95")
    return ProposalsPlan(plan.pipelines, plan.crosswalks, plan.terms, precision, plan.measured_terms)


def _calibration(table: object, fail: Fail, prefix: str = "calibration.") -> CalibrationPlan:
    _no_unknown(table, {"pipelines", "crosswalks", "terms", "measured_terms"}, prefix, fail)
    assert isinstance(table, dict)
    crosswalks = _crosswalks(table, prefix, fail)
    terms, measured = table.get("terms", 150), table.get("measured_terms")
    for key, value in (("terms", terms), ("measured_terms", measured)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise fail(f"{prefix}{key}: a whole number >= 0")
    pipelines = tuple(scorer_specs(table.get("pipelines", ["best"]), f"{prefix}pipelines", fail))
    return CalibrationPlan(pipelines, crosswalks, int(str(terms)), None if measured is None else int(str(measured)))


def _crosswalks(table: dict[str, object], prefix: str, fail: Fail) -> str | tuple[str, ...]:
    """A plan's ``crosswalks``: "all" (the default) or a tuple of crosswalk codes."""
    return _names(table.get("crosswalks", "all"), f"{prefix}crosswalks", ("all",), "crosswalk codes", fail)


def _no_unknown(table: object, known: set[str], prefix: str, fail: Fail) -> None:
    if not isinstance(table, dict):
        raise fail(f"{prefix.rstrip('.') or 'the file'} must be a table")
    unknown = sorted(set(table) - known)
    if unknown:
        raise fail(f"unknown key {prefix}{unknown[0]}; expected {', '.join(prefix + k for k in sorted(known))}")


def _datasets(value: object, prefix: str, fail: Fail) -> str | tuple[str, ...]:
    return _names(value, f"{prefix}datasets", DATASET_SETS, "names", fail)


def _names(value: object, key: str, sets: Sequence[str], what: str, fail: Fail) -> str | tuple[str, ...]:
    """``value`` as one of the named ``sets`` or a tuple of names; else ``fail`` names ``key``."""
    if isinstance(value, str):
        if value not in sets:
            raise fail(f"{key}: {' / '.join(sets)} or a list of {what}, not {value!r}")
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise fail(f"{key}: {' / '.join(sets)} or a list of {what}")
