"""The front door from Python: ``from melo_core import Pipeline``.

``Pipeline.load("best", data=...)`` builds what `link` ranks with (the taxonomy as `link` reads
it, the known mentions of the data folder's crosswalks, the fallback while ``best`` is not
ready); ``.link([...], top=10)`` ranks; ``.evaluate(dataset)`` gives the metrics `eval` gives,
through the same engine (``benchmarking.evaluate_one``). It is ``melo_core.linking.pipeline.Pipeline``
with these added: a subclass here, because evaluating imports the module that imports the pipeline.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset, load_dataset, resolve_dataset
from melo_core.esco.taxonomy import cached_taxonomy_from_melo, language_codes, reader_languages
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.linking.linker import Candidate
from melo_core.linking.pipeline import (
    DEFAULT_PIPELINE,
    PIPELINES_DIR,
    PipelineDefinition,
    choose_ready,
    crosswalk_mentions_of,
    load_pipeline,
)
from melo_core.linking.pipeline import Pipeline as LinkingPipeline
from melo_core.scorers.hybrid import POOL


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


class Pipeline(LinkingPipeline):
    """A named pipeline over a data folder's taxonomy: ``load`` it, then ``link`` and ``evaluate``.
    Built directly (``Pipeline(definition, taxonomy, languages)``) it is the linking pipeline as is."""

    data_dir: Path | None = None  # set by load: the folder of its taxonomy, known mentions and datasets
    query_language: str | None = None  # set by load: what link assumes when a call names none

    @classmethod
    def load(cls, name: str | Path = DEFAULT_PIPELINE, data: str | Path | None = None, *,
             languages: str | Sequence[str] | None = None, query_language: str | None = None,
             cache: str | Path | None = None, models: str | Path | None = None, mentions: bool = True,
             fallback: bool = True, on_status: Callable[[str], None] = _to_stderr,
             show_progress: bool = True) -> Pipeline:  # fmt: skip
        """The pipeline `link` ranks with: ``name`` (best, fast, lexical or a PATH.toml) over the
        taxonomy of ``data`` (default ``$MELO_DATA``, else ./data) as `link` reads it (the MELO
        labels with the ESCO export's groups and descriptions, loaded once), with the known mentions
        of its crosswalks (``mentions=False``: none). Label languages: ``languages``, else
        ``query_language`` and English, else all. While ``best`` cannot serve yet, with ``fallback``
        its first ready fallback (fast, then lexical) does, as `link` without --pipeline does;
        ``on_status`` (default: stderr) says so and ``.name`` tells which. Any other pipeline, or
        ``fallback=False``, builds what it lacks on first use. ``data``, ``cache`` and ``models`` are
        chosen for the whole process, as `--data`, `--cache` and `--models` are for a command."""
        definition = load_pipeline(name)  # a bad name or file fails before the taxonomy loads
        config.choose_folders(data, cache, models)  # what a first use builds reads them too
        folder = config.data_dir()
        if not folder.is_dir():
            raise MeloInputError("data folder not found (Pipeline.load(data=...) or $MELO_DATA)", folder)
        taxonomy = cached_taxonomy_from_melo(folder)
        chosen = list(language_codes(languages) if languages else reader_languages(query_language, taxonomy.languages))
        if lacking := taxonomy.lacking(chosen):
            raise MeloInputError(f"languages: {lacking}")

        def known(d: PipelineDefinition) -> list[tuple[str, str, str | None]]:
            uses = mentions and (d.monolingual.mention_weight or d.cross_lingual.mention_weight)
            return crosswalk_mentions_of(folder, d.mention_relations) if uses else []

        defaulted = fallback and definition.path == PIPELINES_DIR / f"{DEFAULT_PIPELINE}.toml"
        if defaulted:
            definition, why = choose_ready(None, taxonomy, chosen or None, query_language=query_language,
                                           mentions=lambda d: [t for t, uri, _ in known(d) if uri in taxonomy])  # fmt: skip
            if why:
                on_status(why)
        pipeline = cls(definition, taxonomy, chosen or None, on_status=on_status, show_progress=show_progress)
        if known_mentions := known(definition):
            # The default serves with the mentions embedded so far, as `link` does; a named one embeds all.
            pipeline.set_mentions(known_mentions, embedded_only=defaulted)
        pipeline.data_dir, pipeline.query_language = folder, query_language
        return pipeline

    def link(self, queries: Sequence[str], top_k: int = 10, query_language: str | None = None,
             pool: int = POOL, *, top: int | None = None) -> list[list[Candidate]]:  # fmt: skip
        """Per query, its candidates: ``top`` (as `link --top`; or ``top_k``) concepts, best first.
        ``query_language`` None: the one ``load`` was given, else unknown (ranked as monolingual)."""
        return super().link(queries, top_k if top is None else top, query_language or self.query_language, pool)

    def evaluate(self, dataset: str | Path | MeloDataset, limit_queries: int = 0) -> dict[str, float]:
        """The metrics (mrr, acc@1, acc@5, acc@10, ...) of this pipeline on a MELO dataset (a name in
        its data folder, a folder, or a loaded one) as `eval --scorers NAME` gives them, through the
        same engine: the dataset's corpus, known mentions without its country, the published
        protocol. ``limit_queries``: the first N, as `eval --limit-queries N`."""
        data = self.data_dir or config.data_dir()
        loaded = dataset if isinstance(dataset, MeloDataset) else load_dataset(resolve_dataset(data, str(dataset)))
        if limit_queries:
            loaded = loaded.subset(limit_queries)
        named = self.definition.path == PIPELINES_DIR / f"{self.name}.toml"  # else by its path, as eval takes it
        spec = self.name if named else str(self.definition.path)
        return dict(evaluate_one(data, loaded, spec, show_progress=self._options["show_progress"]).metrics)
