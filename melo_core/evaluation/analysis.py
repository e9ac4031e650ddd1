"""The computations behind the analyst dashboards: lexical overlap, benchmark tables and per-query
drill-down. Pages only plot what these functions return (pandas DataFrames, small dataclasses).

Lexical overlap follows the MELO paper's figures 1, 2, 4 and 5 as its published code
(``melo_benchmark/analysis/histogram_visualizer.py`` and ``correlation_visualizer.py``) computes
them: for every query with at least one relevant element, the minimum over its relevant corpus
elements of ``1 - rapidfuzz.fuzz.ratio(q, c) / 100`` on lowercased, NFKD + ASCII-folded strings
(folding skipped for Bulgarian). ``fuzz.ratio`` is the normalised Indel similarity (insertions and
deletions only, divided by ``len(q) + len(c)``), so the paper's "normalised edit distance" is
``rapidfuzz.distance.Indel.normalized_distance``. ``distance="levenshtein"`` gives the Levenshtein
distance divided by the longer string's length instead. The per-dataset statistic plotted against
MRR is the median of these minima over the monolingual datasets.

One deliberate difference: the paper's correlation script (unlike its histogram script) also folds
Bulgarian, which deletes the Cyrillic letters (bgr_q_bg_c_bg median 0.33 instead of 0.56); here
both figures use the histogram script's rule. With it, Spearman's rho of the published MRR against
the median over the 24 monolingual datasets is -0.857 (edit_distance), -0.821 (char_tf_idf),
-0.749 (muse_cnn) and -0.711 (openai).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import pandas as pd
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from melo_core import config
from melo_core.esco.datasets import (
    ANNOTATIONS_FILE,
    CORPUS_FILE,
    QUERIES_FILE,
    MeloDataset,
    dataset_overview,
    list_datasets,
    load_dataset,
    parse_dataset_name,
    resolve_dataset,
)
from melo_core.esco.taxonomy import isco_code_of
from melo_core.evaluation.published import published_model
from melo_core.evaluation.significance import Interval, paired_test
from melo_core.metrics import reciprocal_rank
from melo_core.runtime.disk_cache import files_stamp, load_pickle, save_pickle
from melo_core.scorers.text import ascii_fold, folding_applies

if TYPE_CHECKING:
    from melo_core.evaluation.protocol import EvaluationResult

Kind = Literal["monolingual", "cross-lingual", "multilingual"]
Distance = Literal["indel", "levenshtein"]
KINDS: tuple[Kind, ...] = ("monolingual", "cross-lingual", "multilingual")


def _paper_distance(query: str, element: str) -> float:
    # Computed as the paper did (not Indel.normalized_distance, equal up to rounding) so that
    # values on bin edges (0.15, 0.35...) fall into the same histogram bins as in its figures.
    return 1.0 - fuzz.ratio(query, element) / 100.0


_DISTANCES: dict[str, Callable[[str, str], float]] = {
    "indel": _paper_distance,
    "levenshtein": Levenshtein.normalized_distance,
}
# Bump when the cached distances change meaning (preprocessing, definition).
OVERLAP_CACHE_VERSION = 1
_CONCEPT_IN_ID = re.compile(r"^(C\d+)_")


# --------------------------------------------------------------------------- datasets


def dataset_kind(name: str) -> Kind:
    """monolingual (corpus in exactly the query language), cross-lingual (one other corpus
    language) or multilingual (several corpus languages), from an official dataset name."""
    parsed = parse_dataset_name(name)
    if parsed is None:
        raise ValueError(f"{name!r} is not an official dataset name (<country>_q_<lang>_c_<langs>)")
    return cast(Kind, parsed.kind)


def dataset_table(data_dir: str | Path) -> pd.DataFrame:
    """One row per dataset: dataset, country, query_language, corpus_languages (joined by ","),
    kind, n_queries, n_corpus. Names outside the convention get empty language fields."""
    rows = []
    for row in dataset_overview(data_dir):
        parsed = parse_dataset_name(str(row["dataset"]))
        rows.append(
            {
                "dataset": row["dataset"],
                "country": parsed.country if parsed else "",
                "query_language": parsed.query_language if parsed else "",
                "corpus_languages": ",".join(parsed.corpus_languages) if parsed else "",
                "kind": parsed.kind if parsed else "",
                "n_queries": row["queries"],
                "n_corpus": row["corpus elements"],
            }
        )
    columns = ["dataset", "country", "query_language", "corpus_languages", "kind", "n_queries", "n_corpus"]
    return pd.DataFrame(rows, columns=columns)


def filter_datasets(
    table: pd.DataFrame,
    query_languages: Iterable[str] | None = None,
    corpus_languages: Iterable[str] | None = None,
    kinds: Iterable[str] | None = None,
) -> list[str]:
    """Dataset names of ``dataset_table`` rows passing every given filter (None or empty: no
    filter). A dataset passes ``corpus_languages`` when any of its corpus languages is listed."""
    keep = pd.Series(True, index=table.index)
    if query_languages:
        keep &= table["query_language"].isin(set(query_languages))
    if corpus_languages:
        wanted = set(corpus_languages)
        keep &= table["corpus_languages"].map(lambda joined: bool(wanted.intersection(joined.split(","))))
    if kinds:
        keep &= table["kind"].isin(set(kinds))
    return table.loc[keep, "dataset"].tolist()


def monolingual_datasets(data_dir: str | Path) -> list[str]:
    return [
        name for name in list_datasets(data_dir) if parse_dataset_name(name) and dataset_kind(name) == "monolingual"
    ]


# --------------------------------------------------------------------------- lexical overlap


def _fold_by_default(dataset: MeloDataset) -> bool:
    # The paper folded to ASCII except for Bulgarian, whose Cyrillic letters folding deletes.
    languages = [dataset.query_language] if dataset.query_language else []
    return folding_applies([*languages, *dataset.corpus_languages])


def min_edit_distances(dataset: MeloDataset, distance: Distance = "indel", fold: bool | None = None) -> np.ndarray:
    """Per query with at least one relevant element (query order): the normalised edit distance
    to its closest relevant corpus element, in [0, 1].

    ``distance="indel"`` is the paper's ``1 - fuzz.ratio / 100``; ``"levenshtein"`` divides the
    Levenshtein distance by the longer string's length. Strings are lowercased, then ASCII-folded
    when ``fold`` is true (None: as the paper, unless a language is written in a non-Latin script).
    """
    measure = _DISTANCES[distance]
    if fold is None:
        fold = _fold_by_default(dataset)

    def prepare(text: str) -> str:
        text = text.lower()
        return ascii_fold(text) if fold else text

    corpus_text = dict(zip(dataset.corpus_ids, dataset.corpus, strict=True))
    out = []
    for qid, query in zip(dataset.query_ids, dataset.queries, strict=True):
        relevant = dataset.relevant.get(qid)
        if relevant:
            q = prepare(query)
            out.append(min(measure(q, prepare(corpus_text[c])) for c in relevant))
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class OverlapHistogram:
    """Counts of the minimum distances in equal bins over [0, 1] (the last bin includes 1)."""

    edges: np.ndarray  # bins + 1 edges
    counts: np.ndarray  # per bin
    median: float
    n: int

    @property
    def probabilities(self) -> np.ndarray:
        """Share of queries per bin (the paper's y axis)."""
        return self.counts / self.n if self.n else np.zeros(len(self.counts))

    def to_frame(self) -> pd.DataFrame:
        """left, right, count, probability per bin: ready for a bar chart."""
        return pd.DataFrame(
            {"left": self.edges[:-1], "right": self.edges[1:], "count": self.counts, "probability": self.probabilities}
        )


def overlap_histogram(distances: np.ndarray, bins: int = 20) -> OverlapHistogram:
    distances = np.asarray(distances, dtype=np.float64)
    counts, edges = np.histogram(distances, bins=bins, range=(0.0, 1.0))
    median = float(np.median(distances)) if distances.size else math.nan
    return OverlapHistogram(edges=edges, counts=counts, median=median, n=int(distances.size))


def cached_min_edit_distances(
    data_dir: str | Path,
    name: str,
    distance: Distance = "indel",
    fold: bool | None = None,
    cache_dir: str | Path | None = None,
) -> np.ndarray:
    """``min_edit_distances`` of one dataset, remembered under ``<cache>/analysis`` and keyed by
    its files' names and bytes (``files_stamp``), so pages can call it on every rerun."""
    folder = resolve_dataset(data_dir, name)
    key = f"{name}-{distance}-{'auto' if fold is None else int(fold)}-v{OVERLAP_CACHE_VERSION}-{files_stamp(folder.resolve() / n for n in (QUERIES_FILE, CORPUS_FILE, ANNOTATIONS_FILE))}"
    target = Path(cache_dir or config.cache_dir()) / "analysis" / f"min-dist-{key}.pkl"
    cached = load_pickle(target)
    if isinstance(cached, np.ndarray):
        return cached
    distances = min_edit_distances(load_dataset(folder), distance, fold)
    save_pickle(target, distances)
    return distances


def overlap_table(
    data_dir: str | Path,
    datasets: Sequence[str] | None = None,
    distance: Distance = "indel",
    cache_dir: str | Path | None = None,
) -> pd.DataFrame:
    """Per dataset (default: every monolingual one): dataset, language (of the queries),
    n_queries (queries with a relevant element), median and mean minimum distance."""
    names = list(datasets) if datasets is not None else monolingual_datasets(data_dir)
    rows = []
    for name in names:
        distances = cached_min_edit_distances(data_dir, name, distance, cache_dir=cache_dir)
        parsed = parse_dataset_name(name)
        rows.append(
            {
                "dataset": name,
                "language": parsed.query_language if parsed else "",
                "n_queries": int(distances.size),
                "median": float(np.median(distances)) if distances.size else math.nan,
                "mean": float(distances.mean()) if distances.size else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["dataset", "language", "n_queries", "median", "mean"])


# --------------------------------------------------------------------------- correlations


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value over the pairs where both values are finite;
    (NaN, NaN) for fewer than 3 pairs or a constant side, where rho is undefined."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length ({xs.size} and {ys.size})")
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    if xs.size < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return math.nan, math.nan
    from scipy import stats  # imported here: scipy.stats alone takes ~1 s to import

    result = stats.spearmanr(xs, ys)
    return float(result.statistic), float(result.pvalue)


def metrics_frame(results: Mapping[tuple[str, str], Mapping[str, float]]) -> pd.DataFrame:
    """Long table (model, dataset, mrr, acc@1, ...) from {(model, dataset): metrics}, e.g.
    ``melo_core.evaluation.published.load_all_published(data_dir)``."""
    rows = [{"model": model, "dataset": dataset, **metrics} for (model, dataset), metrics in results.items()]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["model", "dataset", "mrr"])
    return frame.sort_values(["model", "dataset"], ignore_index=True)


