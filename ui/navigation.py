"""The app's navigation (app.py's ``st.navigation``: the landing page is "Home")."""

from __future__ import annotations

import streamlit as st


def app_navigation() -> None:
    """Run every page under app.py's navigation. Streamlit starts in its pages-folder mode (the
    landing page listed as "app") while no run of app.py has called ``st.navigation`` yet, as
    when the first request of a process names a page (``/Link``); this leaves that mode once for
    the process and reruns, now through app.py. Called first thing by each page."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
