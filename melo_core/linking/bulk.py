"""Bulk linking: millions of titles from CSV, TSV or Parquet, streamed in batches.

One function links a batch of titles (``BatchLinker``: the ``Pipeline`` built once, duplicate
titles linked once); two engines feed it:

- ``run_local``: this process reads the input in batches of ``batch_size`` rows and writes one
  shard per batch (``part-000000.parquet`` …, each written to a temporary file, fsynced and
  renamed), so memory is bounded by the batch size and a killed run is resumed with ``--resume``
  (shards already there are skipped; every input row ends up in exactly one shard);
- ``run_ray``: Ray Data reads the same input (``read_csv``/``read_parquet``), gives each row its
  position as id, runs ``BatchLinker`` as a stateful actor class in ``map_batches`` (models and
  indexes loaded once per worker) and writes Parquet (or CSV) files.

Output (long format, one row per input row and candidate, the columns of ``link --out FILE.csv``):
``row`` (0-based position of the data row in the input), ``rank`` (1 … top), ``concept_uri``,
``label``, ``score`` (6 decimals), ``matched_label``, ``matched_language``. Rows whose title is
empty, longer than ``MAX_TITLE_CHARS`` or holds a control character (a line break in a workbook's
cell) are not linked: they go to ``_rejects/`` (``row``, ``reason``, ``length``, ``start``: the
first 100 characters) and are counted. A CSV is read strictly first (``csv_row_count``): a quote
left open, or a line break in a CSV's title cell, stops with its line (exit 2).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import logging
import os
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from tqdm import tqdm

from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.files.output import open_output, remove_orphans, replaced_file, temporary_prefix
from melo_core.files.text_limits import MAX_LABEL, first_control
from melo_core.files.tsv import UTF8_HINT, csv_rows, read_text, sniff_delimiter, text_encoding
from melo_core.runtime.memory import kept_until_exit

if TYPE_CHECKING:
    import ray.data

    from melo_core.linking.linker import Linker

MAX_TITLE_CHARS = MAX_LABEL  # longer titles are rejected, not linked (melo_core.files.text_limits: as every import)
READ_BLOCK_BYTES = 32 << 20  # CSV read block; a row longer than this stops with exit code 2
DEFAULT_BATCH_SIZE = 4096
LINK_CHUNK = 64  # distinct titles per Linker.link call
TITLE_CACHE = 50_000  # distinct titles remembered per worker (LRU): repeated titles are linked once
MANIFEST = "_manifest.json"
REJECTS = "_rejects"
FORMATS = ("parquet", "csv")
# .txt: what a spreadsheet saves as "Unicode Text" (UTF-16, tab-separated, quoted as CSV is)
INPUT_FORMATS = {".csv": "csv", ".txt": "csv", ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet",
                 ".xlsx": "xlsx", ".xlsm": "xlsx"}  # fmt: skip
COLUMNS = ("row", "rank", "concept_uri", "label", "score", "matched_label", "matched_language")
SCHEMA = pa.schema([("row", pa.int64()), ("rank", pa.int32()), ("concept_uri", pa.string()),
                    ("label", pa.string()), ("score", pa.float64()), ("matched_label", pa.string()),
                    ("matched_language", pa.string())])  # fmt: skip
REJECT_SCHEMA = pa.schema([("row", pa.int64()), ("reason", pa.string()), ("length", pa.int64()),
                           ("start", pa.string())])  # fmt: skip


@dataclass(frozen=True)
class LinkSettings:
    """What builds the linker: plain values, so a Ray worker can rebuild the same one."""

    data: str
    pipeline: str | None = None  # a resolved pipeline name or PATH.toml (the CLI has chosen the ready one)
    scorer: str | None = None  # instead of a pipeline: a scorer spec
    languages: tuple[str, ...] | None = None
    query_language: str | None = None
    aggregation: str = "max"
    index_kind: str = "hnsw"
    mentions: bool = True
    hold_out_country: str | None = None
    top: int = 10
    cache_dir: str | None = None
    query_cache: bool = True  # False: titles are embedded afresh, never stored in the embedding cache
    embedded_mentions_only: bool = False  # True: known mentions not embedded yet wait (`prepare` embeds them)


def build_linker(settings: LinkSettings, on_status: Callable[[str], None] = lambda message: None,
                 show_progress: bool = True) -> Linker:  # fmt: skip
    """The linker `link` ranks with: the pipeline's variant for the query language, with the known
    mentions of the data folder's crosswalks, or the scorer spec."""
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo
    from melo_core.linking.linker import Linker
    from melo_core.linking.pipeline import Pipeline, crosswalk_mentions_of, load_pipeline

    taxonomy = cached_taxonomy_from_melo(settings.data, settings.cache_dir)
    languages = list(settings.languages) if settings.languages else None
    try:
        if settings.scorer:
            return Linker(taxonomy, settings.scorer, languages, aggregation=settings.aggregation,
                          index_kind=settings.index_kind, on_status=on_status, query_language=settings.query_language,
                          cache_dir=settings.cache_dir, show_progress=show_progress,
                          cache_queries=settings.query_cache)  # fmt: skip
        definition = load_pipeline(settings.pipeline or "best")
        pipeline = Pipeline(definition, taxonomy, languages, aggregation=settings.aggregation,
                            index_kind=settings.index_kind, on_status=on_status, cache_dir=settings.cache_dir,
                            show_progress=show_progress, cache_queries=settings.query_cache)  # fmt: skip
        if settings.mentions:
            pipeline.set_mentions(crosswalk_mentions_of(settings.data, definition.mention_relations,
                                                        settings.hold_out_country, settings.cache_dir),
                                  embedded_only=settings.embedded_mentions_only)  # fmt: skip
        linker = pipeline.linker(settings.query_language)
        if pending := pipeline.pending_mentions(settings.query_language):
            on_status(f"{pending} known mentions still to embed: "
                      f"`python -m melo_core prepare --pipeline {definition.name}` embeds them")  # fmt: skip
        return linker
    except ValueError as exc:
        raise MeloInputError(str(exc)) from None


