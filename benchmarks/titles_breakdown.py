"""Where a stored job-ad titles run loses its MRR: the titles grouped by how job ads write them.

For each feature (a word, capitals, separators, ...): how many titles have it, their MRR, the
others' MRR, and what the run's MRR would gain if these titles ranked like the others. For one
word (``--word``, default "executive"): the gold concepts of its titles and what the run ranked
first, most frequent first. Reads a run stored by ``eval --titles ... --store``:

    python -m melo_core eval --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --scorers best --store --db sqlite:///titles.db --create
    python benchmarks/titles_breakdown.py --db sqlite:///titles.db
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd

from db.runs import get_run, list_runs, run_queries
from db.store import Store
from melo_core.arguments import at_least
from melo_core.titles import TITLES_PREFIX

# Regular expressions over the raw title, as vacancy titles write them.
FEATURES = {
    "the word 'executive'": r"(?i)\bexecutive\b",
    "all capitals": r"^[^a-z]*[A-Z][^a-z]*$",
    "an ampersand": r"&",
    "a comma": r",",
    "one word": r"^\s*\S+\s*$",
    "a slash": r"/",
    "brackets": r"[(\[]",
    "a dash set off by spaces": r"\s[-–—]\s",
    "intern, trainee or fresh": r"(?i)\b(?:intern(?:ship)?|trainee|fresh)\b",
    "digits": r"\d",
}


def preferred_form(forms: list[tuple[str, str]]) -> str:
    """The concept's preferred label: its form numbered 000 (MELO's layout), else the first."""
    return next((text for cid, text in forms if cid.endswith("_000")), forms[0][1] if forms else "")


def breakdown(queries: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, pattern in FEATURES.items():
        has = queries["query_text"].str.contains(pattern, regex=True)
        mrr, rest = queries.loc[has, "reciprocal_rank"].mean(), queries.loc[~has, "reciprocal_rank"].mean()
        rows.append({"feature": name, "titles": int(has.sum()), "mrr": mrr, "others_mrr": rest,
                     "gain_if_like_others": has.sum() * (rest - mrr) / len(queries)})  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="store URL holding the run")
    parser.add_argument("--run", type=at_least(1), help="run id (default: the newest titles run)")
    parser.add_argument("--word", default="executive", help="word whose gold and first-ranked concepts to list")
    parser.add_argument("--top", type=at_least(1), default=10, help="concepts listed per side")
    args = parser.parse_args()

    with Store(args.db) as store:
        if args.run is None:
            titles_runs = [r for r in list_runs(store, "ours") if r.dataset.startswith(TITLES_PREFIX)]
            if not titles_runs:
                sys.exit(f"no titles run in {args.db}: store one with `eval --titles ... --store`")
            args.run = titles_runs[-1].id
        run = get_run(store, args.run)
        queries = run_queries(store, args.run)
    print(f"run {run.id}: {run.scorer} on {run.dataset}, {len(queries):,} titles, "
          f"MRR {queries['reciprocal_rank'].mean():.4f}\n")  # fmt: skip
    print(breakdown(queries).to_string(index=False, float_format=lambda x: f"{x:.4f}"))

    chosen = queries[queries["query_text"].str.contains(rf"(?i)\b{re.escape(args.word)}\b", regex=True)]
    gold = Counter(preferred_form(g) for g in chosen["gold"])
    first = Counter(t[0][1] for t in chosen["top"] if t)
    print(f"\n{len(chosen):,} titles with {args.word!r}, acc@1 {(chosen['first_rank'] == 1).mean():.3f}")
    print("gold concepts:", ", ".join(f"{c} ({n})" for c, n in gold.most_common(args.top)))
    print("ranked first (label):", ", ".join(f"{c} ({n})" for c, n in first.most_common(args.top)))


if __name__ == "__main__":
    main()
