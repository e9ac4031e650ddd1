"""Known mentions as the linker scores them: grouped by concept, each distinct form scored once.

The Link page gives the linker every known mention again after each decision, one more than
before. Rebuilding the index of 128,000 mentions then took 0.15-0.3 s, and the components restacked
what they hold per distinct form (vectors, sparse rows). So the distinct forms are numbered by
first appearance in the order the mentions were given: appending mentions only appends forms,
and ``MentionIndex.appended`` inserts the few new mentions instead of sorting them all again;
taking the last few back (an undo) only shortens them (``MentionIndex.without_last``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

APPEND_LIMIT = 64  # more new mentions than this: one sort of them all beats inserting each


def shared_head(a: Sequence[object], b: Sequence[object]) -> int:
    """How many items ``a`` and ``b`` share from the start: after an undo with other curators'
    decisions since, the mentions before the one taken back."""
    n = min(len(a), len(b))
    # One begins with the other: compared at C speed, slicing only the longer (a copy of 130,000
    # mentions cost more than comparing them).
    if (a if len(a) == n else a[:n]) == (b if len(b) == n else b[:n]):
        return n
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


@dataclass(frozen=True, slots=True)
class Mention:
    """A term already linked to a concept: a crosswalk title or a curator's accepted decision.
    Slotted: a linker holds 129,000 of them."""

    text: str  # the term as written (shown as the matched label)
    concept_uri: str
    language: str  # "" when the term's language is unknown
    form: str  # what the scorers compare queries with (``melo_core.linking.linker.mention_form``)


@dataclass(frozen=True)
class MentionIndex:
    """Mentions grouped by concept: slot ``k`` holds ``mentions[starts[k]:starts[k + 1]]``. Each
    distinct form is scored once (``texts``), then spread to its mentions (``text_of``)."""

    mentions: list[Mention]  # by concept (taxonomy order), then form
    texts: list[str]  # distinct forms, by first appearance in the order the mentions were given
    text_of: np.ndarray  # per mention: its form's position in ``texts``
    concept_of: np.ndarray  # per mention: its concept's position in the taxonomy (ascending)
    starts: np.ndarray
    form_slot: np.ndarray  # per surface form: its concept's slot, or -1
    _text_position: dict[str, int]

    @classmethod
    def build(cls, mentions: Sequence[Mention], concept_position: Mapping[str, int],
              form_concept: np.ndarray) -> MentionIndex:  # fmt: skip
        """The index of ``mentions`` (distinct by form and concept; given order)."""
        texts = list(dict.fromkeys(m.form for m in mentions))
        position = {text: i for i, text in enumerate(texts)}
        text_of = np.fromiter((position[m.form] for m in mentions), dtype=np.int64, count=len(mentions))
        concept_of = np.fromiter((concept_position[m.concept_uri] for m in mentions), dtype=np.int64,
                                 count=len(mentions))  # fmt: skip
        # In numpy: sorting 128,000 mentions by a Python key took 0.4 s.
        rank = np.empty(len(texts), dtype=np.int64)
        rank[sorted(range(len(texts)), key=texts.__getitem__)] = np.arange(len(texts))
        order = np.lexsort((rank[text_of], concept_of))
        ordered = [mentions[i] for i in order]
        return cls._grouped(ordered, texts, position, text_of[order], concept_of[order], concept_position, form_concept)

    def appended(self, new: Sequence[Mention], concept_position: Mapping[str, int],
                 form_concept: np.ndarray) -> MentionIndex:  # fmt: skip
        """This index with ``new`` mentions (none already in it) given after its own: the same
        as building it from all of them, its forms extended only at the end."""
        texts, position = list(self.texts), dict(self._text_position)
        mentions, text_of, concept_of = list(self.mentions), self.text_of, self.concept_of
        for mention in new:
            if mention.form not in position:
                position[mention.form] = len(texts)
                texts.append(mention.form)
            concept = concept_position[mention.concept_uri]
            at, _ = _place(mentions, concept_of, concept, mention.form)
            mentions.insert(at, mention)
            text_of = np.insert(text_of, at, position[mention.form])
            concept_of = np.insert(concept_of, at, concept)
        return self._grouped(mentions, texts, position, text_of, concept_of, concept_position, form_concept)

    def without_last(self, removed: Sequence[Mention], concept_position: Mapping[str, int],
                     form_concept: np.ndarray) -> MentionIndex:  # fmt: skip
        """This index without ``removed``, the mentions given last (an undo): the same as building
        it from the others. Forms used by no other mention come last in ``texts``, so it only shortens."""
        mentions, text_of, concept_of = list(self.mentions), self.text_of, self.concept_of
        for mention in removed:
            at, end = _place(mentions, concept_of, concept_position[mention.concept_uri], mention.form)
            if at == end or mentions[at] != mention:
                raise ValueError(f"not in the index: {mention}")
            del mentions[at]
            text_of, concept_of = np.delete(text_of, at), np.delete(concept_of, at)
        texts = self.texts[: int(text_of.max()) + 1 if len(text_of) else 0]
        position = dict(self._text_position)
        for text in self.texts[len(texts) :]:
            del position[text]
        return self._grouped(mentions, texts, position, text_of, concept_of, concept_position, form_concept)

    @classmethod
    def _grouped(cls, ordered: list[Mention], texts: list[str], position: dict[str, int], text_of: np.ndarray,
                 concept_of: np.ndarray, concept_position: Mapping[str, int], form_concept: np.ndarray) -> MentionIndex:  # fmt: skip
        starts = np.flatnonzero(np.r_[True, concept_of[1:] != concept_of[:-1]])
        slot_of_concept = np.full(len(concept_position), -1, dtype=np.int64)
        slot_of_concept[concept_of[starts]] = np.arange(len(starts))
        return cls(ordered, texts, text_of, concept_of, starts, slot_of_concept[form_concept], position)

    def concept_counts(self, n_concepts: int) -> np.ndarray:
        """Per concept (taxonomy position): how many of the mentions it has."""
        return np.bincount(self.concept_of, minlength=n_concepts)


def _place(mentions: list[Mention], concept_of: np.ndarray, concept: int, form: str) -> tuple[int, int]:
    """Where ``form`` is or goes among the mentions of ``concept`` (grouped by concept, then form),
    and the end of that group."""
    low, high = np.searchsorted(concept_of, [concept, concept + 1])
    return bisect.bisect_left(mentions, form, int(low), int(high), key=lambda m: m.form), int(high)
