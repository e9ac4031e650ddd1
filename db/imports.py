"""Imports into the store: taxonomies, and source terms with their decisions.

Every file is read and checked completely before the store is touched, so a bad file writes
nothing; errors name the file, the line and the column (or JSON field) at fault. A taxonomy is
one transaction; terms and decisions go in short transactions (batches), so curators' decisions
go on meanwhile. Imports are idempotent: importing the same file twice changes nothing, and
running again an import that failed part-way completes it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from db.formats import (
    LANGUAGE_RE,
    OUTCOME_OF_RELATION,
    SKOS_COLUMNS,
    SKOS_COLUMNS_WITHOUT_ORIGINALS,
    SKOS_COLUMNS_WITHOUT_REVIEWS,
    is_uri,
    parse_time,
    term_uri,
    unneutralise,
)
from db.models import (
    MATCH_OUTCOMES,
    SCHEME_KINDS,
    Base,
    Bounded,
    ColumnValueError,
    ConceptRow,
    DecisionRow,
    LabelRow,
    SchemeRow,
    TaxonomyRow,
    TermRow,
    column_check,
    utcnow,
)
from db.search import label_search_text
from db.store import IMPORT_CURATOR_PREFIX, Actor, Store, search_text
from db.store.accounts import acting_as
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import RELATION_ALIASES, RELATIONS, load_crosswalk
from melo_core.esco.taxonomy import Taxonomy
from melo_core.files.text_limits import MAX_CODE, check_description, check_label, check_name
from melo_core.files.tsv import header_row, read_csv_records, read_text, sniff_delimiter

TERM_CSV_COLUMNS = ("code", "label", "description", "lang")
# A taxonomy import may remove up to this share of a stored version's concepts without --replace.
MAX_REMOVED_SHARE = 0.02
# The version of the ESCO union of the MELO corpora: replaced by nothing else without --replace.
MELO_UNION_VERSION = "melo-union"
_BATCH = 5000
# Rows per transaction of a term import: a few hundredths of a second each, so a curator's
# decision waits no longer than that (benchmarks/reimport.py).
WRITE_BATCH = 2000
SQLITE_PAUSE_SECONDS = 0.1  # between two of an import's transactions (see _BatchWriter)

Progress = Callable[[int], None]
Row = Mapping[str, object]  # column -> value, as an insert takes it


@dataclass(frozen=True)
class TermRecord:
    line: int
    code: str
    label: str
    description: str | None = None  # None: leave a stored description alone
    language: str | None = None
    uri: str | None = None  # None: derived from the code (db.formats.term_uri)


@dataclass(frozen=True)
class DecisionRecord:
    line: int
    code: str
    concept_uri: str
    outcome: str
    curator: str
    decided_at: datetime | None = None  # None: the time of the import
    concept_label: str | None = None
    # A SKOS CSV exported from an import: the curator and date that import's file claimed.
    original_author: str | None = None
    original_date: datetime | None = None


@dataclass
class TermFile:
    path: Path
    terms: list[TermRecord]
    decisions: list[DecisionRecord] = field(default_factory=list)
    language: str | None = None  # the language the file itself declares (crosswalk name)
    rows: int = 0  # data rows (CSV) or entries (JSON) read: each gave a term, a decision or both


@dataclass(frozen=True)
class TaxonomyDiff:
    """What replacing a stored taxonomy version with new content changes. A label is its
    concept, language, kind and text; a concept is relabelled when it stays and its preferred
    label in a language it keeps changes (languages that come or go are the language sets)."""

    concepts_before: int
    concepts_added: int
    concepts_removed: int
    concepts_relabelled: int
    labels_added: int
    labels_removed: int
    languages_before: tuple[str, ...]
    languages_after: tuple[str, ...]

    def summary(self) -> str:
        before, after = ",".join(self.languages_before), ",".join(self.languages_after)
        languages = f"languages {before} (unchanged)" if before == after else f"languages {before} -> {after}"
        return (
            f"diff: concepts +{self.concepts_added} -{self.concepts_removed} of {self.concepts_before} "
            f"({self.concepts_relabelled} relabelled), labels +{self.labels_added} -{self.labels_removed}, {languages}"
        )


@dataclass
class ImportReport:
    what: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    decisions_added: int = 0
    decisions_skipped: int = 0
    labels: int = 0
    diff: TaxonomyDiff | None = None  # a taxonomy version replaced: what changed

    def summary(self) -> str:
        if self.what.startswith("taxonomy"):
            if self.unchanged:
                return f"{self.what}: unchanged ({self.unchanged} concepts already stored)"
            verb = "replaced" if self.updated else "imported"
            text = f"{self.what}: {verb}, {self.added} concepts, {self.labels} labels"
            return f"{text}; {self.diff.summary()}" if self.diff else text
        text = f"{self.what}: {self.added} terms added, {self.updated} updated, {self.unchanged} unchanged"
        if self.decisions_added or self.decisions_skipped:
            text += f"; {self.decisions_added} decisions added, {self.decisions_skipped} already there"
        return text


# -- reading files -------------------------------------------------------------------------------


def _column_error(path: Path, line: int, column: str, message: str) -> MeloInputError:
    return MeloInputError(f"column {column!r}: {message}", path, line)


def _check_code(path: Path, line: int, column: str, code: str, first_seen: dict[str, int]) -> None:
    if not code:
        raise _column_error(path, line, column, "empty code")
    if len(code) > MAX_CODE:
        raise _column_error(path, line, column, f"code longer than {MAX_CODE} characters")
    if code in first_seen:
        raise _column_error(path, line, column, f"duplicate code {code!r} (first on line {first_seen[code]})")


def read_terms_csv(path: str | Path) -> TermFile:
    """``code,label[,description][,lang]`` with a header; one term per row."""
    path = Path(path)
    text = read_text(path)
    header, header_line = _csv_header(path, text)
    unknown = [name for name in header if name not in TERM_CSV_COLUMNS]
    if unknown:
        raise MeloInputError(
            f"column {unknown[0]!r}: unknown column (expected code,label[,description][,lang])", path, header_line
        )
    terms: list[TermRecord] = []
    first_seen: dict[str, int] = {}
    # A line break in a code, label or language is a quote left open (read_csv_records says where).
    for line, row in read_csv_records(path, ["code", "label"], text, single_line=("code", "label", "lang")):
        code = row["code"].strip()
        _check_code(path, line, "code", code, first_seen)
        first_seen[code] = line
        label = row["label"].strip()
        if not label:
            raise _column_error(path, line, "label", "empty label")
        language = row.get("lang", "").strip() or None
        if language is not None and not LANGUAGE_RE.match(language):
            raise _column_error(path, line, "lang", f"{language!r} is not a language code (e.g. de, nb, pt-BR)")
        description = row.get("description", "").strip() if "description" in header else None
        for column, check, value in (("label", check_label, label), ("description", check_description, description)):
            try:
                check(value or "", column)
            except ValueError as exc:
                raise _column_error(path, line, column, str(exc)) from None
        terms.append(TermRecord(line, code, label, description, language))
    if not terms:
        raise MeloInputError("no terms (only a header)", path, header_line)
    return TermFile(path, terms, rows=len(terms))  # one term a row


def _csv_header(path: Path, text: str) -> tuple[list[str], int]:
    """The header of a CSV's ``text`` (its first row that is not an empty line) and its line."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sniff_delimiter(text))
    header = header_row(reader)
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise MeloInputError(f"column {duplicates[0]!r}: appears twice in the header", path, reader.line_num)
    return header, max(reader.line_num, 1)


