"""The ESCO taxonomy as concepts with surface forms per language.

Two sources:
- the MELO corpora themselves (``corpus_elements.tsv`` + ``concept_mapping.tsv``), which
  together cover 21 languages;
- the official ESCO CSV export (``occupations_<lang>.csv``, ``ISCOGroups_<lang>.csv``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset, datasets_root, list_datasets, load_dataset
from melo_core.files.text_limits import check_label
from melo_core.files.tsv import read_csv_records
from melo_core.runtime.disk_cache import files_stamp, load_pickle, save_pickle

OCCUPATION = "occupation"
ISCO_GROUP = "isco_group"


ISCO_URI_PREFIX = "http://data.europa.eu/esco/isco/C"


def concept_kind(uri: str) -> str:
    return ISCO_GROUP if "/isco/" in uri else OCCUPATION


def isco_code_of(uri: str) -> str | None:
    """An ISCO group's code is in its URI (``.../isco/C7512`` → ``7512``); occupations have none."""
    return uri[len(ISCO_URI_PREFIX) :] if uri.startswith(ISCO_URI_PREFIX) else None


def isco_group_uri(code: str) -> str:
    return f"{ISCO_URI_PREFIX}{code}"


def language_codes(languages: str | Iterable[str]) -> tuple[str, ...]:
    """Language codes as a tuple; one code may come as a bare string ("en" is not "e" and "n")."""
    return (languages,) if isinstance(languages, str) else tuple(languages)


def reader_languages(query_language: str | None, available: Iterable[str]) -> tuple[str, ...]:
    """The label languages a query is ranked over by default: its own and English, those of
    ``available`` (the taxonomy's). Empty when the query's language is unknown or the taxonomy has
    neither: the caller then ranks every language. A curator reads both; every language more only
    adds look-alike labels (job-ad titles over all 21: -0.011 MRR, docs/experiments/bulk-linking.md)."""
    if not query_language:
        return ()
    present = set(available)
    return tuple(lang for lang in dict.fromkeys([query_language, "en"]) if lang in present)


@dataclass(slots=True)
class LanguageLabels:
    """One concept's labels in one language. Slotted, with tuples: the union holds 75k of these, and
    as dictionaries and lists they were 300k objects that every full collection walked."""

    preferred: str | None = None
    alternative: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.alternative = tuple(self.alternative)
        self.hidden = tuple(self.hidden)

    def surface_forms(self, include_hidden: bool = False) -> list[str]:
        """Preferred label first (index 0 in MELO ids), then alternatives in order."""
        forms = [*([self.preferred] if self.preferred else []), *self.alternative]
        return [*forms, *self.hidden] if include_hidden else forms


@dataclass
class Concept:
    uri: str
    number: int
    kind: str
    labels: dict[str, LanguageLabels] = field(default_factory=dict)
    isco_code: str | None = None
    description: str = ""

    def preferred_label(self, languages: str | Iterable[str] = ("en",)) -> str:
        """The preferred label in the first of ``languages`` that has one, else in any language."""
        for lang in language_codes(languages):
            labels = self.labels.get(lang)
            if labels and labels.preferred:
                return labels.preferred
        for labels in self.labels.values():
            if labels.preferred:
                return labels.preferred
        return self.uri


@dataclass(frozen=True)
class SurfaceForm:
    """One label of one concept, with the id the MELO benchmark would give it."""

    element_id: str
    text: str
    concept_uri: str
    language: str


@dataclass
class FormTable:
    texts: list[str]
    languages: list[str]
    concept_index: np.ndarray  # position in Taxonomy.concepts of each form's concept


