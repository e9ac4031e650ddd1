"""Text preparation shared by the lexical scorers, as the MELO paper did it:
lowercase, optionally lemmatise, then NFKD + ASCII folding (skipped for non-Latin scripts)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import simplemma

# ASCII folding deletes every Cyrillic or Greek letter, so the paper skipped it for Bulgarian.
NON_LATIN_LANGUAGES = frozenset({"bg", "el"})
# simplemma's codes where they differ from ESCO's ISO 639-1 codes.
_SIMPLEMMA_CODES = {"hr": "hbs", "no": "nb"}


def lemmatiser_languages() -> frozenset[str] | None:
    """The languages simplemma lemmatises, as ESCO codes (``no``, ``hr``) and its own; None when
    this simplemma does not say (then any language is assumed)."""
    try:
        from simplemma.strategies.dictionaries.dictionary_factory import SUPPORTED_LANGUAGES
    except ImportError:
        return None
    ours = {theirs: esco for esco, theirs in _SIMPLEMMA_CODES.items()}
    return frozenset(SUPPORTED_LANGUAGES) | {ours[c] for c in SUPPORTED_LANGUAGES if c in ours}


def ascii_fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def folding_applies(languages: tuple[str, ...] | list[str]) -> bool:
    """ASCII folding is safe only when no language involved is written in a non-Latin script."""
    return not NON_LATIN_LANGUAGES.intersection(languages)


class Lemmatizer:
    """Token-wise lemmatisation with simplemma (dictionary based, offline, all 21 languages)."""

    def __init__(self, language: str):
        self.language = _SIMPLEMMA_CODES.get(language, language)
        try:
            simplemma.lemmatize("test", lang=self.language)
        except ValueError:
            raise ValueError(f"no lemmatiser for language {language!r}") from None
        self._lemma = lru_cache(maxsize=200_000)(self._lemmatize_token)

    def _lemmatize_token(self, token: str) -> str:
        return simplemma.lemmatize(token, lang=self.language).lower()

    def __call__(self, text: str) -> str:
        # Punctuation tokens are dropped, as spaCy's pipeline in the paper did.
        return " ".join(self._lemma(t) for t in simplemma.simple_tokenizer(text) if any(c.isalnum() for c in t))


@dataclass(frozen=True)
class TextPrep:
    """How a scorer prepares both queries and corpus surface forms."""

    lowercase: bool = True
    fold_ascii: bool = True
    lemma_language: str | None = None

    def build(self) -> Preparer:
        return Preparer(self)


class Preparer:
    """The callable a TextPrep describes; picklable, so fitted scorers can be cached on disk."""

    def __init__(self, prep: TextPrep):
        self.prep = prep
        self._lemmatizer = Lemmatizer(prep.lemma_language) if prep.lemma_language else None

    def __getstate__(self) -> dict:
        return {"prep": self.prep}

    def __setstate__(self, state: dict) -> None:
        Preparer.__init__(self, state["prep"])

    def __call__(self, text: str) -> str:
        if self.prep.lowercase:
            text = text.lower()
        if self._lemmatizer is not None:
            text = self._lemmatizer(text)
        if self.prep.fold_ascii:
            text = ascii_fold(text)
        return text


def calm_capitals(text: str) -> str:
    """Lowercase a text written entirely in capitals (e.g. the Spanish national titles).

    Encoders read shouted text as another register and rank it poorly; upstream MELO lowercased
    the Spanish queries for its semantic models for this reason. Mixed-case text is unchanged.
    """
    return text.lower() if text.isupper() else text


# Gender markers such as "(h/f/x)", "(m/w/d)" or "(m./w.)" that national titles carry and ESCO
# labels do not.
GENDER_MARKER = re.compile(r"\s*\(\s*[^\W\d_]{1,2}\.?(?:\s*/\s*[^\W\d_]{1,2}\.?)+\s*\)")
# A paired form: "Monteur / Monteuse", "Leiter/Leiterin", "Schlächter/in".
PAIRED_FORM = re.compile(r"([^\W\d_][\w'-]*)\s*/\s*([^\W\d_][\w'-]*)")
SUFFIX_MAX = 4  # "Schlächter/in", "Tehnolog/ica": a short lower-case right side is a suffix


def may_hold_gender_marker(text: str) -> bool:
    """False when ``drop_gender_markers`` only collapses the text's whitespace: every marker is
    bracketed, so most texts need no regex (129,000 mentions at start-up)."""
    return "(" in text


def drop_gender_markers(text: str) -> str:
    """The text without gender markers, whitespace collapsed."""
    if not may_hold_gender_marker(text):
        return " ".join(text.split())
    return " ".join(GENDER_MARKER.sub(" ", text).split())


def title_variants(text: str) -> list[str]:
    """The forms an occupation title stands for: itself without gender markers and, for its first
    paired form, one title per side ("Monteur / Monteuse de meubles" -> "Monteur de meubles",
    "Monteuse de meubles"; "Schlächter/in" -> "Schlächter", "Schlächterin"). First the title
    itself; no duplicates."""
    base = drop_gender_markers(text)
    forms = [base]
    pair = PAIRED_FORM.search(base)
    if pair:
        left, right = pair.groups()
        sides = (left, left + right) if len(right) <= SUFFIX_MAX and right.islower() else (left, right)
        forms += [" ".join((base[: pair.start()] + side + base[pair.end() :]).split()) for side in sides]
    return list(dict.fromkeys(f for f in forms if f)) or [text]