def limit_threads(threads: int) -> None:
    """At most ``threads`` threads per library in this process (BLAS, OpenMP: numpy, faiss; torch's
    intra-op pool; ONNX Runtime's sessions). What a Ray actor gets from Ray (OMP_NUM_THREADS = its
    CPUs); for the local engine ``--threads``. On a busy machine more threads than free cores slow
    linking down."""
    from threadpoolctl import threadpool_limits

    from melo_core.encoders.onnx_transformer import set_threads

    threadpool_limits(limits=threads)
    set_threads(threads)
    if "torch" in sys.modules:  # else torch, when a model needs it, reads OMP_NUM_THREADS: no import (3 s) for nothing
        sys.modules["torch"].set_num_threads(threads)
    else:
        os.environ["OMP_NUM_THREADS"] = str(threads)


# -- the batch function both engines run -------------------------------------------------------------


def reject_reason(title: str | None) -> str | None:
    """Why a title is not linked (None: it is linked)."""
    text = (title or "").strip()
    if not text:
        return "empty"
    if len(text) > MAX_TITLE_CHARS:
        return f"longer than {MAX_TITLE_CHARS} characters"
    bad = first_control(text)  # the rule of melo_core.files.text_limits.check_label, in a short reason
    if bad is not None:
        return "holds a line break" if bad in "\r\n" else f"holds a control character U+{ord(bad):04X}"
    return None


def rejects_of(batch: pa.Table) -> pa.Table:
    """The rejected rows of a batch (columns row, title) as ``REJECT_SCHEMA`` rows."""
    out: dict[str, list] = {name: [] for name in REJECT_SCHEMA.names}
    for row, title in zip(batch.column("row").to_pylist(), batch.column("title").to_pylist(), strict=True):
        reason = reject_reason(title)
        if reason:
            text = (title or "").strip()
            out["row"].append(row)
            out["reason"].append(reason)
            out["length"].append(len(text))
            out["start"].append(text[:100])
    return pa.Table.from_pydict(out, schema=REJECT_SCHEMA)


class BatchLinker:
    """Title batch (a table with columns ``row`` and ``title``) → candidate rows (``SCHEMA``).

    Builds the linker once (a Ray Data actor: once per worker); each distinct title of a batch
    is linked once, and the last ``TITLE_CACHE`` distinct titles are remembered across batches.
    Rejected titles (``reject_reason``) give no rows."""

    def __init__(self, settings: LinkSettings, linker: Linker | None = None, cache_size: int = TITLE_CACHE,
                 own_process: bool = False):  # fmt: skip
        self.settings = settings
        if linker is None:
            # own_process (a Ray actor): the linker lives as long as the process (``kept_until_exit``)
            with kept_until_exit() if own_process else nullcontext():
                linker = build_linker(settings, show_progress=False)
        self.linker = linker
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[tuple, ...]] = OrderedDict()
        self.distinct_linked = 0

    def _link(self, titles: Sequence[str]) -> dict[str, tuple[tuple, ...]]:
        found: dict[str, tuple[tuple, ...]] = {}
        missing = []
        for title in dict.fromkeys(titles):
            cached = self._cache.get(title)
            if cached is None:
                missing.append(title)
            else:
                self._cache.move_to_end(title)
                found[title] = cached
        for begin in range(0, len(missing), LINK_CHUNK):
            chunk = missing[begin : begin + LINK_CHUNK]
            for title, candidates in zip(chunk, self.linker.link(chunk, top_k=self.settings.top), strict=True):
                found[title] = tuple((c.rank, c.concept_uri, c.label, round(c.score, 6), c.matched_label,
                                      c.matched_language) for c in candidates)  # fmt: skip
        self.distinct_linked += len(missing)
        for title in missing:
            self._cache[title] = found[title]
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return found

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.column("row").to_pylist()
        titles = [(t or "").strip() for t in batch.column("title").to_pylist()]
        keep = [i for i, t in enumerate(titles) if reject_reason(t) is None]
        found = self._link([titles[i] for i in keep])
        out: dict[str, list] = {name: [] for name in COLUMNS}
        for i in keep:
            for rank, uri, label, score, matched, language in found[titles[i]]:
                out["row"].append(rows[i])
                out["rank"].append(rank)
                out["concept_uri"].append(uri)
                out["label"].append(label)
                out["score"].append(score)
                out["matched_label"].append(matched)
                out["matched_language"].append(language)
        return pa.Table.from_pydict(out, schema=SCHEMA)