def mrr_vs_overlap(metrics: pd.DataFrame, overlap: pd.DataFrame, metric: str = "mrr") -> pd.DataFrame:
    """model, dataset, median (overlap), mrr: one point per model and dataset in ``overlap``
    (figures 2a and 5a). ``metric`` picks another column of ``metrics``, kept under its name."""
    merged = metrics[["model", "dataset", metric]].merge(overlap[["dataset", "median"]], on="dataset", how="inner")
    return merged[["model", "dataset", "median", metric]].reset_index(drop=True)


def gain_vs_overlap(
    metrics: pd.DataFrame, models: str | Sequence[str], baseline: str, overlap: pd.DataFrame, metric: str = "mrr"
) -> pd.DataFrame:
    """model, baseline, dataset, median, gain (= metric of model − metric of baseline on the
    dataset): figures 2b and 5b, where the paper used char TF-IDF as the baseline."""
    models = [models] if isinstance(models, str) else list(models)
    base = metrics.loc[metrics["model"] == baseline, ["dataset", metric]].rename(columns={metric: "baseline_value"})
    chosen = metrics.loc[metrics["model"].isin(models), ["model", "dataset", metric]]
    merged = chosen.merge(base, on="dataset").merge(overlap[["dataset", "median"]], on="dataset")
    merged["gain"] = merged[metric] - merged["baseline_value"]
    merged["baseline"] = baseline
    return merged[["model", "baseline", "dataset", "median", "gain"]].reset_index(drop=True)


