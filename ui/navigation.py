"""The app's navigation (``PAGES``, which app.py's ``st.navigation`` lists after "Home") and what it
remembers between pages and reloads (``restore_choice``, ``keep_choice``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st


@dataclass(frozen=True)
class AppPage:
    script: str  # its URL is the file name without the number (/Link): links and tests use it
    link: str  # what Home's link to it says
    icon: str


# The one list of pages: app.py builds the navigation and Home's links from it. A new page is a
# script in pages/ (calling ``app_navigation`` first) and an entry here.
PAGES = (
    AppPage("pages/1_Datasets.py", "Browse the datasets", "📚"),
    AppPage("pages/2_Link.py", "Link terms to ESCO (curation)", "🔗"),
    AppPage("pages/3_Crosswalk.py", "Review and export the crosswalk", "🗺️"),
    AppPage("pages/4_Import.py", "Import a taxonomy, terms or a crosswalk", "📥"),
    AppPage("pages/5_Benchmark.py", "Compare models on the benchmark", "📊"),
    AppPage("pages/6_Lexical_overlap.py", "Lexical overlap and model quality", "🔤"),
    AppPage("pages/7_Drill_down.py", "Drill down to the queries a model gets wrong", "🔍"),
)


def app_navigation() -> None:
    """Run every page under app.py's navigation. Streamlit starts in its pages-folder mode (the
    landing page listed as "app") while no run of app.py has called ``st.navigation`` yet, as
    when the first request of a process names a page (``/Link``); this leaves that mode once for
    the process and reruns, now through app.py. Called first thing by each page. Streamlit 1.67
    has no public way to do this while the folder is named pages/ (docs/architecture.md)."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


# The app remembers what a curator chose (scheme, term, filters) in the URL, so a reload or a
# shared link shows the same, and in the session, since the navigation drops both the query
# string and the state of widgets not on the page.
_WRITTEN = "_url_written_"  # what this session last wrote to a URL parameter
_REMEMBERED = "_url_remembered_"  # what a parameter last held in this session, on any page


def linked_value(param: str) -> list[str]:
    """The URL's ``?param=`` values when this session did not write them there (a link, a reload,
    an edited address): they choose. Else nothing."""
    in_url = st.query_params.get_all(param)
    return in_url if in_url != st.session_state.get(_WRITTEN + param) else []


def remembered_value(param: str) -> list[str] | None:
    """What ``?param=`` last held in this session, on any page (None: never set)."""
    remembered = st.session_state.get(_REMEMBERED + param)
    return list(remembered) if remembered is not None else None


def restore_choice(key: str, param: str, options: Sequence[Any], many: bool = False) -> None:
    """Before the widget ``key`` is drawn: choose what the URL's ``?param=`` names when it came
    from outside (``linked_value``); else keep the widget's own state; else (back from another
    page) what the parameter last held. Values not among ``options`` (compared as text) are
    dropped; ``many``: a multiselect (the parameter repeated)."""
    by_text = {str(option): option for option in options}
    chosen = [by_text[v] for v in linked_value(param) if v in by_text]
    if chosen:
        st.session_state[key] = chosen if many else chosen[0]
        return
    remembered = remembered_value(param)
    if key not in st.session_state and remembered is not None:
        again = [by_text[v] for v in remembered if v in by_text]
        if many:
            st.session_state[key] = again
        elif again:
            st.session_state[key] = again[0]
    if key not in st.session_state:
        return
    current = st.session_state[key]
    if many:
        kept = [v for v in current if str(v) in by_text]
        if kept != current:  # only then: a value set through the state warns beside a widget's default
            st.session_state[key] = kept
    elif str(current) not in by_text:
        del st.session_state[key]  # gone (a scheme deleted): the widget's default


def keep_choice(param: str, value: Any, many: bool = False) -> None:
    """After the widget is drawn: its ``value`` into the URL (``?param=``, repeated for ``many``;
    none when nothing is chosen) and into the session's memory for the next visit."""
    values = [str(v) for v in value] if many else [str(value)]
    st.session_state[_WRITTEN + param] = values
    st.session_state[_REMEMBERED + param] = values
    if values:
        st.query_params[param] = values if many else values[0]
    else:
        st.query_params.pop(param, None)
