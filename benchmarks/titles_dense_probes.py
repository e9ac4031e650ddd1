"""Two cheap probes of a dense encoder on the job-ad titles, outside any pipeline: is there
anything to gain before building it into one?

The encoder (default e5-esco, read through the embedding cache) ranks the English ESCO labels for
every title of the file, a concept scored by its best label, each label's cosine mixed with its
concept centroid's as `best` mixes them (``--centroid``, 0.2; no known mentions).
Then, on the same vectors:

- ``--wordllama W,...``: adds W times a WordLlama score, its best label's similarity. WordLlama:
  static token embeddings distilled from Llama 3, shipped inside the ``wordllama`` wheel; English.
  Needs ``pip install wordllama==0.4.0.post1``; not a MELO Studio dependency.
- ``--pipeline NAME``: WordLlama added to the pipeline's fused concept scores instead (its
  candidates only), linked as ``eval`` links.
- ``--hubness A,...``: subtracts A times each label's hubness, the mean cosine of its 10 nearest
  labels of other concepts (CSLS-style; the reference set is ESCO's own labels, never a title).

    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --wordllama 0.1,0.2,0.3,0.5 --hubness=-0.05,0.05,0.1,0.25
    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --wordllama 0.05,0.1,0.2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from scipy.special import digamma
from tqdm import tqdm

from melo_core.benchmarking import scorer_context
from melo_core.encoders.base import normalise_rows
from melo_core.encoders.cache import cached_encoder
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.scorers.dense import concept_centroids
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.titles import titles_dataset

HUB_NEIGHBOURS = 10
CHUNK = 1000


def wordllama_vectors(texts: list[str]) -> np.ndarray:
    try:
        import wordllama
    except ImportError:
        sys.exit("--wordllama needs `pip install wordllama==0.4.0.post1`")
    # 0.4.0's own lookup misses the tokenizer it ships (it looks in tokenizer/, the wheel has
    # tokenizers/); pointing its cache at the package finds both files without a download.
    package = Path(wordllama.__file__).parent
    model = wordllama.WordLlama.load(cache_dir=package, disable_download=True)
    return normalise_rows(model.embed(texts))


def hubness(labels: np.ndarray, concept: np.ndarray) -> np.ndarray:
    out = np.zeros(len(labels), dtype=np.float32)
    for begin in range(0, len(labels), CHUNK):
        sims = labels[begin : begin + CHUNK] @ labels.T
        sims[concept[begin : begin + CHUNK, None] == concept[None, :]] = -1.0
        out[begin : begin + CHUNK] = -np.partition(-sims, HUB_NEIGHBOURS, axis=1)[:, :HUB_NEIGHBOURS].mean(1)
    return out


def expected_reciprocal_rank(above: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """1/rank with ties broken at random (``tied`` counts the gold): concepts sharing a label tie,
    and counting only those above would favour the gold."""
    harmonic = lambda n: digamma(n + 1.0) + np.euler_gamma  # noqa: E731  H(n) = 1 + 1/2 + ... + 1/n
    return (harmonic(above + tied) - harmonic(above)) / tied


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="MELO data folder (the ESCO labels)")
    parser.add_argument("--titles", required=True, help="titles CSV (vacancyTitle, conceptUri)")
    parser.add_argument("--encoder", default="e5-esco")
    parser.add_argument("--centroid", type=float, default=0.2, help="weight of the concept centroid's cosine")
    parser.add_argument("--wordllama", type=floats, default=[], help="weights of the WordLlama similarity")
    parser.add_argument("--hubness", type=floats, default=[], help="weights of the hubness penalty")
    parser.add_argument("--pipeline", help="add WordLlama to this pipeline's fused concept scores "
                        "(as `eval` links: known mentions, descriptions) instead of the encoder's")  # fmt: skip
    args = parser.parse_args()
    if args.pipeline and args.hubness:
        parser.error("--hubness probes the encoder alone; leave it out with --pipeline")

    dataset, report = titles_dataset(args.titles, cached_taxonomy_from_melo(args.data), "en")
    print(report.describe(), f"over {len(dataset.corpus):,} English labels", flush=True)
    concepts = {uri: i for i, uri in enumerate(sorted(set(dataset.concept_of.values())))}
    concept = np.array([concepts[dataset.concept_of[c]] for c in dataset.corpus_ids])
    gold = np.array([concepts[dataset.concept_of[dataset.relevant[q][0]]] for q in dataset.query_ids])
    order = np.argsort(concept, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(concept[order])) + 1]

    if args.pipeline:
        pipeline = PipelineScorer(load_pipeline(args.pipeline), scorer_context(args.data, dataset, args.pipeline))
        pipeline.fit(dataset.corpus)
    else:
        encoder = cached_encoder(args.encoder)
        labels = normalise_rows(encoder.encode(dataset.corpus, "passage"))
        queries = normalise_rows(encoder.encode(dataset.queries, "query"))
        centroids = concept_centroids(labels, concept, len(concepts))[concept]  # per label, its concept's
    variants: dict[str, tuple[float, float]] = {f"{args.pipeline or args.encoder} alone": (0.0, 0.0)}
    variants |= {f"+ {w} x wordllama": (w, 0.0) for w in args.wordllama}
    variants |= {f"- {a} x hubness": (0.0, a) for a in args.hubness}
    if args.wordllama:
        wl_labels, wl_queries = wordllama_vectors(dataset.corpus), wordllama_vectors(dataset.queries)
    hubs = hubness(labels, concept) if args.hubness else np.zeros(len(dataset.corpus), dtype=np.float32)

    def best_label(sims: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(sims[:, order], starts, axis=1)

    reciprocal: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {name: [] for name in variants}
    for begin in tqdm(range(0, len(dataset.queries), CHUNK), desc="titles", unit="chunk", file=sys.stderr):
        if args.pipeline:  # -inf outside the pipeline's candidates: they stay last
            dense = pipeline.score(dataset.queries[begin : begin + CHUNK])
        else:
            chunk = queries[begin : begin + CHUNK]
            dense = (1 - args.centroid) * (chunk @ labels.T) + args.centroid * (chunk @ centroids.T)
        static = best_label(wl_queries[begin : begin + CHUNK] @ wl_labels.T) if args.wordllama else 0.0
        wanted = gold[begin : begin + CHUNK]
        for name, (w, a) in variants.items():
            # each encoder scores a concept by its best label, then the scores add up, as in a pipeline
            scores = best_label(dense - a * hubs) + w * static
            at_gold = scores[np.arange(len(wanted)), wanted][:, None]
            above, tied = (scores > at_gold).sum(1), (scores == at_gold).sum(1)
            reciprocal[name].append((expected_reciprocal_rank(above, tied), (above == 0) / tied, tied > 1))
    print("| variant | MRR | acc@1 | gold tied with another concept |\n|---|---|---|---|")
    for name, parts in reciprocal.items():
        rr, first, tie = (np.concatenate(column) for column in zip(*parts, strict=True))
        print(f"| {name} | {rr.mean():.4f} | {first.mean():.4f} | {tie.mean():.1%} |")


if __name__ == "__main__":
    main()