def _key_offset(text: str, key: str, start: int = 0) -> int | None:
    """Offset of the JSON object key ``key`` (its opening quote) at or after ``start``."""
    for encoded in dict.fromkeys((json.dumps(key, ensure_ascii=False), json.dumps(key))):
        position = text.find(encoded, start)
        while position != -1:
            after = position + len(encoded)
            if text[after : after + 100].lstrip().startswith(":"):
                return position
            position = text.find(encoded, after)
    return None


class _Lines:
    """Line numbers of offsets, counted incrementally (offsets mostly grow)."""

    def __init__(self, text: str):
        self.text = text
        self.offset = 0
        self.line = 1

    def at(self, offset: int | None) -> int | None:
        if offset is None:
            return None
        if offset < self.offset:
            return self.text.count("\n", 0, offset) + 1
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _duplicate_line(text: str, key: str) -> int | None:
    """Line of the second of two occurrences of a key: the closest pair in the text (the json
    module gives no positions; a key such as an ESCO URI may recur in other objects)."""
    starts = []
    for encoded in {json.dumps(key, ensure_ascii=False), json.dumps(key)}:
        starts += [m.start() for m in re.finditer(re.escape(encoded) + r"\s*:", text)]
    starts.sort()
    if len(starts) < 2:
        return None
    _, second = min(itertools.pairwise(starts), key=lambda pair: pair[1] - pair[0])
    return text.count("\n", 0, second) + 1


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def read_crosswalk(path: str | Path, with_decisions: bool = False) -> TermFile:
    """The standardised crosswalk JSON ``{code: {"title", "description", "matches": {URI:
    relation}}}``; with ``with_decisions`` each match becomes a decision by ``import:<file
    name>``."""
    path = Path(path)
    text = read_text(path)
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise MeloInputError(f"invalid JSON at column {exc.colno}: {exc.msg}", path, exc.lineno) from None
    except _DuplicateKey as dup:
        raise MeloInputError(
            f"key {dup.key!r} appears twice in one object", path, _duplicate_line(text, dup.key)
        ) from None
    if not isinstance(raw, dict) or not raw:
        raise MeloInputError("expected a non-empty JSON object keyed by source code", path, 1)
    curator = f"{IMPORT_CURATOR_PREFIX}{path.name}"
    lines = _Lines(text)
    offset = 0
    first_seen: dict[str, int] = {}
    for code, entry in raw.items():
        found = _key_offset(text, code, offset)
        offset = found if found is not None else offset
        where = lines.at(found) or 1

        def fail(message: str, key: str | None = None, code: str = code, start: int = offset) -> MeloInputError:
            # The line of the field at fault (looked up only now: errors are rare).
            line = lines.at(_key_offset(text, key, start)) if key is not None else None
            return MeloInputError(f"term {code!r}: {message}", path, line or lines.at(start) or 1)

        if not code.strip():
            raise fail("empty code")
        if code.strip() in first_seen:
            raise fail(f"duplicate code (first on line {first_seen[code.strip()]})")
        first_seen[code.strip()] = where
        if not isinstance(entry, dict):
            raise fail("expected an object with title, description and matches")
        title = entry.get("title")
        if not isinstance(title, str) or not title.strip():
            raise fail('field "title": missing or empty', "title")
        description = entry.get("description", "")
        if description is not None and not isinstance(description, str):
            raise fail('field "description": expected a string', "description")
        for key, check, value in (("title", check_label, title), ("description", check_description, description)):
            try:
                check((value or "").strip(), key)
            except ValueError as exc:
                raise fail(f'field "{key}": {exc}', key) from None
        matches = entry.get("matches", {})
        if not isinstance(matches, dict):
            raise fail('field "matches": expected an object {ESCO URI: relation}', "matches")
        for uri, relation in matches.items():
            if not is_uri(uri):
                raise fail(f'field "matches": {uri!r} is not a URI', uri)
            if relation not in RELATIONS and relation not in RELATION_ALIASES:
                raise fail(
                    f'field "matches": {uri}: unknown relation {relation!r} (expected one of {", ".join(RELATIONS)})',
                    uri,
                )
    # The structure is sound: melo_core's loader gives the canonical reading (aliases, stripping).
    crosswalk = load_crosswalk(path)
    terms: list[TermRecord] = []
    decisions: list[DecisionRecord] = []
    for term in crosswalk.terms:
        line = first_seen.get(term.code.strip(), 1)
        terms.append(TermRecord(line, term.code.strip(), term.title, term.description, None))
        if with_decisions:
            for uri, relation in term.matches.items():
                decisions.append(DecisionRecord(line, term.code.strip(), uri, relation, curator))
    return TermFile(path, terms, decisions, language=crosswalk.language, rows=len(raw))