# -- reading ------------------------------------------------------------------------------------------


def input_format(path: str | Path, given: str | None = None) -> str:
    """csv, tsv, parquet or xlsx: ``given``, else from the file name's suffix."""
    if given:
        return given
    suffixes = Path(str(path)).suffixes
    suffix = suffixes[-2] if len(suffixes) > 1 and suffixes[-1] in (".gz", ".bz2", ".zst") else (suffixes or [""])[-1]
    fmt = INPUT_FORMATS.get(suffix.lower())
    if fmt is None:
        raise MeloInputError(f"cannot tell the format from the name; give --input-format "
                             f"{' or '.join(sorted(set(INPUT_FORMATS.values())))}", path)  # fmt: skip
    return fmt


def data_files(folder: str | Path) -> list[Path]:
    """A folder's data files by name: not those named ``_...`` or ``.…`` (manifests, rejects,
    temporary files), as Ray Data and our own folder outputs name them."""
    return sorted(f for f in Path(folder).iterdir() if f.is_file() and not f.name.startswith(("_", ".")))


@dataclass(frozen=True)
class TextLayout:
    """How a text input is written: its encoding (``text_encoding``) and delimiter."""

    encoding: str = "utf-8"
    delimiter: str = ","


def text_layout(path: str | Path, fmt: str) -> TextLayout:
    """The encoding of a text input and its delimiter: a tab for TSV; for CSV, the one its header
    line uses (``sniff_delimiter``: comma, semicolon or tab), read in the file or in the first
    file of a folder; UTF-8 and a comma for an input that is not on this machine."""
    path = Path(path)
    if path.is_dir():
        path = next(iter(data_files(path)), path)
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            head = stream.read(1 << 16)
    except (OSError, pa.ArrowException):
        return TextLayout(delimiter="\t" if fmt == "tsv" else ",")  # a URL, or unreadable: the reader says why
    encoding = text_encoding(head)
    if fmt == "tsv":
        return TextLayout(encoding, "\t")
    return TextLayout(encoding, sniff_delimiter(head.decode(encoding, errors="replace").removeprefix("\ufeff")))


def csv_options(fmt: str, column: str | None, layout: TextLayout = TextLayout()
                ) -> tuple[pacsv.ReadOptions, pacsv.ParseOptions, pacsv.ConvertOptions]:  # fmt: skip
    """The pyarrow CSV options both engines read with: every cell a string, empty cells empty."""
    read = pacsv.ReadOptions(block_size=READ_BLOCK_BYTES,  # pyarrow reads "utf8" itself, transcodes others
                             encoding="utf8" if layout.encoding == "utf-8" else layout.encoding)  # fmt: skip
    parse = pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else layout.delimiter, quote_char=False if fmt == "tsv" else '"',
                               newlines_in_values=fmt != "tsv")  # fmt: skip
    convert = pacsv.ConvertOptions(include_columns=[column] if column else None,
                                   column_types={column: pa.string()} if column else None,
                                   strings_can_be_null=False, quoted_strings_can_be_null=False)  # fmt: skip
    return read, parse, convert


def _arrow_error(exc: Exception, path: str | Path, fmt: str) -> MeloInputError:
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "straddling" in message or "straddles" in message:
        message = f"a row is longer than the {READ_BLOCK_BYTES >> 20} MiB read block"
    elif "invalid UTF8" in message or isinstance(exc, UnicodeDecodeError):
        message = f"not UTF-8 text; {UTF8_HINT}"
    return MeloInputError(f"cannot read as {fmt.upper()} ({message})", path)


