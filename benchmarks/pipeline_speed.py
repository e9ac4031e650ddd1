"""Speed of the default pipeline as users meet it: warm latency per query, bulk throughput, memory.

    python benchmarks/pipeline_speed.py --data ../shared/melo --pipeline best \
        --scenario no:no,en --scenario de:de,en --scenario no:all --queries 200 --bulk 3000

Per scenario ``QUERY_LANG:LABEL_LANGS`` (``all``: the 21-language union): the pipeline as `link`
and the Link page build it (HNSW indexes, the data folder's crosswalks as known mentions, the
query's own country left out where it has one), warmed up, then single queries timed one by one
with real query encoding (the embedding cache is bypassed for queries), as a curator's page asks.
Queries are MELO queries of that language, drawn at random. The pipeline must be prepared
(`python -m melo_core prepare`); the script says so otherwise.

``--bulk N`` then times `python -m melo_core link --input` on N English job-ad titles
(``../shared/jobbert/titles.csv``, used here for timing only) in a fresh process: titles per
second after loading, and peak memory (max RSS).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.cli.arguments import at_least
from melo_core.esco.datasets import datasets_root, list_datasets, load_dataset, parse_dataset_name
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.linking.pipeline import (
    Pipeline,
    crosswalk_mentions_of,
    describe_missing,
    is_ready,
    load_pipeline,
    requirements,
)

ROOT = Path(__file__).resolve().parent.parent
COUNTRY_OF_LANGUAGE = {"no": "nor", "de": "deu", "fr": "fra", "en": "usa"}  # whose crosswalks are held out


def language_queries(data: str, language: str, n: int, seed: int = 0) -> list[str]:
    root = datasets_root(data)
    pool = sorted({q for name in list_datasets(data) if (p := parse_dataset_name(name)) and p.query_language == language
                   for q in load_dataset(root / name).queries})  # fmt: skip
    return random.Random(seed).sample(pool, min(n, len(pool)))


def scenario(args: argparse.Namespace, spec: str) -> None:
    query_language, _, label_languages = spec.partition(":")
    taxonomy = cached_taxonomy_from_melo(args.data)
    languages = None if label_languages in ("", "all") else label_languages.split(",")
    definition = load_pipeline(args.pipeline)
    held_out = COUNTRY_OF_LANGUAGE.get(query_language)
    mentions = [m for m in crosswalk_mentions_of(args.data, definition.mention_relations, held_out) if m[1] in taxonomy]
    needs = requirements(definition, taxonomy, languages, mentions=[t for t, _, _ in mentions])
    if not is_ready(needs):
        print(f"{spec}: {args.pipeline} is not ready ({describe_missing(needs)}); run "
              f"`python -m melo_core prepare --pipeline {args.pipeline} --langs {label_languages}`")  # fmt: skip
        return
    start = time.perf_counter()
    pipeline = Pipeline(definition, taxonomy, languages, show_progress=False, cache_queries=False)
    pipeline.set_mentions(mentions)
    linker = pipeline.linker(query_language)
    load = time.perf_counter() - start
    queries = language_queries(args.data, query_language, args.queries + 10)
    for query in queries[:10]:  # warm-up: lazy loads, BLAS threads, mention vectors
        linker.link([query])
    seconds = []
    for query in queries[10:]:
        began = time.perf_counter()
        linker.link([query], top_k=10)
        seconds.append(time.perf_counter() - began)
    ms = np.array(seconds) * 1000
    print(f"{args.pipeline} {query_language} -> {label_languages or 'all'}: {len(linker.texts):,} labels, "
          f"{len(linker.mentions):,} known mentions, {pipeline.variant_kind(query_language)} variant; "
          f"load {load:.1f} s; warm per query p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, "
          f"max {ms.max():.0f} ms over {len(ms)} queries; peak RSS {peak_rss_mb():,.0f} MB")  # fmt: skip


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bulk(args: argparse.Namespace) -> None:
    with open(args.titles, encoding="utf-8", newline="") as handle:
        titles = [row["vacancyTitle"] for row in csv.DictReader(handle)][: args.bulk]
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "titles.csv", Path(folder) / "links.csv"
        with source.open("w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows([["title"], *[[t] for t in titles]])
        command = [sys.executable, "-m", "melo_core", "link", "--data", args.data, "--pipeline", args.pipeline,
                   "--input", str(source), "--column", "title", "--out", str(out), "--langs", "en",
                   "--query-lang", "en"]  # fmt: skip
        began = time.perf_counter()
        result = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, cwd=ROOT)
        total = time.perf_counter() - began
        if result.returncode != 0:
            print(result.stderr[-2000:])
            return
        rss = next(int(line.split()[-1]) for line in result.stderr.splitlines() if "Maximum resident" in line)
        # tqdm's last report of the linking bar gives the linking time alone (after loading).
        bars = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("linking:")]
        linking = bars[-1] if bars else "?"
        print(f"bulk link --input: {len(titles):,} English job-ad titles against English labels, {args.pipeline}: "
              f"{total:.1f} s in all ({len(titles) / total:.1f} titles/s including loading); "
              f"last progress line: {linking.strip()}; peak RSS {rss / 1024:,.0f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--scenario", action="append", default=[], help="QUERY_LANG:LABEL_LANGS (repeatable)")
    parser.add_argument("--queries", type=at_least(1), default=200)
    parser.add_argument("--bulk", type=at_least(0), default=0, help="titles for the bulk link --input test (0: skip)")
    parser.add_argument("--titles", default=str(ROOT.parent / "shared" / "jobbert" / "titles.csv"))
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    for spec in args.scenario or ["no:no,en"]:
        scenario(args, spec)
    if args.bulk:
        bulk(args)


if __name__ == "__main__":
    main()