def read_skos_csv(path: str | Path) -> TermFile:
    """Our own SKOS CSV export: terms, and the decisions of the crosswalk it was exported from."""
    path = Path(path)
    text = read_text(path)
    header, header_line = _csv_header(path, text)
    if tuple(header) not in (SKOS_COLUMNS, SKOS_COLUMNS_WITHOUT_REVIEWS, SKOS_COLUMNS_WITHOUT_ORIGINALS):
        missing = [c for c in SKOS_COLUMNS if c not in header]
        extra = [c for c in header if c not in SKOS_COLUMNS]
        detail = (
            f"missing column {missing[0]!r}" if missing else f"unknown column {extra[0]!r}" if extra else "wrong order"
        )
        raise MeloInputError(f"not a MELO SKOS CSV ({detail}); expected header {','.join(SKOS_COLUMNS)}", path,
                             header_line)  # fmt: skip
    terms: dict[str, TermRecord] = {}
    uris: dict[str, tuple[str, int]] = {}
    decisions: list[DecisionRecord] = []
    pairs: dict[tuple[str, str], int] = {}
    rows = 0
    # Every cell of our export is one line; labels are kept as written (spaces at either end too).
    for line, raw in read_csv_records(path, header, text, single_line=header):
        rows += 1
        row = {k: unneutralise(v) for k, v in raw.items()}
        row.setdefault("original_author", "")
        row.setdefault("original_date", "")

        def fail(column: str, message: str, line: int = line) -> MeloInputError:
            return _column_error(path, line, column, message)

        code = row["source_code"].strip()
        if not code:
            raise fail("source_code", "empty code")
        label = row["source_label"]
        uri = row["source_uri"].strip()
        if not uri:
            raise fail("source_uri", "empty URI")
        if not label.strip():
            raise fail("source_label", "empty label")
        for column in ("source_label", "target_label"):
            try:
                check_label(row[column], "label")
            except ValueError as exc:
                raise fail(column, str(exc)) from None
        known = terms.get(code)
        if known is None:
            if uri in uris:
                raise fail("source_uri", f"URI already used by code {uris[uri][0]!r} on line {uris[uri][1]}")
            if len(code) > MAX_CODE:
                raise fail("source_code", f"code longer than {MAX_CODE} characters")
            uris[uri] = (code, line)
            terms[code] = TermRecord(line, code, label, None, None, uri)
        else:
            if uri != known.uri:
                raise fail("source_uri", f"{uri!r} differs from {known.uri!r} on line {known.line} for the same code")
            if label != known.label:
                raise fail("source_label", f"{label!r} differs from {known.label!r} on line {known.line}")
        relation = row["relation"].strip()
        rest = ("target_uri", "target_label", "curator", "decided_at", "original_author", "original_date")
        if not relation:
            filled = [c for c in rest if row[c].strip()]
            if filled:
                raise fail(filled[0], "a value without a relation")
            continue
        outcome = OUTCOME_OF_RELATION.get(relation)
        if outcome is None:
            raise fail("relation", f"unknown relation {relation!r} (expected one of {', '.join(OUTCOME_OF_RELATION)})")
        target = row["target_uri"].strip()
        if not is_uri(target):
            raise fail("target_uri", f"{target!r} is not a URI" if target else "empty URI")
        if not row["curator"].strip():
            raise fail("curator", "empty curator")
        names: dict[str, str | None] = {}
        for column in ("curator", "original_author"):
            try:  # shown as what the file says: NFC, no invisible or bidi characters
                names[column] = check_name(row[column].strip(), column) if row[column].strip() else None
            except ValueError as exc:
                raise fail(column, str(exc)) from None
        curator = names["curator"] or ""
        try:
            decided_at = parse_time(row["decided_at"])
        except ValueError as exc:
            raise fail("decided_at", f"{row['decided_at']!r} is not a date and time ({exc})") from None
        try:
            original_date = parse_time(row["original_date"]) if row["original_date"].strip() else None
        except ValueError as exc:
            raise fail("original_date", f"{row['original_date']!r} is not a date and time ({exc})") from None
        if (code, target) in pairs:
            raise fail("target_uri", f"{code!r} -> {target} already on line {pairs[(code, target)]}")
        pairs[(code, target)] = line
        target_label = row["target_label"] if row["target_label"].strip() else None
        claimed = (curator, decided_at, target_label, names["original_author"], original_date)
        decisions.append(DecisionRecord(line, code, target, outcome, *claimed))
    if not terms:
        raise MeloInputError("no terms (only a header)", path, header_line)
    return TermFile(path, list(terms.values()), decisions, rows=rows)