def rho_by_model(points: pd.DataFrame, x: str = "median", y: str = "mrr") -> pd.DataFrame:
    """model, n, rho, p: Spearman's rho of ``y`` against ``x`` per model (the paper's table of
    correlations); use ``y="gain"`` on ``gain_vs_overlap``'s output."""
    rows = []
    for model, group in points.groupby("model", sort=False):
        rho, p = spearman(group[x].to_numpy(), group[y].to_numpy())
        rows.append({"model": model, "n": len(group), "rho": rho, "p": p})
    return pd.DataFrame(rows, columns=["model", "n", "rho", "p"])


# --------------------------------------------------------------------------- benchmark views


def topk_curve(first_ranks: np.ndarray | Sequence[float], max_k: int = 100) -> np.ndarray:
    """Accuracy@k for k = 1..max_k: the share of queries whose first relevant element ranks at
    or above k (inf or NaN: not retrieved). Zeros when there are no queries, as ``metrics``."""
    if max_k < 1:
        raise ValueError("max_k must be >= 1")
    ranks = np.asarray(first_ranks, dtype=np.float64)
    if ranks.size == 0:
        return np.zeros(max_k)
    ranks = np.sort(np.where(np.isnan(ranks), np.inf, ranks))
    return np.searchsorted(ranks, np.arange(1, max_k + 1), side="right") / ranks.size


