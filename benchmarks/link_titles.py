"""Score what `link --input` wrote: the product's bulk path measured as a user runs it (its default
label languages, HNSW search, the query language detected unless given), against the ESCO concepts
of a titles CSV or of a MELO dataset's queries.

`eval` ranks a dataset's corpus exactly; this script scores the candidates `link` itself returned,
so a query whose concept is not among its `--top` candidates counts as a miss. MRR and acc@k are
concept-level (the first of a query's concepts found), as `eval` measures pipelines. A MELO
dataset is linked with `--hold-out-country` its country, as `eval` holds its crosswalk out of the
known mentions.

    python -m melo_core link --data ../shared/melo --input ../shared/jobbert/titles.csv \
        --column vacancyTitle --top 100 --out /tmp/titles-links --format csv
    python benchmarks/link_titles.py --titles ../shared/jobbert/titles.csv --links /tmp/titles-links

    python benchmarks/link_titles.py --data ../shared/melo --dataset aut_q_de_c_en --write-input /tmp/aut.csv
    python -m melo_core link --data ../shared/melo --input /tmp/aut.csv --column query --langs en \
        --hold-out-country aut --top 100 --out /tmp/aut-links --format csv
    python benchmarks/link_titles.py --data ../shared/melo --dataset aut_q_de_c_en --links /tmp/aut-links
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core import config
from melo_core.arguments import at_least
from melo_core.bulk import read_output
from melo_core.datasets import load_dataset, resolve_dataset
from melo_core.metrics import accuracy_at_k, mrr
from melo_core.titles import DEFAULT_TITLE_COLUMN, DEFAULT_URI_COLUMN, read_titles


def titles_gold(path: str, title_column: str, uri_column: str) -> list[tuple[str, set[str]]]:
    return [(title, {uri} if uri else set()) for title, uri in read_titles(path, title_column, uri_column)]


def dataset_gold(data: str, name: str) -> list[tuple[str, set[str]]]:
    dataset = load_dataset(resolve_dataset(data, name))
    return [(text, {dataset.concept_of[c] for c in dataset.relevant.get(q, ())})
            for q, text in zip(dataset.query_ids, dataset.queries, strict=True)]  # fmt: skip


def gold_ranks(gold: list[tuple[str, set[str]]], links: Path) -> np.ndarray:
    """Per row with a text and a concept, the rank of its first concept in `link`'s output (inf
    when absent); rows without either are left out, as `eval --titles` leaves them."""
    table = read_output(links) if links.is_dir() else pacsv.read_csv(links)
    rank_of: dict[tuple[int, str], float] = {}  # inf: absent
    for row, rank, uri in zip(*(table.column(c).to_pylist() for c in ("row", "rank", "concept_uri")), strict=True):
        rank_of[(int(row), uri)] = min(int(rank), rank_of.get((int(row), uri), math.inf))
    ranks = [min((rank_of.get((row, uri), math.inf) for uri in uris), default=math.inf)
             for row, (text, uris) in enumerate(gold) if text and uris]  # fmt: skip
    return np.array(ranks, dtype=np.float64).reshape(-1, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--titles", help="the titles CSV given to link --input")
    source.add_argument("--dataset", help="a MELO dataset whose queries were linked (see --write-input)")
    parser.add_argument("--data", default=str(config.data_dir()), help="data folder of --dataset")
    parser.add_argument("--write-input", help="--dataset: write its queries as a CSV (column query) for link --input")
    parser.add_argument("--links", type=Path, help="link --out: a folder of shards or one CSV")
    parser.add_argument("--title-column", default=DEFAULT_TITLE_COLUMN)
    parser.add_argument("--uri-column", default=DEFAULT_URI_COLUMN)
    parser.add_argument("--top", type=at_least(1), default=100, help="the --top that link ran with (default 100)")
    parser.add_argument("--label", default="", help="a name for the row printed")
    parser.add_argument("--out", help="append the row to this CSV")
    args = parser.parse_args()
    gold = (titles_gold(args.titles, args.title_column, args.uri_column) if args.titles
            else dataset_gold(args.data, args.dataset))  # fmt: skip
    if args.write_input:
        with open(args.write_input, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["query"])
            writer.writerows([text] for text, _ in gold)
        print(f"wrote {len(gold)} queries to {args.write_input}")
    if not args.links:
        return
    ranks = gold_ranks(gold, args.links)
    row = {"run": args.label or str(args.links), "queries": len(ranks), "top": args.top,
           "mrr": round(mrr(ranks), 4), **{f"acc@{k}": round(accuracy_at_k(ranks, k), 4) for k in (1, 5, 10)},
           "recall@top": round(accuracy_at_k(ranks, args.top), 4)}  # fmt: skip
    print(", ".join(f"{k} {v}" for k, v in row.items()))
    if args.out:
        path = Path(args.out)
        new = not path.exists()
        with path.open("a", newline="") as handle:
            row_writer = csv.DictWriter(handle, fieldnames=list(row))
            if new:
                row_writer.writeheader()
            row_writer.writerow(row)


if __name__ == "__main__":
    main()
