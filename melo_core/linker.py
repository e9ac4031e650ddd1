"""Link free-text occupation names to ESCO concepts.

Surface forms (every label of every concept in the chosen languages) are scored by any scorer
spec: lexical scorers score them all, dense scorers search a faiss index, hybrids fuse the
candidate pools of their components exactly as the hybrid scorer does in evaluation. Concepts
are then ranked by an aggregation of their surface forms' scores:
- ``max`` (default): the best matching label;
- ``softmax``: a smooth maximum (temperature 0.05) that also rewards a concept matched by several
  of its labels, e.g. a national title close to both a preferred and an alternative label.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.disk_cache import load_pickle, save_pickle
from melo_core.encoders import is_encoder_spec
from melo_core.index import VectorIndex
from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.dense import DenseScorer, cached_encoder, caps_rule, split_caps
from melo_core.scorers.hybrid import POOL, HybridSpec, fuse, top_pool
from melo_core.scorers.registry import create_scorer
from melo_core.taxonomy import Taxonomy, isco_group_uri

AGGREGATIONS = ("max", "softmax")
SOFTMAX_TEMPERATURE = 0.05
LEXICAL_STATE_VERSION = 2  # bump when a fitted lexical scorer pickles differently
LEXICAL_BATCH = 32  # queries per lexical scoring call: a dense row over 317k forms is 2.5 MB


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


def _fingerprint(*parts: object) -> str:
    return hashlib.sha1("\n".join(map(str, parts)).encode()).hexdigest()[:16]


class _Component:
    """One scorer over the surface forms, able to give a candidate pool and exact scores."""

    def __init__(self, spec: str, texts: list[str], languages: tuple[str, ...], cache_dir: Path, index_kind: str,
                 fingerprint: str, on_status: Callable[[str], None]):  # fmt: skip
        self.spec = spec
        self.dense = is_encoder_spec(spec)
        self.cache_queries = True
        if self.dense:
            encoder_spec, rule = split_caps(spec)
            encoder = cached_encoder(encoder_spec, str(cache_dir / "embeddings"))
            self.encoder = encoder
            self.prepare = caps_rule(rule, None)
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
            index_path = cache_dir / "indexes" / f"{_fingerprint(spec, fingerprint, index_kind)}.faiss"
            if index_path.is_file():
                self.index = VectorIndex.load(index_path, index_kind)
            else:
                on_status(f"building the {index_kind} index for {spec}")
                self.index = VectorIndex.build(self.vectors, index_kind)
                self.index.save(index_path)
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

    def pools(self, queries: Sequence[str], size: int) -> list[tuple[np.ndarray, np.ndarray, Callable]]:
        """Per query: (candidate ids best first, their scores, exact scorer for any ids)."""
        out = []
        if self.dense:
            texts = [self.prepare(q, "query") for q in queries]
            if self.cache_queries:
                vectors = self.encoder.encode(texts, "query")
            else:
                vectors = self.encoder.encoder.encode(texts, "query")
            scores, ids = self.index.search(vectors, size)
            for q, vector in enumerate(vectors):
                keep = ids[q] >= 0
                out.append((ids[q][keep], scores[q][keep].astype(np.float64),
                            lambda cand, v=vector: (self.vectors[cand] @ v).astype(np.float64)))  # fmt: skip
            return out
        for begin in range(0, len(queries), LEXICAL_BATCH):
            matrix = self.scorer.score(list(queries[begin : begin + LEXICAL_BATCH]))
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
        self.components = [_Component(s, self.texts, self.languages, cache, index_kind, fingerprint, on_status)
                           for s in specs]  # fmt: skip
        for component in self.components:
            component.cache_queries = cache_queries  # off to time real query encoding
        self.load_seconds = time.perf_counter() - start

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
        concepts = self.form_concept[forms]
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
            out.append(Candidate(
                rank=rank,
                concept_uri=concept.uri,
                label=concept.preferred_label(self.display_languages),
                score=float(aggregated[b]),
                matched_label=self.texts[form],
                matched_language=self.form_language[form],
                kind=concept.kind,
                isco_code=concept.isco_code,
                isco_label=self._isco_label(concept.isco_code),
                component_scores={s: float(v[b]) for s, v in by_concept.items()},
                component_ranks={s: int(r[b]) for s, r in component_ranks.items()},
            ))  # fmt: skip
        return out
