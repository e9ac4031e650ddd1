"""Link free-text occupation names to ESCO concepts.

Surface forms (every label of every concept in the chosen languages) are scored by any scorer
spec: lexical scorers score them all, dense scorers search a faiss index, hybrids fuse the
candidate pools of their components exactly as the hybrid scorer does in evaluation. Concepts
are then ranked by an aggregation of their surface forms' scores:
- ``max`` (default): the best matching label;
- ``softmax``: a smooth maximum (temperature 0.05) that also rewards a concept matched by several
  of its labels, e.g. a national title close to both a preferred and an alternative label.

Curator aliases (``add_aliases``): accepted decisions make a term an extra surface form of its
concept, for every component at once and without refitting (the thesis's "known mentions as
knowledge base"). Lexical components score queries against the alias texts with the
representation they fitted on the taxonomy (``score_against``); dense ones encode the aliases with
the same encoder and search them exactly beside the faiss index. Aliases live in this object
only: the on-disk caches stay keyed by the taxonomy.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.disk_cache import load_pickle, save_pickle
from melo_core.encoders import is_encoder_spec
from melo_core.index import VectorIndex
from melo_core.scorers.base import ExtendableScorer, Scorer, ScorerContext
from melo_core.scorers.dense import (
    DenseScorer,
    cached_encoder,
    caps_rule,
    concept_centroids,
    query_forms,
    split_scorer_options,
)
from melo_core.scorers.hybrid import POOL, HybridSpec, fuse, top_pool
from melo_core.scorers.registry import create_scorer
from melo_core.taxonomy import Taxonomy, isco_group_uri
from melo_core.text import drop_gender_markers

AGGREGATIONS = ("max", "softmax")
SOFTMAX_TEMPERATURE = 0.05
LEXICAL_STATE_VERSION = 3  # bump when a fitted lexical scorer pickles differently (3: BM25's average length)
LEXICAL_BATCH = 32  # queries per lexical scoring call: a dense row over 317k forms is 2.5 MB


def alias_form(text: str) -> str:
    """The text an alias is scored by: gender markers dropped, whitespace collapsed.

    Kept in an alias, a marker makes every later term bearing it look like that alias: Belgium's
    French titles all end in "(h/f/x)"; with the markers kept in the aliases, the simulated
    curator's MRR fell from 0.48 to 0.18 (char-tfidf, seed 0)."""
    return drop_gender_markers(text)


@dataclass
class Candidate:
    rank: int
    concept_uri: str
    label: str  # preferred label in the first display language that has one
    score: float
    matched_label: str
    matched_language: str
    kind: str
    isco_code: str | None
    isco_label: str | None  # the ISCO group's preferred label in the display languages
    component_scores: dict[str, float] = field(default_factory=dict)
    # Per scorer of a hybrid: the concept's best label score and its rank by that scorer alone
    # among the pooled candidates.
    component_ranks: dict[str, int] = field(default_factory=dict)
    via_alias: bool = False  # matched_label is a curator alias (an accepted term), not an ESCO label


@dataclass(frozen=True)
class Alias:
    """An extra surface form of a concept: a term a curator accepted as its exact or narrow match."""

    text: str  # the term as the curator saw it (shown as the matched label)
    concept_uri: str
    language: str  # "" when the term's language is unknown
    form: str  # what the scorers compare queries with (``alias_form``)


def _fingerprint(*parts: object) -> str:
    return hashlib.sha1("\n".join(map(str, parts)).encode()).hexdigest()[:16]