# -- writing to the store ------------------------------------------------------------------------


# The kinds of term files, as the CLI options and the Import page name them.
TERM_FORMATS = {
    "csv": "terms CSV or Excel sheet (code,label[,description][,lang])",
    "crosswalk": "standardised crosswalk JSON",
    "skos-csv": "SKOS CSV written by our export (terms and decisions)",
}


def read_term_file(path: str | Path, file_format: str, with_decisions: bool = False) -> TermFile:
    """Read a term file of one of ``TERM_FORMATS``; the whole file is checked before anything is
    written. ``with_decisions`` (crosswalks only) turns its matches into decisions."""
    if file_format not in TERM_FORMATS:
        raise MeloInputError(f"unknown term file format {file_format!r}; expected one of {', '.join(TERM_FORMATS)}")
    if with_decisions and file_format != "crosswalk":
        raise MeloInputError("with decisions goes with a crosswalk (a SKOS CSV always brings its decisions)")
    if file_format == "csv":
        return read_terms_csv(path)
    if file_format == "crosswalk":
        return read_crosswalk(path, with_decisions=with_decisions)
    return read_skos_csv(path)


def check_accounted(source: TermFile, report: ImportReport) -> None:
    """Every term and decision read is imported or found already there (no row lost in silence):
    terms added, updated or unchanged; decisions added or skipped."""
    terms = report.added + report.updated + report.unchanged
    decisions = report.decisions_added + report.decisions_skipped
    if (terms, decisions) != (len(source.terms), len(source.decisions)):
        raise MeloInputError(f"{source.rows} rows read gave {len(source.terms)} terms and {len(source.decisions)} "
                             f"decisions, but the import accounts for {terms} and {decisions}", source.path)  # fmt: skip


# batched-import: done
def import_terms(
    store: Store,
    scheme: str,
    source: TermFile,
    *,
    kind: str | None = None,
    language: str | None = None,
    base_uri: str | None = None,
    batch_size: int = WRITE_BATCH,
    signer: Actor | None = None,
) -> ImportReport:
    """Add the file's terms to the scheme (created if new) and its decisions.

    A term already there (same code) is updated when its label, description or language
    changed; terms missing from the file stay. A decision is skipped when the pair already has
    one with the same outcome and curator (and time, when the file gives one).

    Decisions are signed by ``signer`` (the signed-in user; checked as every write of a person
    is), else by ``import:<file name>``, at the time of import: a file can name any curator and
    date, so what it names is kept only as ``original_author`` / ``original_date``.

    Everything is checked before anything is written; then the rows go in transactions of
    ``batch_size``, so curators' decisions go on meanwhile. A failure part-way (disk full)
    leaves the batches already written: the error says so, and the same import run again
    completes it (each batch is idempotent)."""
    if not scheme.strip():
        raise MeloInputError("empty scheme name")
    if kind is not None and kind not in SCHEME_KINDS:
        raise MeloInputError(f"scheme kind must be one of {', '.join(SCHEME_KINDS)}")
    if language is not None and not LANGUAGE_RE.match(language):
        raise MeloInputError(f"{language!r} is not a language code")
    if base_uri is not None and not is_uri(base_uri):
        raise MeloInputError(f"base URI {base_uri!r} is not an http(s) or urn URI")
    for record in source.decisions:
        if record.outcome not in MATCH_OUTCOMES and record.outcome != "rejected":
            raise MeloInputError(f"unknown outcome {record.outcome!r}", source.path, record.line)
    report = ImportReport(f"scheme {scheme}")
    with store.read() as s:
        importer = f"{IMPORT_CURATOR_PREFIX}{source.path.name}"
        if signer is not None or (store.sign_in_required and source.decisions):
            importer = acting_as(s, signer or "", store.sign_in_required)
        source = _with_stored_codes(s, scheme, source)
        plan = _plan_terms(s, scheme, source, kind, language, base_uri, report)
    _check_columns(scheme, source, plan)
    writer = _BatchWriter(store, batch_size)
    # A new scheme is created in the transaction of its first terms: an import refused at its
    # first batch (a full disk) leaves no empty scheme behind.
    created: list[int] = []

    def scheme_id_in(s: Session) -> int:
        if not created:
            created.append(_scheme_for_import(s, scheme, kind, language, base_uri, source.language))
        return created[0]

    try:
        writer.each_batch(
            plan.new_terms, lambda s, b: _bulk_insert(s, TermRow, [{**row, "scheme_id": scheme_id_in(s)} for row in b])
        )
        if not created:  # no new term: the scheme exists (its settings checked again)
            with writer.transaction() as s:
                scheme_id_in(s)
        scheme_id = created[0]
        writer.each_batch(plan.changed_terms, lambda s, b: s.execute(_TERM_UPDATE, list(b)))
        if source.decisions:
            _add_decisions(writer, scheme_id, source, report, importer)
    except (SQLAlchemyError, MeloInputError, writer.driver_error) as exc:
        raise writer.stopped(scheme, exc, source.path) from None
    return report