class Taxonomy:
    """Concepts in a stable order, each with a number used to build MELO element ids."""

    def __init__(self, concepts: Iterable[Concept], source: str = "", description_language: str = "en"):
        self.concepts: list[Concept] = sorted(concepts, key=lambda c: c.number)
        self.by_uri: dict[str, Concept] = {c.uri: c for c in self.concepts}
        self.source = source
        self.description_language = description_language  # of the concepts' descriptions (ESCO's: English)
        self._form_tables: dict[tuple[str, ...], FormTable] = {}

    def form_table(self, languages: str | Iterable[str] | None = None) -> FormTable:
        """The surface forms as parallel arrays (memoised: the linker's start-up reads them)."""
        key = tuple(sorted(set(self.languages if languages is None else language_codes(languages))))
        tables = self.__dict__.setdefault("_form_tables", {})
        if key not in tables:
            forms = list(self.surface_forms(key))
            position = {c.uri: i for i, c in enumerate(self.concepts)}
            tables[key] = FormTable(
                texts=[f.text for f in forms],
                languages=[f.language for f in forms],
                concept_index=np.array([position[f.concept_uri] for f in forms], dtype=np.int64),
            )
        return tables[key]

    def __len__(self) -> int:
        return len(self.concepts)

    def __contains__(self, uri: object) -> bool:
        return uri in self.by_uri

    @property
    def languages(self) -> list[str]:
        """The languages of its labels, sorted; worked out once (nothing changes a Taxonomy once
        built), as the Link page asks three times a rerun and each pass read 75k label sets."""
        known = self.__dict__.get("_languages")
        if known is None:
            known = self.__dict__["_languages"] = tuple(sorted({lang for c in self.concepts for lang in c.labels}))
        return list(known)

    def missing_languages(self, languages: Iterable[str]) -> list[str]:
        """Those of ``languages`` the taxonomy has no labels in, in the order given."""
        present = set(self.languages)
        return [lang for lang in languages if lang not in present]

    def lacking(self, languages: Iterable[str]) -> str | None:
        """Why labels in ``languages`` cannot be searched ("the taxonomy has no labels in xx (it
        has bg, cs, ...)"), or None when it has labels in each."""
        missing = self.missing_languages(languages)
        return (
            f"the taxonomy has no labels in {', '.join(missing)} (it has {', '.join(self.languages)})"
            if missing
            else None
        )

    def surface_forms(self, languages: str | Iterable[str] | None = None) -> Iterator[SurfaceForm]:
        """Surface forms in MELO order: per concept, preferred labels of each language, then
        alternative labels of each language (languages in sorted order)."""
        wanted = set(self.languages if languages is None else language_codes(languages))
        for concept in self.concepts:
            langs = [lang for lang in sorted(concept.labels) if lang in wanted]
            prefix = f"C{concept.number:06d}_"
            for lang in langs:
                preferred = concept.labels[lang].preferred
                if preferred:
                    yield SurfaceForm(f"{prefix}{lang}_000", preferred, concept.uri, lang)
            for lang in langs:
                for j, alt in enumerate(concept.labels[lang].alternative, start=1):
                    yield SurfaceForm(f"{prefix}{lang}_{j:03d}", alt, concept.uri, lang)


def _split_element_id(element_id: str) -> tuple[int, str, int] | None:
    parts = element_id.split("_")
    if len(parts) != 3 or not parts[0].startswith("C"):
        return None
    try:
        return int(parts[0][1:]), parts[1], int(parts[2])
    except ValueError:
        return None


def taxonomy_from_datasets(datasets: Iterable[MeloDataset], source: str = "") -> Taxonomy:
    """Build the taxonomy from MELO corpora and their concept mappings.

    Concepts are keyed by URI. Within one dataset the concept number and label order are
    kept, so a dataset's own corpus yields back exactly its element ids. Across datasets (which
    come from different ESCO versions) the first dataset seen, in the given order, supplies a
    language's labels; concepts first seen later are numbered after the existing ones.
    """
    concepts: dict[str, Concept] = {}
    numbers_used: set[int] = set()
    for dataset in datasets:
        if not dataset.concept_of:
            raise MeloInputError(
                "no concept_mapping.tsv: cannot tell which ESCO concept each element belongs to",
                dataset.path,
            )
        filled: set[tuple[str, str]] = set()
        pending: dict[tuple[str, str], dict[int, str]] = {}
        numbers: dict[str, int] = {}
        for element_id, text in zip(dataset.corpus_ids, dataset.corpus, strict=True):
            parsed = _split_element_id(element_id)
            uri = dataset.concept_of.get(element_id)
            if parsed is None or uri is None:
                raise MeloInputError(f"corpus element {element_id!r} has no concept", dataset.path)
            number, lang, index = parsed
            numbers.setdefault(uri, number)
            pending.setdefault((uri, lang), {})[index] = text
        for (uri, lang), by_index in pending.items():
            concept = concepts.get(uri)
            if concept is None:
                number = numbers[uri]
                if number in numbers_used:  # taken by another concept of an earlier dataset
                    number = max(numbers_used) + 1
                numbers_used.add(number)
                concept = Concept(uri=uri, number=number, kind=concept_kind(uri), isco_code=isco_code_of(uri))
                concepts[uri] = concept
            if lang in concept.labels or (uri, lang) in filled:
                continue
            filled.add((uri, lang))
            concept.labels[lang] = LanguageLabels(
                preferred=by_index.get(0),
                alternative=tuple(by_index[i] for i in sorted(by_index) if i != 0),
            )
    return Taxonomy(concepts.values(), source=source)


