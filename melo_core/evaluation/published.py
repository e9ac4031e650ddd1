"""The published per-dataset results of the MELO paper's baselines (``results/``)."""

from __future__ import annotations

from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.evaluation.protocol import Protocol
from melo_core.files.tsv import read_tsv
from melo_core.metrics import TREC_NAMES
from melo_core.spec import ComponentSpec, SpecError, parse

# Our scorer name -> the published model folder of the same method.
PUBLISHED_NAME = {
    "edit-distance": "edit_distance",
    "word-tfidf": "word_tf_idf",
    "word-tfidf-lemmas": "word_tf_idf_lemmas",
    "char-tfidf": "char_tf_idf",
    "char-tfidf-lemmas": "char_tf_idf_lemmas",
    "bm25": "bm25",
    "bm25-lemmas": "bm25_lemmas",
    "muse": "muse_cnn",
}
# How each published run was ranked: lexical and mUSE-CNN kept the top 100, the rest ranked all.
DEPTH_100_MODELS = frozenset(
    {
        "edit_distance",
        "word_tf_idf",
        "word_tf_idf_lemmas",
        "char_tf_idf",
        "char_tf_idf_lemmas",
        "bm25",
        "bm25_lemmas",
        "muse_cnn",
    }
)


def published_model(scorer: str) -> str | None:
    """The published run of the same method: ``muse@caps=paper`` compares with ``muse_cnn``."""
    if scorer in PUBLISHED_NAME:
        return PUBLISHED_NAME[scorer]
    try:
        parsed = parse(scorer)
    except SpecError:
        return None
    return PUBLISHED_NAME.get(parsed.head) if isinstance(parsed, ComponentSpec) else None


def published_protocol(model: str) -> Protocol:
    return Protocol("trec", 100 if model in DEPTH_100_MODELS else 0)


def default_protocol(scorer: str, mode: str | None = None, depth: int | str | None = None) -> Protocol:
    """The protocol to evaluate ``scorer`` with: ``mode`` (default trec) and ``depth`` (None or
    'auto': the published run's depth for the same method, else 0 = the whole corpus)."""
    published = published_model(scorer)
    default = published_protocol(published) if published else Protocol("trec", 0)
    if depth is None or depth == "auto":
        chosen = default.depth
    else:
        try:
            chosen = int(depth)
        except ValueError:
            raise MeloInputError(f"depth must be 'auto' or a whole number, not {depth!r}") from None
    try:
        return Protocol(mode or default.mode, chosen)
    except ValueError as exc:
        raise MeloInputError(str(exc)) from None


def results_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / "results"


def published_models(data_dir: str | Path) -> list[str]:
    root = results_dir(data_dir)
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def load_published(data_dir: str | Path, model: str, dataset: str) -> dict[str, float] | None:
    """Metrics of one published run keyed like ours (``mrr``, ``acc@1``...), or None."""
    path = results_dir(data_dir) / model / dataset / "summary.tsv"
    if not path.is_file():
        return None
    metrics = {}
    for _, (name, value) in read_tsv(path, 2):
        if name in TREC_NAMES:
            metrics[TREC_NAMES[name]] = float(value)
    return metrics


def load_all_published(data_dir: str | Path) -> dict[tuple[str, str], dict[str, float]]:
    """Every published run: (model, dataset) -> metrics."""
    out = {}
    for model in published_models(data_dir):
        for folder in sorted((results_dir(data_dir) / model).iterdir()):
            metrics = load_published(data_dir, model, folder.name)
            if metrics is not None:
                out[(model, folder.name)] = metrics
    return out