def csv_row_count(path: str | Path, column: str, layout: TextLayout) -> int:
    """The data rows of a CSV file as ``melo_core.files.tsv.csv_rows`` reads them, strict about quotes:
    pyarrow, which reads the titles fast, takes a quote left open for one cell holding the rows
    after it. A quote left open, or a line break in the title ``column`` (a quote left open that a
    later quote closed), stops with the line where it opened (exit 2); what pyarrow reads must
    then come to this count."""
    encoding = "utf-8-sig" if layout.encoding == "utf-8" else layout.encoding
    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            text = io.TextIOWrapper(stream, encoding=encoding, newline="")
            return max(0, sum(1 for _ in csv_rows(Path(path), text, layout.delimiter, (column,))) - 1)
    except OSError as exc:
        raise MeloInputError(f"cannot read file ({exc.strerror or exc})", path) from None
    except (pa.ArrowException, ValueError) as exc:  # a UnicodeDecodeError is a ValueError
        raise _arrow_error(exc, path, "csv") from None


def _missing_column(path: str | Path, column: str, found: Sequence[str]) -> MeloInputError:
    return MeloInputError(f"missing column {column}; found {', '.join(found) or 'no header'}", path, 1)


def sample_titles(path: str | Path, column: str, fmt: str | None = None, rows: int = 5000) -> list[str] | None:
    """The first ``rows`` cells of ``column``: of the file, or of the first file (by name) of a
    folder the Ray engine reads; None when the input is not on this machine (a URL)."""
    path = Path(path)
    if path.is_dir():
        files = data_files(path)
        if not files:
            return []
        path = files[0]
    elif not path.exists():
        return None
    batches = InputBatches(path, column, rows, fmt, head=rows)
    _, table = next(iter(batches), (0, pa.table({"title": pa.array([], pa.string())})))
    return table.column("title").to_pylist()


class InputBatches:
    """The rows of a CSV, TSV or Parquet file's ``column`` in batches of exactly ``batch_size``
    rows (the last may be shorter) as tables (row, title); ``row`` counts data rows from 0, so
    batch ``n`` holds rows ``n * batch_size`` … on every run. ``head``: only the first rows are
    wanted (a sample); a workbook's sheet is then read no further than them."""

    def __init__(self, path: str | Path, column: str, batch_size: int, fmt: str | None = None,
                 head: int | None = None):  # fmt: skip
        if batch_size < 1:  # the CLI's --batch-size never gets here (at_least(1)); a Python caller may
            raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
        self.path = Path(path)
        self.column = column
        self.batch_size = batch_size
        self.head = head
        self.format = input_format(path, fmt)
        try:
            self.size = self.path.stat().st_size
            if self.path.is_dir():
                raise MeloInputError("is a folder; the local engine reads one file (--engine ray reads folders)", path)
        except OSError as exc:
            raise MeloInputError(f"cannot read file ({exc.strerror or exc})", path) from None
        self.total_rows: int | None = None
        self._stream: pa.NativeFile | None = None
        self._batches = self._open()

    def _open(self) -> Iterator[pa.RecordBatch]:
        try:
            if self.format == "parquet":
                parquet = pq.ParquetFile(self.path)
                names = parquet.schema_arrow.names
                if self.column not in names:
                    raise _missing_column(self.path, self.column, names)
                self.total_rows = parquet.metadata.num_rows
                return parquet.iter_batches(batch_size=self.batch_size, columns=[self.column])
            if self.format == "xlsx":  # the first sheet, read as the CSV text it would save
                sheet_rows = None if self.head is None else self.head + 1  # and the header row
                text = read_text(self.path, sheet_rows).encode("utf-8")
                self.size = len(text)  # the progress bar follows the reader through that text
                fmt, layout, source = "csv", TextLayout(), lambda: pa.BufferReader(text)
            else:
                fmt, layout = self.format, text_layout(self.path, self.format)
                source = lambda: pa.input_stream(str(self.path), compression="detect")  # noqa: E731
            self._stream = source()
            read, parse, convert = csv_options(fmt, None, layout)
            header = pacsv.open_csv(self._stream, read_options=read, parse_options=parse,
                                    convert_options=convert).schema.names  # fmt: skip
            if self.column not in header:
                raise _missing_column(self.path, self.column, header)
            if fmt == "csv" and self.format == "csv" and self.head is None:
                self.total_rows = csv_row_count(self.path, self.column, layout)  # and no quote left open
            self._stream = source()
            read, parse, convert = csv_options(fmt, self.column, layout)
            return iter(pacsv.open_csv(self._stream, read_options=read, parse_options=parse, convert_options=convert))
        except OSError as exc:
            raise MeloInputError(f"cannot read file ({exc.strerror or exc})", self.path) from None
        except (pa.ArrowException, ValueError) as exc:
            raise _arrow_error(exc, self.path, self.format) from None

    def bytes_read(self) -> int | None:
        """How far into the (compressed) file the CSV reader is; None for Parquet."""
        try:
            return self._stream.tell() if self._stream is not None else None
        except (OSError, pa.ArrowException):
            return None

    def __iter__(self) -> Iterator[tuple[int, pa.Table]]:
        """(batch number, table with columns row and title)."""
        pending: list[pa.Array] = []
        held = 0
        number = 0
        row = 0

        def emit(size: int) -> pa.Table:
            nonlocal pending, held, row
            chunked = pa.chunked_array(pending, type=pa.string()) if pending else pa.chunked_array([], pa.string())
            titles = chunked.slice(0, size)
            rest = chunked.slice(size)
            pending = rest.chunks
            held -= size
            table = pa.table({"row": pa.array(range(row, row + size), pa.int64()), "title": titles})
            row += size
            return table

        while True:
            try:
                batch = next(self._batches)
            except StopIteration:
                break
            except OSError as exc:
                raise MeloInputError(f"cannot read file ({exc.strerror or exc})", self.path) from None
            except (pa.ArrowException, ValueError) as exc:
                raise _arrow_error(exc, self.path, self.format) from None
            values = batch.column(0)
            if values.type != pa.string():
                try:
                    values = values.cast(pa.string())
                except pa.ArrowException as exc:
                    raise _arrow_error(exc, self.path, self.format) from None
            pending.append(values)
            held += len(values)
            while held >= self.batch_size:
                yield number, emit(self.batch_size)
                number += 1
        if held:
            yield number, emit(held)
        if self.head is None and self.total_rows is not None and row != self.total_rows:
            raise MeloInputError(f"read {row:,} rows of the {self.total_rows:,} the file holds", self.path)


