"""Batch proposals in the app. The Crosswalk page's "Propose at 95 %" (or 90 %, 80 %): the `propose`
command run for the scheme in a process of its own (as `prepare` is), so that the pipeline it loads
goes back to the system when it ends and the page shows the command's own summary or refusal. The
Benchmark page's "Batch proposals": realised precision and coverage per crosswalk and target."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from melo_core import config
from melo_core.evaluation.effort import PROPOSAL_PRECISION

if TYPE_CHECKING:
    import pandas as pd

# The Crosswalk page's targets: 0.95 first; lower ones cover more terms, and `lexical` reaches
# 0.80, not 0.95 (docs/experiments/batch-proposals.md).
PAGE_TARGETS = (PROPOSAL_PRECISION, 0.9, 0.8)
PROPOSE_SECONDS = 1800  # a large scheme with `best` on 2 cores; a hung run must not hold the page


def run_propose(store_url: str, scheme: str, precision: float = PROPOSAL_PRECISION) -> tuple[bool, str]:
    """(whether it worked, the command's last line: its summary, or why it proposed nothing)."""
    folders = config.folders()  # absolute: the process runs in the project root, wherever the app started
    command = [sys.executable, "-m", "melo_core", "propose", "--scheme", scheme, "--precision", str(precision),
               "--data", folders["data"], "--cache", folders["cache"], "--models", folders["models"], "--quiet"]  # fmt: skip
    # The store's URL through the environment, not the command line: ps would show a password in it.
    env = {**os.environ, "MELO_DB_URL": store_url}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=PROPOSE_SECONDS, check=False,
                              cwd=config.PROJECT_ROOT)  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, f"propose took more than {PROPOSE_SECONDS // 60} minutes and was stopped; nothing was proposed"
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    said = lines[-1] if lines else f"propose ended with exit code {done.returncode}"
    return done.returncode == 0, said.removeprefix("error: ")


# -- the Benchmark page's "Batch proposals" section (experiments/results.csv) -------------------------
PROPOSAL_METRICS = ("proposal_precision", "proposal_coverage")


def proposal_rows() -> list[dict[str, str]]:
    from melo_core.evaluation.experiments import results

    return [r for r in results.read_results(results.RESULTS_FILE) if r["metric"] in PROPOSAL_METRICS]


def proposal_targets(experiments: Iterable[str]) -> dict[str, float]:
    """The target precision of each experiment named that is a ``[proposals]`` one (its file in
    ``experiments/``); the others (a simulation's proposal rows, a file since removed) are left out."""
    from melo_core.errors import MeloInputError
    from melo_core.evaluation.experiments.config import load_experiment

    targets = {}
    for name in sorted(set(experiments)):
        try:
            plan = load_experiment(name).proposals
        except MeloInputError:
            continue
        if plan is not None:
            targets[name] = plan.precision
    return targets


def proposal_table(rows: Iterable[dict[str, str]], targets: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per crosswalk, columns ``PIPELINE at TARGET precision`` and ``... coverage`` from each
    (crosswalk, pipeline, target, metric)'s latest run, and a last row with their means over the
    crosswalks shown (the runner's own mean rows are left out: a partial run's mean would stand for
    the whole). No precision where nothing was proposed. Only rows of ``[proposals]`` experiments
    (``targets``: experiment -> target precision; default, read from their files): one pipeline at
    0.95 and at 0.80 are two columns, not one cell the later run overwrote."""
    import pandas as pd

    from melo_core.evaluation.experiments import results

    rows = list(rows)
    if targets is None:
        targets = proposal_targets(r["experiment"] for r in rows)
    shown = (r for r in rows if r["metric"] in PROPOSAL_METRICS and not r["dataset"].startswith("mean:")
             and r["experiment"] in targets)  # fmt: skip
    latest = results.latest_rows(shown, lambda r: (r["dataset"], r["pipeline"], targets[r["experiment"]], r["metric"]),
                                 group=lambda key: key[:3])  # fmt: skip
    if not latest:
        return pd.DataFrame()
    frame = pd.DataFrame([{"crosswalk": c, "column": f"{p} at {t:.2f} {m.removeprefix('proposal_')}",
                           "order": (p, -t, m), "value": float(r["value"])}
                          for (c, p, t, m), r in latest.items()])  # fmt: skip
    table = frame.pivot(index="crosswalk", columns="column", values="value").sort_index()
    order = dict(zip(frame["column"], frame["order"], strict=True))
    table = table[sorted(table.columns, key=order.__getitem__)]
    table.loc["mean"] = table.mean(axis=0)
    return table.reset_index().rename_axis(columns=None)
