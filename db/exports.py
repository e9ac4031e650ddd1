"""Exports of a scheme's current crosswalk: our SKOS CSV, and SSSOM TSV.

Both are deterministic (same store, same bytes) and written through ``melo_core.output``
(atomically to a file, ``-`` for stdout, FIFOs and links kept). Subject is the source
term, object the ESCO concept, and the relation is the one recorded for the pair, as in the
standardised crosswalk JSON.

- SKOS CSV: one row per current match, ordered by term (import order) then concept URI; a term
  without any appears once with empty relation columns, so the file carries the whole scheme and
  ``import-terms --skos-csv`` restores it. With ``negatives`` rejections appear as
  ``melo:rejected``. Cells a spreadsheet would evaluate are prefixed with ``'``.
- SSSOM TSV: the YAML metadata block (curie map, mapping set id, licence) as ``#`` lines, then
  one mapping per row with ``semapv:ManualMappingCuration``; with ``negatives`` rejections are
  negative mappings (``predicate_modifier: Not`` on ``skos:mappingRelation``: no relation at all).
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from pathlib import Path

import yaml

from db.formats import RELATION_OF_OUTCOME, SKOS_COLUMNS, SKOS_NAMESPACE, format_time, neutralise
from db.models import MATCH_OUTCOMES, REJECTED
from db.store import Decision, Store
from melo_core.errors import MeloInputError
from melo_core.output import open_output

DEFAULT_LICENSE = "https://creativecommons.org/licenses/by/4.0/"
SEMAPV = "https://w3id.org/semapv/vocab/"
KNOWN_PREFIXES = {
    "esco": "http://data.europa.eu/esco/occupation/",
    "isco": "http://data.europa.eu/esco/isco/",
    "skos": SKOS_NAMESPACE,
    "semapv": SEMAPV,
}
SSSOM_COLUMNS = (
    "subject_id",
    "subject_label",
    "predicate_id",
    "predicate_modifier",
    "object_id",
    "object_label",
    "mapping_justification",
    "author_label",
    "mapping_date",
    "similarity_score",
    "similarity_measure",
    "comment",
)


def _current(store: Store, scheme: str, negatives: bool, confirmed_only: bool = False) -> list[Decision]:
    """The scheme's current decisions to export; ``confirmed_only``: those a reviewer confirmed."""
    outcomes = (*MATCH_OUTCOMES, REJECTED) if negatives else MATCH_OUTCOMES
    try:
        decisions = store.crosswalk(scheme, outcomes=outcomes)
    except KeyError:
        known = ", ".join(s.name for s in store.schemes()) or "none yet"
        raise MeloInputError(f"no source scheme {scheme!r} in the store (schemes: {known})") from None
    if confirmed_only:
        confirmed = store.confirmed_ids(d.id for d in decisions)
        decisions = [d for d in decisions if d.id in confirmed]
    return decisions


def skos_csv_text(store: Store, scheme: str, negatives: bool = False, confirmed_only: bool = False) -> str:
    return _skos_csv(store, scheme, negatives, confirmed_only)[0]


def _skos_csv(store: Store, scheme: str, negatives: bool, confirmed_only: bool = False) -> tuple[str, int]:
    by_term: dict[int, list[Decision]] = defaultdict(list)
    for decision in _current(store, scheme, negatives, confirmed_only):
        by_term[decision.term_id].append(decision)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SKOS_COLUMNS)
    count = 0
    for term in store.terms(scheme):
        source = [term.uri, term.code, term.label]
        decisions = by_term.get(term.id)
        if not decisions:
            writer.writerow([neutralise(c) for c in [*source, "", "", "", "", ""]])
            count += 1
            continue
        for d in sorted(decisions, key=lambda d: d.concept_uri):
            cells = [
                *source,
                RELATION_OF_OUTCOME[d.outcome],
                d.concept_uri,
                d.concept_label or "",
                d.curator,
                format_time(d.decided_at),
            ]
            writer.writerow([neutralise(c) for c in cells])
            count += 1
    return out.getvalue(), count


