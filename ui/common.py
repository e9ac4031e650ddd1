"""What the curation pages share: the store, the linker, the curator's name and languages, and
the newcomer's one-click start. Streamlit glue only: the work is done in ``db`` and ``melo_core``."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import streamlit as st

from db.aliases import decided_mentions
from db.quickstart import start_curation
from db.store import Actor, Store
from melo_core import config
from melo_core.cli.catalogue import KINDS, CatalogueEntry, scorer_catalogue
from melo_core.encoders import EncoderSpec
from melo_core.encoders.registry import BuiltModel, built_model
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import list_crosswalks, scheme_country
from melo_core.esco.taxonomy import Taxonomy, cached_taxonomy_from_melo
from melo_core.linking.linker import Linker
from melo_core.linking.pipeline import (
    Pipeline,
    PipelineDefinition,
    Requirement,
    crosswalk_mentions_of,
    is_pipeline,
    load_pipeline,
    requirements,
)
from melo_core.runtime.preparing import stop_group, time_left_words, without_time_left
from melo_core.spec import SpecError, components_of, parse
from ui import auth
from ui.learning import scheme_boilerplate
from ui.safe import md_code, md_text

DEFAULT_SCORER = "char-tfidf"  # the advanced box's starting spec
DEFAULT_CROSSWALK = "nor_no"


@st.cache_resource(show_spinner=False)
def _store(url: str, sign_in: bool) -> Store:
    return Store(url, sign_in=sign_in, create=True)  # the app makes its store on first use


def store() -> Store:
    """The store of ``MELO_DB_URL`` (else ``melo.db``), opened once per process; on a shared app
    (``ui.auth.sign_in_required``) it records only signed-in users."""
    try:
        return _store(config.database_url(), auth.sign_in_required())
    except MeloInputError as exc:
        st.error(md_text(exc))
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


def built_models_of(spec: str) -> list[BuiltModel]:
    """The models MELO Studio builds itself that a scorer spec (maybe a hybrid, or pipeline names) uses."""
    kinds: list[str] = []
    for name in spec.split(","):  # a list of scorers, as `eval --scorers` takes them
        try:
            parsed = parse(name)
        except SpecError:
            continue  # the linker says what is wrong with it
        for component in components_of(parsed):
            if is_pipeline(component.head):
                kinds += [EncoderSpec.parse(e).kind for e in load_pipeline(component.head).encoders()]
            else:
                kinds.append(component.family)
    return [m for m in map(built_model, dict.fromkeys(kinds)) if m is not None]


def ensure_built_models(spec: str) -> None:
    """Build the models ``spec`` needs that are missing (the first use: the domain model takes
    about 3 minutes on 2 cores, e5-esco about 13) with a progress bar, instead of inside a spinner."""
    for model in built_models_of(spec):
        if model.ready():
            continue
        minutes = max(1, round(model.seconds * 2 / (os.cpu_count() or 1) / 60))
        bar = st.progress(
            0.0, text=f"Building the {md_text(model.what)} on ESCO labels (first use, about {minutes:d} min)…"
        )
        model.build(
            config.data_dir(),
            on_progress=lambda step, steps, loss, what=model.what, bar=bar: bar.progress(
                step / steps, text=f"Building the {md_text(what)}: step {step:d} of {steps:d}"
            ),
        )
        bar.empty()


def spec_linker(scorer: str, languages: tuple[str, ...] | None, display_languages: tuple[str, ...],
                query_language: str | None) -> Linker:  # fmt: skip
    """A Linker for an expert's scorer spec over the union, kept per spec and languages."""
    ensure_built_models(scorer)
    return _spec_linker(str(config.data_dir()), str(config.cache_dir()), scorer, languages, display_languages,
                        query_language)  # fmt: skip


class MentionTexts(NamedTuple):
    """Distinct known-mention texts, sorted, and their digest (what readiness is keyed by)."""

    texts: tuple[str, ...]
    digest: str


# Shared, not copied: every rerun of the Link page reads them twice (122,000 tuples; the copies
# st.cache_data unpickled took 0.06-0.08 s a rerun). Callers never change them.
@st.cache_resource(show_spinner=False, max_entries=8)
def _crosswalk_mentions(data_dir: str, cache_dir: str, relations: tuple[str, ...],
                        hold_out_country: str | None) -> tuple[list[tuple[str, str, str | None]], MentionTexts]:  # fmt: skip
    """(the crosswalks' mentions of the union's concepts, their distinct texts in order)."""
    known = _taxonomy(data_dir, cache_dir)
    mentions = [m for m in crosswalk_mentions_of(data_dir, relations, hold_out_country, cache_dir) if m[1] in known]
    texts = tuple(sorted({text for text, _, _ in mentions}))
    return mentions, MentionTexts(texts, hashlib.blake2b("\n".join(texts).encode(), digest_size=16).hexdigest())


