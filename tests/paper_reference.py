"""Independent reference computations for the analysis tests, written out on the raw files the
way the MELO paper's scripts do, so the library is checked against something it does not share."""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

from rapidfuzz import fuzz


def read_pairs(path: Path) -> dict[str, str]:
    """First two columns of a TSV file (queries, corpus elements, summary.tsv) as a dict."""
    with open(path, encoding="utf-8", newline="") as handle:
        return {row[0]: row[1] for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}


def paper_min_distances(folder: Path, fold: bool) -> list[float]:
    """1 - fuzz.ratio / 100 on lowercased (and, with ``fold``, NFKD + ASCII-folded) strings,
    minimum over each query's annotated elements, in annotation order."""

    def prep(text: str) -> str:
        text = text.lower()
        return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii") if fold else text

    queries = read_pairs(folder / "queries.tsv")
    corpus = read_pairs(folder / "corpus_elements.tsv")
    relevant: dict[str, list[str]] = {}
    with open(folder / "annotations.tsv", encoding="utf-8") as handle:
        for line in handle:
            qid, _, cid, _ = line.rstrip("\n").split("\t")
            relevant.setdefault(qid, []).append(cid)
    return [min(1 - fuzz.ratio(prep(queries[q]), prep(corpus[c])) / 100 for c in cids) for q, cids in relevant.items()]
