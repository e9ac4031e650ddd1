"""MELO datasets in the official folder layout.

A dataset folder holds ``queries.tsv``, ``corpus_elements.tsv``, ``annotations.tsv`` (TREC
qrels) and optionally ``concept_mapping.tsv`` (older releases and custom datasets lack it).
Folder names follow ``<country>_q_<query lang>_c_<corpus langs joined by _>``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from melo_core.errors import MeloInputError
from melo_core.files.output import is_stdout, output_target, remove_orphans, temporary_prefix, write_error
from melo_core.files.tsv import read_tsv

QUERIES_FILE = "queries.tsv"
CORPUS_FILE = "corpus_elements.tsv"
ANNOTATIONS_FILE = "annotations.tsv"
CONCEPT_MAPPING_FILE = "concept_mapping.tsv"
STATS_FILE = "logged_stats.txt"
REQUIRED_FILES = (QUERIES_FILE, CORPUS_FILE, ANNOTATIONS_FILE)
DATASET_FILES = (*REQUIRED_FILES, CONCEPT_MAPPING_FILE, STATS_FILE)  # all that write_dataset writes

_NAME_RE = re.compile(r"^(?P<country>[a-z]{3})_q_(?P<qlang>[a-z]{2})_c_(?P<clangs>[a-z]{2}(?:_[a-z]{2})*)$")


@dataclass(frozen=True)
class DatasetName:
    country: str
    query_language: str
    corpus_languages: tuple[str, ...]

    @property
    def kind(self) -> str:
        """monolingual, cross-lingual or multilingual (the paper's three settings)."""
        if len(self.corpus_languages) > 1:
            return "multilingual"
        if self.corpus_languages == (self.query_language,):
            return "monolingual"
        return "cross-lingual"


def parse_dataset_name(name: str) -> DatasetName | None:
    """Parse an official dataset folder name; None when it does not follow the convention."""
    match = _NAME_RE.match(name)
    if not match:
        return None
    return DatasetName(
        country=match["country"],
        query_language=match["qlang"],
        corpus_languages=tuple(match["clangs"].split("_")),
    )


@dataclass
class MeloDataset:
    """One linking task: queries, corpus surface forms and their relevance judgements."""

    name: str
    path: Path | None
    query_ids: list[str]
    queries: list[str]
    corpus_ids: list[str]
    corpus: list[str]
    relevant: dict[str, list[str]]
    concept_of: dict[str, str] = field(default_factory=dict)
    query_language: str | None = None
    corpus_languages: tuple[str, ...] = ()

    @property
    def kind(self) -> str | None:
        if self.query_language is None or not self.corpus_languages:
            return None
        return DatasetName("", self.query_language, self.corpus_languages).kind

    def relevant_indices(self) -> list[np.ndarray]:
        """Per query (in query order) the corpus positions of its relevant elements."""
        position = {cid: i for i, cid in enumerate(self.corpus_ids)}
        return [np.fromiter((position[c] for c in self.relevant.get(q, ())), dtype=np.int64) for q in self.query_ids]

    def gold_concepts(self, query_ids: list[str]) -> list[str]:
        """Per query, its gold concepts as one key (``c1 c2``): queries that share it share a cluster
        when intervals resample concepts."""
        return [" ".join(sorted({self.concept_of.get(c, c) for c in self.relevant.get(q, ())})) for q in query_ids]

    def subset(self, n_queries: int) -> MeloDataset:
        """The first ``n_queries`` queries with the whole corpus (for quick runs and tests)."""
        if n_queries < 0:
            raise ValueError(f"n_queries must be 0 or more, got {n_queries}")
        keep = self.query_ids[:n_queries]
        return MeloDataset(
            name=self.name,
            path=self.path,
            query_ids=keep,
            queries=self.queries[:n_queries],
            corpus_ids=self.corpus_ids,
            corpus=self.corpus,
            relevant={q: self.relevant[q] for q in keep if q in self.relevant},
            concept_of=self.concept_of,
            query_language=self.query_language,
            corpus_languages=self.corpus_languages,
        )


def _read_id_text(path: Path) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    seen: dict[str, int] = {}
    for number, (item_id, text) in read_tsv(path, 2):
        item_id = item_id.strip()
        if item_id in seen:
            raise MeloInputError(f"duplicate id {item_id!r} (first on line {seen[item_id]})", path, number)
        seen[item_id] = number
        ids.append(item_id)
        texts.append(text.strip())
    return ids, texts


def load_dataset(folder: str | Path) -> MeloDataset:
    """Load a dataset folder in the official layout, validating every cross-reference."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MeloInputError("dataset folder not found", folder)
    for required in REQUIRED_FILES:
        if not (folder / required).is_file():
            raise MeloInputError(f"missing {required} (a dataset folder needs {', '.join(REQUIRED_FILES)})", folder)
    query_ids, queries = _read_id_text(folder / QUERIES_FILE)
    corpus_ids, corpus = _read_id_text(folder / CORPUS_FILE)
    known_queries = set(query_ids)
    known_corpus = set(corpus_ids)

    relevant: dict[str, list[str]] = {}
    qrels = folder / ANNOTATIONS_FILE
    for number, (qid, _iteration, cid, grade) in read_tsv(qrels, 4):
        qid, cid = qid.strip(), cid.strip()
        if qid not in known_queries:
            raise MeloInputError(f"query id {qid!r} is not in {QUERIES_FILE}", qrels, number)
        if cid not in known_corpus:
            raise MeloInputError(f"corpus element id {cid!r} is not in {CORPUS_FILE}", qrels, number)
        try:
            relevance = int(grade)
        except ValueError:
            raise MeloInputError(f"relevance {grade!r} is not an integer", qrels, number) from None
        if relevance > 0:
            relevant.setdefault(qid, []).append(cid)

    concept_of: dict[str, str] = {}
    mapping = folder / CONCEPT_MAPPING_FILE
    if mapping.is_file():
        for number, (cid, uri) in read_tsv(mapping, 2):
            cid = cid.strip()
            if cid not in known_corpus:
                raise MeloInputError(f"corpus element id {cid!r} is not in {CORPUS_FILE}", mapping, number)
            concept_of[cid] = uri.strip()

    parsed = parse_dataset_name(folder.name)
    return MeloDataset(
        name=folder.name,
        path=folder,
        query_ids=query_ids,
        queries=queries,
        corpus_ids=corpus_ids,
        corpus=corpus,
        relevant=relevant,
        concept_of=concept_of,
        query_language=parsed.query_language if parsed else None,
        corpus_languages=parsed.corpus_languages if parsed else (),
    )


def datasets_root(data_dir: str | Path) -> Path:
    """The folder holding dataset folders, given the data directory in the official layout.

    Accepts the release root (``<dir>/processed/melo``), ``processed/`` itself, or a plain
    folder of dataset folders.
    """
    data_dir = Path(data_dir)
    for candidate in (data_dir / "processed" / "melo", data_dir / "melo", data_dir):
        if candidate.is_dir() and any(_is_dataset_dir(p) for p in candidate.iterdir()):
            return candidate
    raise MeloInputError(
        "no MELO datasets found (expected <dir>/processed/melo/<dataset>/queries.tsv, as in the official "
        "release at https://github.com/Avature/melo-benchmark; pass --data DIR or set MELO_DATA)",
        data_dir,
    )


def _is_dataset_dir(path: Path) -> bool:
    return path.is_dir() and (path / QUERIES_FILE).is_file()


def list_datasets(data_dir: str | Path) -> list[str]:
    """Names of all dataset folders under the data directory, sorted."""
    root = datasets_root(data_dir)
    return sorted(p.name for p in root.iterdir() if _is_dataset_dir(p))


def resolve_dataset(data_dir: str | Path | None, name_or_path: str) -> Path:
    """A dataset given by name (looked up in the data directory) or by folder path."""
    as_path = Path(name_or_path)
    if (as_path.is_dir() and (as_path / QUERIES_FILE).exists()) or os.sep in name_or_path:
        return as_path
    if data_dir is None:
        raise MeloInputError(f"dataset {name_or_path!r}: no data directory given")
    root = datasets_root(data_dir)
    for candidate in (root / name_or_path, root.parent / "custom" / name_or_path):
        if candidate.is_dir():
            return candidate
    raise MeloInputError(f"dataset {name_or_path!r} not found under {root}")


def dataset_target(folder: str | Path, force: bool = False) -> Path:
    """The folder ``write_dataset`` will write for ``folder`` (a link's target); checked before any
    work, so a bad --out fails at once. A folder holding other files than a dataset's is refused
    unless ``force`` (then the dataset's files go beside them)."""
    if is_stdout(folder):
        raise MeloInputError("a dataset is a folder of files: give a folder path, not - (standard output)")
    target = output_target(folder)
    if target.exists() and not target.is_dir():
        raise MeloInputError("exists and is not a folder", folder)
    if target.is_dir() and not force:
        foreign = sorted(p.name for p in target.iterdir() if p.name not in DATASET_FILES or not p.is_file())
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise MeloInputError(f"the folder holds files that are not a dataset's ({shown}): choose a new or "
                                 "empty folder, or --force to write the dataset's files beside them", folder)  # fmt: skip
    return target


def write_dataset(dataset: MeloDataset, folder: str | Path, stats: str | None = None, force: bool = False) -> Path:
    """Write a dataset in the official layout: only its own files (``DATASET_FILES``), each written
    whole (fsynced in a staging folder first, then renamed in); a new folder appears with all of
    them at once. Nothing beside the folder is touched.

    As for output files (``melo_core.files.output``), a symbolic link stays and its target folder gets
    the dataset; ``-``, a path that is not a folder and (without ``force``) a folder holding other
    files are refused, and a failed write is one ``MeloInputError`` line."""
    target = dataset_target(folder, force)
    try:
        _write_folder(dataset, target, stats)
    except OSError as exc:
        raise write_error(exc, folder) from None
    return Path(folder)


def _write_folder(dataset: MeloDataset, folder: Path, stats: str | None) -> None:
    """Written in a staging folder next to ``folder`` (removed by a later run if this one is
    killed), then renamed to ``folder``, or its files renamed into an existing one."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(folder.parent, folder.name)
    staging = Path(tempfile.mkdtemp(prefix=temporary_prefix(folder), suffix=".tmp", dir=folder.parent))
    try:
        with open(staging / QUERIES_FILE, "w", encoding="utf-8", newline="\n") as out:
            for qid, text in zip(dataset.query_ids, dataset.queries, strict=True):
                out.write(f"{qid}\t{text}\n")
        with open(staging / CORPUS_FILE, "w", encoding="utf-8", newline="\n") as out:
            for cid, text in zip(dataset.corpus_ids, dataset.corpus, strict=True):
                out.write(f"{cid}\t{text}\n")
        with open(staging / ANNOTATIONS_FILE, "w", encoding="utf-8", newline="\n") as out:
            for qid in dataset.query_ids:
                for cid in dataset.relevant.get(qid, ()):
                    out.write(f"{qid}\t0\t{cid}\t1\n")
        if dataset.concept_of:
            with open(staging / CONCEPT_MAPPING_FILE, "w", encoding="utf-8", newline="\n") as out:
                for cid in dataset.corpus_ids:
                    out.write(f"{cid}\t{dataset.concept_of[cid]}\n")
        if stats is not None:
            (staging / STATS_FILE).write_text(stats, encoding="utf-8")
        written = [name for name in DATASET_FILES if (staging / name).is_file()]
        for name in written:
            with open(staging / name, "rb") as handle:
                os.fsync(handle.fileno())
        if not folder.exists():
            staging.rename(folder)
            return
        for name in written:
            os.replace(staging / name, folder / name)
        for name in DATASET_FILES:  # an earlier build's file this one has not (concept mapping, stats)
            if name not in written and (folder / name).is_file():
                (folder / name).unlink()
        staging.rmdir()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def dataset_overview(data_dir: str | Path) -> list[dict[str, object]]:
    """One row per dataset (name, languages, kind, sizes) without parsing the files fully."""
    root = datasets_root(data_dir)
    rows = []
    for name in list_datasets(data_dir):
        parsed = parse_dataset_name(name)
        rows.append(
            {
                "dataset": name,
                "query language": parsed.query_language if parsed else "",
                "corpus languages": ", ".join(parsed.corpus_languages) if parsed else "",
                "kind": parsed.kind if parsed else "",
                "queries": _count_lines(root / name / QUERIES_FILE),
                "corpus elements": _count_lines(root / name / CORPUS_FILE),
            }
        )
    return rows