# -- the local engine ---------------------------------------------------------------------------------


@dataclass
class Summary:
    rows: int = 0  # input rows
    rejected: int = 0
    skipped_batches: int = 0  # already written (--resume)
    batches: int = 0
    distinct_linked: int = 0
    seconds: float = 0.0


def shard_name(number: int, fmt: str) -> str:
    return f"part-{number:06d}.{fmt}"


def is_folder_output(out: str) -> bool:
    """A folder of shards unless ``out`` is ``-``, names a .csv file, or is an existing non-folder."""
    if out == "-" or out.lower().endswith(".csv"):
        return False
    path = Path(out)
    return path.is_dir() or not path.exists()


def _job(source: InputBatches, settings: LinkSettings, fmt: str) -> dict:
    """What a resumed run must share with the run it continues: the input's bytes, not its path or
    time (an input moved, copied back or touched is the same input; one edited is not)."""
    from melo_core.runtime.disk_cache import content_digests

    [digest] = content_digests([source.path])
    return {"input_bytes": source.path.stat().st_size, "input_sha1": digest,
            "column": source.column, "input_format": source.format, "batch_size": source.batch_size,
            "format": fmt, "settings": {k: list(v) if isinstance(v, tuple) else v
                                        for k, v in asdict(settings).items() if k not in ("cache_dir", "query_cache")}}  # fmt: skip


def _write_json(path: Path, value: dict) -> None:
    with open_output(path) as handle:
        json.dump(value, handle, indent=1, sort_keys=True)
        handle.write("\n")