def taxonomy_from_melo(data_dir: str | Path, languages: Iterable[str] | None = None) -> Taxonomy:
    """The union of all MELO corpora under ``data_dir``: ESCO in up to 21 languages, labels only
    (``cached_taxonomy_from_melo``, what `link` reads, adds the ESCO export's groups and descriptions).

    Monolingual corpora are read first (sorted by name), so a language's labels come from a
    dataset whose corpus is in that language; the English-corpus datasets follow.
    """
    root = datasets_root(data_dir)
    names = list_datasets(data_dir)
    wanted = set(languages) if languages else None

    def order(name: str) -> tuple[int, str]:
        return (0 if not name.endswith("_c_en") or name.startswith("usa_") else 1, name)

    selected = []
    for name in sorted(names, key=order):
        langs = name.split("_c_", 1)[1].split("_") if "_c_" in name else []
        if wanted is not None and not wanted.intersection(langs):
            continue
        selected.append(name)
    taxonomy = taxonomy_from_datasets((load_dataset(root / n) for n in selected), source=str(root))
    if wanted is not None:
        for concept in taxonomy.concepts:
            concept.labels = {k: v for k, v in concept.labels.items() if k in wanted}
        taxonomy = Taxonomy((c for c in taxonomy.concepts if c.labels), source=str(root))
    return taxonomy


def _lines(cell: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in cell.split("\n") if part.strip())