class _Curies:
    """Compacts URIs into CURIEs, inventing a prefix for each new namespace."""

    def __init__(self, scheme: str):
        self.prefix_of = {ns: p for p, ns in KNOWN_PREFIXES.items()}
        self.used: dict[str, str] = {"skos": SKOS_NAMESPACE, "semapv": SEMAPV}
        base = re.sub(r"[^A-Za-z0-9_]", "_", scheme) or "source"
        self.source_base = base if base[0].isalpha() else f"s_{base}"

    def _new_prefix(self, base: str) -> str:
        taken = set(self.used) | set(KNOWN_PREFIXES)
        if base not in taken:
            return base
        n = 2
        while f"{base}{n}" in taken:
            n += 1
        return f"{base}{n}"

    def compact(self, uri: str, subject: bool) -> str:
        match = re.match(r"^(.*[/#:])([^/#:]+)$", uri)
        if match is None:
            return uri
        namespace, local = match.groups()
        prefix = self.prefix_of.get(namespace)
        if prefix is None:
            prefix = self._new_prefix(self.source_base if subject else "ns")
            self.prefix_of[namespace] = prefix
        self.used[prefix] = namespace
        return f"{prefix}:{local}"


def sssom_text(
    store: Store,
    scheme: str,
    negatives: bool = False,
    license: str = DEFAULT_LICENSE,
    mapping_set_id: str | None = None,
    confirmed_only: bool = False,
) -> str:
    return _sssom(store, scheme, negatives, license, mapping_set_id, confirmed_only)[0]


def _sssom(store: Store, scheme: str, negatives: bool, license: str, mapping_set_id: str | None,
           confirmed_only: bool = False) -> tuple[str, int]:  # fmt: skip
    decisions = _current(store, scheme, negatives, confirmed_only)
    info = store.scheme(scheme)
    assert info is not None
    curies = _Curies(scheme)
    columns = [c for c in SSSOM_COLUMNS if negatives or c != "predicate_modifier"]
    rows: list[list[str]] = []
    for d in decisions:  # already ordered by term, then concept URI
        negative = d.outcome == REJECTED
        row = {
            "subject_id": curies.compact(d.term_uri, subject=True),
            "subject_label": d.term_label,
            "predicate_id": "skos:mappingRelation" if negative else f"skos:{d.outcome}",
            "predicate_modifier": "Not" if negative else "",
            "object_id": curies.compact(d.concept_uri, subject=False),
            "object_label": d.concept_label or "",
            "mapping_justification": "semapv:ManualMappingCuration",
            "author_label": d.curator,
            "mapping_date": d.decided_at.date().isoformat(),
            "similarity_score": "" if d.score is None else f"{d.score:.6g}",
            "similarity_measure": d.scorer or "",
            "comment": d.comment,
        }
        rows.append([row[c] for c in columns])
    metadata = {
        "curie_map": dict(sorted(curies.used.items())),
        "mapping_set_id": mapping_set_id or f"urn:melo:mapping-set:{scheme}",
        "mapping_set_title": f"{scheme} to ESCO",
        "mapping_set_description": (
            f"Crosswalk from the source scheme {scheme!r}"
            + (f" ({info.language})" if info.language else "")
            + " to ESCO, curated in MELO Studio."
        ),
        "license": license,
    }
    header = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True, width=10_000)
    out = io.StringIO()
    out.write("".join(f"#{line}\n" for line in header.splitlines()))
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue(), len(rows)


def export(
    store: Store,
    scheme: str,
    fmt: str,
    out: str | Path,
    negatives: bool = False,
    license: str = DEFAULT_LICENSE,
    mapping_set_id: str | None = None,
    confirmed_only: bool = False,
) -> int:
    """Write the scheme's crosswalk in ``fmt`` (skos-csv or sssom) to ``out`` (``-``: stdout); returns
    the number of rows. ``confirmed_only``: only decisions a reviewer confirmed."""
    if fmt == "skos-csv":
        content, rows = _skos_csv(store, scheme, negatives, confirmed_only)
    elif fmt == "sssom":
        content, rows = _sssom(store, scheme, negatives, license, mapping_set_id, confirmed_only)
    else:
        raise MeloInputError(f"unknown export format {fmt!r} (skos-csv or sssom)")
    with open_output(out) as handle:
        handle.write(content)
    return rows
