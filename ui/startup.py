"""What a visitor sees while a server that has just started is still importing PyTorch and transformers."""

from __future__ import annotations

import streamlit as st

from ui.warmup import wait_for_imports

# The browser loads Plotly's code only when the first chart arrives, and then spends about a second on it
# (fetching, compiling and running 4.7 MB of JavaScript) after the server has finished. An empty chart drawn,
# hidden, while the server still loads the model lets the browser do that on its own core in the meantime.
_HIDE_PRELOAD = "<style>.st-key-plotly-preload { display: none; }</style>"
_EMPTY_CHART = {"data": [{"type": "scatter", "x": [], "y": []}], "layout": {"template": "none"}}  # Plotly needs a trace


def wait_for_startup() -> None:
    """On a server that has just started: say so, and wait until the heavy imports are done (a few seconds); then
    let the browser load the charting code while the model loads. Returns at once afterwards."""
    if wait_for_imports(timeout=0.2):  # done, or about to be (the libraries were already imported in this process)
        return
    with st.spinner("Starting up: loading PyTorch and transformers (once per server start)…"):
        wait_for_imports()
    # Only now: st.plotly_chart imports plotly and pandas, which must not be imported while the warm-up thread
    # imports torch and transformers (two threads importing one module can see it half-initialised).
    with st.container(key="plotly-preload"):
        st.html(_HIDE_PRELOAD)
        st.plotly_chart(_EMPTY_CHART, config={"staticPlot": True})