def _write_table(table: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        with replaced_file(path) as temporary:
            pq.write_table(table, temporary)
        return
    with open_output(path) as handle:
        _write_csv_rows(handle, table, header=True)


def _write_csv_rows(handle: TextIO, table: pa.Table, header: bool) -> None:
    writer = csv.writer(handle)
    if header:
        writer.writerow(table.column_names)
    writer.writerows(zip(*(table.column(name).to_pylist() for name in table.column_names), strict=True))


def _prepare_folder(out: Path, job: dict, resume: bool) -> None:
    """A new or empty folder, or (``resume``) one holding a run of the same job."""
    manifest = out / MANIFEST
    if out.is_dir() and any(out.iterdir()):
        if not resume:
            raise MeloInputError("output folder is not empty; --resume continues the run written there, "
                                 "or choose a new folder", out)  # fmt: skip
        try:
            before = json.loads(manifest.read_text(encoding="utf-8"))["job"]
        except (OSError, ValueError, KeyError):
            raise MeloInputError(f"not a folder of `link` shards (no readable {MANIFEST})", out) from None
        changed = [key for key in sorted(set(job) | set(before)) if job.get(key) != before.get(key)]
        if changed:
            raise MeloInputError(f"cannot resume: {', '.join(changed)} differ from the run written there", out)
        for folder in (out, out / REJECTS):  # a killed run's temporary files (not a live run's)
            remove_orphans(folder)
    _write_json(manifest, {"job": job, "complete": False})


def _progress(source: InputBatches, quiet: bool) -> tqdm:
    return tqdm(total=source.total_rows, unit="row", unit_scale=True, desc="linking", disable=quiet,
                file=sys.stderr, smoothing=0.1)  # fmt: skip


def _estimate_total(bar: tqdm, source: InputBatches) -> None:
    """For CSV, the total rows estimated from the bytes read so far (the ETA follows)."""
    position = source.bytes_read()
    if source.total_rows is None and position and bar.n:
        bar.total = max(bar.n, round(bar.n * source.size / position))


def run_local(source: InputBatches, settings: LinkSettings, out: str, fmt: str = "parquet", resume: bool = False,
              quiet: bool = False, rejects: str | None = None,
              linker_factory: Callable[[], BatchLinker] | None = None) -> Summary:  # fmt: skip
    """Link every row of ``source`` in this process; ``out`` is a folder of shards (resumable) or a
    CSV file (``-``: stdout; ``rejects``: where rejected rows go, else they are only counted)."""
    started = time.monotonic()
    summary = Summary()
    make = linker_factory or (lambda: BatchLinker(settings))
    engine: BatchLinker | None = None
    if not is_folder_output(out):
        if resume:
            raise MeloInputError("--resume needs a folder output (--out FOLDER), not a file")
        rejected_tables = []
        with open_output(out) as handle, _progress(source, quiet) as bar:
            _write_csv_rows(handle, SCHEMA.empty_table(), header=True)
            for _, batch in source:
                engine = engine or make()
                _write_csv_rows(handle, engine(batch), header=False)
                bad = rejects_of(batch)
                summary.rows += len(batch)
                summary.rejected += len(bad)
                summary.batches += 1
                if rejects and len(bad):
                    rejected_tables.append(bad)  # few, small (100 characters each)
                bar.update(len(batch))
                _estimate_total(bar, source)
        if rejects:
            with open_output(rejects) as handle:
                _write_csv_rows(handle, pa.concat_tables([REJECT_SCHEMA.empty_table(), *rejected_tables]), True)
    else:
        folder = Path(out)
        job = _job(source, settings, fmt)
        _prepare_folder(folder, job, resume)
        with _progress(source, quiet) as bar:
            for number, batch in source:
                summary.rows += len(batch)
                summary.batches += 1
                shard = folder / shard_name(number, fmt)
                rejected = folder / REJECTS / shard_name(number, "csv")
                if resume and shard.is_file():
                    summary.skipped_batches += 1
                    summary.rejected += _count_rejects(rejected)
                else:
                    engine = engine or make()
                    linked = engine(batch)
                    bad = rejects_of(batch)
                    summary.rejected += len(bad)
                    if len(bad):  # first: a shard on disk means its batch is wholly done
                        _write_table(bad, rejected, "csv")
                    _write_table(linked, shard, fmt)
                bar.update(len(batch))
                _estimate_total(bar, source)
        _write_json(folder / MANIFEST, {"job": job, "complete": True, "rows": summary.rows,
                                        "rejected": summary.rejected, "batches": summary.batches,
                                        "engine": "local"})  # fmt: skip
    summary.seconds = time.monotonic() - started
    summary.distinct_linked = engine.distinct_linked if engine else 0
    return summary


def _count_rejects(path: Path) -> int:
    if not path.is_file():
        return 0
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types={"start": pa.string()})).num_rows


# -- the Ray Data engine ------------------------------------------------------------------------------

PROPAGATED_ENV = ("MELO_DATA", "MELO_CACHE", "MELO_MODELS", "MELO_ESCO", "PYTHONPATH")
RAY_CONNECT_TIMEOUT_S = 10.0  # how long --address may take to answer (link --connect-timeout)
RAY_CLIENT_PORT = 10001  # of a ray://HOST address without a port


def check_ray_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """One line (``MeloInputError``) within ``timeout`` seconds when nothing takes a connection at
    a Ray cluster's ``address`` (HOST:PORT, or ray://HOST[:PORT]): ``ray.init`` would retry for
    many minutes, printing "Failed to connect to GCS". ``auto`` and ``local`` are Ray's to find."""
    if not timeout > 0:
        raise MeloInputError(f"--connect-timeout must be more than 0 seconds, got {timeout:g}")
    if address in ("auto", "local"):
        return
    text = address.split("://", 1)[1] if "://" in address else address
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        if "://" not in address:
            raise MeloInputError(f"--address {address!r}: expected HOST:PORT or ray://HOST[:PORT]")
        host, port = text, str(RAY_CLIENT_PORT)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:  # refused, unreachable, an unknown host, or no answer in time
        raise _unreachable(address, "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc),
                           timeout) from None  # fmt: skip


