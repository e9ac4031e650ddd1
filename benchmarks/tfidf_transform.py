"""Time the TF-IDF transform of many texts (a lexical component's known mentions, or a bulk file):
ESCO labels of a few languages through the fitted transformer the linker and ``eval`` use.

    python benchmarks/tfidf_transform.py --data ../shared/melo --texts 70000 --repeat 3

Fits char (1-3) and word TF-IDF on the labels, then transforms the first ``--texts`` of them;
prints the best of ``--repeat`` runs and a digest of the matrix (equal digests: equal matrices).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.cli.arguments import at_least
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.scorers.text import TextPrep
from melo_core.scorers.tfidf import TfidfScorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--langs", default="en,de,fr,nl,es")
    parser.add_argument("--texts", type=at_least(1), default=70_000)
    parser.add_argument("--repeat", type=at_least(1), default=3)
    args = parser.parse_args()

    labels = [f.text for f in cached_taxonomy_from_melo(args.data).surface_forms(args.langs.split(","))]
    texts = labels[: args.texts]
    for analyzer, ngrams in (("char", (1, 3)), ("word", (1, 1))):
        scorer = TfidfScorer(analyzer, TextPrep(lowercase=True), analyzer=analyzer, ngram_range=ngrams)
        scorer.fit(labels)
        transformer = scorer._vectorizer
        seconds = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            matrix = transformer.transform(texts)
            seconds.append(time.perf_counter() - start)
        digest = hashlib.sha256(matrix.indptr.tobytes() + matrix.indices.tobytes() + matrix.data.tobytes())
        print(f"{analyzer}: {len(texts)} texts of {len(labels)} labels, best of {args.repeat} {min(seconds):.2f} s, "
              f"{matrix.nnz} non-zeros, sha256 {digest.hexdigest()[:16]}")  # fmt: skip


if __name__ == "__main__":
    main()
