"""What the Link page learns from a scheme's decisions besides known mentions, and the order of its
queue (issue 89, items 4 and 6; the simulated curator measures both: docs/experiments/curator-effort.md).

- ``scheme_kinds``: the kind of concept the scheme's current matches point to (occupation or ISCO
  group, which level), given to ``Linker.link(..., kinds=...)``.
- ``scheme_boilerplate``: the words many of the scheme's terms share; a decided term made mostly
  of them becomes no known mention (``ui.common.known_mentions``).
- ``ordered_queue``: the queue in file order, or the terms the linker is most or least sure of
  first (``melo_core.evaluation.effort.margin`` of char TF-IDF's first two candidates: ready at once, without
  waiting for a pipeline to be prepared).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from db import aliases
from db.store import Store, Term
from melo_core.esco.taxonomy import Taxonomy
from melo_core.evaluation.effort import margin, queue_order
from melo_core.linking.linker import Linker
from melo_core.linking.scheme_learning import Boilerplate, TargetKinds

ORDER_SCORER = "char-tfidf"  # what ranks the queue by confidence
ORDERED_TERMS = 1000  # the terms of a queue ordered by confidence (of the first, in import order)
_BOILERPLATE = "_scheme_boilerplate"  # session state: (scheme, its number of terms) -> Boilerplate
_MARGINS = "_queue_margins"  # session state: (scheme, languages) -> {term id: margin}


def scheme_kinds(store: Store, scheme: str, taxonomy: Taxonomy) -> TargetKinds:
    return aliases.scheme_kinds(store, scheme, taxonomy.by_uri)


def scheme_boilerplate(store: Store, scheme: str) -> Boilerplate:
    """The scheme's boilerplate, read again when its number of terms changes."""
    labels = aliases.scheme_labels(store, scheme)
    cache = st.session_state.setdefault(_BOILERPLATE, {})
    key = (scheme, len(labels))
    if key not in cache:
        cache[key] = Boilerplate.of(labels)
    return cache[key]


def ordered_queue(queue: Sequence[Term], order: str, scheme: str, languages: tuple[str, ...] | None,
                  linker: Callable[[], Linker]) -> list[Term]:  # fmt: skip
    """``queue`` in ``order`` (``melo_core.evaluation.effort.QUEUE_ORDERS``). The margins are kept per session
    and scheme: only terms not seen before are linked (``linker()`` is built only then)."""
    if order == "file":
        return list(queue)
    margins: dict[int, float] = st.session_state.setdefault(_MARGINS, {}).setdefault((scheme, languages), {})
    missing = [t for t in queue if t.id not in margins]
    if missing:
        ranked = linker().link([t.label for t in missing], top_k=2)
        margins.update(
            {t.id: margin([c.score for c in candidates]) for t, candidates in zip(missing, ranked, strict=True)}
        )
    return [queue[i] for i in queue_order(order, [margins[t.id] for t in queue])]


def following(queue: Sequence[Term], term_id: int) -> int:
    """The id of the term after ``term_id`` in the queue (the first after the last)."""
    ids = [t.id for t in queue]
    return ids[(ids.index(term_id) + 1) % len(ids)] if term_id in ids else ids[0]
