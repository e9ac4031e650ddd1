"""What the curation pages share: the store, the linker, the curator's name and languages, and
the newcomer's one-click start. Streamlit glue only: the work is done in ``db`` and ``melo_core``."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import streamlit as st

from db.aliases import accepted_aliases
from db.quickstart import start_curation
from db.store import Store
from melo_core import config
from melo_core.crosswalk import crosswalk_country, list_crosswalks
from melo_core.errors import MeloInputError
from melo_core.linker import Linker
from melo_core.pipeline import (
    Pipeline,
    PipelineDefinition,
    Requirement,
    crosswalk_mentions_of,
    load_pipeline,
    prepare,
    requirements,
)
from melo_core.taxonomy import Taxonomy, cached_taxonomy_from_melo

DEFAULT_SCORER = "char-tfidf"  # the advanced box's starting spec
DEFAULT_CROSSWALK = "nor_no"


@st.cache_resource(show_spinner=False)
def _store(url: str) -> Store:
    return Store(url)


def store() -> Store:
    """The store of ``MELO_DB_URL`` (else ``melo.db``), opened once per process."""
    try:
        return _store(config.database_url())
    except MeloInputError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() raises


@st.cache_resource(show_spinner=False)
def _taxonomy(data_dir: str, cache_dir: str) -> Taxonomy:
    return cached_taxonomy_from_melo(data_dir, cache_dir)


def taxonomy() -> Taxonomy:
    """The ESCO union of the MELO corpora of the data folder, loaded once per process."""
    return _taxonomy(str(config.data_dir()), str(config.cache_dir()))


@st.cache_resource(show_spinner="Loading the linker…", max_entries=6)
def _pipeline(data_dir: str, cache_dir: str, name: str, languages: tuple[str, ...] | None,
              display_languages: tuple[str, ...]) -> Pipeline:  # fmt: skip
    return Pipeline(name, _taxonomy(data_dir, cache_dir), languages, cache_dir=cache_dir,
                    display_languages=display_languages, show_progress=False)  # fmt: skip


def pipeline(name: str, languages: tuple[str, ...] | None, display_languages: tuple[str, ...]) -> Pipeline:
    """A pipeline over the union's labels in ``languages``, kept per process."""
    return _pipeline(str(config.data_dir()), str(config.cache_dir()), name, languages, display_languages)


@st.cache_resource(show_spinner="Preparing the linker (the first time for a scorer takes a while)…", max_entries=4)
def _spec_linker(data_dir: str, cache_dir: str, scorer: str, languages: tuple[str, ...] | None,
                 display_languages: tuple[str, ...], query_language: str | None) -> Linker:  # fmt: skip
    return Linker(_taxonomy(data_dir, cache_dir), scorer, languages, cache_dir=cache_dir,
                  display_languages=display_languages, query_language=query_language)  # fmt: skip


def uses_domain_model(spec: str) -> bool:
    """Whether a scorer spec (maybe a hybrid) names the ``domain`` encoder."""
    return any(part.split("@")[0].strip() == "domain" for part in re.split(r"[:+*]", spec))


def ensure_domain_model(spec: str) -> None:
    """Train the default domain model with a progress bar when ``spec`` needs it and it is missing
    (the first use; about 20 minutes on 2 cores), instead of inside a spinner."""
    from melo_core.training import default_model_dir, ensure_default_model

    if not uses_domain_model(spec) or (default_model_dir() / "modules.json").is_file():
        return
    bar = st.progress(0.0, text="Training the domain model on ESCO labels (first use, about 20 minutes on 2 cores)…")
    ensure_default_model(
        config.data_dir(),
        on_progress=lambda step, steps, loss: bar.progress(
            step / steps, text=f"Training the domain model: step {step} of {steps}"
        ),
    )
    bar.empty()


def spec_linker(scorer: str, languages: tuple[str, ...] | None, display_languages: tuple[str, ...],
                query_language: str | None) -> Linker:  # fmt: skip
    """A Linker for an expert's scorer spec over the union, kept per spec and languages."""
    ensure_domain_model(scorer)
    return _spec_linker(str(config.data_dir()), str(config.cache_dir()), scorer, languages, display_languages,
                        query_language)  # fmt: skip


@st.cache_data(show_spinner=False)
def crosswalk_mentions(data_dir: str, relations: tuple[str, ...], hold_out_country: str | None) -> list[tuple]:
    return crosswalk_mentions_of(data_dir, relations, hold_out_country)


def known_mentions(store: Store, definition: PipelineDefinition, scheme: str) -> list[tuple[str, str, str | None]]:
    """The pipeline's known mentions for linking ``scheme``: the data folder's national crosswalks
    (those of the scheme's own country left out, where the scheme is one) and every current
    decision of the store by the pipeline's relations — each accepted term helps the next at once."""
    country = crosswalk_country(scheme) if re.fullmatch(r"[a-z]{3}_[a-z]{2}", scheme) else None
    mentions = crosswalk_mentions(str(config.data_dir()), definition.mention_relations, country)
    return [*mentions, *accepted_aliases(store, relations=definition.mention_relations)]