def shown_code(code: str, uri: str) -> str:
    """A term's code as the Link page shows it: a code that is the term's own URI (MELO's
    crosswalks are keyed by URI) by its last segment, ".../norwegian-occupations/110" as 110, the
    URI being shown beside it."""
    if code == uri and "/" in code.rstrip("/"):
        return code.rstrip("/").rsplit("/", 1)[-1]
    return code


def crosswalk_known_mentions(definition: PipelineDefinition, scheme: str) -> list[tuple[str, str, str | None]]:
    """The data folder's national crosswalks as known mentions for linking ``scheme`` (those of
    the scheme's own country left out, where the scheme is one): what `prepare` embeds. Shared:
    read, never change."""
    return _crosswalks_for(definition, scheme)[0]


def crosswalk_mention_texts(definition: PipelineDefinition, scheme: str) -> MentionTexts:
    """The distinct texts of ``crosswalk_known_mentions``, sorted: what readiness asks to be embedded."""
    return _crosswalks_for(definition, scheme)[1]


def _crosswalks_for(definition: PipelineDefinition, scheme: str) -> tuple[list[tuple[str, str, str | None]], MentionTexts]:  # fmt: skip
    return _crosswalk_mentions(str(config.data_dir()), str(config.cache_dir()), definition.mention_relations,
                               scheme_country(scheme))  # fmt: skip


def known_mentions(store: Store, definition: PipelineDefinition, scheme: str) -> list[tuple[str, str, str | None]]:
    """The pipeline's known mentions for linking ``scheme``: the crosswalks' and every current
    decision of the store by the pipeline's relations — each accepted term helps the next at once
    (the few new ones are embedded when they come) — but a term made mostly of the scheme's
    boilerplate ("Chemistry Teachers, Postsecondary"), which would pull its look-alikes to its concept."""
    # The taxonomy once: each call of a cached function hashes its arguments (7,557 calls took 1.7 s).
    decided = decided_mentions(store, scheme, definition.mention_relations, taxonomy(),
                               scheme_boilerplate(store, scheme))  # fmt: skip
    return [*crosswalk_known_mentions(definition, scheme), *decided]