def topk_curves_frame(runs: Mapping[tuple[str, str], np.ndarray | Sequence[float]], max_k: int = 100) -> pd.DataFrame:
    """Long form model, dataset, k, accuracy from {(model, dataset): first ranks per query}."""
    frames = [
        pd.DataFrame(
            {"model": model, "dataset": dataset, "k": np.arange(1, max_k + 1), "accuracy": topk_curve(r, max_k)}
        )
        for (model, dataset), r in runs.items()
    ]
    if not frames:
        return pd.DataFrame(columns=["model", "dataset", "k", "accuracy"])
    return pd.concat(frames, ignore_index=True)


def published_topk_frame(
    metrics: pd.DataFrame, models: Sequence[str] | None = None, datasets: Sequence[str] | None = None
) -> pd.DataFrame:
    """model, dataset, k, accuracy at the ks a metrics table has (published runs: 1, 5, 10; the
    paper's figure 3), for curves of models whose per-query ranks are not available."""
    columns = {int(c.split("@")[1]): c for c in metrics.columns if re.fullmatch(r"acc@\d+", str(c))}
    chosen = metrics
    if models is not None:
        chosen = chosen[chosen["model"].isin(models)]
    if datasets is not None:
        chosen = chosen[chosen["dataset"].isin(datasets)]
    long = [
        pd.DataFrame({"model": chosen["model"], "dataset": chosen["dataset"], "k": k, "accuracy": chosen[column]})
        for k, column in sorted(columns.items())
    ]
    if not long:
        return pd.DataFrame(columns=["model", "dataset", "k", "accuracy"])
    # A table mixing our runs (k up to 100) with published ones (1, 5, 10) has NaN at the other ks.
    frame = pd.concat(long, ignore_index=True).dropna(subset=["accuracy"])
    return frame.sort_values(["model", "dataset", "k"], ignore_index=True)


def mrr_matrix(
    metrics: pd.DataFrame,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    metric: str = "mrr",
) -> pd.DataFrame:
    """Heatmap table: one row per model, one column per dataset, in the given orders (NaN where a
    model was not run on a dataset)."""
    matrix = metrics.pivot_table(index="model", columns="dataset", values=metric, aggfunc="first")
    matrix = matrix.reindex(
        index=list(models) if models is not None else matrix.index,
        columns=list(datasets) if datasets is not None else matrix.columns,
    )
    matrix.index.name, matrix.columns.name = "model", "dataset"
    return matrix


