"""Experiments as data: a TOML file under ``experiments/`` says what to evaluate (scorers or
pipelines on MELO datasets or job-ad titles, or a grid with a selection rule); ``run`` executes it
through the product's engine and appends tidy rows with provenance to one results table."""

from melo_core.evaluation.experiments.config import Experiment, experiment_names, load_experiment
from melo_core.evaluation.experiments.results import RESULT_COLUMNS, read_results
from melo_core.evaluation.experiments.runner import run_experiment

__all__ = ["RESULT_COLUMNS", "Experiment", "experiment_names", "load_experiment", "read_results", "run_experiment"]
