"""What `--scorers` accepts, in one list: the named pipelines, the named scorers and the encoders.
The `scorers` command, the `eval --scorers` help and the app's home page all show this list, so a
new scorer, encoder or pipeline appears everywhere once it is registered."""

from __future__ import annotations

from dataclasses import dataclass

from melo_core.encoders.registry import built_model, encoder_kinds
from melo_core.evaluation.published import PUBLISHED_NAME
from melo_core.linking.pipeline import DEFAULT_PIPELINE, load_pipeline, pipeline_names
from melo_core.scorers import scorer_names

KINDS = ("pipeline", "scorer", "encoder")
_SPEC_ONLY_ENCODERS = {"st"}  # named with a model (st:MODEL): listed among the families


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    kind: str  # one of KINDS
    note: str  # what it is, in a few words ("" when the name says it)
    default: bool = False  # what `link` and the Link page use when no option is given


def scorer_catalogue() -> list[CatalogueEntry]:
    """Pipelines (the default first), then scorers, then encoders, each in name order."""
    entries = []
    for name in sorted(pipeline_names(), key=lambda n: (n != DEFAULT_PIPELINE, n)):
        entries.append(CatalogueEntry(name, "pipeline", load_pipeline(name).description, name == DEFAULT_PIPELINE))
    for name in scorer_names():
        entries.append(CatalogueEntry(name, "scorer", _published(name)))
    for kind in encoder_kinds():
        if kind in _SPEC_ONLY_ENCODERS:
            continue
        model = built_model(kind)
        origin = f"built on first use (about {model.seconds / 60:.0f} min on 2 cores)" if model else "bundled"
        published = _published(kind)
        entries.append(CatalogueEntry(kind, "encoder", f"{origin}{', ' + published if published else ''}"))
    return entries


def names_by_kind(entries: list[CatalogueEntry] | None = None) -> dict[str, list[str]]:
    """The entries' names (all of the catalogue's by default) per kind, in catalogue order."""
    entries = scorer_catalogue() if entries is None else entries
    return {kind: [e.name for e in entries if e.kind == kind] for kind in KINDS}


def _published(name: str) -> str:
    published = PUBLISHED_NAME.get(name)
    return f"published as {published}" if published else ""