def _unreachable(address: str, reason: str, timeout: float) -> MeloInputError:
    return MeloInputError(f"cannot reach the Ray cluster at {address} ({reason}; waited up to {timeout:g} s, "
                          "--connect-timeout sets it): is it running?")  # fmt: skip


def _bound_ray_connect(timeout: float) -> None:
    """Ray's own connection attempts bounded by ``timeout`` (an address that takes the connection but
    is no cluster): one attempt, each of its waits ``timeout`` seconds, unless the user set them."""
    seconds = str(max(1, round(timeout)))
    for name in ("RAY_py_gcs_connect_timeout_s", "RAY_gcs_rpc_server_connect_timeout_s"):
        os.environ.setdefault(name, seconds)
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "1")  # attempts, about a second apart


def run_ray(path: str, column: str, settings: LinkSettings, out: str, fmt: str = "parquet",
            input_fmt: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE, workers: int | None = None,
            num_gpus: float = 0.0, address: str | None = None, quiet: bool = False,
            connect_timeout: float = RAY_CONNECT_TIMEOUT_S) -> Summary:  # fmt: skip
    """The same ``BatchLinker`` through Ray Data: read → row ids → ``map_batches`` (an actor per
    worker) → ``write_parquet`` / ``write_csv``. Without ``address`` a local Ray is started on
    this machine; a cluster that does not answer in ``connect_timeout`` seconds (a few times that
    when its address takes connections) is one line. A local ``out`` is written as
    ``.OUT.p<pid>-ray.tmp`` and renamed when whole."""
    if address:  # before importing Ray (seconds): a cluster not there fails at once
        check_ray_address(address, connect_timeout)
        _bound_ray_connect(connect_timeout)
    import ray
    import ray.data

    started = time.monotonic()
    fmt_in = input_format(path, input_fmt)
    remote = "://" in out
    folder = Path(out)
    if not remote and folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise MeloInputError("output folder exists and is not empty (the ray engine writes a new folder; "
                             "--resume is for --engine local)", out)  # fmt: skip
    if "://" not in path and not Path(path).exists():
        raise MeloInputError("cannot read file (No such file or directory)", path)
    if "://" in path and fmt_in == "xlsx":
        raise MeloInputError("an Excel workbook is read on this machine: give its local path, or save its "
                             "sheet as CSV for the cluster to read", path)  # fmt: skip
    workers = workers or max(1, os.cpu_count() or 1)
    env = {k: os.environ[k] for k in PROPAGATED_ENV if os.environ.get(k)}
    folders = config.folders()  # --cache, --models as this process resolved them: the actors' environment
    env.update(MELO_DATA=os.path.abspath(settings.data), MELO_CACHE=folders["cache"], MELO_MODELS=folders["models"])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(config.PROJECT_ROOT),
                                                      env.get("PYTHONPATH")]))  # fmt: skip
    if not ray.is_initialized():
        options: dict = {"include_dashboard": False, "log_to_driver": False, "configure_logging": True,
                         "logging_level": "ERROR", "runtime_env": {"env_vars": env}}  # fmt: skip
        if address:
            try:
                ray.init(address=address, **options)
            except ConnectionError as exc:
                raise _unreachable(address, str(exc).splitlines()[0] if str(exc) else "no cluster",
                                   connect_timeout) from None  # fmt: skip
        else:  # one CPU per linking actor, and one for the reading and writing tasks
            ray.init(address="local", num_cpus=workers + 1, num_gpus=1 if num_gpus else 0, **options)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # row ids are positions in the input
    context.enable_progress_bars = not quiet
    if quiet:
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    numbered, count = ray_titles(path, column, fmt_in, batch_size)
    linked = numbered.map_batches(BatchLinker, fn_constructor_kwargs={"settings": settings, "own_process": True},
                                  batch_size=batch_size, batch_format="pyarrow",
                                  compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1,
                                  num_gpus=num_gpus or None)  # fmt: skip
    target = out if remote else str(folder.with_name(f"{temporary_prefix(folder)}ray.tmp"))
    if not remote:
        remove_orphans(folder.parent, folder.name)  # a killed run's leftovers, not a live run's
    if fmt == "parquet":
        linked.write_parquet(target)
    else:
        linked.write_csv(target)
    rejected = numbered.map_batches(rejects_of, batch_size=batch_size, batch_format="pyarrow")
    rejected_count = rejected.count()
    if rejected_count:
        rejected.write_csv(f"{target}/{REJECTS}")
    summary = Summary(rows=count, rejected=rejected_count, seconds=time.monotonic() - started)
    if not remote:
        Path(target).mkdir(parents=True, exist_ok=True)
        _write_json(Path(target) / MANIFEST, {"complete": True, "engine": "ray", "input": path, "column": column,
                                              "rows": count, "rejected": rejected_count, "batch_size": batch_size,
                                              "format": fmt, "settings": asdict(settings)})  # fmt: skip
        if folder.is_dir():
            folder.rmdir()  # empty (checked above)
        os.replace(target, folder)
    return summary


