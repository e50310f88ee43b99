"""The Attention page's head switch: one button per head of a layer ("Head n", a radio group with arrow keys) and the
chosen head's heatmap, drawn in the browser from every head's cells sent once (``viz.head_cells``), so another head
of the layer is on screen before any rerun; the choice then reaches Python (the page's ``head`` option, so the URL
and the page's other views follow).

The layer's data stays byte for byte the same while only the head changes, so Streamlit's message cache sends it
again as a reference, not as the layer's cells: the head the browser shows is in ``data`` only when the server chose
it (first draw, another control, a link), marked by a new ``nonce``.

Another layer chosen in a fragment run travels in two messages: the shown head alone first, then the layer in full,
which the browser asks for (a ``rest`` trigger, so a fragment rerun) once it has painted that head: a message sent
right after the first arrived in the same burst, and the browser handled its 1.2 MB before painting. A head clicked
before the rest arrives says it is loading (the click's rerun sends the rest too) and is drawn when it arrives."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui.page_state import set_option
from viz.head_cells import digest as layer_digest
from viz.head_cells import to_wire

CSS = """
.head-switch { font-family: var(--st-font, sans-serif); color: var(--st-text-color, #31333f); position: relative; }
.heads { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
.heads button { font: inherit; font-size: 0.875rem; padding: 2px 10px; min-height: 32px; border-radius: 6px; cursor: pointer;
  border: 1px solid var(--st-border-color, #d6d6d9); background: var(--st-background-color, #fff); color: inherit; }
.heads button[aria-checked="true"] { border: 2px solid var(--st-primary-color, #ff4b4b); font-weight: 700;
  box-shadow: inset 0 -3px 0 var(--st-primary-color, #ff4b4b); }
.heads button:focus-visible { outline: 2px solid var(--st-primary-color, #ff4b4b); outline-offset: 2px; }
.title { font-weight: 600; margin: 4px 0; }
.axes { font-size: 0.8rem; margin: 0 0 4px; }
.grid { display: grid; position: relative; align-items: start; justify-items: start; }
.grid canvas { display: block; }
.pooled img { display: block; image-rendering: pixelated; }
.tip { position: absolute; z-index: 2; pointer-events: none; background: #fff; color: #111; border: 1px solid #888;
  padding: 2px 6px; font-size: 0.8rem; white-space: nowrap; }
"""

_SWITCH = st.components.v2.component(
    "attention_head_switch",
    html='<div class="head-switch"></div>',
    css=CSS,
    js=(Path(__file__).with_name("head_switch.js")).read_text(encoding="utf-8"),
)


def _chosen(key: str) -> None:
    """The browser chose a head: the page's ``head`` option takes it on the run this starts."""
    value = st.session_state.get(key)
    picked = value.get("head") if value is not None else None
    if isinstance(picked, dict) and isinstance(picked.get("head"), int):
        st.session_state[f"{key}.picked"] = (picked["head"], picked.get("seq"), picked.get("digest"))
        set_option("head", picked["head"])


def data_for(layer: dict, head: int, record: tuple | None, picked: tuple | None) -> tuple[dict, tuple]:
    """The component's data for ``layer`` (``viz.head_cells.layer_cells``) showing ``head``, and the record of what
    was sent: ``(digest, head sent, nonce, the browser's choice when sent)``. The data is unchanged (so cached by the
    browser) when the browser already shows ``head``: the one sent, or the one it chose since on this layer
    (``picked``: ``(head, seq, digest of the layer it was chosen on)``; a click on the layer before, landing before
    this one arrived, is not a head this layer shows)."""
    digest = layer.get("digest") or layer_digest(layer)
    if record is not None and record[0] == digest:
        on_this = picked is not None and (len(picked) < 3 or picked[2] in (None, digest))
        shown = picked[0] if on_this and picked != record[3] else record[1]
        if shown == head:
            return {**layer, "digest": digest, "head": record[1], "nonce": record[2]}, record
    nonce = 0 if record is None else record[2] + 1
    record = (digest, head, nonce, picked)
    return {**layer, "digest": digest, "head": head, "nonce": nonce}, record


def fragment_run() -> bool:
    """Whether this run reruns fragments only (``st.rerun(scope="fragment")`` is allowed in it)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def head_switch(layer: dict, head: int, *, axes: tuple[str, str] | None = None, key: str = "head-switch") -> None:
    """Mount the head switch for ``layer`` showing ``head`` (the page's option); ``axes``: what its rows and columns
    are (``ui.seq2seq.axis_titles``), said under its title. When a fragment run shows another
    layer than the browser holds, the shown head goes alone (so the browser draws it before the other heads' bytes
    arrive), and the next run (the browser's request for the rest, or a click) sends the layer in full."""
    before = st.session_state.get(f"{key}.sent")
    data, record = data_for(layer, head, before, st.session_state.get(f"{key}.picked"))
    st.session_state[f"{key}.sent"] = record
    if data["kind"] != "cells":  # a long text's images as they are (each sent once it is pooled)
        _SWITCH(key=key, data=data, on_head_change=lambda: _chosen(key))
        return
    rest = f"{key}.rest"
    first = before is not None and before[0] != record[0] and fragment_run()
    if first:
        st.session_state[rest] = record[0]
    elif st.session_state.get(rest) == record[0]:
        del st.session_state[rest]
    # the codes as bytes, the head shown inflated (drawn on arrival); after another layer, that head alone
    wire = to_wire({**data, **({"axes": list(axes)} if axes else {})}, raw=data["head"], only=data["head"] if first else None)
    _SWITCH(key=key, data=wire, on_head_change=lambda: _chosen(key), on_rest_change=lambda: None)
