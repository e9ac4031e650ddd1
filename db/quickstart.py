"""A newcomer's one-click start: the ESCO union of the MELO corpora plus one national
crosswalk's terms as a source scheme (what `import-taxonomy` and `import-terms --crosswalk` do)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from db.imports import ImportReport, count_labels, import_taxonomy, import_terms, read_crosswalk
from db.store import Store
from melo_core.esco.crosswalk import crosswalk_path
from melo_core.esco.taxonomy import cached_taxonomy_from_melo

TAXONOMY_NAME = "esco"
TAXONOMY_VERSION = "melo-union"


@dataclass(frozen=True)
class StartReport:
    taxonomy: ImportReport
    terms: ImportReport


def start_curation(
    store: Store,
    data_dir: str | Path,
    crosswalk: str,
    on_progress: Callable[[float, str], object] = lambda fraction, message: None,
) -> StartReport:
    """Import the taxonomy (skipped when already there) and the crosswalk's terms, without its
    decisions (the curators make those), as the scheme named like the crosswalk (``nor_no``).
    ``on_progress(fraction, message)`` is told how far it got, from 0 to 1."""
    on_progress(0.0, "reading the ESCO union of the MELO corpora")
    taxonomy = cached_taxonomy_from_melo(data_dir)
    total = len(taxonomy.concepts) + count_labels(taxonomy)
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        on_progress(0.05 + 0.85 * min(done / total, 1.0), "importing the ESCO taxonomy")

    taxonomy_report = import_taxonomy(
        store,
        taxonomy,
        TAXONOMY_NAME,
        TAXONOMY_VERSION,
        str(Path(data_dir).resolve()),
        on_progress=step,
        from_melo_corpora=True,
    )
    on_progress(0.9, f"importing the terms of {crosswalk}")
    terms_report = import_terms(store, crosswalk, read_crosswalk(crosswalk_path(data_dir, crosswalk)))
    on_progress(1.0, "done")
    return StartReport(taxonomy_report, terms_report)