def ray_titles(path: str, column: str, fmt_in: str, batch_size: int) -> tuple[ray.data.Dataset, int]:
    """The input's titles as a Ray dataset with columns row (the position in the input) and title,
    in blocks of at most ``batch_size`` rows, and their number. One block per batch: each actor
    task is then one batch, so its rows are written as soon as it is linked (not after a reader's
    block of many batches: 110 s to the first rows of 100,000 titles with `fast`, 30 s so), and
    the actors share the work to the last batch.

    Positions: the titles are read once and kept in Ray's object store, in input order (the
    caller sets ``preserve_order``), and each block numbers its rows from the sizes of the blocks
    before it. (``Dataset.zip`` with ``range``, which did this, is deprecated since Ray 2.60 and
    read the input twice.)"""
    import ray
    import ray.data

    try:
        if fmt_in == "parquet":
            dataset = ray.data.read_parquet(path, columns=[column])
        elif fmt_in == "xlsx":  # a sheet is at most 1,048,576 rows: read here, as the CSV text it would save
            text = read_text(Path(path)).encode("utf-8")
            read, parse, convert = csv_options("csv", None)
            dataset = ray.data.from_arrow(pacsv.read_csv(pa.BufferReader(text), read_options=read,
                                                         parse_options=parse, convert_options=convert))  # fmt: skip
        else:
            read, parse, convert = csv_options(fmt_in, None, text_layout(path, fmt_in))
            dataset = ray.data.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
        schema = dataset.schema()
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise _arrow_error(exc, path, fmt_in) from None
    if schema is None:  # no rows to read a schema from (a header alone): nothing to link, as locally
        return ray.data.from_arrow(_numbered_block(pa.table({"title": pa.array([], pa.string())}), 0)), 0
    names = schema.names
    if column not in names:
        raise _missing_column(path, column, names)
    expected = None
    if fmt_in == "csv" and "://" not in path:  # a local CSV file, or folder: no quote left open, no row lost
        files = data_files(path) if Path(path).is_dir() else [Path(path)]
        expected = sum(csv_row_count(file, column, text_layout(file, fmt_in)) for file in files)
    blocks = dataset.select_columns([column]).rename_columns({column: "title"}).materialize().to_arrow_refs()
    # No CPU reserved for these small tasks: with one, Ray warned that the linking found no free CPU.
    block_rows, numbered_block = ray.remote(num_cpus=0)(_block_rows), ray.remote(num_cpus=0)(_numbered_block)
    sizes = ray.get([block_rows.remote(block) for block in blocks])
    starts = itertools.accumulate(sizes, initial=0)  # one more than the blocks: the total
    numbered = ray.data.from_arrow_refs([numbered_block.remote(block, start)
                                         for block, start in zip(blocks, starts, strict=False)])  # fmt: skip
    if expected is not None and sum(sizes) != expected:
        raise MeloInputError(f"read {sum(sizes):,} rows of the {expected:,} the input holds", path)
    return numbered.repartition(target_num_rows_per_block=batch_size), sum(sizes)


def _block_rows(block: pa.Table) -> int:
    return block.num_rows


def _numbered_block(block: pa.Table, start: int) -> pa.Table:
    """The block's titles with their positions in the input, ``start`` on."""
    return pa.table({"row": pa.array(range(start, start + block.num_rows), pa.int64()), "title": block["title"]})


def read_output(folder: str | Path) -> pa.Table:
    """Every candidate row of a folder output (either engine), sorted by row and rank."""
    files = data_files(folder)
    tables = []
    for file in files:
        if file.suffix == ".parquet":
            tables.append(pq.read_table(file).cast(SCHEMA))
        else:
            tables.append(pacsv.read_csv(file, convert_options=pacsv.ConvertOptions(
                column_types=SCHEMA, strings_can_be_null=False)).select(list(COLUMNS)).cast(SCHEMA))  # fmt: skip
    table = pa.concat_tables([SCHEMA.empty_table(), *tables])
    return table.sort_by([("row", "ascending"), ("rank", "ascending")])
