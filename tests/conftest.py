"""Shared fixtures: the MELO data folder (``MELO_DATA``, default ``../shared/melo``)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from db.store import Store
from db.testing import BACKENDS, empty_store_url, pg_url

if TYPE_CHECKING:
    from melo_core.esco.taxonomy import Taxonomy
    from melo_core.linking.pipeline import PipelineDefinition

ROOT = Path(__file__).resolve().parent.parent


def run_at_once(targets: list[Callable[[], None]]) -> None:
    """Run each target in a thread of its own, switching threads every microsecond (to make a race
    likely), and wait for all."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)


@contextmanager
def module_folder(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A folder for a module's fixture, removed when the module's tests are done. Models and caches
    run to gigabytes; the run's base folder would keep them all until the session ends (a run
    peaked at 9.5 GB in /tmp and CI's disk filled up)."""
    folder = factory.mktemp(name)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def melo_data_dir() -> Path:
    return Path(os.environ.get("MELO_DATA", ROOT.parent / "shared" / "melo")).resolve()


def esco_csv_dir() -> Path:
    return Path(os.environ.get("MELO_ESCO", melo_data_dir().parent / "esco"))


# `make test` runs the files on two workers, each file on one; the longest go first, so that
# neither worker is left with a long file at the end (pytest --durations on a fresh clone,
# 2026-12-07: test_pipeline.py 140 s, then 107 to 70 s for these five; the rest under 55 s).
LONGEST_FIRST = ("test_pipeline.py", "test_training.py", "test_e5_esco.py", "test_e2e_browser.py",
                 "test_options_in_children.py", "test_coverage.py")  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order


@pytest.fixture(scope="session", autouse=True)
def run_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cache every test uses unless it sets ``MELO_CACHE`` itself: one for the run, shared by
    the xdist workers (their temporary folders have one parent), never the project's ``./cache``.
    A run used to leave 209 MB there (taxonomy pickles of temporary data folders, which no later
    run reads) and could read what an earlier run or the app had left."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "melo-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MELO_CACHE", str(folder))
        yield folder


# The store tests run on SQLite, and on PostgreSQL when MELO_TEST_PG_URL is set (make test does).
BACKENDS_UNDER_TEST = [b for b in BACKENDS if b == "sqlite" or pg_url()]


@pytest.fixture(params=BACKENDS_UNDER_TEST)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store (its schema, no rows) on each backend under test."""
    with empty_store_url(request.param, tmp_path) as url:
        Store(url, create=True).close()
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store(store_url) as opened:
        yield opened


@pytest.fixture(scope="session")
def melo_data() -> Path:
    path = melo_data_dir()
    if not (path / "processed").is_dir():
        pytest.skip(f"MELO data not found at {path} (set MELO_DATA)")
    return path


@pytest.fixture(scope="session")
def esco_csv() -> Path:
    path = esco_csv_dir()
    if not (path / "occupations_en.csv").is_file():
        pytest.skip(f"ESCO CSV export not found at {path} (set MELO_ESCO)")
    return path


@pytest.fixture(scope="session")
def nor_data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder in the official layout with one dataset (nor_q_no_c_no, 96 queries) and its
    crosswalk (nor_no), linked, not copied: enough for the curation pages."""
    return linked_slice(tmp_path_factory.mktemp("nor-data"), melo_data,
                        ("processed/melo/nor_q_no_c_no", "raw/crosswalks_standard/nor_no"))  # fmt: skip


def described_pipeline(esco_csv: Path, folder: Path, variant: str) -> tuple[Taxonomy, PipelineDefinition]:
    """(ESCO's cooks, ISCO 512, as a taxonomy; a pipeline whose two variants are ``variant``, TOML
    lines, written to ``folder``): where the description tests link."""
    from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_esco_csv
    from melo_core.linking.pipeline import load_pipeline

    esco = taxonomy_from_esco_csv(esco_csv)
    taxonomy = Taxonomy(c for c in esco.concepts if (c.isco_code or "").startswith("512"))
    path = folder / "described.toml"
    path.write_text(f"[monolingual]\n{variant}[cross_lingual]\n{variant}", encoding="utf-8")
    return taxonomy, load_pipeline(str(path))


def linked_slice(root: Path, melo_data: Path, parts: tuple[str, ...]) -> Path:
    """A data folder in the official layout holding only ``parts`` of the shared data (dataset
    and crosswalk folders), linked, not copied."""
    for part in parts:
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (root / part).symlink_to((melo_data / part).resolve())
    return root


def slice_dataset(source: Path, target: Path, distractors: int) -> None:
    """A MELO dataset folder cut down: all queries, their relevant corpus elements and the first
    ``distractors`` others, in corpus order."""

    def rows(name: str) -> list[list[str]]:
        return [line.split("\t") for line in (source / name).read_text(encoding="utf-8").splitlines() if line]

    keep = {r[2] for r in rows("annotations.tsv")} | {r[0] for r in rows("corpus_elements.tsv")[:distractors]}
    target.mkdir(parents=True)
    for name in ("corpus_elements.tsv", "concept_mapping.tsv"):
        kept = ["\t".join(r) for r in rows(name) if r[0] in keep]
        (target / name).write_text("\n".join(kept) + "\n", encoding="utf-8")
    for name in ("queries.tsv", "annotations.tsv"):
        (target / name).write_text((source / name).read_text(encoding="utf-8"), encoding="utf-8")


@pytest.fixture(scope="session")
def datasets_dir(melo_data: Path) -> Path:
    return melo_data / "processed" / "melo"


def write_tsv(path: Path, rows: list[tuple[str, ...]]) -> None:
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


def write_workbook(path: Path, rows: Sequence[Sequence[object]], styled_empty_column: int | None = None,
                   number_formats: dict[str, str] | None = None) -> Path:  # fmt: skip
    """An Excel workbook whose first sheet holds ``rows`` (numbers stay numbers), written by
    openpyxl; a second sheet that no reader should see. ``styled_empty_column``: a bold cell
    without a value in that column of the header row, as a spreadsheet leaves after formatting;
    ``number_formats``: cell ("A2") -> number format ("0000")."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(row)
    if styled_empty_column is not None:
        sheet.cell(row=1, column=styled_empty_column).font = Font(bold=True)
    for cell, number_format in (number_formats or {}).items():
        sheet[cell].number_format = number_format
    book.create_sheet("notes").append(["not", "this", "sheet"])
    book.save(path)
    return path


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    """A hand-made dataset folder in the official layout (no concept_mapping.tsv, like older releases)."""
    folder = tmp_path / "tst_q_en_c_en"
    folder.mkdir()
    write_tsv(folder / "queries.tsv", [("Q1", "data scientist"), ("Q2", "baker"), ("Q3", "nurse")])
    write_tsv(
        folder / "corpus_elements.tsv",
        [("C1", "data scientist"), ("C2", "data analyst"), ("C3", "baker"), ("C4", "pastry baker"), ("C5", "nurse")],
    )
    write_tsv(
        folder / "annotations.tsv",
        [("Q1", "0", "C1", "1"), ("Q1", "0", "C2", "1"), ("Q2", "0", "C3", "1"), ("Q3", "0", "C5", "1")],
    )
    return folder


# A small stored run set for the analysis pages: two lexical scorers on three small datasets (the
# first 60 queries of each) and every published baseline of the paper.
RUN_SET_DATASETS = ("nor_q_no_c_no", "bel_q_fr_c_fr", "nor_q_no_c_en")
RUN_SET_SCORERS = ("edit-distance", "char-tfidf")
RUN_SET_QUERIES = 60


@pytest.fixture(scope="session")
def run_set_db(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding the run set; copy it before writing to it."""
    from db.runs import evaluate_and_store, import_published
    from db.store import Store

    path = tmp_path_factory.mktemp("runs") / "melo.db"
    with Store(f"sqlite:///{path}", create=True) as store:
        evaluate_and_store(
            store, melo_data, list(RUN_SET_DATASETS), list(RUN_SET_SCORERS), limit_queries=RUN_SET_QUERIES
        )
        import_published(store, melo_data)
    return path