@dataclass
class _TermPlan:
    """What an import writes, worked out (and checked) before anything is."""

    new_terms: list[dict[str, object]] = field(default_factory=list)  # rows without scheme_id
    changed_terms: list[dict[str, object]] = field(default_factory=list)  # term_id and the new values


# One UPDATE sent for many rows (executemany): "term_id" names the row, the other keys the values.
_TERMS = cast(Table, TermRow.__table__)  # a declarative model's table
_TERM_UPDATE = update(_TERMS).where(_TERMS.c.id == bindparam("term_id"))


def _with_stored_codes(s: Session, scheme: str, source: TermFile) -> TermFile:
    """The file with the stored code of each term it names by another code and the stored URI:
    a term whose code is its URI (a crosswalk JSON keyed by URIs) is exported with the URI's
    last segment as its code (``db.exports.scheme_codes``), and a round trip finds it again."""
    by_uri = {r.code: r.uri for r in source.terms if r.uri is not None and r.uri != r.code}
    if not by_uri:
        return source
    query = select(TermRow.code).join(SchemeRow, SchemeRow.id == TermRow.scheme_id).where(SchemeRow.name == scheme)
    stored = set(s.scalars(query))
    renamed = {code: uri for code, uri in by_uri.items() if code not in stored and uri in stored}
    if not renamed:
        return source
    return replace(
        source,
        terms=[replace(r, code=renamed.get(r.code, r.code)) for r in source.terms],
        decisions=[replace(d, code=renamed.get(d.code, d.code)) for d in source.decisions],
    )


def _plan_terms(
    s: Session,
    scheme: str,
    source: TermFile,
    kind: str | None,
    language: str | None,
    base_uri: str | None,
    report: ImportReport,
) -> _TermPlan:
    """Compare the file with the stored scheme (one query for its terms, as plain tuples: no
    ORM objects to keep in step, which made a re-import quadratic) and check it all."""
    row = s.scalars(select(SchemeRow).where(SchemeRow.name == scheme)).first()
    stored: dict[str, tuple[int, str, str, str, str | None]] = {}
    scheme_base = base_uri
    if row is not None:
        _check_scheme_settings(row, kind, language, base_uri)
        scheme_base = row.base_uri
        query = select(TermRow.code, TermRow.id, TermRow.uri, TermRow.label, TermRow.description, TermRow.language)
        stored = {code: rest for code, *rest in s.execute(query.where(TermRow.scheme_id == row.id))}  # type: ignore[misc]
    uri_owner = {uri: code for code, (_, uri, *_) in stored.items()}
    plan = _TermPlan()
    for record in source.terms:
        known = stored.get(record.code)
        if known is None:
            uri = record.uri or term_uri(scheme, record.code, scheme_base)
            if uri in uri_owner:
                raise MeloInputError(
                    f"term {record.code!r}: URI {uri} already belongs to term {uri_owner[uri]!r}",
                    source.path,
                    record.line,
                )
            uri_owner[uri] = record.code
            description = record.description or ""
            plan.new_terms.append(
                {
                    "code": record.code,
                    "uri": uri,
                    "label": record.label,
                    "description": description,
                    "language": record.language,
                    "search_text": search_text(record.code, record.label, description),
                }
            )
            report.added += 1
            continue
        term_id, stored_uri, stored_label, stored_description, stored_language = known
        if record.uri is not None and record.uri != stored_uri:
            raise MeloInputError(
                f"term {record.code!r}: URI {record.uri} differs from the stored {stored_uri}",
                source.path,
                record.line,
            )
        description = stored_description if record.description is None else record.description
        language_now = record.language if record.language is not None else stored_language
        if (record.label, description, language_now) == (stored_label, stored_description, stored_language):
            report.unchanged += 1
            continue
        plan.changed_terms.append(
            {
                "term_id": term_id,
                "label": record.label,
                "description": description,
                "language": language_now,
                "search_text": search_text(record.code, record.label, description),
            }
        )
        report.updated += 1
    return plan


