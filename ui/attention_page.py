"""The Attention page for a text longer than its full heatmaps draw (``LONG_TEXT_TOKENS``): one head at screen
resolution (each pixel the maximum or the sum of the cells it covers), a zoomed region token by token, and every head
of a layer (or of every layer) as thumbnails; computed one head, or a few query rows, at a time
(``core.attention_heads.long_attention``) and cached per head, so switching heads within a layer on screen is a cache hit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.attention_heads.head_reading import region_reading, region_sentence
from core.attention_heads.pooling import region_around
from core.model.analysis import Analysis
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL
from core.model.models import LoadedModel
from core.model.run import Run
from ui import results
from ui.errors import friendly_fragment
from ui.figures import NORMAL_WIDTH, PRESENTATION_WIDTH, main_column_width, show_figure
from ui.head_switch import head_switch
from ui.models import run_of
from ui.page_figures import LONG_TEXT_TOKENS
from ui.page_state import option, set_option, unshown_option
from ui.session import current_model_name, current_text, current_token_limit, presentation_mode
from ui.viewport import current_column
from viz import long_heatmap as lh
from viz.attention_cells import mask_note
from viz.common import file_stem, markdown_safe
from viz.head_cells import head_image, layer_images

POOLS = {"max": "maximum", "sum": "sum"}
SCOPES = ["this layer", "every layer"]
ZOOM_SIDES = [16, 32, 64, 128, 256]
THUMBS_MOST_CSS = 1450  # the thumbnails' plot area is at most this tall (every layer: their side shrinks to fit)
THUMBS_KEY, HEAD_KEY = "long-attention-thumbnails", "long-attention-head"


def page_width(present: bool) -> int:
    """The CSS width the long view's figures are drawn in: the slide's, or the main column as measured."""
    return PRESENTATION_WIDTH if present else main_column_width()


def device_pixel_ratio(present: bool) -> float:
    """The browser's device pixel ratio as the probe measured it (``ui.viewport``; 1 until it says otherwise)."""
    return current_column(PRESENTATION_WIDTH if present else NORMAL_WIDTH).dpr


