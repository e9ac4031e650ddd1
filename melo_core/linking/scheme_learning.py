"""What a scheme's decisions teach the linker beyond known mentions (issue 89, item 4).

Known mentions lift the concepts curators accepted. A scheme's decisions also show which kind of
concept it maps to — ESCO occupations or ISCO groups, and which ISCO level — and which relation
its curators use. Norway's crosswalk maps its titles to occupations ("Jordmødre" -> midwife,
closeMatch) while every pipeline ranks the ISCO group of the same name first ("Midwifery
professionals", C2222): after a few decisions the kind learnt puts the occupation first.

``TargetKinds`` counts the kinds of every match decided (exact, narrow, broad and close all
teach it) and gives each kind a score offset, ``weight * min(0, log(p(kind) / (IN_USE * p(most
used kind))))``, with ``p`` smoothed by pseudo-counts (``KIND_PRIOR``: a scheme is taken to map
to occupations until its decisions say otherwise). The linker adds it to a concept's score
(``Linker.link(..., kinds=...)``). Only kinds the scheme (almost) never uses move down: a kind
used at least a quarter as often as the main one is one the scheme uses, and keeps its score.
Pushing the minority of a mixed scheme down lost time: Hungary maps 48 % of its terms to ISCO
groups, and the plain log ratio cost its curator 62 s per 100 terms against learning nothing.

``Boilerplate``: words that many of a scheme's terms share ("Teachers", "Postsecondary" in the
U.S. SOC). A decided term of two or more such words around at most one of its own ("Chemistry
Teachers, Postsecondary") makes a bad known mention: it pulls every later "... Teachers,
Postsecondary" to chemistry (the simulated curator lost MRR on usa_en by learning). Such a
decision teaches the kind, not the mention (``teaches_mention``). A first rule, "more than half
of its words", also dropped Italian and Spanish titles whose function words ("della", "de") are
frequent, and cost ita_it, esp_es and hrv_hr more than usa_en gained
(docs/experiments/curator-effort.md).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from melo_core.esco.taxonomy import ISCO_GROUP, Concept

KINDS = ("occupation", "isco1", "isco2", "isco3", "isco4")
# Pseudo-counts before any decision: occupations are what most schemes map to.
KIND_PRIOR = {"occupation": 2.0, "isco1": 0.25, "isco2": 0.25, "isco3": 0.25, "isco4": 0.5}
KIND_WEIGHT = 0.1  # score offset per unit of log odds between a kind and the most used one
IN_USE = 0.25  # a kind this likely relative to the most used one is in use: no offset
# A word in this share of a scheme's terms (and in at least BOILERPLATE_MIN_TERMS) is its boilerplate.
BOILERPLATE_SHARE = 0.02
BOILERPLATE_MIN_TERMS = 5
_WORD = re.compile(r"\w+")


class Kinded(Protocol):
    """A concept or a candidate: what its kind of target is read from."""

    @property
    def kind(self) -> str: ...

    @property
    def isco_code(self) -> str | None: ...


def target_kind(concept: Concept | Kinded) -> str:
    """``occupation``, or ``iscoN`` for an ISCO group of level N (its code's length)."""
    if concept.kind == ISCO_GROUP and concept.isco_code:
        return f"isco{min(max(len(concept.isco_code), 1), 4)}"
    return "occupation"


@dataclass
class TargetKinds:
    """The kinds of concept a scheme's decisions matched, and what each kind is worth."""

    counts: Counter[str] = field(default_factory=Counter)
    relations: Counter[str] = field(default_factory=Counter)
    weight: float = KIND_WEIGHT

    def observe(self, concept: Concept, relation: str) -> None:
        self.counts[target_kind(concept)] += 1
        self.relations[relation] += 1

    @property
    def decisions(self) -> int:
        return sum(self.counts.values())

    def usual_relation(self) -> str | None:
        """The relation the scheme's curators chose most, None before any decision."""
        return self.relations.most_common(1)[0][0] if self.relations else None

    def uses(self, kind: str) -> bool:
        """Whether the scheme's decisions show ``kind`` in use (it gets no offset); False before any."""
        return self.decisions > 0 and self.offsets()[kind] == 0.0

    def offsets(self) -> dict[str, float]:
        """Per kind: what the linker adds to a concept's score (0 for the kinds in use)."""
        total = self.decisions + sum(KIND_PRIOR.values())
        likely = {kind: (self.counts[kind] + KIND_PRIOR[kind]) / total for kind in KINDS}
        top = max(likely.values())
        return {kind: self.weight * min(0.0, math.log(p / (IN_USE * top))) for kind, p in likely.items()}


def scheme_kinds(decisions: Iterable[tuple[str, str]], concepts: dict[str, Concept],
                 weight: float = KIND_WEIGHT) -> TargetKinds:  # fmt: skip
    """``TargetKinds`` of a scheme's current match decisions, given as (concept URI, relation);
    concepts not in ``concepts`` (the taxonomy's ``by_uri``) are skipped."""
    kinds = TargetKinds(weight=weight)
    for uri, relation in decisions:
        concept = concepts.get(uri)
        if concept is not None:
            kinds.observe(concept, relation)
    return kinds


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


@dataclass(frozen=True)
class Boilerplate:
    """The words many of a scheme's terms share."""

    common: frozenset[str]

    @classmethod
    def of(cls, labels: Sequence[str]) -> Boilerplate:
        frequency = Counter(word for label in labels for word in set(words(label)))
        floor = max(BOILERPLATE_MIN_TERMS, BOILERPLATE_SHARE * len(labels))
        return cls(frozenset(word for word, n in frequency.items() if n >= floor))

    def share(self, text: str) -> float:
        """The share of the text's words that are boilerplate (0 for no word)."""
        found = words(text)
        return sum(word in self.common for word in found) / len(found) if found else 0.0

    def teaches_mention(self, text: str) -> bool:
        """Whether a decided term may become a known mention: not when it is two or more words of
        boilerplate around at most one of its own."""
        found = words(text)
        common = sum(word in self.common for word in found)
        return common < 2 or len(found) - common > 1
