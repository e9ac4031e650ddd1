"""What `propose` costs when a scheme's decided terms came with its import, and what they shift.

    python benchmarks/imported_shift.py --data ../shared/melo --crosswalks nor_no,usa_en

For each crosswalk and each N of ``--decided``: a fresh store (SQLite, temporary) holding the
crosswalk's terms (``start_curation``), the first N with a crosswalk match decided as if imported
(every match with its relation; nothing stored as shown on the Link page). Then `propose`'s own path
(``pipeline_link``, ``scheme_calibrator``, ``propose`` with ``link_decided``): the decided terms the
Link page never showed are linked again for the scheme's shift (``db.proposals.relink``), the
undecided ones are linked and proposed. The pipeline is `propose`'s default (``--pipeline``);
``MELO_CACHE`` and ``MELO_MODELS`` must hold it prepared, with its calibrators.

Rows (experiment ``imported-shift``, dataset ``CROSSWALK-decided-N``, pipeline the one that served):
``seconds`` (the propose call, pipeline already loaded), ``load_seconds`` (``pipeline_link``),
``relinked``, ``shift`` (logit), ``proposal_coverage`` (share of the undecided terms proposed) and
``proposal_precision`` (share of the proposals among the term's crosswalk matches; none where
nothing was proposed).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from db.proposals import pipeline_link, propose, scheme_calibrator  # noqa: E402
from db.quickstart import start_curation  # noqa: E402
from db.store import Store  # noqa: E402
from melo_core import config  # noqa: E402
from melo_core.cli.arguments import at_least  # noqa: E402
from melo_core.errors import MeloInputError  # noqa: E402
from melo_core.esco.crosswalk import crosswalk_path, load_crosswalk  # noqa: E402
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402
from melo_core.version import code_version  # noqa: E402


def measure(data: Path, code: str, decided: int, pipeline: str | None, folder: Path) -> tuple[str, dict[str, float]]:
    crosswalk = load_crosswalk(crosswalk_path(data, code))
    gold = {t.code: t.matches for t in crosswalk.terms if t.matches}
    with Store(f"sqlite:///{tempfile.mkdtemp(dir=folder)}/melo.db", create=True) as store:
        start_curation(store, data, code)
        for term in [t for t in store.queue(code, limit=None) if t.code in gold][:decided]:
            for uri, relation in gold[term.code].items():  # every match, as an import brings them
                store.decide(term.id, uri, relation, "imported")
        began = time.perf_counter()
        name, link, link_decided, kinds = pipeline_link(store, code, pipeline, data)
        calibrator = scheme_calibrator(name, code)
        loaded = time.perf_counter()
        report = propose(store, code, 0.95, link, calibrator, pipeline=name, tool_version=code_version(),
                         link_decided=link_decided, kinds=kinds)  # fmt: skip
        ended = time.perf_counter()
        print(f"  {code}, {decided} decided: {report.summary()}", file=sys.stderr)
        found = store.proposals(code)
        right = sum(p.concept_uri in gold.get(p.term_code, {}) for p in found)
    metrics = {"seconds": ended - loaded, "load_seconds": loaded - began, "relinked": float(report.relinked),
               "shift": report.shift, "proposal_coverage": len(found) / max(report.linked, 1)}  # fmt: skip
    if found:
        metrics["proposal_precision"] = right / len(found)
    return name, metrics


def counts(text: str) -> list[int]:
    try:
        values = [int(n) for n in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated whole numbers, not {text!r}") from None
    if any(n < 0 for n in values):
        raise argparse.ArgumentTypeError(f"counts are 0 or more, not {text!r}")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--crosswalks", default="nor_no,usa_en", help="comma-separated crosswalk codes")
    parser.add_argument("--decided", type=counts, default=[0, 25, 200], help="imported decisions, comma-separated")
    parser.add_argument("--pipeline", help="default: propose's (best when prepared)")
    parser.add_argument("--repeat", type=at_least(1), default=1, help="runs per case; the fastest is kept")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    data = Path(args.data)
    codes = [c.strip() for c in args.crosswalks.split(",") if c.strip()]
    command = " ".join(["python benchmarks/imported_shift.py", *sys.argv[1:]])
    origin = provenance([args.pipeline or "best"], [crosswalk_path(data, c) for c in codes], command)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="melo-imported-") as folder:
        for code in codes:
            for decided in args.decided:
                try:
                    runs = [measure(data, code, decided, args.pipeline, Path(folder)) for _ in range(args.repeat)]
                except MeloInputError as exc:  # e.g. a fallback pipeline that reaches no 0.95: said, not recorded
                    print(f"{code} decided {decided}: {exc}")
                    continue
                name, best = min(runs, key=lambda run: run[1]["seconds"])
                print(f"{code} decided {decided} ({name}): " + ", ".join(f"{k} {v:.3f}" for k, v in best.items()))
                rows += [{"dataset": f"{code}-decided-{decided}", "pipeline": name, "metric": metric,
                          "value": round(value, 4), "queries": decided, "seconds": round(best["seconds"], 1)}
                         for metric, value in best.items()]  # fmt: skip
    if not args.no_record:
        append_results(RESULTS_FILE, "imported-shift", rows, origin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