class Preparation:
    """A pipeline being prepared by `python -m melo_core prepare` in a process of its own (worker
    processes, and nothing of it in the page's thread); its progress comes through a JSON file."""

    def __init__(self, name: str, languages: tuple[str, ...] | None, query_language: str | None,
                 hold_out_country: str | None):  # fmt: skip
        folder = config.cache_dir() / "prepare"
        folder.mkdir(parents=True, exist_ok=True)
        key = "-".join([name, *(languages or ("all",)), query_language or "any"])
        self.state = folder / f"{key}.json"
        self.state.unlink(missing_ok=True)
        folders = config.folders()  # absolute: the process runs in the project root, wherever the app started
        command = [sys.executable, "-m", "melo_core", "prepare", "--pipeline", name, "--data", folders["data"],
                   "--cache", folders["cache"], "--models", folders["models"],
                   "--progress-file", str(self.state), "--quiet", "--stop-with-parent", str(os.getpid())]  # fmt: skip
        if languages:
            command += ["--langs", ",".join(languages)]
        if query_language:
            command += ["--query-lang", query_language]
        if hold_out_country:
            command += ["--hold-out-country", hold_out_country]
        self.log = folder / f"{key}.log"
        with self.log.open("w", encoding="utf-8") as log:
            # A session of its own: stopping it stops its workers (its process group), and it
            # stops itself when the app ends (--stop-with-parent), even by kill -9.
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=config.PROJECT_ROOT,
                                            start_new_session=True)  # fmt: skip
        atexit.register(self.stop)

    def stop(self) -> None:
        """End the preparation and its workers (the app is ending)."""
        if self.process.poll() is None:
            stop_group(self.process.pid)

    def status(self) -> PreparationStatus:
        try:
            state = json.loads(self.state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {"fraction": 0.0, "message": "starting…", "done": False, "error": False}
        code = self.process.poll()
        serving = bool(state.get("serving"))
        if state["error"] or (code not in (None, 0)):
            tail = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
            error = state["message"] if state["error"] else tail[0]
            return PreparationStatus(state["fraction"], state["message"], True, error, serving)
        stage, time_left = state["message"], ""
        if state.get("complete_at") is not None:  # counted down from the moments it wrote: banner and bar say the same
            stage = without_time_left(stage)
            now = time.time()
            serves_at = state.get("serves_at")
            time_left = time_left_words(None if serves_at is None else serves_at - now, state["complete_at"] - now)
        return PreparationStatus(state["fraction"], stage, code == 0, None, serving or code == 0, time_left)


class PreparationStatus(NamedTuple):
    fraction: float
    message: str  # the stage under way, or "queued behind the preparation of …"
    done: bool
    error: str | None
    serving: bool  # the pipeline serves already; known mentions are still being embedded
    time_left: str = ""  # "serves in about 9 min, complete in about 14 min"; "" while not known

    def queued(self) -> bool:
        return self.message.startswith("queued behind")

    def said(self) -> str:
        """The stage and the time left, as the bar shows them."""
        return f"{self.message} — {self.time_left}" if self.time_left else self.message


def prepares_in_background() -> bool:
    """Whether the app prepares a pipeline that is not ready itself (default), or leaves it to
    `python -m melo_core prepare` (``MELO_PREPARE=manual``, e.g. on a shared server)."""
    return os.environ.get("MELO_PREPARE", "background") != "manual"


@st.cache_resource(show_spinner=False)
def _preparations() -> dict[tuple, Preparation]:
    return {}


def preparation(name: str, languages: tuple[str, ...] | None, query_language: str | None,
                hold_out_country: str | None) -> Preparation:  # fmt: skip
    """The preparation of a pipeline, started once per process, languages and query language
    (again after a failure)."""
    runs = _preparations()
    key = (name, languages, query_language, hold_out_country)
    run = runs.get(key)
    if run is None or run.status().error is not None:
        run = runs[key] = Preparation(name, languages, query_language, hold_out_country)
    return run


@st.cache_resource(show_spinner=False)
def _refits() -> dict[str, Preparation]:
    return {}


def refitting_calibrator(name: str, languages: tuple[str, ...] | None, query_language: str | None,
                         hold_out_country: str | None) -> bool:  # fmt: skip
    """Whether the pipeline's calibrator, there but unreadable (an older format, after an upgrade),
    is being refitted: `prepare` runs in the background, once per app process (its models are
    ready: it refits from the rows it kept, seconds to minutes). False when it ended, or where the
    app prepares nothing itself (``MELO_PREPARE=manual``)."""
    from melo_core.evaluation.calibration import calibration_path

    if not prepares_in_background() or not calibration_path(name).is_file():
        return False
    runs = _refits()
    if name not in runs:
        runs[name] = preparation(name, languages, query_language, hold_out_country)
    status = runs[name].status()
    return not status.done and status.error is None


def readiness(name: str, languages: tuple[str, ...] | None, mentions: MentionTexts) -> list[Requirement]:
    """What the pipeline still needs, checked at most every 20 s. Keyed by the known mentions'
    digest, made once with them: Streamlit hashing 65,000 texts on every rerun of the Link page
    took 1.1 s, and digesting them 10 ms per call."""
    return _readiness(name, languages, mentions.digest, mentions.texts)


@st.cache_data(ttl=20, show_spinner="Checking what the pipeline needs…")
def _readiness(name: str, languages: tuple[str, ...] | None, mentions_digest: str,
               _mentions: tuple[str, ...]) -> list[Requirement]:  # fmt: skip
    return requirements(load_pipeline(name), taxonomy(), languages, config.cache_dir(), mentions=_mentions)


def forget_readiness() -> None:
    """Check again at the next call (a preparation just finished)."""
    _readiness.clear()


def curator() -> Actor | str:
    """Who is curating: the signed-in user on a shared app, else the name typed once per browser
    session (``ui.auth``); every decision records it."""
    return auth.current_user(store())


def concept_descriptions(store: Store, uris: list[str]) -> dict[str, str]:
    """ESCO descriptions of concepts: the store's imported taxonomy, else the union in memory
    (which has them from the ESCO CSV export when ``MELO_ESCO`` or ``../esco`` is there)."""
    found = store.concept_descriptions(uris)
    missing = [u for u in uris if not found.get(u)]
    if missing:
        known = taxonomy().by_uri
        found.update({u: known[u].description for u in missing if u in known and known[u].description})
    return found


def curator_languages(default: tuple[str, ...] = ("en",)) -> tuple[str, ...]:
    """The languages the curator reads (concept labels are shown in the first that has one)."""
    chosen = st.sidebar.text_input(
        "Your languages (comma-separated, first preferred)",
        value=st.session_state.get("curator_languages", ",".join(default)),
        key="curator_languages_input",
    )
    languages = tuple(lang.strip().lower() for lang in chosen.split(",") if lang.strip()) or ("en",)
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
            f"No MELO data with crosswalks in {md_code(data_dir)}. Import a taxonomy and terms from the command line:\n\n"
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
            report = start_curation(store, data_dir, chosen, lambda f, message: bar.progress(f, text=md_text(message)))
        except MeloInputError as exc:
            st.error(md_text(exc))
            st.stop()
        st.success(md_text(f"{report.taxonomy.summary()}; {report.terms.summary()}"))
        st.rerun()
    st.stop()


def catalogue_markdown() -> str:
    """One line per kind of what `--scorers` accepts, the default pipeline said, and how to combine them."""
    entries = scorer_catalogue()

    def shown(entry: CatalogueEntry) -> str:
        return f"`{entry.name}`" + (" (the default of `link` and the Link page)" if entry.default else "")

    kinds = [f"- **{kind.capitalize()}s:** " + ", ".join(shown(e) for e in entries if e.kind == kind) for kind in KINDS]
    return "\n".join([*kinds, "- **Fusions:** `wsum:0.3*A+0.7*B`, `rrf:A+B`; `python -m melo_core scorers` says more."])
