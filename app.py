"""Entry point: navigation, the shared sidebar, and the error boundary around every page."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import streamlit as st

from ui.idle import page_running
from ui.startup import wait_for_startup
from ui.warmup import start_warmup

start_warmup()  # `make run` did this as the server started; with `streamlit run app.py`, the first visit does
wait_for_startup()  # the first visit to a server that has just started: a few seconds

import transformers  # noqa: E402 - after the start-up wait: the warm-up thread imports it first

from ui.errors import friendly_errors  # noqa: E402 - as above
from ui.explain import page_style  # noqa: E402 - as above
from ui.figures import measure_main_column  # noqa: E402 - as above
from ui.page_state import page_run  # noqa: E402 - as above
from ui.session import page_limit_notice  # noqa: E402 - as above
from ui.sidebar import render_sidebar  # noqa: E402 - as above

ROOT = Path(__file__).parent
# The favicon inline, as a data URL: Chromium fetches a page's icon again on every URL change, which every click that
# changes a query parameter is (a /media request of about 0.5 kB per click, a fifth of a small click's bytes).
FAVICON = "data:image/png;base64," + base64.b64encode((ROOT / "assets" / "favicon.png").read_bytes()).decode("ascii")

# (file, title, icon, url path). The url paths are stable: links sent to a workshop depend on them.
PAGES = [
    ("app_pages/home.py", "Home", ":material/home:", ""),
    ("app_pages/tour.py", "Guided tour", ":material/tour:", "tour"),
    ("app_pages/attention.py", "Attention", ":material/grid_on:", "attention"),
    ("app_pages/maxima.py", "Maxima", ":material/call_made:", "maxima"),
    ("app_pages/stats.py", "Head statistics", ":material/leaderboard:", "stats"),
    ("app_pages/inside.py", "Inside one head", ":material/calculate:", "inside"),
    ("app_pages/compare.py", "Compare two sentences", ":material/compare:", "compare"),
    ("app_pages/predictions.py", "Predictions", ":material/lightbulb:", "predictions"),
    ("app_pages/effects.py", "Does it matter?", ":material/science:", "effects"),
    ("app_pages/patching.py", "Patching", ":material/healing:", "patching"),
    ("app_pages/needle.py", "Needle in a haystack", ":material/search:", "needle"),
    ("app_pages/long-context.py", "Long context", ":material/straighten:", "long-context"),
    ("app_pages/flow.py", "Information flow", ":material/account_tree:", "flow"),
    ("app_pages/drift.py", "Drift", ":material/trending_down:", "drift"),
    ("app_pages/senses.py", "Senses", ":material/scatter_plot:", "senses"),
    ("app_pages/qk-map.py", "Queries and keys", ":material/hub:", "qk-map"),
    ("app_pages/deck.py", "Deck", ":material/slideshow:", "deck"),
    ("app_pages/room.py", "Workshop room", ":material/groups:", "room"),
]


def run() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # Presentation mode (?present=true) opens with the sidebar folded, so a figure fills the slide.
    present = st.session_state.get("present", st.query_params.get("present", "").lower() == "true")
    st.set_page_config(page_title="Transformer attention explorer", page_icon=FAVICON,
                       layout="wide", initial_sidebar_state="collapsed" if present else "auto")
    pages = [
        st.Page(str(ROOT / file), title=title, icon=icon, url_path=path or None, default=not path)
        for file, title, icon, path in PAGES
    ]
    page = st.navigation(pages, expanded=True)  # past twelve pages Streamlit would hide the last ones behind "View more"
    with friendly_errors(f"showing {page.title}"), page_run(page.url_path):
        render_sidebar()  # inside the boundary: a bad deployment setting is a sentence too
        page_style()
        measure_main_column()
        page_limit_notice()  # before the page computes: the token limit it applies, and why
        page.run()


with page_running():  # background warm-up (UMAP) waits until no page has run for ten seconds
    run()
