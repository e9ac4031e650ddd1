"""File-format conventions shared by the importers and the exporters (no database here).

Source-term URIs: a code that already is a URI (``http://``, ``https://``, ``urn:``) is its own
URI; otherwise the scheme's base URI followed by the percent-encoded code when the scheme has
one (``import-terms --base-uri``), else ``urn:melo:scheme:<scheme>:<code>`` with scheme name
and code percent-encoded (RFC 3986 unreserved characters kept). A term keeps the URI it got when
first imported.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from urllib.parse import quote

from db.models import MATCH_OUTCOMES, REJECTED

URN_PREFIX = "urn:melo:scheme:"
_URI_RE = re.compile(r"^(https?://|urn:)\S+$", re.IGNORECASE)
LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")

# SKOS CSV: our own exchange format (export, and import with --skos-csv).
SKOS_COLUMNS = (
    "source_uri",
    "source_code",
    "source_label",
    "relation",
    "target_uri",
    "target_label",
    "curator",
    "decided_at",
    # An imported decision's curator and date as the file claimed them (unverified): ``curator``
    # and ``decided_at`` name who imported it, and when.
    "original_author",
    "original_date",
    # What a crosswalk handed on needs (db.exports): the ESCO release decided against, the review
    # status (proposed, confirmed, rejected), reviewer and date, and the comments. Reviews and
    # comments are this store's: ``import-terms --skos-csv`` reads past them.
    "esco_version",
    "review_status",
    "reviewer",
    "reviewed_at",
    "comments",
)
# Files written before the review columns, or before the two provenance columns: still read.
SKOS_COLUMNS_WITHOUT_REVIEWS = SKOS_COLUMNS[:10]
SKOS_COLUMNS_WITHOUT_ORIGINALS = SKOS_COLUMNS[:8]
# A rejection is not a SKOS relation: it appears (with --negatives) under our own prefix.
RELATION_OF_OUTCOME = {**{o: f"skos:{o}" for o in MATCH_OUTCOMES}, REJECTED: "melo:rejected"}
OUTCOME_OF_RELATION = {v: k for k, v in RELATION_OF_OUTCOME.items()}

SKOS_NAMESPACE = "http://www.w3.org/2004/02/skos/core#"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# A spreadsheet runs a cell starting with one of these as a formula (CSV injection). Tab and
# carriage return are on OWASP's list too.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def search_fold(text: str) -> str:
    """Text as the store searches it: case-folded and without accents (``Bäcker`` → ``backer``),
    so search behaves the same on every backend and language (SQLite's ``lower()`` only folds
    ASCII, PostgreSQL's depends on the server's locale)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def is_uri(code: str) -> bool:
    return bool(_URI_RE.match(code))


def term_uri(scheme: str, code: str, base_uri: str | None = None) -> str:
    if is_uri(code):
        return code
    if base_uri:
        return base_uri + quote(code, safe="")
    return f"{URN_PREFIX}{quote(scheme, safe='')}:{quote(code, safe='')}"


def _needs_guard(cell: str) -> bool:
    # A cell starting with quotes before a formula character is guarded too, so that unguarding
    # (on import) is the exact inverse of guarding.
    stripped = cell.lstrip("'")
    return stripped.startswith(FORMULA_STARTS)


def neutralise(cell: str) -> str:
    """Prefix ``'`` to a cell a spreadsheet would evaluate (``=1+1`` -> ``'=1+1``)."""
    return "'" + cell if _needs_guard(cell) else cell


def unneutralise(cell: str) -> str:
    """The inverse of :func:`neutralise`: ``unneutralise(neutralise(s)) == s`` for every s."""
    return cell[1:] if cell.startswith("'") and _needs_guard(cell[1:]) else cell


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime:
    """ISO 8601 with a time zone (``2025-01-31T09:30:00Z``); a naive time is refused because
    decisions are compared across curators in different zones."""
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        raise ValueError("no time zone (write e.g. 2025-01-31T09:30:00Z)")
    return value.astimezone(UTC)