def head_pixels(present: bool) -> int:
    """Device pixels per side a pooled head is drawn on: its plot area (the column less the figure's margins, in
    CSS pixels, a multiple of 4 so that the usual pixel ratios 1.25, 1.5, 2 give whole pixels) × the pixel ratio."""
    margins = lh.HEAD_MARGINS["l"] + lh.HEAD_MARGINS["r"]
    side_css = max(64, (page_width(present) - margins) // 4 * 4)
    return round(side_css * device_pixel_ratio(present))


def thumbs_pixels(present: bool, heads: int, layers: int) -> int:
    """Device pixels per side of each thumbnail (``viz.long_heatmap.thumbnail_pixels``) for the page's width."""
    width = page_width(present) - lh.THUMB_MARGINS["l"] - lh.THUMB_MARGINS["r"]
    return lh.thumbnail_pixels(width, THUMBS_MOST_CSS, heads, layers, device_pixel_ratio(present))


def _run(model_name: str, ablation) -> Run:
    """The run of the sidebar's text (``ablation``: ``(heads, method)`` or None): what every result and figure of the
    long view is computed from."""
    return run_of(model_name, current_text(), current_token_limit(), ablation)


def clicked_head() -> tuple[int, int] | None:
    """The ``[layer, head]`` of the thumbnail last clicked, once per click."""
    event = st.session_state.get(THUMBS_KEY)
    try:
        points = event["selection"]["points"] if event else []
    except (KeyError, TypeError):
        points = []
    data = list(points[0].get("customdata") or []) if points else None
    handled = f"{THUMBS_KEY}.handled"
    if data == st.session_state.get(handled):
        return None
    st.session_state[handled] = data
    return (int(data[0]), int(data[1])) if data and len(data) == 2 else None


def selected_box(n: int) -> tuple[int, int, int] | None:
    """``(first query, first key, side)`` of the zoom around the box last dragged on the pooled head, once per box."""
    event = st.session_state.get(HEAD_KEY)
    try:
        boxes = event["selection"]["box"] if event else []
    except (KeyError, TypeError):
        boxes = []
    box = boxes[-1] if boxes else None
    bounds = (tuple(box.get("x") or ()), tuple(box.get("y") or ())) if isinstance(box, dict) else None
    handled = f"{HEAD_KEY}.handled"
    if bounds == st.session_state.get(handled):
        return None
    st.session_state[handled] = bounds
    if not bounds or len(bounds[0]) != 2 or len(bounds[1]) != 2:
        return None
    return region_around(bounds[0], bounds[1], n, ZOOM_SIDES)


def long_attention(model: LoadedModel, analysis: Analysis, *, source: str, special: str, words: bool, per_head: bool,
                   colorscale: str, ablation) -> None:
    """The long-text part of the Attention page (after its shared controls)."""
    n = analysis.num_tokens
    st.caption(
        f"This text has {n:,} tokens, more than the {LONG_TEXT_TOKENS} whose every cell the heatmaps draw, so each "
        "head is drawn at screen resolution (each pixel the maximum or the sum of the weights it covers, as its title "
        "says) and computed when it is shown; zoom in below to read single tokens.")
    ignored = [f"the {source} source" if source != "raw" else "", "word level" if words else "",
               f"{special} special tokens" if special != "show" else ""]
    if any(ignored):
        st.info(f"At this length the page draws raw attention weights of every token, so {', '.join(i for i in ignored if i)} "
                "do not apply: those options need every head's whole matrix at once "
                f"({model.num_layers} × {model.num_heads} × {n:,}² weights, "
                f"{model.num_layers * model.num_heads * n * n * 4 / 1e9:,.1f} GB as float32).")
    long_view(model.name, ablation, per_head, colorscale, model.num_layers, model.num_heads, analysis.is_decoder)


@friendly_fragment
def long_view(name: str, ablation, per_head: bool, colorscale: str, layers: int, heads: int, causal: bool) -> None:
    """Layer, head, pooling and zoom pickers, the thumbnails and the head they open: a click reruns only this part."""
    run = _run(current_model_name(), ablation)
    analysis = results.analyses.at(run)
    n, present = analysis.num_tokens, presentation_mode()
    picked = clicked_head()
    if picked is not None and picked[0] < layers and picked[1] < heads:
        set_option("layer", picked[0])
        set_option("head", picked[1])
    boxed = selected_box(n)
    if boxed is not None:
        for key, value in zip(("q0", "k0", "zoom"), boxed, strict=True):
            set_option(key, value)
    c = st.columns([1, 1, 1])
    layer = option(c[0].selectbox, BLOCK_SELECT_LABEL, range(layers), key="layer", help=BLOCK_SELECT_HELP)
    head = unshown_option("head", range(heads))  # chosen with the head switch's "Head n" buttons, or a thumbnail
    how = option(c[1].radio, "Each pixel shows", list(POOLS), format_func=POOLS.get, key="pool", horizontal=True,
                 help="The maximum shows where any single weight is high; the sum, how much attention a block gets in all.")
    scope = option(c[2].segmented_control, "Thumbnails", SCOPES, key="thumbs", default=SCOPES[0], required=True)
    dpr = device_pixel_ratio(present)
    view = View(run, name + (" (ablated run)" if ablation else ""), how, head_pixels(present),
                {"colorscale": colorscale, "per_head_scale": per_head, "large": present, "dpr": dpr},
                masked_note(causal, None if analysis.sliding_windows is None else analysis.sliding_windows[layer]))

    shown = tuple(range(layers)) if scope == SCOPES[1] else (layer,)
    bar = st.empty()
    tile = thumbs_pixels(present, heads, len(shown))
    thumbs = results.long_thumbnails.at(run, shown, how, tile, progress=lambda done, total: bar.progress(
        done / total, text=f"Thumbnails: layer {done} of {total}…") if total > 1 else None)
    bar.empty()
    show_figure(
        results.figures.at(run, "long-thumbnails", shown, how, tile, colorscale, per_head, present, dpr,
                           build=lambda: lh.thumbnails_figure(
            thumbs, title=f"{view.title}: {'every layer × head' if len(shown) > 1 else f'layer {layer}, every head'}"
            "; click one to open it", **view.style)),
        name=file_stem(name, "thumbnails", how, *(("layer", layer) if len(shown) == 1 else ())),
        data=lambda: lh.thumbnails_table(thumbs), key=THUMBS_KEY, on_select="rerun", width="content",
    )

    with st.spinner(f"Computing layer {layer}, head {head} ({n:,} × {n:,} weights)…"):
        pooled = results.long_pooled_heads.at(run, layer, head, view.pixels)[how]
    z = st.columns([1, 1, 1])
    side = option(z[2].selectbox, "Zoom: tokens per side", ZOOM_SIDES, key="zoom", index=ZOOM_SIDES.index(64))
    side = min(side, n)
    q0 = option(z[0].number_input, "Zoom: first query", min_value=0, max_value=n - side, value=0, step=max(1, side // 2),
                key="q0")
    k0 = option(z[1].number_input, "Zoom: first key", min_value=0, max_value=n - side, value=0, step=max(1, side // 2),
                key="k0")
    region = (range(int(q0), int(q0) + side), range(int(k0), int(k0) + side))
    first = markdown_safe(results.long_labels.at(run)[0])
    # the layer's heads pooled so far (the shown one at least; ``prepare_layer`` pools the others, then sends them)
    layer_heads = [results.long_pooled_heads.peek_at(run, layer, h, view.pixels) for h in range(heads)]
    head_switch(layer_images([None if p is None else p[how] for p in layer_heads],
                             [None if p is None else view.head_image(layer, h, p[how]) for h, p in enumerate(layer_heads)],
                             layer=layer, dpr=dpr), head)
    show_figure(view.head_figure(layer, head, region), name=file_stem(name, "layer", layer, "head", head, how),
                data=lambda: lh.pooled_table(pooled), key=HEAD_KEY, on_select="rerun", selection_mode="box",
                width="content", alt=pooled.reading.sentence(first))
    st.caption(f"Layer {layer}, head {head}: {pooled.reading.sentence(first)}")
    with st.spinner(f"Computing queries {region[0].start}-{region[0].stop - 1}…"):
        zoom_figure = view.zoom_figure(layer, head, region)
    zoomed = results.long_zooms.at(run, layer, head, *region)
    show_figure(zoom_figure, name=file_stem(name, "layer", layer, "head", head, "queries", region[0].start, "keys",
                                            region[1].start),
                data=lambda: lh.zoom_table(zoomed), key="long-attention-zoom", reserve_margins=True)
    st.caption(zoom_caption(zoomed))
    prepare_layer(view, layer, heads)


def zoom_caption(zoomed) -> str:
    """The zoom's sentence, from the cells of the region shown."""
    reading = region_reading(zoomed.values, zoomed.hidden, zoomed.queries, zoomed.keys)
    return region_sentence(reading, zoomed.queries, zoomed.keys,
                           markdown_safe(zoomed.query_labels[reading.query - zoomed.queries.start]),
                           markdown_safe(zoomed.key_labels[reading.key - zoomed.keys.start]))


def masked_note(causal: bool, window: int | None) -> str:
    """What the grey cells of a layer's figures are: the future of a decoder, and keys outside its sliding window."""
    if not causal:
        return ""
    return mask_note(None if window is None else np.ones(1, dtype=bool), window)


@dataclass(frozen=True)
class View:
    """What the long view's figures of one run share: the run they are computed from and its title, the pooling and
    pixels, the style and mask note."""

    run: Run
    title: str
    how: str
    pixels: int
    style: dict
    note: str

    def head_figure(self, layer: int, head: int, region: tuple[range, range]):
        """The pooled head with the zoomed region outlined (cached per head, pooling, style and region)."""
        style = tuple(self.style.values())
        return results.figures.at(
            self.run, "long-head", layer, head, self.how, self.pixels, *style, *region,
            build=lambda: lh.pooled_head_figure(
                results.long_pooled_heads.at(self.run, layer, head, self.pixels)[self.how],
                title=f"{self.title} · layer {layer}, head {head}", region=region, masked_note=self.note, **self.style))

    def head_image(self, layer: int, head: int, pooled) -> str:
        """The head switch's picture of the pooled head (``viz.head_cells.head_image``), cached as a figure."""
        colours = (self.style["colorscale"], self.style["per_head_scale"])
        return results.figures.at(self.run, "long-head-image", layer, head, self.how, self.pixels, *colours,
                                  build=lambda: head_image(pooled, colorscale=colours[0], per_head_scale=colours[1]))

    def zoom_figure(self, layer: int, head: int, region: tuple[range, range]):
        """The zoomed region token by token (cached per head, style and region)."""
        queries, keys = region
        return results.figures.at(
            self.run, "long-zoom", layer, head, *tuple(self.style.values()), *region,
            build=lambda: lh.zoom_figure(results.long_zooms.at(self.run, layer, head, queries, keys),
                                         title=f"{self.title} · layer {layer}, head {head}: queries {queries.start}-"
                                         f"{queries.stop - 1}, keys {keys.start}-{keys.stop - 1}", masked_note=self.note,
                                         **{k: v for k, v in self.style.items() if k != "dpr"}))


def prepare_layer(view: View, layer: int, heads: int) -> None:
    """Pool the layer's other heads after the shown one is on screen, then rerun the view once so that the head switch
    holds them all (a click on one of them is then drawn in the browser). Each head's figures are built when it is
    chosen, from its pooled pixels. A click meanwhile ends this run (Streamlit stops it at the next element) and
    keeps the heads already pooled."""
    missing = [h for h in range(heads) if results.long_pooled_heads.peek_at(view.run, layer, h, view.pixels) is None]
    if not missing:
        return
    status = st.empty()
    for done, h in enumerate(missing):
        status.caption(f"Preparing layer {layer}'s other heads for the head switch: {done} of {len(missing)}…")
        results.long_pooled_heads.at(view.run, layer, h, view.pixels)
    status.empty()
    try:  # once per layer: the run that sends the switch every head
        st.rerun(scope="fragment")
    except StreamlitAPIException:  # a run of the whole page (this view is its last part): Streamlit runs it again
        st.rerun()
