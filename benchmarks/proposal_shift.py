"""Proposals with and without the shift a scheme's first decided terms give, on the calibration rows
that `prepare` kept.

    python benchmarks/proposal_shift.py --data ../shared/melo --pipeline best --langs en,no

For each crosswalk, the rows `prepare`'s calibration step linked (150 terms, their top 10 candidates,
``cache/calibration``, for the label languages ``--langs`` it prepared) are read back; the calibrator
fitted without the crosswalk's country (``models/calibration``) gives their probabilities. The
first ``MIN_SCHEME_TERMS`` terms count as decided on the Link page: their shift
(``scheme_offset``, under the calibrator's prior). The other terms' first candidates are proposed
where they clear ``threshold_for(target)``: unshifted, shifted only down (what `propose` does) and
shifted both ways. Right: the candidate is among the term's crosswalk matches.

``--accepts one``: the decided terms' curator accepts one concept per term, the first right one
shown (as on the Link page, where one is usually accepted), not every crosswalk match; the shift
``down-first`` is fitted on the decided terms' first candidates only, ``down-cascade`` on each decided
term's candidates down to its first accepted one (those a curator read): neither changes with that.

Rows (experiment ``proposal-shift``, dataset ``first-use-rows``, pipelines ``PIPELINE/95-none`` and
``PIPELINE/95-down``; with ``--accepts one``, ``PIPELINE/95-down/accepts-one`` and
``PIPELINE/95-down-first/accepts-one``, ``PIPELINE/95-down-cascade/accepts-one``): ``proposal_precision`` (pooled), ``proposal_coverage``,
``proposal_precision_reached`` (crosswalks whose proposals reach the target less 0.02, or that get
none). The other targets and rules are printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from db.proposals import cautious  # noqa: E402
from melo_core import config  # noqa: E402
from melo_core.esco.crosswalk import crosswalk_country, crosswalk_path, list_crosswalks  # noqa: E402
from melo_core.esco.taxonomy import cached_taxonomy_from_melo  # noqa: E402
from melo_core.evaluation.calibration import (  # noqa: E402
    MIN_SCHEME_TERMS,
    load_calibrator,
    plan_rows,
    scheme_offset,
    shift_probabilities,
)
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402
from melo_core.linking.pipeline import load_pipeline  # noqa: E402

TARGETS = (0.95, 0.9, 0.8)
# down-first: fitted on the decided terms' first candidates only; down-cascade: on each decided term's
# candidates down to its first accepted one (all ten where none was): those a curator read
RULES = ("none", "down", "both", "down-first", "down-cascade")
RECORDED = {
    "all": ((0.95, "none"), (0.95, "down")),
    "one": ((0.95, "down"), (0.95, "down-first"), (0.95, "down-cascade")),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--langs", help="the label languages `prepare --langs` prepared (default: all)")
    parser.add_argument(
        "--accepts",
        choices=("all", "one"),
        default="all",
        help="what the decided terms' curator accepts: every crosswalk match, or only the "
        "first right candidate shown (one concept per term)",
    )
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    data = Path(args.data)
    languages = args.langs.split(",") if args.langs else None
    command = " ".join(["python benchmarks/proposal_shift.py", *sys.argv[1:]])
    origin = provenance([args.pipeline], [crosswalk_path(data, c) for c in list_crosswalks(data)], command)
    plan = plan_rows(load_pipeline(args.pipeline), cached_taxonomy_from_melo(data), data, cache_dir=config.cache_dir(),
                     languages=languages)  # fmt: skip
    tally = {(t, rule): [0, 0, 0, 0] for t in TARGETS for rule in RULES}  # proposed, right, first candidates, reached
    for planned in plan:
        rows = planned.kept()
        calibrator = load_calibrator(args.pipeline, crosswalk_country(planned.code))
        if rows is None or calibrator is None:
            raise SystemExit(f"{planned.code}: no kept rows or calibrator; run `prepare --pipeline {args.pipeline}`")
        probabilities = calibrator.probabilities_of(rows.features)
        term = np.cumsum(rows.ranks == 1)
        decided = term <= MIN_SCHEME_TERMS
        matches = rows.labels.astype(bool)
        below_right = np.array([matches[(term == t) & (rows.ranks < r)].any()  # a right candidate above it
                                for t, r in zip(term, rows.ranks, strict=True)])  # fmt: skip
        # one: only each term's first right candidate is accepted
        accepted = matches & ~below_right if args.accepts == "one" else matches
        taught = accepted.astype(np.float64)
        offset = scheme_offset(probabilities[decided], taught[decided], calibrator.offset_spread)
        firsts = decided & (rows.ranks == 1)
        offset_first = scheme_offset(probabilities[firsts], taught[firsts], calibrator.offset_spread)
        read = decided & ~below_right  # down to the first accepted: the first right one, whatever the habit
        offset_cascade = scheme_offset(probabilities[read], taught[read], calibrator.offset_spread)
        later = ~decided & (rows.ranks == 1)
        for target in TARGETS:
            threshold = calibrator.threshold_for(target)
            for rule, shift in (("none", 0.0), ("down", cautious(offset)), ("both", offset),
                                ("down-first", cautious(offset_first)),
                                ("down-cascade", cautious(offset_cascade))):  # fmt: skip
                first = shift_probabilities(probabilities[later], shift)
                proposed = first >= threshold if threshold is not None else np.zeros(len(first), dtype=bool)
                right = int(rows.labels[later][proposed].sum())
                counts = tally[(target, rule)]
                counts[0] += int(proposed.sum())
                counts[1] += right
                counts[2] += len(first)
                counts[3] += int(not proposed.any() or right / proposed.sum() >= target - 0.02)
    out: list[dict[str, object]] = []  # recorded: 0.95 unshifted and down; printed: the rest (benchmarks.md: 300 lines)
    for (target, rule), (count, right, firsts, reached) in tally.items():
        name = f"{args.pipeline}/{round(target * 100)}-{rule}" + ("/accepts-one" if args.accepts == "one" else "")
        measures = (("proposal_precision", right / max(count, 1), count),
                    ("proposal_coverage", count / max(firsts, 1), firsts),
                    ("proposal_precision_reached", reached, len(plan)))  # fmt: skip
        if (target, rule) in RECORDED[args.accepts]:
            out += [{"dataset": "first-use-rows" if languages else "rows", "pipeline": name, "metric": metric,
                     "value": round(value, 6), "queries": queries, "seconds": ""} for metric, value, queries in measures]  # fmt: skip
        print(f"{name:<30} proposed {count:>4} of {firsts} ({count / max(firsts, 1):.1%}), "
              f"precision {right / max(count, 1):.3f}, crosswalks reached {reached} of {len(plan)}")  # fmt: skip
    if not args.no_record:
        append_results(RESULTS_FILE, "proposal-shift", out, origin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
