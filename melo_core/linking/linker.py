"""The linking engine: free-text occupation names to ranked ESCO concepts.

Surface forms (every label of every concept in the chosen languages, or a MELO corpus) are
scored by any scorer spec: lexical scorers score them all; dense scorers score them all
(``index_kind="exact"``) or search a faiss HNSW index; fusions (``wsum:``/``rrf:``) fuse the
candidate pools of their components. Concepts are then ranked by an aggregation of their
forms' scores:
- ``max`` (default): the best matching label (one form per concept, as ``concepts:SPEC`` ranks);
- ``softmax``: a smooth maximum (temperature 0.05) that also rewards a concept matched by several
  of its labels.

Known mentions (``set_mentions``): terms already linked to a concept — titles of other
crosswalks, a curator's accepted decisions — lift every component's scores of that concept's
forms: ``s + W * max(0, m - s)`` with ``m`` the query's best score against one of the concept's
mentions (``melo_core.scorers.known_mentions.lift``, the rule evaluation uses). With ``W = 1`` a
mention counts as one more label of its concept. Lexical components score mentions with the
representation they fitted (``score_against``); dense ones encode them with the same encoder.
Mentions live in this object only: the on-disk caches stay keyed by the taxonomy.

Mention prior (``mention_prior``, 0 by default): a concept's score is raised by
``mention_prior * log(1 + n)``, ``n`` the number of distinct known mentions of the concept. Terms
already linked to a concept say how often it is the answer (the entity linking "commonness"
prior); with other countries' crosswalks as mentions it is learned on those countries only.

Mention languages (``mention_languages``): ``all`` (default) keeps every known mention;
``query_and_labels`` only those in the query's language or a label language (and those of no
known language, such as a scheme's decisions without one). A lexical scorer fitted on the labels
reads another language's mention by the few n-grams it shares with them: a Bulgarian title folded
to ASCII kept only its brackets and lifted a plumber for "Senior Baker (m/f)"
(docs/experiments/fallback-mentions.md). The mention prior counts only the mentions kept.

Description weight (``description_weight``, 0 by default): a concept's score is raised by that
weight times the query's similarity to the concept's description (``melo_core.linking.descriptions``),
for concepts that have one.

Pipelines (``melo_core.linking.pipeline``) choose the spec, the weight and the mentions; ``eval``,
``link``, ``simulate`` and the Link page all rank through this class.
"""

from __future__ import annotations

import functools
import hashlib
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.encoders import cached_encoder, is_encoder_spec
from melo_core.encoders.vectors import concept_centroids
from melo_core.esco.taxonomy import FormTable, Taxonomy, isco_group_uri, language_codes
from melo_core.linking.descriptions import DEFAULT_ENCODER, DescriptionSimilarity
from melo_core.linking.index import VectorIndex
from melo_core.linking.query_rules import check_rules, normalise_query
from melo_core.linking.scheme_learning import KINDS, TargetKinds, target_kind
from melo_core.runtime.disk_cache import keep_newest, load_pickle, save_array, save_pickle, texts_digest
from melo_core.scorers.base import ExtendableScorer, Scorer, ScorerContext
from melo_core.scorers.dense import (
    SAME_VECTOR_OPTIONS,
    DenseScorer,
    caps_rule,
    centroid_weight,
    encoder_part,
    pool_temperature,
    query_forms,
    soft_pooled,
)
from melo_core.scorers.hybrid import POOL, fuse, top_pool
from melo_core.scorers.known_mentions import lift
from melo_core.scorers.mention_index import APPEND_LIMIT, Mention, MentionIndex, shared_head
from melo_core.scorers.registry import check_scorer, create_scorer
from melo_core.scorers.text import drop_gender_markers, may_hold_gender_marker
from melo_core.spec import ComponentSpec, FusionSpec, Spec, components_of, parse_component

AGGREGATIONS = ("max", "softmax")
MENTION_LANGUAGES = ("all", "query_and_labels")  # which known mentions a linker keeps, by their language
SOFTMAX_TEMPERATURE = 0.05
LEXICAL_STATE_VERSION = 3  # bump when a fitted lexical scorer pickles differently (3: BM25's average length)
LEXICAL_BATCH = 32  # queries per lexical scoring call: a dense row over 317k forms is 2.5 MB


@functools.lru_cache(maxsize=1 << 18)  # a cold `link` forms the same 129,000 crosswalk titles up to four times
def mention_form(text: str) -> str:
    """The text a mention is scored by: gender markers dropped, whitespace collapsed.

    Kept in a mention, a marker makes every later term bearing it look like that mention:
    Belgium's French titles all end in "(h/f/x)"; with the markers kept, the simulated curator's
    MRR fell from 0.48 to 0.18 (char-tfidf, seed 0)."""
    return drop_gender_markers(text)


@dataclass
class Candidate:
    rank: int
    concept_uri: str
    label: str  # preferred label in the first display language that has one
    score: float
    matched_label: str  # the best label, or the mention that lifted the concept
    matched_language: str
    kind: str
    isco_code: str | None
    isco_label: str | None  # the ISCO group's preferred label in the display languages
    component_scores: dict[str, float] = field(default_factory=dict)
    # Per scorer of a fusion: the concept's best label score and its rank by that scorer alone
    # among the pooled candidates.
    component_ranks: dict[str, int] = field(default_factory=dict)
    via_mention: bool = False  # matched_label is a known mention (a linked term), not an ESCO label
    prior: float = 0.0  # what the mention prior added to ``score``
    description: float = 0.0  # what the similarity to the concept's description added to ``score``


