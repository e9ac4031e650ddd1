"""e5-esco's recipe with ISCO unit group labels as positives (issue 19: "label <-> ISCO group label").

A share of the training pairs get, as their positive, the English preferred label of the anchor
occupation's ISCO unit group (e.g. "bakery shop manager" -> "Retail and wholesale trade managers")
instead of another label of the occupation; two anchors of one batch never share such a positive.
The share is given as ``--descriptions`` (this script replaces the hook that puts descriptions in
the positives); every other argument is the `train` command's:

    MELO_MODELS=/tmp/models-isco python benchmarks/e5_esco_isco_positives.py train --data ../shared/melo \
        --base e5-small --languages en --prompt "query: " --validation 0 --rounds 6 --batch-size 64 \
        --lr 5e-5 --no-hard-negatives --job-ad-noise 0.5 --descriptions 0.25 --out /tmp/models-isco/e5-esco
    MELO_MODELS=/tmp/models-isco python -m melo_core eval --data ../shared/melo \
        --titles ../shared/jobbert/titles.csv --langs en --scorers concepts:e5-esco

(``/tmp/models-isco/e5-small``: a link to ``models/e5-small``.) Results: docs/experiments/e5-esco.md.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence

import melo_core.training as training
from melo_core.cli import main
from melo_core.taxonomy import cached_taxonomy_from_melo


def unit_group_labels(data: str) -> list[str]:
    """Per concept of the taxonomy `train` reads: its ISCO unit group's English preferred label
    (occupations), else ""."""
    taxonomy = cached_taxonomy_from_melo(data)
    groups = {c.isco_code: c for c in taxonomy.concepts if c.kind == "isco_group"}
    return [
        groups[c.isco_code].preferred_label("en") if c.kind == "occupation" and c.isco_code in groups else ""
        for c in taxonomy.concepts
    ]


def group_positives(group_label: list[str]):
    def replace(labels: training.Labels, batches: list[list[tuple[int, int]]], descriptions: Sequence[str],
                share: float, seed: int) -> int:  # fmt: skip
        rng = random.Random(seed + 2)
        index: dict[int, int] = {}
        replaced = 0
        for batch in batches:
            used: set[str] = set()
            for k, (anchor, _positive) in enumerate(batch):
                concept = labels.concepts[anchor]
                text = group_label[concept]
                if text and text not in used and rng.random() < share:
                    used.add(text)  # siblings in one batch must not share a positive
                    if concept not in index:
                        index[concept] = labels.add_text(text, concept, "en")
                    batch[k] = (anchor, index[concept])
                    replaced += 1
        print(f"{replaced} of {sum(map(len, batches))} positives are ISCO unit group labels", file=sys.stderr)
        return replaced

    return replace


if __name__ == "__main__":
    training.describe_positives = group_positives(unit_group_labels(sys.argv[sys.argv.index("--data") + 1]))
    sys.exit(main())
