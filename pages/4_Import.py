"""Import into the crosswalk store what the CLI imports: the ESCO taxonomy (the union of the MELO
corpora, or an ESCO CSV export) and source terms (a terms CSV, a standardised crosswalk JSON, or
our own SKOS CSV export). A bad file is refused with its line and column; nothing is written."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import streamlit as st

from db.imports import TERM_FORMATS, check_accounted, count_labels, import_taxonomy, import_terms, read_term_file
from db.quickstart import TAXONOMY_NAME, TAXONOMY_VERSION
from db.store import AccessError
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import crosswalk_path, list_crosswalks
from melo_core.esco.taxonomy import Taxonomy, cached_taxonomy_from_melo, taxonomy_from_esco_csv
from ui import auth
from ui import common as ui
from ui.navigation import app_navigation
from ui.safe import md_code, md_text

app_navigation()
st.set_page_config(page_title="Import · MELO Studio", layout="wide")
st.title("Import")
store = ui.store()
# A shared app imports for signed-in users only, and signs their imported decisions with their name.
signer = auth.require_sign_in(store)
st.caption(f"Store: {md_code(store.display_url)}")


def safe_name(name: str) -> str:
    """An uploaded file's own name, without any folder part (it names the import's curator)."""
    return re.sub(r"[^\w.\-]+", "_", Path(name).name) or "upload"


def refused(exc: MeloInputError) -> None:
    """The error with the uploaded file's own name instead of its temporary path."""
    where = ""
    if exc.path is not None:
        where = exc.path.name + (f", line {exc.line}" if exc.line is not None else "") + ": "
    st.error(f"Nothing was imported. {md_text(where + exc.message)}")


def import_with_progress(taxonomy: Taxonomy, name: str, version: str, source: str, melo_corpora: bool = False) -> None:
    total = len(taxonomy.concepts) + count_labels(taxonomy)
    bar = st.progress(0.0, text="importing the taxonomy")
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        bar.progress(min(done / total, 1.0), text=f"importing the taxonomy: {done:,} of {total:,} rows")

    report = import_taxonomy(store, taxonomy, name, version, source, on_progress=step, from_melo_corpora=melo_corpora)
    bar.progress(1.0, text="done")
    st.success(md_text(report.summary()))


# -- taxonomy -------------------------------------------------------------------------------------
st.header("ESCO taxonomy")
stored = store.taxonomies()
if stored:
    st.markdown(
        "In the store: "
        + "; ".join(f"**{md_text(t.name)} {md_text(t.version)}** ({t.concepts:,} concepts)" for t in stored)
    )
union_tab, csv_tab = st.tabs(["Union of the MELO corpora", "ESCO CSV export"])
with union_tab:
    data_dir = config.data_dir()
    st.markdown(f"All ESCO labels of the MELO corpora in {md_code(data_dir)} (21 languages).")
    if st.button("Import the union", key="import_union"):
        try:
            with st.spinner("reading the corpora"):
                union = cached_taxonomy_from_melo(data_dir)
            import_with_progress(union, TAXONOMY_NAME, TAXONOMY_VERSION, str(Path(data_dir).resolve()), True)
        except MeloInputError as exc:
            refused(exc)
        except OSError as exc:
            st.error(
                f"Nothing was imported: {md_text(f'cannot read the MELO data in {data_dir} ({exc}).')} {config.DATA_HELP}"
            )
with csv_tab:
    st.markdown(
        "The files of an ESCO download in CSV format: `occupations_<lang>.csv` and, for the ISCO "
        "hierarchy, `ISCOGroups_<lang>.csv` (any number of languages)."
    )
    esco_files = st.file_uploader("ESCO CSV files", type=["csv"], accept_multiple_files=True, key="import_esco")
    version = st.text_input("Version", value="esco-csv", key="import_esco_version")
    if st.button("Import the ESCO CSV files", key="import_esco_go", disabled=not esco_files):
        with tempfile.TemporaryDirectory(prefix="melo-esco-") as folder:
            for esco_file in esco_files or []:
                Path(folder, safe_name(esco_file.name)).write_bytes(esco_file.getvalue())
            try:
                taxonomy = taxonomy_from_esco_csv(folder)
                import_with_progress(taxonomy, TAXONOMY_NAME, version.strip() or "esco-csv", "upload")
            except MeloInputError as exc:
                refused(exc)