def _check_columns(scheme: str, source: TermFile, plan: _TermPlan) -> None:
    """Values the store's columns cannot hold (``db.models.Bounded``: too long, control
    characters) stop the import before its first batch, with the line at fault."""
    try:
        column_check(SchemeRow.name)(scheme)
        for row in plan.new_terms:
            column_check(TermRow.uri)(str(row["uri"]))
        for decision in source.decisions:
            try:
                column_check(DecisionRow.concept_uri)(decision.concept_uri)
                column_check(DecisionRow.original_author)(decision.curator)
            except ColumnValueError as exc:
                raise MeloInputError(str(exc), source.path, decision.line) from None
    except ColumnValueError as exc:
        raise MeloInputError(str(exc), source.path) from None


def _check_scheme_settings(row: SchemeRow, kind: str | None, language: str | None, base_uri: str | None) -> None:
    for attribute, wanted in (("kind", kind), ("language", language), ("base_uri", base_uri)):
        stored = getattr(row, attribute)
        if wanted is not None and wanted != stored:
            raise MeloInputError(
                f"scheme {row.name!r} exists with {attribute} {stored!r}, not {wanted!r} "
                "(a scheme's settings are fixed when it is created)"
            )


def _scheme_for_import(
    s: Session, scheme: str, kind: str | None, language: str | None, base_uri: str | None, file_language: str | None
) -> int:
    """The id of the scheme, created now if new (checked again: another import may have
    created it since the plan)."""
    row = s.scalars(select(SchemeRow).where(SchemeRow.name == scheme)).first()
    if row is not None:
        _check_scheme_settings(row, kind, language, base_uri)
        return row.id
    row = SchemeRow(
        name=scheme,
        kind=kind or "terminology",
        language=language or file_language,
        base_uri=base_uri,
        # Linked against the latest imported taxonomy (none yet: set by ``migrate``).
        taxonomy_id=s.scalar(select(func.max(TaxonomyRow.id))),
    )
    s.add(row)
    s.flush()
    return row.id


class _BatchWriter:
    """An import's writes, one short transaction per batch of rows. On SQLite a writer waiting
    for the lock polls it every 100 ms at most (its busy handler), so a pause as long between
    two transactions lets a curator's decision in; PostgreSQL locks rows, and needs none."""

    def __init__(self, store: Store, batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
        self.store = store
        self.batch_size = batch_size
        self.pause = SQLITE_PAUSE_SECONDS if store.engine.dialect.name == "sqlite" else 0.0
        # What the driver raises itself, outside SQLAlchemy: PostgreSQL's COPY (_bulk_insert).
        self.driver_error: type[Exception] = store.engine.dialect.loaded_dbapi.Error
        self.transactions = 0
        self.planned = 0
        self.written = 0

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        if self.transactions and self.pause:
            time.sleep(self.pause)
        self.transactions += 1
        with self.store.write() as s:
            yield s

    def each_batch(self, rows: Sequence[Row], write: Callable[[Session, Sequence[Row]], object]) -> None:
        self.planned += len(rows)
        for batch in _batches(rows, self.batch_size):
            with self.transaction() as s:
                write(s, batch)
            self.written += len(batch)

    def database_error(self, error: BaseException) -> BaseException | None:
        """The database's own error behind ``error`` (the store may re-raise it in its words)."""
        current: BaseException | None = error
        while current is not None:
            if isinstance(current, DBAPIError):
                return current.orig
            if isinstance(current, self.driver_error):
                return current
            current = current.__cause__ or current.__context__
        return None

    def stopped(self, scheme: str, error: Exception, path: Path) -> MeloInputError:
        """The one line for a write that failed part-way: what stays, and how to complete it."""
        reason = (str(self.database_error(error) or error).strip().splitlines() or [type(error).__name__])[0]
        if self.written == 0:  # a new scheme is created with its first batch: nothing stays
            return MeloInputError(f"scheme {scheme!r}: nothing imported ({reason})", path)
        return MeloInputError(
            f"scheme {scheme!r}: the import stopped part-way ({reason}); {self.written} of {self.planned} "
            "rows written so far stay: run the same import again to complete it",
            path,
        )


def _bulk_insert(s: Session, model: type[Base], rows: Sequence[Row]) -> None:
    """Insert many rows at once: COPY on PostgreSQL with psycopg (an executemany there sends
    one statement per row), executemany elsewhere."""
    if not rows:
        return
    connection = s.connection()
    table = cast(Table, model.__table__)  # a declarative model's table
    if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
        from psycopg import sql

        columns = list(rows[0])
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table.name), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
        )
        # COPY skips SQLAlchemy's bind processing: the String(n) columns' check (Bounded) runs here.
        bounded = [(c, t.check) for c in columns if isinstance(t := table.c[c].type, Bounded)]
        with connection.connection.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
            with cursor.copy(statement) as copy:
                for row in rows:
                    for column, check in bounded:
                        if isinstance(value := row[column], str):
                            check(value)
                    copy.write_row([row[c] for c in columns])
    else:
        s.execute(insert(table), rows)


