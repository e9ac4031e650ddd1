"""How the calibrated confidence, learnt on national crosswalks, fares on job-ad titles, and what a
scheme's own decisions do to it.

    python benchmarks/calibration_titles.py --data ../shared/melo --titles ../shared/jobbert/titles.csv

A sample of the validation titles (``--sample``, seed 0) is linked with the prepared pipeline over
English, with every country's crosswalk titles as known mentions, as `link` ranks them. Each title's
top 10 candidates get the probability of the calibrator `prepare` fitted on every country
(``load_calibrator(PIPELINE)``); a candidate is right when it is the title's concept. The titles are
taken as one scheme, decided in sample order: the first K give the shift the Link page fits
(``scheme_offset``, under the calibrator's prior) and the titles after the first ``HELD`` are
measured, unshifted and shifted, and as `propose` would propose them (the first candidate at or above
``threshold_for(target)``, the shift applied only down, ``db.proposals.cautious``).

Rows (dataset ``titles-N``): experiment ``calibration-titles``, ``ece`` and ``ece_first`` of all N
and ``ece_adapted`` of the titles after ``HELD`` once the first 25 shifted them; experiment
``proposal-shift``, ``proposal_precision`` and ``proposal_coverage`` at 0.95, pipelines
``PIPELINE/95-none``, ``PIPELINE/95-down-25``, ``PIPELINE/95-down-first-25`` (the shift fitted on
the decided titles' first candidates only) and ``PIPELINE/95-down-cascade-25`` (on each decided
title's candidates down to its concept). The other figures (50 to 200 decided titles, targets
0.90 and 0.80) are printed. Measure only: the titles are never trained on.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from db.proposals import cautious  # noqa: E402
from melo_core import config  # noqa: E402
from melo_core.cli.arguments import at_least  # noqa: E402
from melo_core.esco.crosswalk import crosswalk_path, list_crosswalks  # noqa: E402
from melo_core.esco.taxonomy import cached_taxonomy_from_melo  # noqa: E402
from melo_core.evaluation.calibration import (  # noqa: E402
    MIN_SCHEME_TERMS,
    TOP_K,
    expected_calibration_error,
    load_calibrator,
    scheme_offset,
    shift_probabilities,
)
from melo_core.evaluation.effort import PROPOSAL_PRECISION  # noqa: E402
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402
from melo_core.linking.pipeline import Pipeline, crosswalk_mentions_of, load_pipeline  # noqa: E402

HELD = 200  # the titles a scheme's shift may be fitted on; those after them are measured
DECIDED = (25, 50, 100, 200)
TARGETS = (0.95, 0.9, 0.8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--titles", default=str(ROOT.parent / "shared" / "jobbert" / "titles.csv"))
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--sample", type=at_least(HELD + 1), default=1000, help="titles linked (default 1000)")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    data = Path(args.data)
    command = " ".join(["python benchmarks/calibration_titles.py", *sys.argv[1:]])
    origin = provenance([args.pipeline], [Path(args.titles), *(crosswalk_path(data, c) for c in list_crosswalks(data))],
                        command)  # fmt: skip
    with open(args.titles, encoding="utf-8", newline="") as handle:
        titles = [(r["vacancyTitle"], r["conceptUri"]) for r in csv.DictReader(handle)]
    random.Random(0).shuffle(titles)
    titles = titles[: args.sample]
    calibrator = load_calibrator(args.pipeline)
    if calibrator is None:
        raise SystemExit(f"no calibrator for {args.pipeline}: run `prepare --pipeline {args.pipeline}` first")
    definition = load_pipeline(args.pipeline)
    pipeline = Pipeline(definition, cached_taxonomy_from_melo(data), ["en"], show_progress=False)
    pipeline.set_mentions(crosswalk_mentions_of(data, definition.mention_relations, None))
    began = time.perf_counter()
    lists = pipeline.link([title for title, _ in titles], top_k=TOP_K, query_language="en")
    seconds = round(time.perf_counter() - began, 1)
    shown = [(np.array(calibrator.probabilities(candidates, "en", None)),
              np.array([float(c.concept_uri == uri) for c in candidates])) for (_, uri), candidates in zip(titles, lists, strict=True)]  # fmt: skip
    shown = [(p, right) for p, right in shown if len(p)]
    dataset = f"titles-{len(titles)}"

    def row(metric: str, value: float, queries: int, name: str = args.pipeline) -> dict[str, object]:
        return {"dataset": dataset, "pipeline": name, "metric": metric, "value": round(float(value), 6),
                "queries": queries, "seconds": seconds}  # fmt: skip

    printed: list[dict[str, object]] = []  # figures shown, not recorded (docs/benchmarks.md keeps to 300 lines)
    shifts: list[dict[str, object]] = []

    def pooled(terms: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate([p for p, _ in terms]), np.concatenate([r for _, r in terms])

    later = shown[HELD:]
    offsets = {0: 0.0, **{k: scheme_offset(*pooled(shown[:k]), calibrator.offset_spread) for k in DECIDED}}
    # fitted on the decided titles' first candidates only: what proposals are made of
    firsts = {k: scheme_offset([p[0] for p, _ in shown[:k]], [r[0] for _, r in shown[:k]], calibrator.offset_spread)
              for k in DECIDED}  # fmt: skip
    # fitted on each decided title's candidates down to its concept (all ten where it is not among them)
    read = [(p[: int(np.argmax(r)) + 1], r[: int(np.argmax(r)) + 1]) if r.any() else (p, r) for p, r in shown]
    cascades = {k: scheme_offset(*pooled(read[:k]), calibrator.offset_spread) for k in DECIDED}
    rows = [row("ece", expected_calibration_error(*pooled(shown)), len(shown)),
            row("ece_first", expected_calibration_error([p[0] for p, _ in shown], [r[0] for _, r in shown]), len(shown))]  # fmt: skip
    for k in DECIDED:  # recorded: after the first MIN_SCHEME_TERMS (the Link page's), printed: the others
        probabilities, right = pooled(later)
        ece = expected_calibration_error(shift_probabilities(probabilities, offsets[k]), right)
        if k == MIN_SCHEME_TERMS:
            rows.append(row("ece_adapted", ece, len(later)))
        else:
            printed.append(row("ece_adapted", ece, len(later), f"{args.pipeline}/after-{k}"))
    for target in TARGETS:  # as `propose` proposes: unshifted, then shifted down after 25 and 100 titles
        threshold = calibrator.threshold_for(target)
        for k in (0, MIN_SCHEME_TERMS, 100):
            first = shift_probabilities([p[0] for p, _ in later], cautious(offsets[k]))
            proposed = first >= threshold if threshold is not None else np.zeros(len(later), dtype=bool)
            right = np.array([r[0] for _, r in later])[proposed]
            name = f"{args.pipeline}/{round(target * 100)}-{'none' if k == 0 else f'down-{k}'}"
            kept = shifts if target == PROPOSAL_PRECISION and k in (0, MIN_SCHEME_TERMS) else printed
            kept.append(row("proposal_coverage", proposed.mean(), len(later), name))
            if proposed.any():
                kept.append(row("proposal_precision", right.mean(), int(proposed.sum()), name))
            for rule, fitted in (("first", firsts), ("cascade", cascades)) if k else ():  # the other fits
                first = shift_probabilities([p[0] for p, _ in later], cautious(fitted[k]))
                proposed = first >= threshold if threshold is not None else np.zeros(len(later), dtype=bool)
                name = f"{args.pipeline}/{round(target * 100)}-down-{rule}-{k}"
                kept.append(row("proposal_coverage", proposed.mean(), len(later), name))
                if proposed.any():
                    right = np.array([r[0] for _, r in later])[proposed]
                    kept.append(row("proposal_precision", right.mean(), int(proposed.sum()), name))
    for r in [*rows, *shifts, *printed]:
        print(f"{r['pipeline']:<18} {r['metric']:<20} {r['value']:.4f}  ({r['queries']})")
    print(f"offsets after {', '.join(f'{k}: {offsets[k]:+.3f}' for k in DECIDED)}; first candidates only: "
          f"{', '.join(f'{k}: {firsts[k]:+.3f}' for k in DECIDED)}; cascade: "
          f"{', '.join(f'{k}: {cascades[k]:+.3f}' for k in DECIDED)}; linked in {seconds} s")  # fmt: skip
    if not args.no_record:
        append_results(RESULTS_FILE, "calibration-titles", rows, origin)
        append_results(RESULTS_FILE, "proposal-shift", shifts, origin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
