"""Job-ad titles as a benchmark: a CSV of titles with their ESCO occupation, ranked against the
ESCO labels of chosen languages (``eval --titles``).

The titles become a ``MeloDataset`` whose corpus is every label of the taxonomy in those
languages and whose relevant elements are all labels of the title's concept, so ``evaluate``
scores it like a MELO dataset. Ranked one form per concept (pipelines do; ``eval --titles``
wraps other scorers in ``concepts:``), MRR and acc@k are concept-level, and acc@100 is the
concept's recall@100. No crosswalk is held out of the known mentions: the titles belong to no
country. Titles are evaluation data only: nothing here turns them into mentions or aliases.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.esco.builder import LabelCorpus
from melo_core.esco.datasets import MeloDataset
from melo_core.esco.taxonomy import Taxonomy, language_codes
from melo_core.files.tsv import csv_rows, read_text, sniff_delimiter

# Dataset names of title sets start with this; MELO names start with a country.
TITLES_PREFIX = "titles_"
DEFAULT_TITLE_COLUMN = "vacancyTitle"
DEFAULT_URI_COLUMN = "conceptUri"


@dataclass(frozen=True)
class TitlesReport:
    rows: int  # data rows in the file
    kept: int  # titles evaluated
    empty: int  # rows without a title or a URI
    unknown_concept: int  # URIs the taxonomy does not have
    distinct_titles: int
    concepts: int  # distinct concepts of the kept titles

    def describe(self) -> str:
        text = f"{self.kept} of {self.rows} titles ({self.distinct_titles} distinct, {self.concepts} concepts)"
        skipped = [f"{n} {why}" for n, why in ((self.empty, "empty"), (self.unknown_concept, "with a concept "
                   "the labels lack")) if n]  # fmt: skip
        return text + (f"; skipped {', '.join(skipped)}" if skipped else "")


def is_titles_dataset(name: str) -> bool:
    return name.startswith(TITLES_PREFIX)


def read_titles(path: str | Path, title_column: str = DEFAULT_TITLE_COLUMN,
                uri_column: str = DEFAULT_URI_COLUMN) -> list[tuple[str, str]]:  # fmt: skip
    """(title, concept URI) per data row, stripped; empty cells stay empty strings."""
    path = Path(path)
    if not path.is_file():
        raise MeloInputError("titles file not found", path)
    text = read_text(path)  # UTF-8, or UTF-16 with its mark (a spreadsheet's "Unicode Text")
    # strict about quotes: a title or URI holding a line break is a quote left open
    rows = csv_rows(path, io.StringIO(text, newline=""), sniff_delimiter(text), (title_column, uri_column))
    _, header = next(rows, (1, []))
    missing = [c for c in (title_column, uri_column) if c not in header]
    if missing:
        raise MeloInputError(f"no column {' or '.join(map(repr, missing))} (the header has "
                             f"{', '.join(map(repr, header)) or 'nothing'}); choose with --title-column "
                             "and --uri-column", path)  # fmt: skip
    title_at, uri_at = header.index(title_column), header.index(uri_column)
    return [(_cell(cells, title_at), _cell(cells, uri_at)) for _, cells in rows]


def _cell(cells: list[str], index: int) -> str:
    return cells[index].strip() if index < len(cells) else ""


def _name(path: Path, languages: list[str]) -> str:
    """``titles_<file stem>_<languages>``; a stem that already says "titles" is not repeated."""
    stem = path.stem.removeprefix(TITLES_PREFIX.rstrip("_")).strip("_-")
    return TITLES_PREFIX + "_".join([stem, *languages] if stem else languages)


def titles_dataset(path: str | Path, taxonomy: Taxonomy, languages: str | list[str], query_language: str = "en",
                   title_column: str = DEFAULT_TITLE_COLUMN, uri_column: str = DEFAULT_URI_COLUMN,
                   name: str | None = None) -> tuple[MeloDataset, TitlesReport]:  # fmt: skip
    """The titles of ``path`` as a dataset over the taxonomy's labels in ``languages``."""
    languages = sorted(set(language_codes(languages)))
    if lacking := taxonomy.lacking(languages):
        raise MeloInputError(lacking)
    rows = read_titles(path, title_column, uri_column)
    corpus = LabelCorpus.of(taxonomy, languages)
    kept: list[tuple[str, str]] = []
    empty = unknown = 0
    for title, uri in rows:
        if not title or not uri:
            empty += 1
        elif uri not in corpus.elements_of:
            unknown += 1
        else:
            kept.append((title, uri))
    if not kept:
        raise MeloInputError(f"no title to evaluate ({empty} empty, {unknown} with a concept the "
                             f"{'/'.join(languages)} labels lack)", path)  # fmt: skip
    dataset = corpus.dataset(name or _name(Path(path), languages), kept, query_language, prefix="T")
    report = TitlesReport(rows=len(rows), kept=len(kept), empty=empty, unknown_concept=unknown,
                          distinct_titles=len({t for t, _ in kept}), concepts=len({u for _, u in kept}))  # fmt: skip
    return dataset, report
