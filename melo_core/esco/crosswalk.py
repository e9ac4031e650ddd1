"""National terminology -> ESCO crosswalks in the MELO standardised JSON form:
``{source code: {"title", "description", "matches": {ESCO URI: relation}}}``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.files.text_limits import check_description, check_label
from melo_core.files.tsv import read_text

# The SKOS mapping relations, closest first: the one list of the crosswalk JSON, the store's match
# outcomes (db.models.MATCH_OUTCOMES), its imports and the Link page's buttons.
SKOS_RELATIONS = ("exactMatch", "narrowMatch", "broadMatch", "closeMatch", "relatedMatch")
# The relations of the MELO crosswalk JSON: all but relatedMatch, which only curators record.
# Closest first: the builder keeps the closest relation a term has.
RELATIONS = SKOS_RELATIONS[:-1]
# Accepted decisions whose term may stand for its concept (training pairs, the simulated curator): a
# broad match's term is wider than the concept, a close or related one is another concept.
ALIAS_RELATIONS = ("exactMatch", "narrowMatch")
RELATION_ALIASES = {"exactISCO": "exactMatch"}  # read as exactMatch


@dataclass
class SourceTerm:
    code: str
    title: str
    description: str = ""
    matches: dict[str, str] = field(default_factory=dict)


@dataclass
class Crosswalk:
    name: str
    terms: list[SourceTerm]

    @property
    def country(self) -> str:
        return crosswalk_country(self.name)

    @property
    def scheme_terms(self) -> int:
        """How many terms the store holds of this crosswalk as a scheme: those with a title."""
        return sum(1 for t in self.terms if t.title)

    @property
    def language(self) -> str | None:
        parts = self.name.split("_")
        return parts[1] if len(parts) == 2 else None


def crosswalk_country(name: str) -> str:
    """The country of a crosswalk code: ``bel`` for ``bel_fr`` and ``bel_nl``."""
    return name.split("_")[0]


def scheme_country(scheme: str) -> str | None:
    """The country of a store's scheme named like a national crosswalk (``nor_no``: ``nor``), else
    None. Such a scheme's own crosswalks are neither known mentions nor calibration rows while it is
    linked or proposed for."""
    return crosswalk_country(scheme) if re.fullmatch(r"[a-z]{3}_[a-z]{2}", scheme) else None


def crosswalk_path(data_dir: str | Path | None, code_or_path: str) -> Path:
    """A crosswalk given by code (``deu_de``) or by the path of its JSON file."""
    as_path = Path(code_or_path)
    if as_path.suffix == ".json" or as_path.is_file():
        return as_path
    if data_dir is None:
        raise MeloInputError(f"crosswalk {code_or_path!r}: no data directory given")
    path = Path(data_dir) / "raw" / "crosswalks_standard" / code_or_path / "crosswalk.json"
    if not path.is_file():
        raise MeloInputError(f"crosswalk {code_or_path!r} not found", path)
    return path


def list_crosswalks(data_dir: str | Path) -> list[str]:
    root = Path(data_dir) / "raw" / "crosswalks_standard"
    return sorted(p.parent.name for p in root.glob("*/crosswalk.json"))


def load_crosswalk(path: str | Path, name: str | None = None) -> Crosswalk:
    path = Path(path)
    try:
        raw = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise MeloInputError(f"invalid JSON ({exc.msg})", path, exc.lineno) from None
    if not isinstance(raw, dict):
        raise MeloInputError("expected a JSON object keyed by source code", path)
    terms = []
    for code, entry in raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("matches", {}), dict):
            raise MeloInputError(f"term {code!r}: expected an object with title and matches", path)
        matches = {}
        for uri, relation in entry.get("matches", {}).items():
            relation = RELATION_ALIASES.get(relation, relation)
            if relation not in RELATIONS:
                raise MeloInputError(
                    f"term {code!r}: unknown relation {relation!r} (expected one of {', '.join(RELATIONS)})",
                    path,
                )
            matches[uri] = relation
        term = SourceTerm(code=code, title=str(entry.get("title", "")).strip(),
                          description=str(entry.get("description", "") or "").strip(), matches=matches)  # fmt: skip
        # One limit for titles and descriptions, as every import checks them (melo_core.files.text_limits).
        for key, check, value in (("title", check_label, term.title), ("description", check_description,
                                                                           term.description)):  # fmt: skip
            try:
                check(value, key)
            except ValueError as exc:
                raise MeloInputError(f'term {code!r}: field "{key}": {exc}', path) from None
        terms.append(term)
    if name is None:
        name = path.parent.name if path.name == "crosswalk.json" else path.stem
    return Crosswalk(name=name, terms=terms)


def crosswalk_decisions(
    data_dir: str | Path | None, code_or_path: str, relations: Iterable[str] = ALIAS_RELATIONS
) -> list[tuple[str, str, str | None]]:
    """A crosswalk's matches by ``relations`` (default: the alias ones) as (term title, concept
    URI, language) triples, the shape curator decisions take for training
    (``train --with-crosswalks``) and known mentions take for scoring."""
    crosswalk = load_crosswalk(crosswalk_path(data_dir, code_or_path))
    relations, language = set(relations), crosswalk.language
    return [
        (term.title, uri, language)
        for term in crosswalk.terms
        if term.title
        for uri, relation in term.matches.items()
        if relation in relations
    ]


def training_crosswalks(data_dir: str | Path, codes: str, hold_out_countries: Iterable[str] = ()) -> list[str]:
    """The crosswalk codes to train on: ``codes`` ('all' or comma-separated codes of the data
    folder) minus every crosswalk of the held-out countries, so their MELO datasets stay a fair
    test of the model."""
    known = list_crosswalks(data_dir)
    wanted = known if codes == "all" else [c.strip() for c in codes.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in known]
    if unknown:
        raise MeloInputError(f"--with-crosswalks: unknown crosswalk(s) {', '.join(unknown)} "
                             f"(known: {', '.join(known) or 'none'})")  # fmt: skip
    held = set(hold_out_countries)
    unknown_countries = held - {crosswalk_country(c) for c in known}
    if unknown_countries:
        raise MeloInputError(f"--hold-out-countries: no crosswalk of {', '.join(sorted(unknown_countries))}")
    seen = [c for c in wanted if crosswalk_country(c) not in held]
    if not seen:
        raise MeloInputError("--with-crosswalks: every crosswalk given is held out")
    return seen