class _Component:
    """One scorer over the surface forms, able to give a candidate pool and exact scores."""

    def __init__(self, spec: str, texts: list[str], form_concept: np.ndarray, languages: tuple[str, ...],
                 cache_dir: Path, index_kind: str, fingerprint: str, on_status: Callable[[str], None]):  # fmt: skip
        self.spec = spec
        self.dense = is_encoder_spec(spec)
        self.cache_queries = True
        self.size = len(texts)  # taxonomy forms; ids from here on are aliases
        self.alias_texts: list[str] = []
        if self.dense:
            encoder_spec, options = split_scorer_options(spec)
            rule = options.get("caps", "calm")
            encoder = cached_encoder(encoder_spec, str(cache_dir / "embeddings"))
            self.encoder = encoder
            self.prepare = caps_rule(rule, None)
            self.forms = query_forms(options.get("forms", "asis"))
            self.centroid = float(options.get("centroid", "0"))
            if not 0.0 <= self.centroid < 1.0:
                raise ValueError(f"{spec!r}: centroid must be in [0, 1)")
            # The union's vectors in one file, memory-mapped: start-up reads no cache shards.
            snapshot = cache_dir / "linker" / f"{_fingerprint(encoder.spec, rule, fingerprint)}.npy"
            if snapshot.is_file():
                self.vectors = np.load(snapshot, mmap_mode="r")
            else:
                on_status(f"embedding {len(texts)} surface forms with {spec} (cached after the first time)")
                self.vectors = DenseScorer(encoder, prepare=self.prepare).embed(texts, "passage")
                snapshot.parent.mkdir(parents=True, exist_ok=True)
                temporary = snapshot.with_name(f".tmp-{os.getpid()}-{snapshot.name}")
                with temporary.open("wb") as handle:
                    np.save(handle, self.vectors)
                os.replace(temporary, snapshot)
            # Keyed by the spec less the options that do not change the vectors: one index serves all.
            same_vectors = "@".join(p for p in spec.split("@") if p.partition("=")[0] not in ("centroid", "forms"))
            index_path = cache_dir / "indexes" / f"{_fingerprint(same_vectors, fingerprint, index_kind)}.faiss"
            if index_path.is_file():
                self.index = VectorIndex.load(index_path, index_kind)
            else:
                on_status(f"building the {index_kind} index for {spec}")
                self.index = VectorIndex.build(self.vectors, index_kind)
                self.index.save(index_path)
            self.alias_vectors = np.zeros((0, self.vectors.shape[1]), dtype=np.float32)
            self.form_concept = np.asarray(form_concept)  # aliases' concepts are appended by the linker
            if self.centroid:  # over the taxonomy's labels; aliases are scored against them too
                self.centroids = concept_centroids(self.vectors, self.form_concept, int(self.form_concept.max()) + 1)
        else:
            state = cache_dir / "lexical" / f"{_fingerprint(spec, fingerprint, LEXICAL_STATE_VERSION)}.pkl"
            scorer = load_pickle(state)
            if scorer is None:
                on_status(f"fitting {spec} on {len(texts)} surface forms")
                context = ScorerContext(languages[0] if len(languages) == 1 else None, languages)
                scorer = create_scorer(spec, context)
                scorer.fit(texts)
                save_pickle(state, scorer)
            self.scorer: Scorer = scorer  # type: ignore[assignment]

    def _encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        prepared = [self.prepare(t, role) for t in texts]
        if self.cache_queries:
            return self.encoder.encode(prepared, role)
        return self.encoder.encoder.encode(prepared, role)

    def check_aliases(self) -> None:
        if not self.dense and not isinstance(self.scorer, ExtendableScorer):
            raise ValueError(f"scorer {self.spec!r} cannot score aliases (it has no score_against)")

    def add_aliases(self, texts: Sequence[str]) -> None:
        if self.dense:
            vectors = np.asarray(self._encode(texts, "passage"), dtype=np.float32)
            self.alias_vectors = np.vstack([self.alias_vectors, vectors])
        self.alias_texts.extend(texts)

    def keep_aliases(self, keep: np.ndarray) -> None:
        """Drop the aliases where ``keep`` (one flag per alias, in order) is False."""
        self.alias_texts = [t for t, k in zip(self.alias_texts, keep, strict=True) if k]
        if self.dense:
            self.alias_vectors = self.alias_vectors[keep]

    def _exact(self, vectors: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Exact scores of any forms, taxonomy labels and aliases alike: the best over the query's
        forms (``vectors``, one row each) of the cosine, mixed with the concept centroid's."""
        out = np.empty((len(vectors), len(candidates)), dtype=np.float64)
        base = candidates < self.size
        out[:, base] = vectors @ self.vectors[candidates[base]].T
        out[:, ~base] = vectors @ self.alias_vectors[candidates[~base] - self.size].T
        if self.centroid:
            concept_scores = vectors @ self.centroids[self.form_concept[candidates]].T
            out = (1 - self.centroid) * out + self.centroid * concept_scores
        return out.max(axis=0)

    def pools(self, queries: Sequence[str], size: int) -> list[tuple[np.ndarray, np.ndarray, Callable]]:
        """Per query: (candidate ids best first, their scores, exact scorer for any ids)."""
        out = []
        if self.dense:
            forms = [self.forms(q) for q in queries]
            flat = [f for fs in forms for f in fs]
            vectors = self._encode(flat, "query")
            _, ids = self.index.search(vectors, size)
            start = 0
            for query_forms in forms:
                rows = slice(start, start + len(query_forms))
                start += len(query_forms)
                found = ids[rows].ravel()
                pool = np.unique(found[found >= 0])
                if self.alias_texts:  # searched exactly: a few thousand aliases at most
                    pool = np.concatenate([pool, self.size + np.arange(len(self.alias_texts))])
                exact = partial(self._exact, vectors[rows])
                pool_scores = exact(pool)
                best = top_pool(pool_scores, size)
                out.append((pool[best], pool_scores[best], exact))
            return out
        for begin in range(0, len(queries), LEXICAL_BATCH):
            batch = list(queries[begin : begin + LEXICAL_BATCH])
            matrix = self.scorer.score(batch)
            if self.alias_texts:
                aliases = self.scorer.score_against(batch, self.alias_texts)  # type: ignore[attr-defined]
                matrix = np.hstack([matrix, aliases])
            for row in matrix:
                pool = top_pool(row, size)
                out.append((pool, row[pool], lambda cand, r=row: r[cand]))
        return out


class Linker:
    def __init__(
        self,
        taxonomy: Taxonomy,
        scorer: str,
        languages: Sequence[str] | None = None,
        aggregation: str = "max",
        index_kind: str = "hnsw",
        cache_dir: str | Path | None = None,
        display_languages: Sequence[str] = ("en",),
        on_status: Callable[[str], None] = lambda message: None,
        cache_queries: bool = True,
    ):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
        start = time.perf_counter()
        self.taxonomy = taxonomy
        self.aggregation = aggregation
        self.display_languages = tuple(display_languages)
        self.languages = tuple(sorted(set(languages) if languages else taxonomy.languages))
        table = taxonomy.form_table(self.languages)
        if not table.texts:
            raise ValueError(f"the taxonomy has no labels in {', '.join(self.languages)}")
        self.texts, self.form_language, self.form_concept = table.texts, table.languages, table.concept_index
        fingerprint = _fingerprint(len(self.texts), hashlib.sha1("\0".join(self.texts).encode()).hexdigest(),
                                   hashlib.sha1(self.form_concept.tobytes()).hexdigest(), self.languages)  # fmt: skip
        cache = Path(cache_dir) if cache_dir else config.cache_dir()
        if scorer.partition(":")[0] in ("rrf", "wsum"):
            self.hybrid: HybridSpec | None = HybridSpec.parse(scorer)
            specs = list(self.hybrid.components)
        else:
            self.hybrid, specs = None, [scorer]
        self.scorer_spec = scorer
        self.components = [_Component(s, self.texts, self.form_concept, self.languages, cache, index_kind,
                                      fingerprint, on_status) for s in specs]  # fmt: skip
        for component in self.components:
            component.cache_queries = cache_queries  # off to time real query encoding
        self.aliases: list[Alias] = []
        self._alias_keys: set[tuple[str, str]] = set()
        self._all_concepts = self.form_concept  # per form id, taxonomy forms then aliases
        self.load_seconds = time.perf_counter() - start

    def add_aliases(self, aliases: Iterable[tuple[str, str, str | None]]) -> int:
        """Make each (text, concept URI, language) an extra surface form of its concept for every
        component at once; returns how many were new.

        Aliases are scored by ``alias_form`` (gender markers dropped). Ignored: duplicates (same
        form and concept), forms that already are a label of that concept in the linker's
        languages, concepts not in the taxonomy, and languages outside the linker's (a term with
        no language is kept). Which decisions become aliases is the caller's choice: accepted
        exact and narrow matches (``crosswalk.ALIAS_RELATIONS``)."""
        new: list[Alias] = []
        batch: set[tuple[str, str]] = set()
        for text, uri, language in aliases:
            form = alias_form(text)
            key = (form, uri)
            concept = self.taxonomy.by_uri.get(uri)
            if not form or key in self._alias_keys or key in batch or concept is None:
                continue
            if language and language not in self.languages:
                continue
            if any(form in labels.surface_forms() for lang, labels in concept.labels.items()
                   if lang in self.languages):  # fmt: skip
                continue
            batch.add(key)
            new.append(Alias(" ".join(text.split()), uri, language or "", form))
        if new:
            for component in self.components:  # all or none: a hybrid's components stay in step
                component.check_aliases()
            texts = [a.form for a in new]
            for component in self.components:
                component.add_aliases(texts)
            self.aliases.extend(new)
            self._alias_keys |= batch
            self._refresh_alias_concepts()
        return len(new)

    def remove_aliases(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop aliases given as (text, concept URI), e.g. of decisions undone; returns how many."""
        drop = {(alias_form(text), uri) for text, uri in pairs} & self._alias_keys
        if not drop:
            return 0
        keep = np.array([(a.form, a.concept_uri) not in drop for a in self.aliases], dtype=bool)
        for component in self.components:
            component.keep_aliases(keep)
        self.aliases = [a for a, k in zip(self.aliases, keep, strict=True) if k]
        self._alias_keys -= drop
        self._refresh_alias_concepts()
        return len(drop)

    def set_aliases(self, aliases: Iterable[tuple[str, str, str | None]]) -> tuple[int, int]:
        """Make the aliases exactly these (only the new ones are encoded); (added, removed)."""
        wanted = list(aliases)
        keys = {(alias_form(text), uri) for text, uri, _ in wanted}
        removed = self.remove_aliases(self._alias_keys - keys)
        return self.add_aliases(wanted), removed

    def _refresh_alias_concepts(self) -> None:
        if not hasattr(self, "_concept_position"):
            self._concept_position = {c.uri: i for i, c in enumerate(self.taxonomy.concepts)}
        alias_concepts = np.array([self._concept_position[a.concept_uri] for a in self.aliases], dtype=np.int64)
        self._all_concepts = np.concatenate([self.form_concept, alias_concepts])
        for component in self.components:
            if component.dense:
                component.form_concept = self._all_concepts

    def link(self, queries: Sequence[str], top_k: int = 10, pool: int = POOL) -> list[list[Candidate]]:
        per_component = [c.pools(queries, pool) for c in self.components]
        results = []
        for q in range(len(queries)):
            pools = [pc[q] for pc in per_component]
            if self.hybrid is None:
                candidates, scores = pools[0][0], pools[0][1]
                component_scores = {self.components[0].spec: scores}
            else:
                candidates = np.unique(np.concatenate([p[0] for p in pools]))
                exact = np.stack([p[2](candidates) for p in pools])
                ranks = np.full(exact.shape, np.inf)
                for c, (ids, _, _) in enumerate(pools):
                    ranks[c, np.searchsorted(candidates, ids)] = np.arange(1, ids.size + 1)
                scores = fuse(self.hybrid.method, self.hybrid.weights, exact, ranks)
                component_scores = {comp.spec: exact[c] for c, comp in enumerate(self.components)}
            results.append(self._concepts(candidates, scores, component_scores, top_k))
        return results

    def _isco_label(self, code: str | None) -> str | None:
        group = self.taxonomy.by_uri.get(isco_group_uri(code)) if code else None
        return group.preferred_label(self.display_languages) if group else None

    def _concepts(self, forms: np.ndarray, scores: np.ndarray, component_scores: dict[str, np.ndarray],
                  top_k: int) -> list[Candidate]:  # fmt: skip
        concepts = self._all_concepts[forms]
        order = np.lexsort((-scores, concepts))  # per concept, best form first
        concepts, forms, scores = concepts[order], forms[order], scores[order]
        firsts = np.flatnonzero(np.r_[True, concepts[1:] != concepts[:-1]])
        if self.aggregation == "max":
            aggregated = scores[firsts]
        else:
            shifted = np.exp(
                (scores - scores[np.repeat(firsts, np.diff(np.r_[firsts, len(scores)]))]) / SOFTMAX_TEMPERATURE
            )
            sums = np.add.reduceat(shifted, firsts)
            aggregated = scores[firsts] + SOFTMAX_TEMPERATURE * np.log(sums)
        best = np.argsort(-aggregated, kind="stable")[:top_k]
        # Per scorer: a concept's score is its best label's, its rank among the pooled concepts.
        by_concept = {spec: np.maximum.reduceat(v[order], firsts) for spec, v in component_scores.items()}
        component_ranks = {}
        for spec, values in by_concept.items():
            ranks = np.empty(len(firsts), dtype=np.int64)
            ranks[np.argsort(-values, kind="stable")] = np.arange(1, len(firsts) + 1)
            component_ranks[spec] = ranks
        out = []
        for rank, b in enumerate(best, start=1):
            position = firsts[b]
            form = int(forms[position])
            concept = self.taxonomy.concepts[int(concepts[position])]
            alias = self.aliases[form - len(self.texts)] if form >= len(self.texts) else None
            out.append(Candidate(
                rank=rank,
                concept_uri=concept.uri,
                label=concept.preferred_label(self.display_languages),
                score=float(aggregated[b]),
                matched_label=alias.text if alias else self.texts[form],
                matched_language=alias.language if alias else self.form_language[form],
                kind=concept.kind,
                isco_code=concept.isco_code,
                isco_label=self._isco_label(concept.isco_code),
                component_scores={s: float(v[b]) for s, v in by_concept.items()},
                component_ranks={s: int(r[b]) for s, r in component_ranks.items()},
                via_alias=alias is not None,
            ))  # fmt: skip
        return out