def taxonomy_from_esco_csv(folder: str | Path, languages: Iterable[str] | None = None) -> Taxonomy:
    """Read the ESCO CSV export (``occupations_<lang>.csv`` and ``ISCOGroups_<lang>.csv``).

    ISCO groups come first (ordered by code), then occupations (ordered by URI), which matches
    the concept order of the MELO corpora.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MeloInputError("ESCO CSV folder not found", folder)
    present = sorted(p.stem.split("_", 1)[1] for p in folder.glob("occupations_*.csv"))
    if not present:
        raise MeloInputError("no occupations_<lang>.csv file found (download ESCO as CSV)", folder)
    wanted = None if languages is None else set(language_codes(languages))
    langs = [lang for lang in present if wanted is None or lang in wanted]
    if not langs:
        named = ", ".join(language_codes(languages or ()))  # as given, in its order
        raise MeloInputError(
            f"no occupations_<lang>.csv file for {named} (the folder has {', '.join(present)})", folder
        )

    groups: dict[str, Concept] = {}
    occupations: dict[str, Concept] = {}
    for lang in langs:
        isco_file = folder / f"ISCOGroups_{lang}.csv"
        if isco_file.exists():
            _read_esco_labels(isco_file, lang, groups, ISCO_GROUP, code_column="code")
        _read_esco_labels(folder / f"occupations_{lang}.csv", lang, occupations, OCCUPATION, code_column="iscoGroup")

    ordered = sorted(groups.values(), key=lambda c: c.isco_code or "") + sorted(
        occupations.values(), key=lambda c: c.uri
    )
    for i, concept in enumerate(ordered, start=1):
        concept.number = i
    # The descriptions are English where the export has English (preferred above), else the first language's.
    return Taxonomy(ordered, source=str(folder), description_language="en" if "en" in langs else langs[0])


def _read_esco_labels(path: Path, lang: str, into: dict[str, Concept], kind: str, code_column: str) -> None:
    """One ``occupations_<lang>.csv`` or ``ISCOGroups_<lang>.csv``: its labels (and description)
    join the concepts of ``into`` by URI, a concept made on its first sight."""
    required = ["conceptUri", code_column, "preferredLabel"] + (["altLabels"] if kind == OCCUPATION else [])
    # altLabels, hiddenLabels and descriptions hold line breaks (one label a line); these never do.
    single_line = ["conceptUri", code_column, "preferredLabel"]
    first_line: dict[str, int] = {}  # a row per concept: a second one would replace the first's labels
    for number, row in read_csv_records(path, required, single_line=single_line):
        uri = row["conceptUri"].strip()
        if not uri:
            raise MeloInputError("empty conceptUri", path, number)
        if uri in first_line:
            raise MeloInputError(f"column 'conceptUri': {uri} already on line {first_line[uri]}", path, number)
        first_line[uri] = number
        labels = LanguageLabels(
            preferred=row["preferredLabel"].strip() or None,
            alternative=_lines(row.get("altLabels", "")),
            hidden=_lines(row.get("hiddenLabels", "")),
        )
        for column, values in (("preferredLabel", [labels.preferred or ""]), ("altLabels", labels.alternative),
                               ("hiddenLabels", labels.hidden)):  # fmt: skip
            try:
                for value in values:
                    check_label(value)
            except ValueError as exc:
                raise MeloInputError(f"column {column!r}: {exc}", path, number) from None
        concept = into.setdefault(uri, Concept(uri=uri, number=0, kind=kind, isco_code=row[code_column].strip()))
        concept.labels[lang] = labels
        if lang == "en" or not concept.description:
            concept.description = row.get("description", "").strip() or concept.description


def add_esco_details(taxonomy: Taxonomy, esco: Taxonomy) -> int:
    """Give the concepts of ``taxonomy`` the ISCO group and description that ``esco`` (read from
    the ESCO CSV export) has for the same URI, where they lack them; returns how many changed.
    The MELO corpora carry labels only, so this is how the union learns its ISCO groups."""
    changed = 0
    for concept in taxonomy.concepts:
        other = esco.by_uri.get(concept.uri)
        if other is None:
            continue
        before = (concept.isco_code, concept.description)
        concept.isco_code = concept.isco_code or other.isco_code
        concept.description = concept.description or other.description
        changed += (concept.isco_code, concept.description) != before
    if any(c.description for c in esco.concepts):
        taxonomy.description_language = esco.description_language
    return changed


TAXONOMY_CACHE_VERSION = 5  # bump when the pickled Taxonomy changes shape


def cached_taxonomy_from_melo(
    data_dir: str | Path, cache_dir: str | Path | None = None, esco_dir: str | Path | None = None
) -> Taxonomy:
    """``taxonomy_from_melo`` remembered on disk (8 s to build, well under 1 s to load), keyed by
    the names and bytes of every corpus file (``files_stamp``), so edited data is re-read. When an ESCO
    CSV export is found (``esco_dir``, else ``config.esco_dir(data_dir)``), its ISCO groups and
    descriptions are added (``add_esco_details``)."""
    root = datasets_root(data_dir)
    esco = esco_dir or config.esco_dir(data_dir)
    esco_files = sorted(Path(esco).glob("*.csv")) if esco else []
    # Each folder stamped on its own: the data and the ESCO export may sit apart, named anyhow.
    stamp = files_stamp(sorted(root.glob("*/*.tsv")), root=root)
    if esco and esco_files:
        stamp = f"{stamp}-{files_stamp(esco_files, root=Path(esco), length=8)}"
    target = Path(cache_dir or config.cache_dir()) / "taxonomy" / f"melo-v{TAXONOMY_CACHE_VERSION}-{stamp}.pkl"
    if _last_loaded is not None and _last_loaded[0] == target:
        return _last_loaded[1]
    cached = load_pickle(target)
    if isinstance(cached, Taxonomy):
        _remember(target, cached)
        return cached
    taxonomy = taxonomy_from_melo(data_dir)
    if esco and esco_files:
        add_esco_details(taxonomy, taxonomy_from_esco_csv(esco))
    taxonomy.form_table()  # stored with it: generating 316k forms takes longer than unpickling them
    save_pickle(target, taxonomy)
    _remember(target, taxonomy)
    return taxonomy


# The last taxonomy loaded, by its cache file: `link` checks the query's languages against it and
# then builds the linker from it; unpickling the union twice cost 0.5-0.9 s of a cold start.
# Nothing changes a Taxonomy once built, so sharing the object is safe.
_last_loaded: tuple[Path, Taxonomy] | None = None


def _remember(target: Path, taxonomy: Taxonomy) -> None:
    global _last_loaded
    _last_loaded = (target, taxonomy)


def crosswalk_languages(crosswalk_language: str | None, taxonomy: Taxonomy,
                        languages: Sequence[str] | None = None) -> tuple[str, ...]:  # fmt: skip
    """ESCO label languages to search for a crosswalk's terms: the given ones, else those `link`
    ranks for the crosswalk's language (its own and English)."""
    if languages:
        wanted = tuple(dict.fromkeys(languages))
        present = tuple(lang for lang in wanted if lang in taxonomy.languages)
    else:
        wanted = tuple(dict.fromkeys(lang for lang in (crosswalk_language, "en") if lang))
        present = reader_languages(crosswalk_language or "en", taxonomy.languages)
    if not present:
        raise MeloInputError(
            f"the taxonomy has no labels in {', '.join(wanted) or 'the crosswalk language'} "
            f"(it has {', '.join(taxonomy.languages)})"
        )
    return present
