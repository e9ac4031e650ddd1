"""Would candidates ranked by their calibrated probability serve a curator better than by score?

    python benchmarks/probability_order.py --data ../shared/melo --langs en

The calibrator (``melo_core.evaluation.calibration``) gives each of a term's top 10 candidates the
probability that it is a match, from features the ranking has (score, margins, ISCO group or
occupation, what leads the list, the scheme's size). It is learnt on other countries' crosswalks.
Here, leave one country out: for each crosswalk C, the fits without C (and, for the proposal
threshold, each other country's rows predicted without it too) score C's candidates, and the
list is read in three orders:

- ``best``: the pipeline's order, by fused score;
- ``best/by-probability``: the same ten candidates, most probable first;
- ``best/by-probability-group-led``: most probable first only where an ISCO group leads the list,
  as the Link page shows a list before the scheme's decisions say it maps to such groups.

Rows are `prepare`'s calibration rows (``collect_rows``: ``--terms`` per crosswalk train, as
`prepare` fits them) and, measured, up to ``--measured-terms`` per crosswalk linked the same way
(kept in the cache). ``--langs``: the label languages linked (a first use prepares English and the
scheme's language: every other crosswalk is then linked over English alone). Nothing here trains
on the crosswalk it measures.

Rows (experiment ``probability-order``, dataset the crosswalk, ``queries`` the terms measured):
``acc_at_1`` (the first candidate is one of the term's crosswalk matches), ``mrr`` (of the first
match within the ten), and at target precision ``--precision``, ``proposal_coverage`` and
``proposal_precision`` of the first candidates whose probability clears the threshold at which
other countries' first candidates (in that order) reached it; means over ``mean:crosswalks``.

``--titles``: job-ad titles (``vacancyTitle``, ``conceptUri``), a sample of ``--title-sample`` (seed
0) linked over English with every country's crosswalk titles as known mentions, as `link` ranks
them; their candidates get the calibrator `prepare` fitted on every country (no title trains it).
Rows: dataset ``titles-N``, ``acc_at_1`` and ``mrr`` (right: the title's concept), each order.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from melo_core import config  # noqa: E402
from melo_core.cli.arguments import at_least  # noqa: E402
from melo_core.esco.crosswalk import crosswalk_path  # noqa: E402
from melo_core.esco.taxonomy import ISCO_GROUP, Taxonomy, cached_taxonomy_from_melo  # noqa: E402
from melo_core.esco.titles import read_titles  # noqa: E402
from melo_core.evaluation.calibration import (  # noqa: E402
    FEATURES,
    TOP_K,
    CandidateRows,
    Fits,
    calibrated_codes,
    collect_rows,
    load_calibrator,
    out_of_fold,
    precision_curve,
    shown_positions,
    threshold_on_curve,
)
from melo_core.evaluation.effort import PROPOSAL_SHORTFALL  # noqa: E402
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402
from melo_core.linking.pipeline import Pipeline, PipelineDefinition, crosswalk_mentions_of, load_pipeline  # noqa: E402

ORDERS = ("score", "probability", "group-led")
NAMES = {"score": "", "probability": "/by-probability", "group-led": "/by-probability-group-led"}


def order_of(probabilities: np.ndarray, led_by_group: bool, order: str) -> np.ndarray:
    """Positions of one list's candidates in ``order``: by score (as linked), by probability, or as
    the Link page shows them (``shown_positions``: by probability only where an ISCO group leads)."""
    if order == "probability":
        return np.argsort(-probabilities, kind="stable")
    return np.array(shown_positions(list(probabilities), led_by_group and order == "group-led"), dtype=int)


def lists(rows: CandidateRows) -> list[slice]:
    """Each term's candidates: rows from one rank 1 to the next."""
    starts = np.flatnonzero(rows.ranks == 1)
    return [slice(s, e) for s, e in zip(starts, [*starts[1:], len(rows)], strict=True)]


