"""`link` with the known mentions limited to some languages (an experiment; `link` itself always
takes every crosswalk's titles). Arguments after the languages are `link`'s own.

    python benchmarks/mention_languages.py en -- --data ../shared/melo \
        --input ../shared/jobbert/titles.csv --column vacancyTitle --query-lang en --langs en \
        --top 100 --out /tmp/links-en.csv
    python benchmarks/link_titles.py --titles ../shared/jobbert/titles.csv --links /tmp/links-en.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import melo_core.pipeline as pipeline
from melo_core.cli import main


def limited_to(languages: set[str]):
    every = pipeline.crosswalk_mentions_of

    def mentions(*args, **kwargs) -> list[tuple[str, str, str | None]]:
        return [mention for mention in every(*args, **kwargs) if mention[2] in languages]

    return mentions


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    # bulk.build_linker imports crosswalk_mentions_of from the module when it builds the linker.
    pipeline.crosswalk_mentions_of = limited_to(set(sys.argv[1].split(",")))
    sys.exit(main(["link", *sys.argv[3:]]))