# -- source terms ---------------------------------------------------------------------------------
st.header("Source terms")
schemes = [s.name for s in store.schemes()]
left, right = st.columns(2)
scheme = left.text_input(
    "Scheme (existing or new)",
    key="import_scheme",
    help=f"Existing: {md_text(', '.join(schemes))}" if schemes else "A name for the new scheme, e.g. nor_no",
).strip()
language = right.text_input("Language of a new scheme (e.g. de; optional)", key="import_lang").strip() or None
kind = left.selectbox("Kind of a new scheme", ("terminology", "job-titles"), key="import_kind")
base_uri = right.text_input("Base URI of a new scheme's terms (optional)", key="import_base_uri").strip() or None

file_tab, crosswalk_tab = st.tabs(["Upload a file", "A national crosswalk of the MELO data"])
with file_tab:
    file_format = st.radio(
        "Format",
        list(TERM_FORMATS),
        format_func=lambda f: md_text(TERM_FORMATS[f]),
        key="import_format",
        horizontal=True,
    )
    with_decisions = st.checkbox(
        "Its matches become decisions, to review an existing crosswalk "
        + ("(signed by you, now)" if signer else "(curator import:<file name>)"),
        key="import_with_decisions",
        disabled=file_format != "crosswalk",
    )
    # txt: a spreadsheet's "Unicode Text" (UTF-16, tab-separated); xlsx: a workbook's first sheet
    uploaded = st.file_uploader("Term file", type=["csv", "txt", "xlsx", "json"], key="import_terms_file")
    if st.button("Import the terms", key="import_terms_go", type="primary", disabled=uploaded is None) and uploaded:
        if not scheme:
            st.error("Give the scheme a name first.")
        else:
            with tempfile.TemporaryDirectory(prefix="melo-terms-") as folder:
                path = Path(folder, safe_name(uploaded.name))
                path.write_bytes(uploaded.getvalue())
                try:
                    source = read_term_file(path, file_format, with_decisions and file_format == "crosswalk")
                    report = import_terms(store, scheme, source, kind=kind, language=language, base_uri=base_uri,
                                          signer=signer)  # fmt: skip
                    check_accounted(source, report)  # every row read imported or already there
                    st.success(md_text(report.summary()))
                except MeloInputError as exc:
                    refused(exc)
                except AccessError as exc:  # the session expired or the account was disabled meanwhile
                    st.error(f"Nothing was imported: {md_text(auth.refused(exc))}.")
with crosswalk_tab:
    try:
        crosswalks = list_crosswalks(config.data_dir())
    except (MeloInputError, OSError):
        crosswalks = []
    if not crosswalks:
        st.caption(f"No crosswalks under {md_code(config.data_dir())}. {config.DATA_HELP}")
    else:
        code = st.selectbox("Crosswalk", crosswalks, key="import_crosswalk")
        reviewed = st.checkbox("With its published matches as decisions", key="import_crosswalk_decisions")
        if st.button("Import this crosswalk's terms", key="import_crosswalk_go"):
            try:
                source = read_term_file(crosswalk_path(config.data_dir(), code), "crosswalk", reviewed)
                report = import_terms(store, scheme or code, source, kind=kind, language=language, base_uri=base_uri,
                                      signer=signer)  # fmt: skip
                check_accounted(source, report)
                st.success(md_text(report.summary()))
            except MeloInputError as exc:
                refused(exc)
            except AccessError as exc:
                st.error(f"Nothing was imported: {md_text(auth.refused(exc))}.")