def firsts(rows: CandidateRows, probabilities: np.ndarray, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per term: the first candidate's probability and label in ``order``, and the reciprocal rank of
    its first match (0 when none of the ten is one)."""
    shown, right, reciprocal = [], [], []
    for term in lists(rows):
        p, labels = probabilities[term], rows.labels[term]
        led = bool(rows.features[term.start, FEATURES.index("isco_group")])
        ranking = order_of(p, led, order)
        shown.append(p[ranking[0]])
        right.append(labels[ranking[0]])
        hits = np.flatnonzero(labels[ranking] > 0)
        reciprocal.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
    return np.array(shown), np.array(right), np.array(reciprocal)


def title_rows(definition: PipelineDefinition, taxonomy: Taxonomy, data: Path, path: Path,
               sample: int) -> list[dict[str, object]]:  # fmt: skip
    """Job-ad titles in each order, under the calibrator fitted on every country."""
    calibrator = load_calibrator(definition.name)
    if calibrator is None:
        raise SystemExit(f"no calibrator for {definition.name}: run `prepare --pipeline {definition.name}` first")
    titles = [(title, uri) for title, uri in read_titles(path) if title and uri]
    random.Random(0).shuffle(titles)
    titles = titles[:sample]
    pipeline = Pipeline(definition, taxonomy, ["en"], show_progress=False)
    pipeline.set_mentions(crosswalk_mentions_of(data, definition.mention_relations, None))
    lists = pipeline.link([title for title, _ in titles], top_k=TOP_K, query_language="en")
    rows: list[dict[str, object]] = []
    probabilities = [np.array(calibrator.probabilities(candidates, "en", None)) for candidates in lists]
    for order in ORDERS:
        right, reciprocal = [], []
        for (_, uri), candidates, p in zip(titles, lists, probabilities, strict=True):
            led = bool(candidates) and candidates[0].kind == ISCO_GROUP
            hits = [i for i, at in enumerate(order_of(p, led, order)) if candidates[at].concept_uri == uri]
            right.append(float(bool(hits) and hits[0] == 0))
            reciprocal.append(1.0 / (hits[0] + 1) if hits else 0.0)
        name = definition.name + NAMES[order]
        print(f"titles-{len(titles)} {name}: acc@1 {np.mean(right):.4f}, mrr {np.mean(reciprocal):.4f}")
        rows += [{"dataset": f"titles-{len(titles)}", "pipeline": name, "metric": metric, "value": round(value, 4),
                  "queries": len(titles), "seconds": ""}
                 for metric, value in (("acc_at_1", float(np.mean(right))), ("mrr", float(np.mean(reciprocal))))]  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--langs", default="en", help="label languages linked, comma-separated (as prepared)")
    parser.add_argument("--terms", type=at_least(1), default=150, help="training terms per crosswalk, as prepare")
    parser.add_argument("--measured-terms", type=at_least(1), default=1000, help="terms measured per crosswalk")
    parser.add_argument("--precision", type=float, default=0.95)
    parser.add_argument("--titles", help="job-ad titles (vacancyTitle, conceptUri) measured too")
    parser.add_argument("--title-sample", type=at_least(1), default=1000, help="titles measured (seed 0)")
    parser.add_argument("--titles-only", action="store_true", help="measure the titles alone")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    data = Path(args.data)
    definition = load_pipeline(args.pipeline)
    taxonomy = cached_taxonomy_from_melo(data)
    languages = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    codes = calibrated_codes(data)
    rows = [] if args.titles_only else crosswalk_rows(args, definition, taxonomy, data, languages, codes)
    if args.titles:
        rows += title_rows(definition, taxonomy, data, Path(args.titles), args.title_sample)
    if not args.no_record:
        command = " ".join(["python benchmarks/probability_order.py", *sys.argv[1:]])
        files = [crosswalk_path(data, code) for code in codes] + ([Path(args.titles)] if args.titles else [])
        append_results(RESULTS_FILE, "probability-order", rows, provenance([args.pipeline], files, command))
    return 0


def crosswalk_rows(args: argparse.Namespace, definition: PipelineDefinition, taxonomy: object, data: Path,
                   languages: list[str], codes: list[str]) -> list[dict[str, object]]:  # fmt: skip
    """Each crosswalk's terms in each order, leave one country out."""

    def rows_of(terms: int) -> CandidateRows:
        return collect_rows(definition, taxonomy, data, codes, terms, languages=languages,
                            on_progress=lambda message: print(message, file=sys.stderr))  # fmt: skip

    training, measured = rows_of(args.terms), rows_of(args.measured_terms)
    fits: Fits = {}
    held_out = out_of_fold(training, definition.name, fits, measured=measured)  # each crosswalk without its country
    table: dict[tuple[str, str], dict[str, float]] = {}
    for country in sorted(set(measured.countries)):
        others = training.of_countries([country], keep=False)
        predicted = out_of_fold(others, definition.name, fits, frozenset([country]))
        mine = measured.of_countries([country])
        probabilities = held_out[np.array([c == country for c in measured.countries])]
        for order in ORDERS:
            line = threshold_on_curve(*precision_curve(*firsts(others, predicted, order)[:2]), args.precision)
            for code in sorted(set(mine.datasets)):
                of_code = np.array([d == code for d in mine.datasets])
                shown, right, reciprocal = firsts(mine.where(of_code), probabilities[of_code], order)
                proposed = shown >= line if line is not None else np.zeros(len(shown), dtype=bool)
                metrics = {"acc_at_1": right.mean(), "mrr": reciprocal.mean(), "queries": float(len(shown)),
                           "proposal_coverage": proposed.mean()}  # fmt: skip
                if proposed.any():
                    metrics["proposal_precision"] = right[proposed].mean()
                table[(code, order)] = metrics
    pipelines = {order: definition.name + NAMES[order] for order in ORDERS}
    rows: list[dict[str, object]] = []
    for (code, order), metrics in sorted(table.items()):
        terms = int(metrics.pop("queries"))
        rows += [{"dataset": code, "pipeline": pipelines[order], "metric": metric, "value": round(float(value), 4),
                  "queries": terms, "seconds": ""} for metric, value in metrics.items()]  # fmt: skip
    for order in ORDERS:
        of_order = {code: m for (code, o), m in table.items() if o == order}
        means = {metric: float(np.mean([m[metric] for m in of_order.values()])) for metric in ("acc_at_1", "mrr",
                                                                                          "proposal_coverage")}  # fmt: skip
        floor = args.precision - PROPOSAL_SHORTFALL
        reached = sum(m.get("proposal_precision", 0.0) >= floor for m in of_order.values())
        print(f"{pipelines[order]}: " + ", ".join(f"{k} {v:.4f}" for k, v in means.items())
              + f", crosswalks at {floor:.2f} or more: {reached} of {len(of_order)}")  # fmt: skip
        rows += [{"dataset": "mean:crosswalks", "pipeline": pipelines[order], "metric": metric,
                  "value": round(value, 4), "queries": len(of_order), "seconds": ""} for metric, value in means.items()]  # fmt: skip
        rows.append({"dataset": "mean:crosswalks", "pipeline": pipelines[order], "metric": "proposal_precision_reached",
                     "value": reached, "queries": len(of_order), "seconds": ""})  # fmt: skip
    for code in sorted({code for code, _ in table}):
        print(f"{code}: " + "; ".join(f"{order} acc@1 {table[(code, order)]['acc_at_1']:.3f} mrr "
                                      f"{table[(code, order)]['mrr']:.3f}" for order in ORDERS))  # fmt: skip
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
