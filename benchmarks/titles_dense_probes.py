"""Cheap probes of a dense encoder on the job-ad titles, outside any pipeline: is there
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
- ``--late-interaction W,...`` (with ``--pipeline``): adds W times a token-level match (ColBERT's
  MaxSim, no training) to the pipeline's first ``--late-top`` concepts: e5-esco's last-layer token
  vectors of the title and of each label, every label token matched to its nearest title token
  (``recall``: words the title adds, such as "(Native Thai)", cost nothing), every title token to
  its nearest label token (``precision``), or their harmonic mean (``f1``), as BERTScore does; a
  concept scores its best label.
- ``--add-encoder SPEC --add-weights W,...``: adds W times a second encoder's score (each label's
  cosine mixed with its concept centroid's, as ``--centroid``; a concept scores its best label),
  to the encoder's or, with ``--pipeline``, to the pipeline's fused concept scores.
- ``--alias-table`` (with ``--pipeline``): an alias table's exact match first, as entity linkers
  look a mention up before they score it: the concepts with an English label equal to the title
  once both are lowercased, folded and lemmatised (the lexical component's text preparation) rank
  above all others, in the pipeline's order.
- ``--pool T,...``: the encoder's ``@pool=T`` (``melo_core.scorers.dense.soft_pooled``): a concept
  scores the log-sum-exp of its labels' scores at temperature T instead of its best label's.

    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --wordllama 0.1,0.2,0.3,0.5 --hubness=-0.05,0.05,0.1,0.25 --pool 0.02,0.03,0.05,0.08
    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --wordllama 0.05,0.1,0.2
    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --late-interaction 0.05,0.1,0.2,0.4
    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --add-encoder st:models/minilm-esco --add-weights 0.1,0.2,0.3,0.5
    python benchmarks/titles_dense_probes.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --alias-table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from scipy.special import digamma
from tqdm import tqdm

from melo_core.arguments import at_least
from melo_core.benchmarking import scorer_context
from melo_core.encoders.base import normalise_rows
from melo_core.encoders.cache import cached_encoder
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.scorers.dense import concept_centroids, soft_pooled
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.text import TextPrep
from melo_core.titles import titles_dataset

HUB_NEIGHBOURS = 10
ALIAS = "alias table first"
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


class TokenVectors:
    """Last-layer token vectors of e5-esco, normalised, without the special and prompt tokens: one
    matrix of every text's tokens, ``starts[i]`` its first row for text ``i``."""

    def __init__(self, texts: list[str], batch: int = 128, cache: Path | None = None) -> None:
        if cache is not None and cache.is_file():
            saved = np.load(cache)
            self.vectors, self.starts = saved["vectors"], saved["starts"]
            if len(self.starts) == len(texts) + 1:
                return
        import torch
        from sentence_transformers import SentenceTransformer

        from melo_core.encoders.e5_esco_encoder import E5_ESCO_MODEL
        from melo_core.text import calm_capitals

        model = SentenceTransformer(str(E5_ESCO_MODEL.on_first_use("building")), device="cpu")
        tokenizer = model.tokenizer
        bert: Any = model[0].auto_model  # a transformers model: torch's Module types no call
        prompt = len(tokenizer("query:", add_special_tokens=False)["input_ids"])  # "▁query", ":"
        rows, lengths = [], []
        with torch.inference_mode():
            for begin in tqdm(range(0, len(texts), batch), desc="token vectors", unit="batch", file=sys.stderr):
                chunk = [f"query: {calm_capitals(t)}" for t in texts[begin : begin + batch]]
                encoded = tokenizer(chunk, padding=True, truncation=True, max_length=64, return_tensors="pt")
                hidden = bert(**encoded).last_hidden_state.numpy()
                for vectors, n in zip(hidden, encoded["attention_mask"].sum(1).tolist(), strict=True):
                    kept = vectors[1 + prompt : n - 1]  # after <s> and the prompt, before </s>
                    kept = kept if len(kept) else vectors[:1]  # an empty text keeps <s>
                    rows.append(normalise_rows(kept))
                    lengths.append(len(kept))
        self.vectors = np.concatenate(rows).astype(np.float32)
        self.starts = np.r_[0, np.cumsum(lengths)]
        if cache is not None:
            np.savez(cache, vectors=self.vectors, starts=self.starts)

    def of(self, texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of these texts stacked, and where each text begins among them."""
        spans = [np.arange(self.starts[t], self.starts[t + 1]) for t in texts]
        return self.vectors[np.concatenate(spans)], np.r_[0, np.cumsum([len(s) for s in spans])[:-1]]


def late_interaction(query: np.ndarray, labels: np.ndarray, begins: np.ndarray) -> dict[str, np.ndarray]:
    """MaxSim of one title's tokens against each label's (``begins``: each label's first row)."""
    sims = labels @ query.T  # label tokens x title tokens
    sizes = np.diff(np.r_[begins, len(labels)])
    recall = np.add.reduceat(sims.max(1), begins) / sizes
    precision = np.maximum.reduceat(sims, begins, axis=0).mean(1)
    return {"recall": recall, "precision": precision, "f1": 2 * recall * precision / (recall + precision)}


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
    parser.add_argument("--late-interaction", type=floats, default=[], help="weights of the token-level match")
    parser.add_argument("--add-encoder", help="a second encoder whose score is added (see --add-weights)")
    parser.add_argument("--add-weights", type=floats, default=[], help="weights of the --add-encoder score")
    parser.add_argument("--pool", type=floats, default=[], help="temperatures of @pool (a concept's log-sum-exp)")
    parser.add_argument("--token-cache", help="folder that keeps the token vectors between runs")
    parser.add_argument("--late-top", type=at_least(1), default=50, help="the pipeline's first concepts it re-scores")
    parser.add_argument("--alias-table", action="store_true", help="with --pipeline: concepts with a label "
                        "equal to the title (lowercased, folded, lemmatised) first")  # fmt: skip
    parser.add_argument("--pipeline", help="add WordLlama to this pipeline's fused concept scores "
                        "(as `eval` links: known mentions, descriptions) instead of the encoder's")  # fmt: skip
    args = parser.parse_args()
    if args.pipeline and (args.hubness or args.pool):
        parser.error("--hubness and --pool probe the encoder alone; leave them out with --pipeline")
    if bool(args.add_encoder) != bool(args.add_weights):
        parser.error("--add-encoder and --add-weights go together")
    if (args.late_interaction or args.alias_table) and not args.pipeline:
        parser.error("--late-interaction and --alias-table re-rank a pipeline's candidates; name it with --pipeline")

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
    variants: dict[str, tuple[float, float, float]] = {f"{args.pipeline or args.encoder} alone": (0.0, 0.0, 0.0)}
    variants |= {f"+ {w} x wordllama": (w, 0.0, 0.0) for w in args.wordllama}
    variants |= {f"- {a} x hubness": (0.0, a, 0.0) for a in args.hubness}
    variants |= {f"@pool={t}": (0.0, 0.0, t) for t in args.pool}
    added = {f"+ {w} x {args.add_encoder}": w for w in args.add_weights}
    late = {f"+ {w} x late interaction ({kind})": (kind, w) for kind in ("recall", "precision", "f1")
            for w in args.late_interaction}  # fmt: skip
    if args.alias_table:
        prepared = TextPrep(lemma_language="en").build()
        concepts_named: dict[str, set[int]] = {}
        for label, c in zip(dataset.corpus, concept, strict=True):
            concepts_named.setdefault(prepared(label), set()).add(int(c))
        named = [sorted(concepts_named.get(prepared(title), ())) for title in dataset.queries]
        print(f"{sum(map(bool, named)):,} titles equal a label of {sum(map(len, named)):,} concepts in all", flush=True)
    if late:
        keep = Path(args.token_cache) if args.token_cache else None
        label_tokens = TokenVectors(dataset.corpus, cache=keep / "labels.npz" if keep else None)
        title_tokens = TokenVectors(dataset.queries, cache=keep / "titles.npz" if keep else None)
    if args.wordllama:
        wl_labels, wl_queries = wordllama_vectors(dataset.corpus), wordllama_vectors(dataset.queries)
    if added:
        extra = cached_encoder(args.add_encoder)
        extra_labels = normalise_rows(extra.encode(dataset.corpus, "passage"))
        extra_queries = normalise_rows(extra.encode(dataset.queries, "query"))
        extra_centroids = concept_centroids(extra_labels, concept, len(concepts))[concept]
    hubs = hubness(labels, concept) if args.hubness else np.zeros(len(dataset.corpus), dtype=np.float32)

    def mixed(chunk: np.ndarray, label_vectors: np.ndarray, label_centroids: np.ndarray) -> np.ndarray:
        """Each label's cosine mixed with its concept centroid's, as `best` mixes them."""
        return (1 - args.centroid) * (chunk @ label_vectors.T) + args.centroid * (chunk @ label_centroids.T)

    def best_label(sims: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(sims[:, order], starts, axis=1)

    reciprocal: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
        name: [] for name in [*variants, *late, *added, *([ALIAS] if args.alias_table else [])]
    }

    def record(name: str, scores: np.ndarray, wanted: np.ndarray) -> None:
        at_gold = scores[np.arange(len(wanted)), wanted][:, None]
        above, tied = (scores > at_gold).sum(1), (scores == at_gold).sum(1)
        reciprocal[name].append((expected_reciprocal_rank(above, tied), (above == 0) / tied, tied > 1))

    for begin in tqdm(range(0, len(dataset.queries), CHUNK), desc="titles", unit="chunk", file=sys.stderr):
        if args.pipeline:  # -inf outside the pipeline's candidates: they stay last
            dense = pipeline.score(dataset.queries[begin : begin + CHUNK])
        else:
            dense = mixed(queries[begin : begin + CHUNK], labels, centroids)
        static = best_label(wl_queries[begin : begin + CHUNK] @ wl_labels.T) if args.wordllama else 0.0
        wanted = gold[begin : begin + CHUNK]
        for name, (w, a, t) in variants.items():
            # each encoder scores a concept by its best label, then the scores add up, as in a pipeline
            scores = best_label(soft_pooled(dense - a * hubs, concept, t)) + w * static
            record(name, scores, wanted)
        if added:
            second = best_label(mixed(extra_queries[begin : begin + CHUNK], extra_labels, extra_centroids))
            first = best_label(dense)
            for name, w in added.items():
                record(name, first + w * second, wanted)
        if args.alias_table:  # the named concepts above every other, in the pipeline's order among them
            fused = best_label(dense)
            lifted = np.where(np.isfinite(fused), fused, np.nanmin(np.where(np.isfinite(fused), fused, np.nan)) - 1)
            lift_by = lifted.max() - lifted.min() + 1
            for row, found in enumerate(named[begin : begin + CHUNK]):
                fused[row, found] = lifted[row, found] + lift_by
            record(ALIAS, fused, wanted)
        if late:
            fused, ends = best_label(dense), np.r_[starts[1:], len(order)]
            bonus = {kind: np.zeros_like(fused) for kind in ("recall", "precision", "f1")}
            for row, top in enumerate(np.argsort(-fused, axis=1)[:, : args.late_top]):
                top = top[np.isfinite(fused[row, top])]
                label_ids = np.concatenate([order[starts[c] : ends[c]] for c in top])
                owner = np.repeat(np.arange(len(top)), ends[top] - starts[top])
                rows, begins = label_tokens.of(label_ids)
                query, _ = title_tokens.of(np.array([begin + row]))
                for kind, per_label in late_interaction(query, rows, begins).items():
                    per_concept = np.full(len(top), -np.inf, dtype=np.float32)
                    np.maximum.at(per_concept, owner, per_label)
                    bonus[kind][row, top] = per_concept  # outside the first concepts: no bonus
            for name, (kind, w) in late.items():
                record(name, fused + w * bonus[kind], wanted)
    print("| variant | MRR | acc@1 | gold tied with another concept |\n|---|---|---|---|")
    for name, parts in reciprocal.items():
        rr, first, tie = (np.concatenate(column) for column in zip(*parts, strict=True))
        print(f"| {name} | {rr.mean():.4f} | {first.mean():.4f} | {tie.mean():.1%} |")


if __name__ == "__main__":
    main()
