"""How the concept search splits text into words (no database here): a label's ``search_text``
holds its folded words, each with one space either side, so that plain ``LIKE`` finds a whole word
(``'% nurse %'``) or a word's start (``'% nurs%'``) the same way on SQLite and PostgreSQL."""

from __future__ import annotations

import re

from db.formats import search_fold

_WORD_RE = re.compile(r"[^\W_]+")  # letters and digits: no LIKE wildcard can be part of a word


def search_words(text: str) -> list[str]:
    """The folded words of ``text`` (``search_fold``: case and accents), as the concept search
    matches them: ``Children's Nurse`` → ``children``, ``s``, ``nurse``."""
    return _WORD_RE.findall(search_fold(text))


def label_search_text(label: str) -> str:
    """A label's ``search_text``: ``Children's nurse`` → ``" children s nurse "``."""
    return f" {' '.join(search_words(label))} "