def diff_to_published(
    ours: pd.DataFrame,
    published: pd.DataFrame,
    model_map: Mapping[str, str] | None = None,
    metric: str = "mrr",
) -> pd.DataFrame:
    """model, published_model, dataset, ours, published, diff (ours − published) for every row of
    ``ours``. Our model names are mapped to published ones by ``model_map`` or, without it, by
    ``melo_core.evaluation.published.published_model`` (scorer spec -> published run); NaN where none."""
    frame = ours[["model", "dataset", metric]].rename(columns={metric: "ours"})
    lookup = model_map.get if model_map is not None else published_model
    frame["published_model"] = frame["model"].map(lookup)
    reference = published[["model", "dataset", metric]].rename(
        columns={"model": "published_model", metric: "published"}
    )
    frame = frame.merge(reference, on=["published_model", "dataset"], how="left")
    frame["diff"] = frame["ours"] - frame["published"]
    return frame[["model", "published_model", "dataset", "ours", "published", "diff"]]


# --------------------------------------------------------------------------- drill-down


def _concept(corpus_id: str, concept_of: Mapping[str, str]) -> str:
    # Datasets without concept_mapping.tsv still name the concept in the id: C<number>_<lang>_<n>.
    if corpus_id in concept_of:
        return concept_of[corpus_id]
    match = _CONCEPT_IN_ID.match(corpus_id)
    return match[1] if match else corpus_id


def query_results(dataset: MeloDataset, result: EvaluationResult, top_n: int = 5) -> pd.DataFrame:
    """Per evaluated query: query_id, query, gold_concepts, gold_forms, first_rank (inf: not
    retrieved), reciprocal_rank, top_forms, top_concepts, top_hits (whether each of the top
    ``top_n`` predictions is relevant). List columns hold tuples."""
    text_of = dict(zip(dataset.corpus_ids, dataset.corpus, strict=True))
    query_text = dict(zip(dataset.query_ids, dataset.queries, strict=True))
    first = result.first_ranks()
    rows = []
    for i, qid in enumerate(result.query_ids):
        relevant = dataset.relevant.get(qid, [])
        gold = tuple(dict.fromkeys(_concept(c, dataset.concept_of) for c in relevant))
        top = result.top_ids[i][:top_n]
        relevant_set = set(relevant)
        rows.append(
            {
                "query_id": qid,
                "query": query_text.get(qid, ""),
                "gold_concepts": gold,
                "gold_forms": tuple(text_of[c] for c in relevant),
                "first_rank": float(first[i]),
                "reciprocal_rank": float(reciprocal_rank(first[i])),
                "top_forms": tuple(text_of[c] for c in top),
                "top_concepts": tuple(_concept(c, dataset.concept_of) for c in top),
                "top_hits": tuple(c in relevant_set for c in top),
            }
        )
    columns = [
        "query_id",
        "query",
        "gold_concepts",
        "gold_forms",
        "first_rank",
        "reciprocal_rank",
        "top_forms",
        "top_concepts",
        "top_hits",
    ]
    return pd.DataFrame(rows, columns=columns)


def failures(queries: pd.DataFrame, k: int = 1) -> pd.DataFrame:
    """Rows whose first relevant element is not in the top k (rank > k, inf or NaN)."""
    return queries[~(queries["first_rank"] <= k)]


@dataclass(frozen=True)
class PairedComparison:
    """Two runs on the same queries; b is compared with a ("better": b ranks the gold higher)."""

    table: pd.DataFrame  # query_id, [query], first_rank_a, first_rank_b, rr_a, rr_b, delta, status
    n_pairs: int
    n_better: int
    n_worse: int
    n_same: int
    mean_rr_a: float
    mean_rr_b: float
    statistic: float  # Wilcoxon signed-rank statistic (NaN when every difference is zero)
    p_value: float  # two-sided; 1.0 when every difference is zero, NaN without pairs
    difference: Interval | None  # mean of b - a with its 95% bootstrap interval; None without pairs