class Preparation:
    """A pipeline being prepared in a background thread of the app (``melo_core.pipeline.prepare``)."""

    def __init__(self, definition: PipelineDefinition, languages: tuple[str, ...] | None,
                 query_language: str | None, mentions: list[str]):  # fmt: skip
        self.fraction = 0.0
        self.message = "starting…"
        self.error: str | None = None
        self.done = False
        self.started = time.time()
        args = (definition, taxonomy(), languages)
        kwargs = dict(cache_dir=config.cache_dir(), on_progress=self._progress, query_language=query_language,
                      mentions=mentions)  # fmt: skip
        self.thread = threading.Thread(target=self._run, args=(args, kwargs), daemon=True, name="melo-prepare")
        self.thread.start()

    def _progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def _run(self, args: tuple, kwargs: dict) -> None:
        try:
            prepare(*args, **kwargs)
        except Exception as exc:  # shown on the page; the curator keeps the fallback
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True


def prepares_in_background() -> bool:
    """Whether the app prepares a pipeline that is not ready itself (default), or leaves it to
    `python -m melo_core prepare` (``MELO_PREPARE=manual``, e.g. on a shared server)."""
    return os.environ.get("MELO_PREPARE", "background") != "manual"


@st.cache_resource(show_spinner=False)
def _preparations() -> dict[tuple, Preparation]:
    return {}


def preparation(definition: PipelineDefinition, languages: tuple[str, ...] | None, query_language: str | None,
                mentions: list[str]) -> Preparation:  # fmt: skip
    """The background preparation of a pipeline, started once per process and languages."""
    runs = _preparations()
    key = (definition.name, languages, query_language)
    run = runs.get(key)
    if run is None or (run.done and run.error):
        run = runs[key] = Preparation(definition, languages, query_language, mentions)
    return run


@st.cache_data(ttl=20, show_spinner="Checking what the pipeline needs…")
def readiness(name: str, languages: tuple[str, ...] | None, mentions: tuple[str, ...]) -> list[Requirement]:
    return requirements(load_pipeline(name), taxonomy(), languages, config.cache_dir(), mentions=mentions)


def curator() -> str:
    """The curator's name, asked once per browser session; every decision carries it."""
    name = st.session_state.get("curator", "")
    if name:
        with st.sidebar:
            st.markdown(f"Curator: **{name}**")
            if st.button("Change curator", key="change_curator"):
                del st.session_state["curator"]
                st.rerun()
        return name
    st.subheader("Who is curating?")
    with st.form("curator_form"):
        typed = st.text_input("Your name (recorded with every decision)", key="curator_input")
        if st.form_submit_button("Start") and typed.strip():
            st.session_state["curator"] = typed.strip()
            st.rerun()
    st.stop()
    raise RuntimeError  # unreachable: st.stop() raises


def curator_languages(default: tuple[str, ...] = ("en",)) -> tuple[str, ...]:
    """The languages the curator reads (concept labels are shown in the first that has one)."""
    chosen = st.sidebar.text_input(
        "Your languages (comma-separated, first preferred)",
        value=st.session_state.get("curator_languages", ",".join(default)),
        key="curator_languages_input",
    )
    languages = tuple(lang.strip() for lang in chosen.split(",") if lang.strip()) or ("en",)
    st.session_state["curator_languages"] = ",".join(languages)
    return languages


def first_run(store: Store) -> None:
    """With an empty store: offer the one-click start when there is data, else explain."""
    st.info("The crosswalk store is empty: no source terms to link yet.")
    data_dir = config.data_dir()
    try:
        crosswalks = list_crosswalks(data_dir)
        has_corpora = any(Path(data_dir, "processed", "melo").glob("*/corpus_elements.tsv"))
    except OSError:
        crosswalks, has_corpora = [], False
    if not crosswalks or not has_corpora:
        st.markdown(
            f"No MELO data with crosswalks in `{data_dir}`. Import a taxonomy and terms from the command line:\n\n"
            "```bash\npython -m melo_core import-taxonomy --data DATA\n"
            "python -m melo_core import-terms --scheme titles --csv titles.csv --kind job-titles --lang de\n```\n\n"
            f"{config.DATA_HELP}"
        )
        st.stop()
    st.subheader("Start curating")
    st.markdown(
        "One click imports the ESCO union of the MELO corpora (21 languages) and the terms of one national "
        "crosswalk as the source scheme to link (its published matches are left out)."
    )
    index = crosswalks.index(DEFAULT_CROSSWALK) if DEFAULT_CROSSWALK in crosswalks else 0
    chosen = st.selectbox("National terminology", crosswalks, index=index, key="start_crosswalk")
    if st.button("Import ESCO and these terms", type="primary", key="start_import"):
        bar = st.progress(0.0, text="starting…")
        try:
            report = start_curation(store, data_dir, chosen, lambda f, message: bar.progress(f, text=message))
        except MeloInputError as exc:
            st.error(str(exc))
            st.stop()
        st.success(f"{report.taxonomy.summary()}; {report.terms.summary()}")
        st.rerun()
    st.stop()
