"""Rebuild every official MELO dataset from its crosswalk and compare with the release.

For each dataset the taxonomy is taken from that dataset's own corpus (so the ESCO version
matches) and the queries and annotations are compared exactly.

    python scripts/check_builder.py --data ../shared/melo
"""

from __future__ import annotations

import argparse

from melo_core.esco.builder import build_dataset
from melo_core.esco.crosswalk import crosswalk_path, load_crosswalk
from melo_core.esco.datasets import datasets_root, list_datasets, load_dataset, parse_dataset_name
from melo_core.esco.taxonomy import taxonomy_from_datasets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    root = datasets_root(args.data)
    identical = 0
    names = list_datasets(args.data)
    for name in names:
        parsed = parse_dataset_name(name)
        assert parsed is not None
        official = load_dataset(root / name)
        code = f"{parsed.country}_{parsed.query_language}"
        crosswalk = load_crosswalk(crosswalk_path(args.data, code))
        built, report = build_dataset(crosswalk, taxonomy_from_datasets([official]), list(parsed.corpus_languages))
        problems = []
        if built.query_ids != official.query_ids or built.queries != official.queries:
            diff = sum(a != b for a, b in zip(built.queries, official.queries, strict=False))
            problems.append(
                f"queries: built {len(built.queries)}, official {len(official.queries)}, {diff} differ in order"
            )
        if built.relevant != official.relevant:
            n = sum(built.relevant.get(q) != official.relevant.get(q) for q in official.query_ids)
            problems.append(f"annotations differ for {n} queries")
        if built.corpus_ids != official.corpus_ids or built.corpus != official.corpus:
            problems.append("corpus differs")
        note = (
            f" (skipped {report.unknown_concept} term(s) whose concept is not in ESCO)"
            if report.unknown_concept
            else ""
        )
        if problems:
            print(f"{name}: DIFFERENT: {'; '.join(problems)}{note}")
        else:
            identical += 1
            print(f"{name}: identical ({len(built.query_ids)} queries){note}")
    print(f"{identical}/{len(names)} datasets reproduced exactly")


if __name__ == "__main__":
    main()