def compare_queries(a: pd.DataFrame, b: pd.DataFrame, cluster_of: Mapping[str, str] | None = None) -> PairedComparison:
    """Join two per-query frames (query_id, first_rank; e.g. ``query_results``) on query_id and
    compare their reciprocal ranks, with a two-sided Wilcoxon signed-rank test on the pairs
    (scipy's defaults: zero differences dropped, as the MELO code's significance test) and a
    bootstrap interval of the difference in MRR. ``cluster_of``: query_id -> cluster (its gold
    concepts, ``gold_clusters``): the interval draws clusters and the test pairs their means, for
    other concepts than these queries'."""
    left = a[["query_id", *(["query"] if "query" in a.columns else []), "first_rank"]]
    table = left.merge(b[["query_id", "first_rank"]], on="query_id", suffixes=("_a", "_b"), validate="one_to_one")
    rr_a = reciprocal_rank(table["first_rank_a"])
    rr_b = reciprocal_rank(table["first_rank_b"])
    delta = rr_b - rr_a
    table["rr_a"], table["rr_b"], table["delta"] = rr_a, rr_b, delta
    table["status"] = np.select([delta > 0, delta < 0], ["better", "worse"], "same")
    n = len(table)
    clusters = None if cluster_of is None else [cluster_of[q] for q in table["query_id"]]
    test = paired_test(rr_a, rr_b, clusters=clusters) if n else None
    return PairedComparison(
        table=table,
        n_pairs=n,
        n_better=test.better if test else 0,
        n_worse=test.worse if test else 0,
        n_same=test.same if test else 0,
        mean_rr_a=float(rr_a.mean()) if n else math.nan,
        mean_rr_b=float(rr_b.mean()) if n else math.nan,
        statistic=test.statistic if test else math.nan,
        p_value=test.p_value if test else math.nan,
        difference=test.difference if test else None,
    )


def gold_clusters(queries: pd.DataFrame) -> dict[str, str]:
    """A stored run's queries (``db.runs.run_queries``) -> query_id: its gold corpus ids as one
    label. Queries naming the same gold succeed or fail together: resampling them as one cluster
    gives intervals for other concepts (``eval --resample concepts``)."""
    return {
        qid: " ".join(sorted({cid for cid, _ in gold}))
        for qid, gold in zip(queries["query_id"], queries["gold"], strict=True)
    }


def drilldown_table(queries: pd.DataFrame, concept_of: Mapping[str, str] | None = None, top_n: int = 5) -> pd.DataFrame:
    """A stored run's queries (``db.runs.run_queries``: gold and top as (corpus id, form) pairs)
    for reading: query_id, query, gold concepts, gold labels, first_rank, reciprocal_rank, and the
    top ``top_n`` predictions, a relevant one marked with ✔. An ISCO group's label reads with its
    code first ("ISCO 011 …"), as on the Link page: ISCO repeats a label across levels."""
    mapping = concept_of or {}

    def shown(cid: str, form: str) -> str:
        code = isco_code_of(_concept(cid, mapping))
        return f"ISCO {code} {form}" if code else form

    rows = []
    for row in queries.itertuples(index=False):
        gold_ids = {cid for cid, _ in row.gold}
        rows.append(
            {
                "query_id": row.query_id,
                "query": row.query_text,
                "gold concepts": " | ".join(dict.fromkeys(_concept(cid, mapping) for cid, _ in row.gold)),
                "gold labels": " | ".join(shown(cid, form) for cid, form in row.gold),
                "first_rank": row.first_rank,
                "reciprocal_rank": row.reciprocal_rank,
                **{
                    f"top {i}": (("✔ " if cid in gold_ids else "") + shown(cid, form))
                    for i, (cid, form) in enumerate(row.top[:top_n], start=1)
                },
            }
        )
    columns = ["query_id", "query", "gold concepts", "gold labels", "first_rank", "reciprocal_rank"]
    return pd.DataFrame(rows, columns=columns + [f"top {i}" for i in range(1, top_n + 1)])


def mean_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """model, k, accuracy, datasets: the curves of ``topk_curves_frame`` / ``published_topk_frame``
    averaged over datasets per model and k (each dataset weighs the same, as the paper's means)."""
    grouped = curves.groupby(["model", "k"], sort=True)["accuracy"]
    return grouped.agg(accuracy="mean", datasets="count").reset_index()