def _batches(rows: Sequence[Row], size: int = _BATCH) -> Iterable[Sequence[Row]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _add_decisions(writer: _BatchWriter, scheme_id: int, source: TermFile, report: ImportReport, importer: str) -> None:
    """The file's decisions not in the store yet, signed by ``importer``, in batches (outcomes
    checked before). "Already there" compares what the file claims (curator and date) with what
    earlier imports kept of their files' claims."""
    with writer.store.read() as s:
        term_ids = dict(s.execute(select(TermRow.code, TermRow.id).where(TermRow.scheme_id == scheme_id)).all())
        seen: set[tuple[int, str, str, str, datetime | None]] = set()
        query = (
            select(
                DecisionRow.term_id,
                DecisionRow.concept_uri,
                DecisionRow.outcome,
                func.coalesce(DecisionRow.original_author, DecisionRow.curator),
                DecisionRow.decided_at,
                DecisionRow.original_date,
            )
            .join(TermRow, TermRow.id == DecisionRow.term_id)
            .where(TermRow.scheme_id == scheme_id)
        )
        for term_id, uri, outcome, author, decided_at, original_date in s.execute(query):
            seen.add((term_id, uri, outcome, author, None))
            seen.add((term_id, uri, outcome, author, (original_date or decided_at).replace(microsecond=0)))
    now = utcnow()
    rows: list[dict[str, object]] = []
    for record in source.decisions:
        term_id = term_ids[record.code]
        claimed = (record.original_author or record.curator, record.original_date or record.decided_at)
        key = (term_id, record.concept_uri, record.outcome, *claimed)
        if key in seen:
            report.decisions_skipped += 1
            continue
        seen.add(key)
        rows.append(_decision_row(record, term_id, now, importer))
    writer.each_batch(rows, lambda s, batch: _bulk_insert(s, DecisionRow, batch))
    report.decisions_added += len(rows)


def _decision_row(record: DecisionRecord, term_id: int, now: datetime, importer: str) -> dict[str, object]:
    """The decisions-table row of one decision of an imported file: signed by its importer now;
    the earliest curator and date the file claims kept apart (a crosswalk JSON names none)."""
    author = record.original_author or record.curator
    return {
        "term_id": term_id,
        "concept_uri": record.concept_uri,
        "outcome": record.outcome,
        "curator": importer,
        "decided_at": now,
        "comment": "",
        "concept_label": record.concept_label,
        "imported_by": importer,
        "original_author": author if author != importer else None,
        "original_date": record.original_date or record.decided_at,
    }


def taxonomy_checksum(taxonomy: Taxonomy) -> str:
    digest = hashlib.sha256()
    for c in taxonomy.concepts:
        digest.update(f"{c.uri}\0{c.number}\0{c.kind}\0{c.isco_code or ''}\0{c.description}\n".encode())
        for lang in sorted(c.labels):
            labels = c.labels[lang]
            parts = [lang, labels.preferred or "", *labels.alternative, "\0", *labels.hidden]
            digest.update(("\x1f".join(parts) + "\n").encode())
    return digest.hexdigest()


def count_labels(taxonomy: Taxonomy) -> int:
    return sum(
        (1 if labels.preferred else 0) + len(labels.alternative) + len(labels.hidden)
        for c in taxonomy.concepts
        for labels in c.labels.values()
    )


def import_taxonomy(
    store: Store,
    taxonomy: Taxonomy,
    name: str,
    version: str,
    source: str = "",
    on_progress: Progress | None = None,
    *,
    replace: bool = False,
    from_melo_corpora: bool = False,
) -> ImportReport:
    """Store a taxonomy version with bulk inserts. The same content again is a no-op; other
    content under the same name and version replaces the stored one (decisions refer to
    concepts by URI, so they are unaffected), and the report carries the diff.

    A replacement that removes more than ``MAX_REMOVED_SHARE`` of the stored concepts, changes
    the version's label languages, or overwrites the reserved ``melo-union`` version with
    anything but the MELO corpora (``from_melo_corpora``) stops with its diff and writes
    nothing, unless ``replace``."""
    if not name.strip() or not version.strip():
        raise MeloInputError("a taxonomy needs a name and a version")
    if not taxonomy.concepts:
        raise MeloInputError("the taxonomy has no concepts", source or None)
    report = ImportReport(f"taxonomy {name} {version}")
    checksum = taxonomy_checksum(taxonomy)
    progress = on_progress or (lambda n: None)
    with store.write() as s:
        row = s.scalars(select(TaxonomyRow).where(TaxonomyRow.name == name, TaxonomyRow.version == version)).first()
        if row is not None and row.checksum == checksum:
            report.unchanged = len(taxonomy.concepts)
            progress(len(taxonomy.concepts) + count_labels(taxonomy))
            return report
        if row is not None:
            report.diff = _taxonomy_diff(s, row.id, taxonomy)
            reasons = _replacement_risks(report.diff, version, from_melo_corpora)
            if reasons and not replace:
                raise MeloInputError(
                    f"taxonomy {name} {version} not replaced: {'; '.join(reasons)}. Nothing was written; "
                    f"give --replace to replace it all the same ({report.diff.summary()})"
                )
            s.execute(delete(ConceptRow).where(ConceptRow.taxonomy_id == row.id))  # labels cascade
            s.execute(
                update(TaxonomyRow)
                .where(TaxonomyRow.id == row.id)
                .values(checksum=checksum, source=source, imported_at=utcnow())
            )
            taxonomy_id = row.id
            report.updated = 1
        else:
            created = TaxonomyRow(name=name, version=version, source=source, checksum=checksum)
            s.add(created)
            s.flush()
            taxonomy_id = created.id
            # A scheme created before any taxonomy was there links against the first one imported.
            s.execute(update(SchemeRow).where(SchemeRow.taxonomy_id.is_(None)).values(taxonomy_id=taxonomy_id))
        concept_rows = [
            {
                "taxonomy_id": taxonomy_id,
                "uri": c.uri,
                "number": c.number,
                "kind": c.kind,
                "isco_code": c.isco_code,
                "description": c.description or "",
            }
            for c in taxonomy.concepts
        ]
        for batch in _batches(concept_rows):
            _bulk_insert(s, ConceptRow, batch)
            progress(len(batch))
        ids = dict(s.execute(select(ConceptRow.uri, ConceptRow.id).where(ConceptRow.taxonomy_id == taxonomy_id)).all())
        labels: list[dict[str, object]] = []
        for c in taxonomy.concepts:
            concept_id = ids[c.uri]
            for lang, forms in c.labels.items():
                if forms.preferred:
                    labels.append(_label(concept_id, lang, "preferred", 0, forms.preferred))
                labels.extend(_label(concept_id, lang, "alternative", i, t) for i, t in enumerate(forms.alternative, 1))
                labels.extend(_label(concept_id, lang, "hidden", i, t) for i, t in enumerate(forms.hidden, 1))
            if len(labels) >= _BATCH:
                _bulk_insert(s, LabelRow, labels)
                progress(len(labels))
                report.labels += len(labels)
                labels = []
        if labels:
            _bulk_insert(s, LabelRow, labels)
            progress(len(labels))
            report.labels += len(labels)
        report.added = len(concept_rows)
    return report


def _taxonomy_diff(s: Session, taxonomy_id: int, taxonomy: Taxonomy) -> TaxonomyDiff:
    """The stored version against the new content, in two queries: the concepts' URIs, and every
    label streamed once (the MELO union holds 316,372) and kept as a hash, not a row."""
    stored_uris = set(s.scalars(select(ConceptRow.uri).where(ConceptRow.taxonomy_id == taxonomy_id)))
    new_uris = {c.uri for c in taxonomy.concepts}
    new_preferred: dict[tuple[str, str], str] = {}
    new_labels: set[int] = set()
    languages_after: set[str] = set()
    for c in taxonomy.concepts:
        for language, forms in c.labels.items():
            texts = [("alternative", t) for t in forms.alternative] + [("hidden", t) for t in forms.hidden]
            if forms.preferred:
                new_preferred[c.uri, language] = forms.preferred
                texts.append(("preferred", forms.preferred))
            if texts:
                languages_after.add(language)
            new_labels.update(hash((c.uri, language, kind, text)) for kind, text in texts)
    stored_labels: set[int] = set()
    stored_preferred: dict[tuple[str, str], str] = {}
    languages_before: set[str] = set()
    query = (
        select(ConceptRow.uri, LabelRow.language, LabelRow.kind, LabelRow.text)
        .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
        .where(ConceptRow.taxonomy_id == taxonomy_id)
        .execution_options(yield_per=20_000)
    )
    for uri, language, kind, text in s.execute(query):
        stored_labels.add(hash((uri, language, kind, text)))
        languages_before.add(language)
        if kind == "preferred":
            stored_preferred[uri, language] = text
    relabelled = {
        uri for (uri, language), label in stored_preferred.items() if new_preferred.get((uri, language), label) != label
    }
    return TaxonomyDiff(
        concepts_before=len(stored_uris),
        concepts_added=len(new_uris - stored_uris),
        concepts_removed=len(stored_uris - new_uris),
        concepts_relabelled=len(relabelled),
        labels_added=len(new_labels - stored_labels),
        labels_removed=len(stored_labels - new_labels),
        languages_before=tuple(sorted(languages_before)),
        languages_after=tuple(sorted(languages_after)),
    )


def _replacement_risks(diff: TaxonomyDiff, version: str, from_melo_corpora: bool) -> list[str]:
    """Why replacing a stored version with this content needs ``--replace`` (none: it may go ahead)."""
    risks = []
    if diff.concepts_removed > MAX_REMOVED_SHARE * diff.concepts_before:
        risks.append(
            f"it would remove {diff.concepts_removed} of {diff.concepts_before} concepts "
            f"(more than {MAX_REMOVED_SHARE:.0%})"
        )
    if diff.languages_before != diff.languages_after:
        risks.append(
            f"it would change the label languages ({','.join(diff.languages_before)} -> "
            f"{','.join(diff.languages_after) or 'none'})"
        )
    if version == MELO_UNION_VERSION and not from_melo_corpora:
        risks.append(f"the version {MELO_UNION_VERSION} is kept for the ESCO union of the MELO corpora (--data)")
    return risks


def _label(concept_id: int, language: str, kind: str, position: int, text: str) -> dict[str, object]:
    return {
        "concept_id": concept_id,
        "language": language,
        "kind": kind,
        "position": position,
        "text": text,
        "search_text": label_search_text(text),
    }
