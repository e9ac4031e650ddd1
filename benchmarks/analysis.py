"""Numbers behind the analysis pages, for docs/benchmarks.md.

- Lexical overlap of the 24 monolingual datasets (the paper's figures 1 and 4): median minimum
  normalised edit distance per dataset, time to compute it cold and from the cache.
- Spearman's rho of each published model's MRR against that median (figures 2 and 5), and of
  the gain of bi-encoders over char TF-IDF.
- Run storage: loading the published baselines, and saving one full evaluation with per-query rows.

    MELO_DATA=../shared/melo .venv/bin/python benchmarks/analysis.py [--db sqlite:///tmp/runs.db]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from db.runs import import_published, save_run
from db.store import Store
from melo_core import config
from melo_core.esco.datasets import load_dataset, resolve_dataset
from melo_core.evaluation.analysis import gain_vs_overlap, metrics_frame, mrr_vs_overlap, overlap_table, rho_by_model
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.evaluation.published import load_all_published
from melo_core.scorers import ScorerContext, create_scorer

MODELS = ("edit_distance", "char_tf_idf", "bm25", "muse_cnn", "me5", "openai")
BI_ENCODERS = ("muse_cnn", "me5", "openai")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--db", help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--save-dataset", default="deu_q_de_c_de", help="dataset of the timed save_run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        overlap = overlap_table(args.data, cache_dir=cache)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        overlap_table(args.data, cache_dir=cache)
        warm = time.perf_counter() - started
    print(f"overlap_table: {len(overlap)} monolingual datasets, cold {cold:.2f} s, warm {warm * 1000:.0f} ms")
    print(overlap.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    metrics = metrics_frame(load_all_published(args.data))
    points = mrr_vs_overlap(metrics[metrics["model"].isin(MODELS)], overlap)
    print("\nSpearman rho, published MRR vs median distance (monolingual datasets)")
    print(rho_by_model(points).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    gains = gain_vs_overlap(metrics, list(BI_ENCODERS), "char_tf_idf", overlap)
    print("\nSpearman rho, gain over char_tf_idf vs median distance")
    print(rho_by_model(gains, y="gain").to_string(index=False, float_format=lambda v: f"{v:.3g}"))

    with tempfile.TemporaryDirectory() as folder:
        url = args.db or f"sqlite:///{Path(folder) / 'runs.db'}"
        with Store(url, create=True) as store:
            started = time.perf_counter()
            added = import_published(store, args.data)
            print(f"\nimport_published: {added} runs in {time.perf_counter() - started:.2f} s ({store.display_url})")
            dataset = load_dataset(resolve_dataset(args.data, args.save_dataset))
            scorer = create_scorer("edit-distance", ScorerContext(dataset.query_language, dataset.corpus_languages))
            result = evaluate(dataset, scorer, Protocol("trec", 100))
            started = time.perf_counter()
            run_id = save_run(store, result, dataset, scorer="edit-distance")
            seconds = time.perf_counter() - started
            print(f"save_run: {len(result.query_ids)} queries of {dataset.name} in {seconds:.2f} s (run {run_id})")


if __name__ == "__main__":
    main()
