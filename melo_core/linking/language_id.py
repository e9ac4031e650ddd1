"""The language of a column of titles (or of one), so that `link` ranks it as the benchmarks measured it.

Every MELO and job-ad number is measured with the queries' language known: it picks the pipeline
variant (monolingual or cross-lingual), the lemmatiser, and the components coverage leaves out.
A file linked without ``--query-lang`` had none of that. One title is too short to tell (py3langid
names the right ESCO language for 82 % of single MELO queries), but 20 titles read together are
right for every MELO dataset and for the job-ad titles (docs/experiments/bulk-linking.md, "The query language of a file").

The language is chosen among the languages ESCO is published in: a title set is linked to ESCO,
and look-alike languages outside it (Bosnian for Croatian, Latin or Pidgin for short English
titles) would otherwise win.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from melo_core import config
from melo_core.runtime.disk_cache import files_stamp, keep_newest, load_pickle, save_pickle

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

# The 28 languages of ESCO v1.2 (Norwegian as "no", as ESCO and MELO write it).
ESCO_LANGUAGES = ("ar", "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "ga", "hr", "hu", "is", "it",
                  "lt", "lv", "mt", "nl", "no", "pl", "pt", "ro", "sk", "sl", "sv", "uk")  # fmt: skip
CHUNK_TITLES = 20  # titles read together: right on every MELO dataset (10 already are)
SAMPLE_TITLES = 400  # distinct titles read from the start of a file: 20 chunks
MIN_TITLES = 5  # fewer say too little
AGREEMENT = 0.8  # share of chunks that must name the same language; a mixed column stays unknown
# One title (`link --query`): named only when py3langid gives its language this probability, as
# a wrong language costs more than none (all label languages). 300 queries of each MELO dataset:
# 42 % reach it, 99.8 % of those right (at 0.8: 51 %, 99.6 %). The 15,463 job-ad titles: 2.3 %,
# all right (at 0.8: 6.8 %, 99.3 %; "Boutique Assistant" is French at 0.81).
TITLE_CONFIDENCE = 0.9


@dataclass(frozen=True)
class Detection:
    language: str | None  # None: too few titles, or no language agreed on
    titles: int  # distinct titles read
    agreement: float  # share of chunks that named the language chosen (0 when none)
    confidence: float | None = None  # one title: py3langid's probability of its best language

    def describe(self) -> str:
        if self.confidence is not None:
            if self.language:
                return f"{self.language} (detected from the title, {self.confidence:.0%} sure; --query-lang sets it)"
            return (f"unknown (one title: its likeliest language is {self.confidence:.0%} sure, below "
                    f"{TITLE_CONFIDENCE:.0%}; --query-lang sets it)")  # fmt: skip
        if self.language:
            return f"{self.language} (detected from {self.titles} titles; --query-lang sets it)"
        if self.titles < MIN_TITLES:
            return f"unknown ({self.titles} titles are too few to tell; --query-lang sets it)"
        return (f"unknown (the titles do not agree on one language: {self.agreement:.0%} of them read "
                "together name the same; --query-lang sets it)")  # fmt: skip


def _identifier(languages: Iterable[str], probabilities: bool = False) -> LanguageIdentifier:
    return _cached_identifier(tuple(sorted({x.lower() for x in languages})), probabilities)


@cache
def _cached_identifier(languages: tuple[str, ...], probabilities: bool) -> LanguageIdentifier:
    from py3langid.langid import LanguageIdentifier

    ptc, pc, classes, nextmove, row, output = _model()
    identifier = LanguageIdentifier(np.asarray(ptc), np.asarray(pc), classes, nextmove, output,
                                    norm_probs=probabilities, tk_row=row)  # as from_model_file  # fmt: skip
    identifier.set_languages([x for x in languages if x in identifier.nb_classes])
    return identifier


@cache
def _model() -> tuple:
    """py3langid's model, kept unpacked in the cache folder: its file is LZMA-compressed, and
    unpacking it took 0.5-0.7 s of every `link --query` (68 MB unpacked, read back in 0.08 s)."""
    import py3langid.langid
    from py3langid.modelio import load_model

    packed = py3langid.langid.MODEL_DIR / py3langid.langid.MODEL_FILE
    stamp = files_stamp([packed, Path(py3langid.langid.__file__)])  # a new model or py3langid: unpacked again
    unpacked = config.cache_dir() / "language_id" / f"model-{stamp}.pickle"
    model = load_pickle(unpacked)
    if not isinstance(model, tuple):
        model = load_model(packed)
        with suppress(OSError):  # a read-only cache folder: unpacked again next time
            save_pickle(unpacked, model)
            keep_newest(unpacked.parent, "model-*.pickle", keep=1)
    return model


def detect_language(titles: Iterable[str], languages: Iterable[str] = ESCO_LANGUAGES) -> Detection:
    """The language that at least ``AGREEMENT`` of the chunks of ``CHUNK_TITLES`` distinct titles
    name, among ``languages``; reads the first ``SAMPLE_TITLES`` distinct non-empty titles."""
    distinct: dict[str, None] = {}
    for title in titles:
        text = " ".join(str(title).split())
        if text:
            distinct.setdefault(text, None)
            if len(distinct) >= SAMPLE_TITLES:
                break
    sample = list(distinct)
    if len(sample) < MIN_TITLES:
        return Detection(None, len(sample), 0.0)
    identifier = _identifier(languages)
    chunks = [sample[i : i + CHUNK_TITLES] for i in range(0, len(sample), CHUNK_TITLES)]
    if len(chunks) > 1 and len(chunks[-1]) < MIN_TITLES:
        chunks[-2].extend(chunks.pop())  # a short last chunk would be a noisy vote
    votes = Counter(identifier.classify(" \n ".join(chunk))[0] for chunk in chunks)
    language, count = votes.most_common(1)[0]
    agreement = count / len(chunks)
    return Detection(language if agreement >= AGREEMENT else None, len(sample), agreement)


def detect_title_language(title: str, languages: Iterable[str] = ESCO_LANGUAGES) -> Detection:
    """The language of one title among ``languages``, when py3langid is at least
    ``TITLE_CONFIDENCE`` sure of it; else unknown."""
    text = " ".join(title.split())
    if not text:
        return Detection(None, 0, 0.0, 0.0)
    language, probability = _identifier(languages, True).classify(text)
    confident = probability >= TITLE_CONFIDENCE
    return Detection(language if confident else None, 1, 1.0 if confident else 0.0, float(probability))
