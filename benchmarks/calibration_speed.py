"""How long `prepare`'s last step, the calibrated confidence, takes for a prepared pipeline.

    python benchmarks/calibration_speed.py --data ../shared/melo --pipeline lexical
    python benchmarks/calibration_speed.py --data ../shared/melo --pipeline best --langs en,no

Runs ``calibration_step`` (what `prepare` runs last: 150 terms of every crosswalk linked with the
pipeline, the other countries' crosswalks as known mentions, then the calibrators fitted) from a
fresh start: in a temporary cache folder that links every area of the prepared cache
(``--cache``, default ``MELO_CACHE`` or ``./cache``) except the kept calibration rows, the parsed
crosswalk mentions and the measured paces, and with the calibrators written to a temporary models
folder (the prepared ones are left as they are). The pipeline's models come from ``MELO_MODELS``.

Results: printed, and appended to experiments/results.csv (experiment ``calibration-speed``,
dataset ``all-crosswalks``; metrics seconds, link_seconds, fit_seconds, seconds_per_term) unless
``--no-record``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from melo_core import config  # noqa: E402
from melo_core.esco.crosswalk import crosswalk_path, list_crosswalks  # noqa: E402
from melo_core.esco.taxonomy import cached_taxonomy_from_melo  # noqa: E402
from melo_core.evaluation.calibration import calibration_step  # noqa: E402
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402
from melo_core.linking.pipeline import load_pipeline  # noqa: E402

FRESH = ("calibration", "crosswalk_mentions", "prepare")  # what the step makes or reads of its own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(config.data_dir()))
    parser.add_argument("--pipeline", default="lexical")
    parser.add_argument("--cache", default=str(config.cache_dir()), help="the prepared cache (read, not changed)")
    parser.add_argument("--langs", help="label languages, as `prepare --langs` (default: all)")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    languages = args.langs.split(",") if args.langs else None
    command = " ".join(["python benchmarks/calibration_speed.py", *sys.argv[1:]])
    data = Path(args.data)
    origin = provenance([args.pipeline], [crosswalk_path(data, c) for c in list_crosswalks(data)], command)
    with tempfile.TemporaryDirectory(prefix="melo-calibration-") as folder:
        cache, models = Path(folder) / "cache", Path(folder) / "models"
        cache.mkdir()
        for area in Path(args.cache).iterdir():
            if area.name not in FRESH:
                (cache / area.name).symlink_to(area.resolve(), target_is_directory=area.is_dir())
        definition = load_pipeline(args.pipeline)
        taxonomy = cached_taxonomy_from_melo(data, cache)
        began = time.perf_counter()
        step = calibration_step(definition, taxonomy, data, cache, models, languages)
        fitting: list[float] = []

        def said(fraction: float, message: str) -> None:
            if message.startswith("calibration: fitting") and not fitting:
                fitting.append(time.perf_counter())
            print(f"  {time.perf_counter() - began:6.1f} s  {message}", file=sys.stderr)

        terms = step.run(said)
        ended = time.perf_counter()
    if not terms:
        raise SystemExit("nothing was linked: is the pipeline prepared, and are there crosswalks?")
    fitted = fitting[0] if fitting else ended
    metrics = {"seconds": ended - began, "link_seconds": fitted - began, "fit_seconds": ended - fitted,
               "seconds_per_term": (ended - began) / terms}  # fmt: skip
    print(f"{args.pipeline}: {terms:,} terms, " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))
    if not args.no_record:
        rows = [{"dataset": "all-crosswalks", "pipeline": args.pipeline, "metric": metric, "value": round(value, 4),
                 "queries": terms, "seconds": round(ended - began, 1)} for metric, value in metrics.items()]  # fmt: skip
        append_results(RESULTS_FILE, "calibration-speed", rows, origin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