def keeps_mention(mention_languages: str, language: str | None, query_language: str | None,
                  label_languages: Sequence[str]) -> bool:  # fmt: skip
    """Whether a linker with ``mention_languages`` keeps a known mention in ``language`` (None or
    "": unknown, kept) for queries in ``query_language`` over labels in ``label_languages``."""
    if mention_languages == "all" or not language:
        return True
    return language == query_language or language in label_languages


def best_per_query(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per query, the element-wise best row of its forms' (rows from ``starts`` on). With one form
    per query (the monolingual default) the rows themselves: reduceat copied 64 x 70,000 scores in
    60 ms for nothing, per dense component and batch."""
    return scores if len(starts) == len(scores) else np.maximum.reduceat(scores, starts, axis=0)


def _fingerprint(*parts: object) -> str:
    return hashlib.sha1("\n".join(map(str, parts)).encode()).hexdigest()[:16]


def table_fingerprint(table: FormTable, languages: Sequence[str]) -> str:
    """What the on-disk state of a linker over these forms is keyed by."""
    return _fingerprint(len(table.texts), hashlib.sha1("\0".join(table.texts).encode()).hexdigest(),
                        hashlib.sha1(np.asarray(table.concept_index).tobytes()).hexdigest(), tuple(languages))  # fmt: skip


def vector_files(cache_dir: Path, spec: str | ComponentSpec, encoder_spec: str, rule: str, fingerprint: str,
                 index_kind: str) -> tuple[Path, Path | None]:  # fmt: skip
    """(vector snapshot, faiss index or None for exact search) of a dense component.
    ``encoder_spec``: the loaded encoder's spec (a local model's carries its files' stamp)."""
    snapshot = cache_dir / "linker" / f"{_fingerprint(encoder_spec, rule, fingerprint)}.npy"
    if index_kind == "exact":
        return snapshot, None
    # Keyed by the spec less the options that do not change the vectors: one index serves all.
    same_vectors = str(parse_component(spec).without(SAME_VECTOR_OPTIONS))
    return snapshot, cache_dir / "indexes" / f"{_fingerprint(same_vectors, fingerprint, index_kind)}.faiss"


@dataclass
class _Pool:
    """One component's answer for one query."""

    ids: np.ndarray  # candidate forms, best first
    scores: np.ndarray  # their lifted scores
    exact: Callable[[np.ndarray], np.ndarray]  # lifted scores of any forms
    mention: Callable[[int], tuple[float, int]]  # slot -> (best mention score, its index), (-inf, -1) if none


def _no_mention(slot: int) -> tuple[float, int]:
    return -np.inf, -1


class _Component:
    """One scorer over the surface forms, able to give a candidate pool and exact scores."""

    def __init__(self, parsed: Spec, table: FormTable, languages: tuple[str, ...], query_language: str | None,
                 cache_dir: Path, index_kind: str, fingerprint: str, on_status: Callable[[str], None],
                 persist: bool, show_progress: bool):  # fmt: skip
        self.spec = spec = str(parsed)  # what names it, and keys what it keeps on disk
        self.dense = isinstance(parsed, ComponentSpec) and is_encoder_spec(parsed)
        self.cache_queries = True
        self.exact_rows = index_kind == "exact"
        texts = table.texts
        if isinstance(parsed, ComponentSpec) and self.dense:
            rule = parsed.option("caps", "calm")
            encoder = cached_encoder(str(encoder_part(parsed)), str(cache_dir / "embeddings"))
            self.encoder = encoder
            self.prepare = caps_rule(rule, query_language)
            self.forms = query_forms(parsed.option("forms", "asis"))
            self.centroid = centroid_weight(parsed)
            self.pool = pool_temperature(parsed)
            embedder = DenseScorer(encoder, show_progress=show_progress, prepare=self.prepare, name=spec)
            snapshot, index_path = vector_files(cache_dir, spec, encoder.spec, rule, fingerprint, index_kind)
            self.vectors = self._snapshot(embedder, texts, snapshot, persist, on_status)
            # The known mentions' vectors, kept whole per set of mentions: keyed by the encoder and rule, not the forms.
            self._mention_folder = (
                (cache_dir / "linker" / f"{_fingerprint(encoder.spec, rule)}.mentions") if persist else None
            )
            self._embedder = embedder
            if index_path is not None:
                if index_path.is_file():
                    self.index = VectorIndex.load(index_path, index_kind)
                else:
                    on_status(f"building the {index_kind} index for {spec}")
                    self.index = VectorIndex.build(self.vectors, index_kind)
                    if persist:
                        self.index.save(index_path)
            self.form_concept = np.asarray(table.concept_index)
            if self.centroid:
                self.centroids = concept_centroids(self.vectors, self.form_concept, int(self.form_concept.max()) + 1)
            if self.pool:  # each concept's forms, for pooling over a searched pool's concepts
                self._by_concept = np.argsort(self.form_concept, kind="stable")
                self._concept_starts = np.searchsorted(self.form_concept[self._by_concept],
                                                       np.arange(int(self.form_concept.max()) + 2))  # fmt: skip
            self._mention_vectors: dict[str, np.ndarray] = {}
            self._mention_rows: tuple[list[str], np.ndarray] = ([], np.zeros((0, self.vectors.shape[1]), np.float32))
        else:
            state = cache_dir / "lexical" / f"{_fingerprint(spec, fingerprint, query_language, LEXICAL_STATE_VERSION)}.pkl"  # fmt: skip
            scorer = load_pickle(state) if persist else None
            if scorer is None:
                on_status(f"fitting {spec} on {len(texts)} surface forms")
                scorer = create_scorer(parsed, ScorerContext(query_language, languages, show_progress=show_progress))
                scorer.fit(texts)
                if persist:
                    save_pickle(state, scorer)
            if not isinstance(scorer, ExtendableScorer):
                raise ValueError(f"scorer {spec!r} cannot be part of the linker (it has no score_against)")
            if persist:  # where its known mentions' matrix is kept for the next process
                scorer.memo_folder = state.with_suffix(".mentions")  # type: ignore[attr-defined]
            self.scorer: Scorer = scorer

    def _snapshot(self, embedder: DenseScorer, texts: list[str], snapshot: Path, persist: bool,
                  on_status: Callable[[str], None]) -> np.ndarray:  # fmt: skip
        """The forms' vectors: with ``persist``, in one memory-mapped file, so start-up reads no cache shards."""
        if persist and snapshot.is_file():
            return np.load(snapshot, mmap_mode="r")
        on_status(f"embedding {len(texts)} surface forms with {self.spec} (cached after the first time)")
        vectors = embedder.embed(texts, "passage")
        if persist:
            save_array(snapshot, vectors)
        return vectors

    # -- dense helpers ---------------------------------------------------------------------------

    def _query_vectors(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of every scored form of the queries, and where each query's forms start."""
        forms = [self.forms(q) for q in queries]
        flat = [self.prepare(f, "query") for fs in forms for f in fs]
        vectors = self.encoder.encode(flat, "query") if self.cache_queries else self.encoder.encode_fresh(flat, "query")
        starts = np.cumsum([0] + [len(fs) for fs in forms[:-1]])
        return np.asarray(vectors, dtype=np.float32), starts

    def _mixed(self, vectors: np.ndarray, ids: np.ndarray | None, to_centroids: np.ndarray | None = None) -> np.ndarray:
        """Cosine of each query form with the forms ``ids`` (None: all), mixed with the concept
        centroid's. ``to_centroids``: ``vectors @ centroids.T`` when the caller has it already."""
        forms = self.vectors if ids is None else self.vectors[ids]
        out = vectors @ np.asarray(forms).T
        if self.centroid:
            concepts = self.form_concept if ids is None else self.form_concept[ids]
            if to_centroids is None:
                to_centroids = vectors @ self.centroids.T
            out = (1 - self.centroid) * out + self.centroid * to_centroids[:, concepts]
        return out

    def _pooled(self, vectors: np.ndarray, ids: np.ndarray, to_centroids: np.ndarray | None = None) -> np.ndarray:
        """The scores of the forms ``ids`` (best over the query's forms), pooled over every form of
        their concepts with ``@pool``: as the exact rows are, so searched and exact pools agree."""
        if not self.pool or len(ids) == 0:
            return self._mixed(vectors, ids, to_centroids).max(axis=0).astype(np.float64)
        concepts = np.unique(self.form_concept[ids])
        spans = [self._by_concept[self._concept_starts[c] : self._concept_starts[c + 1]] for c in concepts]
        family = np.sort(np.concatenate(spans))  # every form of those concepts, ids among them
        scores = self._mixed(vectors, family, to_centroids).max(axis=0).astype(np.float64)
        pooled = soft_pooled(scores[None, :], self.form_concept[family], self.pool)[0]
        return pooled[np.searchsorted(family, ids)]

    def _mention_matrix(self, mentions: MentionIndex) -> np.ndarray:
        """The vectors of the mentions' forms, in ``mentions.texts`` order. Kept in a buffer with
        room to grow: after a decision the forms are the same plus a few at the end, after an undo
        the same less a few (restacking the vectors of 100,000 forms took 0.1 s per encoder)."""
        texts = mentions.texts
        done, buffer = self._mention_rows
        if done is texts:
            return buffer[: len(texts)]
        head = shared_head(done, texts)
        if head == len(texts):  # the same or fewer: an undo (the rows past are reused)
            self._mention_rows = (texts, buffer)
            return buffer[: len(texts)]
        if head and (head == len(done) or len(texts) - head <= APPEND_LIMIT):
            # The same and more (a decision), or a few taken back and others after them (an undo after
            # other curators' decisions): the shared rows kept, the rest written after them. Past the
            # old rows in place; in a new buffer when some were cut (the old one may still be read).
            rows = self._vectors_of(texts[head:])
            if head < len(done) or len(texts) > len(buffer):
                grown = np.empty((len(texts) + len(texts) // 4 + 16, buffer.shape[1]), dtype=np.float32)
                grown[:head] = buffer[:head]
                buffer = grown
            buffer[head : len(texts)] = rows
        else:  # other forms: a new buffer
            buffer = self._all_mention_vectors(texts)
        self._mention_rows = (texts, buffer)
        return buffer[: len(texts)]

    def _all_mention_vectors(self, texts: list[str]) -> np.ndarray:
        """``_vectors_of(texts)``, read from the mentions folder when a process built these before:
        looking up 70,707 mentions in the embedding cache took 0.5 s for e5-esco and 1.2 s for muse
        at each start of `link` or the Link page. Written when built; the newest two stay."""
        folder = self._mention_folder
        if folder is None or not texts:
            return self._vectors_of(texts)
        digest = texts_digest(texts)
        path = folder / f"{digest}-{len(texts)}.npy"
        try:
            rows = np.load(path)
            if rows.shape == (len(texts), self.vectors.shape[1]) and rows.dtype == np.float32:
                return rows
        except (OSError, ValueError):
            pass
        rows = self._vectors_of(texts)
        try:
            save_array(path, rows)
            keep_newest(folder, "*.npy")
        except OSError:
            pass  # a read-only or full cache: the next process looks them up again
        return rows

    def _vectors_of(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._mention_vectors]
        if missing:
            vectors = self._embedder.embed(missing, "passage")
            self._mention_vectors.update(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        if not texts:
            return np.zeros((0, self.vectors.shape[1]), dtype=np.float32)
        return np.stack([self._mention_vectors[t] for t in texts])

    def forget_mentions(self, keep: Iterable[str]) -> None:
        if self.dense:
            wanted = set(keep)
            self._mention_vectors = {t: v for t, v in self._mention_vectors.items() if t in wanted}

    # -- pools -----------------------------------------------------------------------------------

    def pools(self, queries: Sequence[str], size: int, mentions: MentionIndex | None, weight: float) -> list[_Pool]:
        """Per query: candidate forms best first, by scores lifted by the known mentions."""
        out: list[_Pool] = []
        batch = len(queries) if self.dense else LEXICAL_BATCH
        for begin in range(0, len(queries), batch):
            part = list(queries[begin : begin + batch])
            per_mention = None
            if self.dense:
                vectors, starts = self._query_vectors(part)
                if mentions is not None:
                    per_text = best_per_query(vectors @ self._mention_matrix(mentions).T, starts)
                    per_mention = np.take(per_text, mentions.text_of, axis=1)  # 3x faster than [:, text_of]
            elif mentions is not None:
                per_text = np.asarray(self.scorer.score_against(part, mentions.texts), dtype=np.float64)  # type: ignore[attr-defined]
                per_mention = np.take(per_text, mentions.text_of, axis=1)
            if per_mention is not None:
                assert mentions is not None
                per_slot = np.maximum.reduceat(per_mention, mentions.starts, axis=1)
            if self.dense and not self.exact_rows:
                out += self._searched(vectors, starts, size, mentions, per_slot if per_mention is not None else None,
                                      per_mention, weight)  # fmt: skip
                continue
            if self.dense:
                rows = best_per_query(self._mixed(vectors, None), starts).astype(np.float64)
                rows = soft_pooled(rows, self.form_concept, self.pool)
            else:
                rows = np.asarray(self.scorer.score(part), dtype=np.float64)
            if per_mention is not None:
                assert mentions is not None
                best = np.where(mentions.form_slot >= 0, per_slot[:, np.maximum(mentions.form_slot, 0)], -np.inf)
                rows = lift(rows, best, weight)
            for q, row in enumerate(rows):
                pool = top_pool(row, size)
                out.append(_Pool(pool, row[pool], row.__getitem__,
                                 self._mention_lookup(per_mention, q, mentions)))  # fmt: skip
        return out

    def _searched(self, vectors: np.ndarray, starts: np.ndarray, size: int, mentions: MentionIndex | None,
                  per_slot: np.ndarray | None, per_mention: np.ndarray | None, weight: float) -> list[_Pool]:  # fmt: skip
        """Pools from the HNSW index, plus the forms of the concepts whose mentions match best."""
        _, found = self.index.search(vectors, size)
        ends = np.r_[starts[1:], len(vectors)]
        out = []
        for q, (low, high) in enumerate(zip(starts, ends, strict=True)):
            ids = found[low:high].ravel()
            ids = ids[ids >= 0]
            query_vectors = vectors[low:high]
            # Once per query, not per scoring of its candidates (its pool, then the fusion's):
            # against 3,600 centroids it outweighed the few hundred forms scored.
            to_centroids = query_vectors @ self.centroids.T if self.centroid else None
            best_of_form: Callable[[np.ndarray], np.ndarray] = lambda ids: np.full(len(ids), -np.inf)  # noqa: E731
            # The pool as a mask over the forms: np.unique and np.union1d sorted it twice per query.
            if per_slot is not None and mentions is not None:
                slots = per_slot[q]
                top_slots = top_pool(np.where(np.isfinite(slots), slots, -np.inf), size)
                chosen = np.zeros(len(slots) + 1, dtype=bool)  # the last for form_slot -1: no mention
                chosen[top_slots] = True
                in_pool = chosen[mentions.form_slot]  # the forms of the concepts whose mentions match best

                def best_of_form(ids: np.ndarray, slots: np.ndarray = slots) -> np.ndarray:
                    form_slots = mentions.form_slot[ids]
                    return np.where(form_slots >= 0, slots[np.maximum(form_slots, 0)], -np.inf)
            else:
                in_pool = np.zeros(len(self.form_concept), dtype=bool)
            in_pool[ids] = True
            pool = np.flatnonzero(in_pool)

            def exact(ids: np.ndarray, v: np.ndarray = query_vectors, m: Callable = best_of_form,
                      c: np.ndarray | None = to_centroids) -> np.ndarray:  # fmt: skip
                return lift(self._pooled(v, ids, c), m(ids), weight)

            scores = exact(pool)
            best = top_pool(scores, size)
            out.append(_Pool(pool[best], scores[best], exact, self._mention_lookup(per_mention, q, mentions)))
        return out

    @staticmethod
    def _mention_lookup(per_mention: np.ndarray | None, q: int,
                        mentions: MentionIndex | None) -> Callable[[int], tuple[float, int]]:  # fmt: skip
        if per_mention is None or mentions is None:
            return _no_mention
        row = per_mention[q]
        ends = np.r_[mentions.starts[1:], len(row)]

        def lookup(slot: int) -> tuple[float, int]:
            low = int(mentions.starts[slot])
            best = low + int(np.argmax(row[low : ends[slot]]))
            return float(row[best]), best

        return lookup


class Linker:
    """Ranks concepts for queries with one scorer spec (a fusion or a single scorer).

    ``forms``: the surface forms to rank (default: the taxonomy's labels in ``languages``), e.g. a
    MELO corpus in its own order. ``query_language`` picks lemmatisation and capitalisation rules;
    ``mention_weight`` the ``W`` of known mentions. ``persist=False`` writes no snapshot, index or
    fitted state to ``cache_dir`` (one-off corpora; embeddings are still cached)."""

    def __init__(
        self,
        taxonomy: Taxonomy,
        scorer: str | Spec,
        languages: Sequence[str] | None = None,
        aggregation: str = "max",
        index_kind: str = "hnsw",
        cache_dir: str | Path | None = None,
        display_languages: str | Sequence[str] = ("en",),
        on_status: Callable[[str], None] = lambda message: None,
        cache_queries: bool = True,
        query_language: str | None = None,
        mention_weight: float = 1.0,
        forms: FormTable | None = None,
        persist: bool = True,
        show_progress: bool = True,
        query_rules: Sequence[str] = (),
        mention_prior: float = 0.0,
        description_weight: float = 0.0,
        description_encoder: str = DEFAULT_ENCODER,
        mention_languages: str = "all",
    ):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
        if not 0.0 < mention_weight <= 1.0:
            raise ValueError(f"mention weight must be in (0, 1], got {mention_weight}")
        if not (np.isfinite(mention_prior) and mention_prior >= 0.0):
            raise ValueError(f"mention prior must be a number >= 0, got {mention_prior}")
        if not (np.isfinite(description_weight) and description_weight >= 0.0):
            raise ValueError(f"description weight must be a number >= 0, got {description_weight}")
        start = time.perf_counter()
        self.taxonomy = taxonomy
        self.aggregation = aggregation
        self.display_languages = language_codes(display_languages)
        self.query_language = query_language
        self.mention_weight = mention_weight
        self.mention_prior = mention_prior
        if mention_languages not in MENTION_LANGUAGES:
            raise ValueError(f"unknown mention languages {mention_languages!r}; expected one of "
                             f"{', '.join(MENTION_LANGUAGES)}")  # fmt: skip
        self.mention_languages = mention_languages
        check_rules(query_rules)
        self.query_rules = tuple(query_rules)
        if forms is None:
            self.languages = tuple(sorted(set(languages) if languages else taxonomy.languages))
            table = taxonomy.form_table(self.languages)
        else:
            table = forms
            self.languages = tuple(sorted(set(languages) if languages else set(forms.languages)))
        if not table.texts:
            raise ValueError(f"the taxonomy has no labels in {', '.join(self.languages)}")
        self.texts, self.form_language, self.form_concept = table.texts, table.languages, table.concept_index
        fingerprint = table_fingerprint(table, self.languages)
        cache = Path(cache_dir) if cache_dir else config.cache_dir()
        parsed = check_scorer(scorer)  # a string from a caller is parsed here, once
        self.hybrid: FusionSpec | None = parsed if isinstance(parsed, FusionSpec) else None
        specs: Sequence[Spec] = components_of(parsed) if self.hybrid else [parsed]
        self.scorer_spec = scorer if isinstance(scorer, str) else str(parsed)
        self.components = [_Component(s, table, self.languages, query_language, cache, index_kind, fingerprint,
                                      on_status, persist, show_progress) for s in specs]  # fmt: skip
        for component in self.components:
            component.cache_queries = cache_queries  # off to time real query encoding
        # The component whose mention is shown as the matched label: the heaviest of a fusion.
        self._shown = int(np.argmax(self.hybrid.weights)) if self.hybrid else 0
        self.mentions: list[Mention] = []
        # The Link page sets the same mentions on every rerun (one more after a decision): the
        # last ones given, and the Mention each became (None: dropped), spare the work.
        self._mentions_given: list[tuple[str, str, str | None]] = []
        self._mention_of: dict[tuple[str, str, str | None], Mention | None] = {}
        self._kept: dict[tuple[str, str], Mention] = {}  # the mentions by (form, concept)
        # Per item given: (len(_mention_of), len(_kept)) after it. Both dicts grow in item order,
        # so an undo (the last items taken back) pops their ends back to these sizes. Flat, in an
        # array: 2 MB for 128,000 items (16 MB as a list of tuples).
        self._sizes_after = array("q")
        self._mention_index: MentionIndex | None = None
        self._concept_position = {c.uri: i for i, c in enumerate(taxonomy.concepts)}
        self._prior = np.zeros(len(taxonomy.concepts))  # per concept: log(1 + its known mentions)
        self._concept_kind: np.ndarray | None = None  # per concept: its index in scheme_learning.KINDS
        self.description_weight = description_weight
        # No concept described (labels only): no describing encoder to build, no query to embed with it.
        described = description_weight and any(c.description for c in taxonomy.concepts)
        self._descriptions = (DescriptionSimilarity([c.description for c in taxonomy.concepts], cache,
                                                    description_encoder, cache_queries)
                              if described else None)  # fmt: skip
        self.load_seconds = time.perf_counter() - start

    # -- known mentions ----------------------------------------------------------------------------

    @property
    def mentions_given(self) -> list[tuple[str, str, str | None]]:
        """The (text, concept URI, language) items last given: ``set_mentions`` of them changes nothing."""
        return self._mentions_given

    def set_mentions(self, mentions: Iterable[tuple[str, str, str | None]]) -> tuple[int, int]:
        """Make the known mentions exactly these (text, concept URI, language); (added, removed).

        Kept once per (form, concept): duplicates, empty forms and concepts not in the taxonomy
        are dropped. Dense components encode only mentions they have not seen."""
        given = list(mentions)
        last = self._mentions_given
        if given == last:
            return 0, 0
        # After a decision the Link page gives the same mentions and one more; after an undo, one
        # fewer; after an undo with other curators' decisions since, one fewer before theirs. Each
        # is taken back to the shared head, then the rest appended, instead of rebuilt whole.
        head = shared_head(last, given)
        removed = self._take_back(head) if head < len(last) else []
        if removed is None:
            return self._rebuild(given)
        new = self._keep(given[head:], self._kept, self._mention_of, self._mention_of, self._sizes_after)
        self._mentions_given = given
        if new:
            self.mentions = [*self.mentions, *new]
            self._index_mentions(appended=new)
        gone, came = {(m.form, m.concept_uri) for m in removed}, {(m.form, m.concept_uri) for m in new}
        return len(came - gone), len(gone - came)

    def _take_back(self, head: int) -> list[Mention] | None:
        """Keep the mentions of the first ``head`` items given; the mentions taken out, or None
        (nothing changed) when there would be none left or more than a few to take out."""
        if not head:
            return None
        items, kept = self._sizes_after[2 * head - 2 : 2 * head]
        removed = self.mentions[kept:]
        if len(removed) > APPEND_LIMIT:
            return None
        while len(self._mention_of) > items:
            self._mention_of.popitem()
        while len(self._kept) > kept:
            self._kept.popitem()
        del self._sizes_after[2 * head :]
        self.mentions, self._mentions_given = self.mentions[:kept], self._mentions_given[:head]
        if removed:
            self._index_mentions(removed=removed)
        return removed

    def _rebuild(self, given: list[tuple[str, str, str | None]]) -> tuple[int, int]:
        before = self._kept.keys()
        kept_now: dict[tuple[str, str], Mention] = {}
        mention_of: dict[tuple[str, str, str | None], Mention | None] = {}
        sizes = array("q")
        self._keep(given, kept_now, self._mention_of, mention_of, sizes)
        added, removed_count = len(kept_now.keys() - before), len(before - kept_now.keys())
        self.mentions, self._kept, self._mentions_given = list(kept_now.values()), kept_now, given
        self._mention_of, self._sizes_after = mention_of, sizes
        self._index_mentions()
        return added, removed_count

    def _keep(self, items: Iterable[tuple[str, str, str | None]], kept: dict[tuple[str, str], Mention],
              made: dict[tuple[str, str, str | None], Mention | None],
              mention_of: dict[tuple[str, str, str | None], Mention | None],
              sizes: array[int]) -> list[Mention]:  # fmt: skip
        """Adds to ``kept`` the mentions of ``items`` not in it yet (returned), reusing those ``made``
        before; ``mention_of`` records what each item became (None: dropped), ``sizes`` both
        dicts' sizes after each item."""
        new = []
        position, size = self._concept_position, sizes.append  # 129,733 crosswalk mentions at start-up
        for item in items:
            if item not in mention_of:
                if item in made:
                    mention = made[item]
                else:
                    text, uri, language = item
                    form = mention_form(text)
                    # Without a marker the form is the text, spaces collapsed.
                    if form and uri in position and self._reads(language):
                        shown = " ".join(text.split()) if may_hold_gender_marker(text) else form
                        mention = Mention(shown, uri, language or "", form)
                    else:
                        mention = None
                mention_of[item] = mention
                if mention is not None:
                    key = (mention.form, mention.concept_uri)
                    if key not in kept:
                        kept[key] = mention
                        new.append(mention)
            size(len(mention_of))
            size(len(kept))
        return new

    def _reads(self, language: str | None) -> bool:
        """Whether a known mention in ``language`` is kept (``mention_languages``)."""
        return keeps_mention(self.mention_languages, language, self.query_language, self.languages)

    def add_mentions(self, mentions: Iterable[tuple[str, str, str | None]]) -> int:
        """Add known mentions to the current ones; returns how many were new."""
        added, _ = self.set_mentions([*self._mentions_given, *mentions])
        return added

    def remove_mentions(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop mentions given as (text, concept URI), e.g. of decisions undone; returns how many."""
        drop = {(mention_form(text), uri) for text, uri in pairs}
        kept = [(m.text, m.concept_uri, m.language) for m in self.mentions if (m.form, m.concept_uri) not in drop]
        _, removed = self.set_mentions(kept)
        return removed

    def _index_mentions(self, appended: Sequence[Mention] = (), removed: Sequence[Mention] = ()) -> None:
        """Index the mentions again: only the few ``appended`` inserted, or the last ``removed``
        taken out, when given; else all."""
        index = self._mention_index
        if appended and index is not None and len(appended) <= APPEND_LIMIT:
            index = index.appended(appended, self._concept_position, self.form_concept)
        elif removed and index is not None and self.mentions:
            index = index.without_last(removed, self._concept_position, self.form_concept)
        else:
            index = (
                MentionIndex.build(self.mentions, self._concept_position, self.form_concept) if self.mentions else None
            )
            for component in self.components:
                component.forget_mentions(index.texts if index else [])
        self._mention_index = index
        counts = index.concept_counts(len(self.taxonomy.concepts)) if index else np.zeros(len(self.taxonomy.concepts))
        self._prior = np.log1p(counts)

    # -- linking -----------------------------------------------------------------------------------

    def link(self, queries: Sequence[str], top_k: int = 10, pool: int = POOL,
             kinds: TargetKinds | None = None) -> list[list[Candidate]]:  # fmt: skip
        """Per query, its ``top_k`` concepts, best first. A query of white space only gets none:
        ranked, it got the corpus's arbitrary nearest concepts (`link` and bulk files refuse it).
        ``kinds``: what a scheme's decisions taught about the kind of concept it maps to; its
        offsets move each concept's score (``melo_core.linking.scheme_learning``)."""
        if isinstance(queries, str):  # would be linked character by character
            raise TypeError(f"link takes a list of queries, not one string: link([{queries!r}])")
        if top_k < 1 or pool < 1:
            raise ValueError(f"top_k and pool must be 1 or more, got {top_k} and {pool}")
        readable = [q for q in queries if q.strip()]
        if len(readable) < len(queries):
            found = iter(self.link(readable, top_k, pool, kinds) if readable else [])
            return [next(found) if q.strip() else [] for q in queries]
        fused, offsets, exacts = self._fused(queries, pool)
        by_kind = self._kind_offsets(kinds)
        return [self._concepts(*f, top_k, o, e, by_kind) for f, o, e in zip(fused, offsets, exacts, strict=True)]

    def _kind_offsets(self, kinds: TargetKinds | None) -> np.ndarray | None:
        """Per concept, what the kinds learnt add to its score; None before any decision."""
        if kinds is None or not kinds.decisions:
            return None
        if self._concept_kind is None:
            self._concept_kind = np.array([KINDS.index(target_kind(c)) for c in self.taxonomy.concepts])
        offsets = kinds.offsets()
        return np.array([offsets[kind] for kind in KINDS])[self._concept_kind]

    def fused(self, queries: Sequence[str], pool: int = POOL) -> list[tuple[np.ndarray, np.ndarray, list[_Pool]]]:
        """Per query: the candidate forms, their fused scores, and each component's pool."""
        return self._fused(queries, pool)[0]

    def _description_offsets(self, vector: np.ndarray, forms: np.ndarray) -> np.ndarray:
        """What the description similarity adds to each form's score: its concept's, the same for
        every form of a concept (centred over the distinct concepts)."""
        concepts, inverse = np.unique(self.form_concept[forms], return_inverse=True)
        return self.description_weight * self._descriptions.scores(vector, concepts)[inverse]  # type: ignore[union-attr]

    def _fused(self, queries: Sequence[str], pool: int, extra: Sequence[np.ndarray] | None = None,
               ) -> tuple[list[tuple[np.ndarray, np.ndarray, list[_Pool]]], list[np.ndarray | None],
                          list[np.ndarray | None]]:  # fmt: skip
        """``fused``; per query what the descriptions added to each candidate form (None: off), and
        each component's scores of the candidates (None: one scorer, no fusion). ``extra``: per
        query, forms made candidates beside the pools (``pair_scores``)."""
        if self.query_rules:
            queries = [normalise_query(q, self.query_rules, self.query_language) for q in queries]
        # Each distinct query scored once: pair_scores repeats a term once per concept it scores.
        distinct = {query: i for i, query in enumerate(dict.fromkeys(queries))}
        per_component = [c.pools(list(distinct), pool, self._mention_index, self.mention_weight)
                         for c in self.components]  # fmt: skip
        described = self._descriptions.query_vectors(list(distinct)) if self._descriptions is not None else None
        out, offsets, exacts = [], [], []
        for q, query in enumerate(queries):
            pools = [pc[distinct[query]] for pc in per_component]
            exact = None
            if self.hybrid is None:
                candidates, scores = pools[0].ids, pools[0].scores
                if extra is not None:
                    candidates = np.union1d(candidates, extra[q])
                    scores = pools[0].exact(candidates)
            else:
                pooled = np.zeros(len(self.texts), dtype=bool)  # a mask, not np.unique's sort, per query
                for p in pools:
                    pooled[p.ids] = True
                if extra is not None:
                    pooled[extra[q]] = True
                candidates = np.flatnonzero(pooled)
                exact = np.stack([p.exact(candidates) for p in pools])
                ranks = np.full(exact.shape, np.inf)
                for c, p in enumerate(pools):
                    ranks[c, np.searchsorted(candidates, p.ids)] = np.arange(1, p.ids.size + 1)
                scores = fuse(self.hybrid.method, self.hybrid.weights, exact, ranks)
            added = None if described is None else self._description_offsets(described[distinct[query]], candidates)
            if added is not None:  # the same for every form of a concept: it shifts the concept
                scores = scores + added
            out.append((candidates, scores, pools))
            offsets.append(added)
            exacts.append(exact)
        return out, offsets, exacts

    def concept_ranking(self, queries: Sequence[str], pool: int = POOL) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (best form of each candidate concept, its concept score), best first."""
        return [self.rank_concepts(forms, scores) for forms, scores, _ in self.fused(queries, pool)]

    @functools.cached_property
    def _forms_of_concept(self) -> list[np.ndarray]:
        """Each concept's forms (by taxonomy position), in form order."""
        concepts = np.asarray(self.form_concept)
        order = np.argsort(concepts, kind="stable")
        bounds = np.searchsorted(concepts[order], np.arange(len(self.taxonomy.concepts) + 1))
        return [order[bounds[i] : bounds[i + 1]] for i in range(len(self.taxonomy.concepts))]

    def pair_scores(self, queries: Sequence[str], concept_uris: Sequence[str],
                    pool: int = POOL) -> list[tuple[float, dict[str, float]]]:  # fmt: skip
        """Per (query, concept) pair: the concept's score and each component's (its best form's), as
        ``link`` would rank the concept were its forms among the pooled candidates: a concept outside
        every pool gets a score too (graded similarity scores unrelated concepts: melo_core.evaluation.graded).
        Each pair is fused on its own, so one pair's forms never move another's normalisation."""
        if len(queries) != len(concept_uris):
            raise ValueError(f"{len(queries)} queries for {len(concept_uris)} concepts")
        wanted = [self._forms_of_concept[self._concept_position[uri]] for uri in concept_uris]
        missing = [uri for uri, forms in zip(concept_uris, wanted, strict=True) if not len(forms)]
        if missing:
            raise ValueError(f"concept {missing[0]} has no form in {', '.join(self.languages)}")
        fused, _, exacts = self._fused(queries, pool, wanted)
        out = []
        for (forms, scores, _), mine, exact in zip(fused, wanted, exacts, strict=True):
            best_forms, concept_scores = self.rank_concepts(forms, scores)
            concept = self.form_concept[mine[0]]
            at = int(np.flatnonzero(self.form_concept[best_forms] == concept)[0])
            per_component = (exact if exact is not None else scores[None])[:, np.isin(forms, mine)]
            components = {c.spec: float(per_component[i].max()) for i, c in enumerate(self.components)}
            out.append((float(concept_scores[at]), components))
        return out

    def rank_concepts(self, forms: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One query's fused candidates (``fused``) as (best form of each concept, its concept
        score), best first: the aggregation and the mention prior as they stand now."""
        firsts, order, aggregated = self._aggregate(forms, scores)
        best = np.argsort(-aggregated, kind="stable")
        return forms[order][firsts][best], aggregated[best]

    def _aggregate(self, forms: np.ndarray, scores: np.ndarray,
                   by_kind: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """(first position of each concept in ``order``, the order, each concept's score);
        ``by_kind``: per concept of the taxonomy, what its kind adds (``_kind_offsets``)."""
        concepts = self.form_concept[forms]
        order = np.lexsort((-scores, concepts))  # per concept, best form first
        scores = scores[order]
        firsts = np.flatnonzero(np.r_[True, concepts[order][1:] != concepts[order][:-1]])
        if self.aggregation == "max":
            aggregated = scores[firsts]
        else:
            shifted = np.exp(
                (scores - scores[np.repeat(firsts, np.diff(np.r_[firsts, len(scores)]))]) / SOFTMAX_TEMPERATURE
            )
            aggregated = scores[firsts] + SOFTMAX_TEMPERATURE * np.log(np.add.reduceat(shifted, firsts))
        ranked = concepts[order][firsts]
        return firsts, order, aggregated + self._prior_of(ranked) + (by_kind[ranked] if by_kind is not None else 0.0)

    def _prior_of(self, concepts: np.ndarray) -> np.ndarray:
        """What the mention prior adds to these concepts' scores (0 when off)."""
        if not self.mention_prior:
            return np.zeros(len(concepts))
        return self.mention_prior * self._prior[concepts]

    def _isco_label(self, code: str | None) -> str | None:
        group = self.taxonomy.by_uri.get(isco_group_uri(code)) if code else None
        return group.preferred_label(self.display_languages) if group else None

    def _concepts(self, forms: np.ndarray, scores: np.ndarray, pools: list[_Pool], top_k: int,
                  added: np.ndarray | None = None, exact: np.ndarray | None = None,
                  by_kind: np.ndarray | None = None) -> list[Candidate]:  # fmt: skip
        """``added``: what the descriptions added to each of ``forms``; ``exact``: each component's
        scores of ``forms`` (both from ``_fused``; None: off, or scored here); ``by_kind``: what
        each concept's kind adds (``_kind_offsets``)."""
        firsts, order, aggregated = self._aggregate(forms, scores, by_kind)
        best = np.argsort(-aggregated, kind="stable")[:top_k]
        sorted_forms = forms[order]
        priors = self._prior_of(self.form_concept[sorted_forms[firsts]])
        offsets = added[order][firsts] if added is not None else np.zeros(len(firsts))
        specs = [c.spec for c in self.components]
        # Per scorer: a concept's score is its best label's, its rank among the pooled concepts.
        if not self.hybrid:
            per_component = scores[order][None]
        else:  # what the fusion scored already: scoring them again was a third of the dense work
            per_component = exact[:, order] if exact is not None else np.stack([p.exact(sorted_forms) for p in pools])
        by_concept = np.maximum.reduceat(per_component, firsts, axis=1)
        ranks = np.empty_like(by_concept, dtype=np.int64)
        for c in range(len(by_concept)):
            ranks[c, np.argsort(-by_concept[c], kind="stable")] = np.arange(1, by_concept.shape[1] + 1)
        index = self._mention_index
        out = []
        for rank, b in enumerate(best, start=1):
            form = int(sorted_forms[firsts[b]])
            concept = self.taxonomy.concepts[int(self.form_concept[form])]
            mention = None
            if index is not None and index.form_slot[form] >= 0:
                value, which = pools[self._shown].mention(int(index.form_slot[form]))
                # The mention gave the concept its score (s + (m - s) need not equal m to the last bit).
                if which >= 0 and value >= by_concept[self._shown, b] - 1e-9:
                    mention = index.mentions[which]
            out.append(Candidate(
                rank=rank,
                concept_uri=concept.uri,
                label=concept.preferred_label(self.display_languages),
                score=float(aggregated[b]),
                matched_label=mention.text if mention else self.texts[form],
                matched_language=mention.language if mention else self.form_language[form],
                kind=concept.kind,
                isco_code=concept.isco_code,
                isco_label=self._isco_label(concept.isco_code),
                component_scores={s: float(by_concept[c, b]) for c, s in enumerate(specs)},
                component_ranks={s: int(ranks[c, b]) for c, s in enumerate(specs)},
                via_mention=mention is not None,
                prior=float(priors[b]),
                description=float(offsets[b]),
            ))  # fmt: skip
        return out
