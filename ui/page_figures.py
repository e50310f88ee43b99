"""The figures that a page draws and that the Deck page draws again from a pin's link (``ui.view_figures``): each is
built by one function here, which its page calls with the options on screen and ``ui.view_figures`` with the options
in the link, so a figure drawn again is the page's own (same cached results, same title, same file name).

Each returns a ``ViewFigure``: the figure's file name, the figure (from the ``ui.results.figures`` shelf where the page
keeps it there), its table (or a function building it) and the sentence said about it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pandas as pd
import plotly.graph_objects as go

from core.attention_heads.attention import layer_panels, pairs_table, special_share
from core.attention_heads.head_statistics import STATISTICS, sink_names, statistic_grid
from core.attention_heads.long_context import LOCAL_DISTANCE, text_ids
from core.maths.similarity import token_static_similarity
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.run import Run
from core.model.tokens import decoded_tokens, quoted_token, readable_token, token_labels
from core.outputs.predictions import Predictions
from ui import results
from ui.caveats import NORM_WEIGHTED
from viz import attention as va
from viz import attention_tables as vt
from viz.common import COLORBLIND_SAFE, SEQUENTIAL, file_stem
from viz.head_cells import layer_cells
from viz.head_stats import head_heatmap
from viz.long_context import distance_heatmap, distance_table, head_table, kinds_sentence, layer_sentence, sink_heatmap, sink_sentence, sink_table
from viz.maxima import attention_panels, maxima_grid, special_share_chart
from viz.predictions import fill_in_bars, next_token_heatmap
from viz.tokens import token_layer_heatmap


@dataclass(frozen=True)
class ViewFigure:
    """One figure of a view, as ``ui.figures.show_figure`` draws it and a pin keeps it."""

    name: str
    figure: go.Figure | None
    data: pd.DataFrame | Callable[[], pd.DataFrame] | None = None
    sentence: str = ""


# --- Home ----------------------------------------------------------------------------------------------------------

def static_similarity(model_name: str, analysis: Analysis) -> ViewFigure:
    """Home's heatmap: each token's cosine similarity to its embedding-layer vector, at every hidden state."""
    labels = token_labels(analysis)
    similarity = token_static_similarity(analysis)
    rows = [
        {"layer": layer, "position": i, "token": labels[i], "cosine_to_layer_0": float(similarity[layer, i])}
        for layer in range(similarity.shape[0])
        for i in range(similarity.shape[1])
    ]
    return ViewFigure(file_stem(model_name, "static-similarity"),
                      token_layer_heatmap(similarity, labels, title="Cosine similarity to the embedding layer",
                                          colorbar="cosine"),
                      pd.DataFrame(rows))


# --- Attention -----------------------------------------------------------------------------------------------------

# Option values are what the URL carries (bound widgets write their shown label), so they stay short.
ATTENTION_SOURCES = {"raw": "raw attention weights", "norm-weighted": "norm-weighted attention",
                     "rollout": "attention rollout"}
ATTENTION_SPECIAL = ["show", "hide", "renormalise"]
ATTENTION_PALETTES = {"cividis": COLORBLIND_SAFE, "viridis": SEQUENTIAL}
ATTENTION_VIEWS = ["one head", "one layer", "BertViz"]
# Up to this many tokens the Attention page draws every head's every cell (``viz.attention``: 512 is the app's default
# limit, the length its figures are measured at in docs/benchmarks.md); past it, or when the analysis keeps no weights
# of its own, ``ui.attention_page`` draws the long text (screen resolution, zooms, thumbnails).
LONG_TEXT_TOKENS = 512


def is_long(analysis: Analysis) -> bool:
    """Whether the Attention page draws ``analysis`` as a long text (``ui.attention_page``)."""
    return analysis.attentions is None or analysis.num_tokens > LONG_TEXT_TOKENS


@dataclass(frozen=True)
class AttentionFigures:
    """What every figure of the Attention page is drawn from: ``run`` (the text or texts, limit and knock-out),
    ``inputs`` (source, special tokens, word level[, stack kind]), the view's matrices, the style (causal, colour
    scale, per-head scale, large), ``who`` (the model's name, and the run or stack it shows, as titles begin),
    ``stack_kind``, the head names, the key labels of cross-attention and each layer's sliding-window cells."""

    run: Run
    inputs: tuple
    view: object
    style: dict
    who: str
    model_name: str
    stack_kind: str = SINGLE_STACK
    head_names: tuple[str, ...] = ()
    keys: list[str] | None = None
    hidden: object = None
    windows: tuple | None = None

    @property
    def source(self) -> str:
        return self.inputs[0]

    @property
    def _options(self) -> tuple:
        return (*self.inputs, self.style["colorscale"], self.style["per_head_scale"], self.style["large"])

    @property
    def _stem(self) -> tuple:
        return () if self.stack_kind == SINGLE_STACK else (self.stack_kind,)

    def overview(self, title: str) -> ViewFigure:
        """Every layer × head (or every layer of rollout) as thumbnails."""
        view, hidden = self.view, None if self.hidden is None else self.hidden[:, None]
        layers = view.matrices.shape[0]
        figure = results.figures.at(
            self.run, "attention-overview", *self._options,
            build=partial(va.overview_figure, view.matrices, title=title,
                          head_names=[n.removeprefix("head ") for n in self.head_names], hidden=hidden, **self.style))
        data = partial(vt.cells_table, view.matrices, view.labels, causal=self.style["causal"],
                       max_cells=va.OVERVIEW_MAX_CELLS, outer={"layer": list(range(layers)), "head": list(self.head_names)},
                       hidden=hidden, key_labels=self.keys)
        return ViewFigure(file_stem(self.model_name, *self._stem, self.source, "overview"), figure, data)

    def _window(self, layer: int) -> dict:
        return {} if self.hidden is None else {"hidden": self.hidden[layer], "window": self.windows[layer]}

    def _head_figure(self, layer: int, head: int, axis_titles: tuple[str, str]):
        return partial(va.head_figure, self.view.matrices[layer, head], self.view.labels, key_labels=self.keys,
                       title=f"{self.who} · layer {layer}, {self.head_names[head]}", axis_titles=axis_titles,
                       **self.style, **self._window(layer))

    def head(self, layer: int, head: int, axis_titles: tuple[str, str]) -> ViewFigure:
        """One head of one layer, large."""
        figure = results.figures.at(self.run, "attention-head", *self._options, layer, head,
                                    build=self._head_figure(layer, head, axis_titles))
        view = self.head_view(layer, head)
        return ViewFigure(view.name, figure, view.data)

    def head_view(self, layer: int, head: int) -> ViewFigure:
        """``head``'s file name and data without its figure (None): what its downloads need when the page does not
        draw it (the head switch shows its cells)."""
        window = self._window(layer)
        data = partial(vt.matrix_table, self.view.matrices[layer, head], self.view.labels, causal=self.style["causal"],
                       key_labels=self.keys, hidden=window.get("hidden"))
        return ViewFigure(file_stem(self.model_name, *self._stem, self.source, "layer", layer, "head", head), None, data)

    def _cells(self, layer: int):
        return partial(layer_cells, self.view.matrices[layer], self.view.labels, layer=layer, key_labels=self.keys,
                       colorscale=self.style["colorscale"], per_head_scale=self.style["per_head_scale"],
                       hidden=None if self.hidden is None else self.hidden[layer])

    def cells(self, layer: int) -> dict:
        """The layer's heads packed for the head switch (``viz.head_cells.layer_cells``), kept per layer."""
        return results.head_cells.at(self.run, *self._options, layer, build=self._cells(layer))

    def cells_later(self, layer: int):
        """``cells(layer)`` computed (and kept) in another thread (``ui.ahead``)."""
        return results.head_cells.later(self.run, *self._options, layer, build=self._cells(layer))

    def layer(self, layer: int) -> ViewFigure:
        """Every head of one layer."""
        window = self._window(layer)
        figure = results.figures.at(self.run, "attention-layer", *self._options, layer, build=lambda: va.layer_grid_figure(
            self.view.matrices[layer], self.view.labels, title=f"{self.who} · layer {layer}, every head",
            head_names=list(self.head_names), key_labels=self.keys, **self.style, **window))
        data = partial(vt.cells_table, self.view.matrices[layer], self.view.labels, causal=self.style["causal"],
                       max_cells=va.GRID_MAX_CELLS, outer={"head": list(self.head_names)}, key_labels=self.keys,
                       hidden=window.get("hidden"))
        return ViewFigure(file_stem(self.model_name, *self._stem, self.source, "layer", layer), figure, data)


def head_names_of(source: str, heads: int) -> tuple[str, ...]:
    return ("all heads (rollout)",) if source == "rollout" else tuple(f"head {h}" for h in range(heads))


def overview_title(who: str, source: str) -> str:
    return f"{who}: {ATTENTION_SOURCES[source]}, every layer" + ("" if source == "rollout" else " × head")


# --- Maxima --------------------------------------------------------------------------------------------------------

MAXIMA_RAW, MAXIMA_NORM, MAXIMA_ROLLOUT = "raw attention", NORM_WEIGHTED, "rollout"
MAXIMA_WEIGHT_NAMES = {MAXIMA_RAW: "attention", MAXIMA_NORM: "α·‖f(x)‖", MAXIMA_ROLLOUT: "rollout"}
MAXIMA_REDUCTIONS = ["max over heads", "mean over heads", "one head"]
MAX_PANEL_TOKENS = 128  # the raw, norm-weighted and rollout maps are drawn up to this many tokens


@dataclass(frozen=True)
class MaximaChoice:
    """The matrices the Maxima page reads (``source`` of the stack), how heads are reduced (``heads``: "max",
    "mean" or one head's number), what the title calls it and the file name's part for the heads."""

    source: str
    matrices: object
    heads: str | int
    what: str
    head_part: tuple


def maxima_choice(source: str, reduction: str, head: int | None, attentions, weighted, rolled) -> MaximaChoice:
    if source == MAXIMA_ROLLOUT:
        return MaximaChoice(source, rolled[:, None], "mean", "rollout", ("heads", "mean"))
    heads = head if head is not None else {"max over heads": "max", "mean over heads": "mean"}[reduction]
    what = f"{source}, head {head}" if head is not None else f"{source}, {reduction}"
    return MaximaChoice(source, attentions if source == MAXIMA_RAW else weighted, heads, what,
                        ("head", head) if head is not None else ("heads", heads))  # never a name ending in "-head"


def maxima_figure(model_name: str, maxima, choice: MaximaChoice, what: str, *, ablated: bool,
                  stem: tuple = ()) -> ViewFigure:
    """The most-attended token of every token at every layer (``maxima``: ``attention_maxima`` of ``choice``)."""
    return ViewFigure(file_stem(model_name, "maxima", *stem, choice.source, *choice.head_part),
                      maxima_grid(maxima, title=f"Most-attended token ({what}){', ablated run' if ablated else ''}",
                                  weight_name=MAXIMA_WEIGHT_NAMES[choice.source]),
                      maxima.long_table)


def maxima_panels(model_name: str, run: Run, stack, weighted, rolled, layer: int, head: int | None,
                  stacked: bool) -> ViewFigure:
    """Raw, norm-weighted and rollout maps of one layer of ``stack`` (each None where not drawn)."""
    stem = () if stack.kind == SINGLE_STACK else (stack.kind,)
    panels = layer_panels(stack.attentions, weighted, rolled, layer, head)
    labels = token_labels(stack.queries)
    return ViewFigure(
        file_stem(model_name, *stem, "raw-norm-weighted-rollout", "layer", layer,
                  *(("head", head) if head is not None else ("heads", "mean"))),
        results.figures.at(run, "maxima-panels", *stem, layer, head, tuple(panels), stacked,
                           build=lambda: attention_panels(list(panels.items()), labels, stacked=stacked)),
        partial(pairs_table, labels, panels))


def special_shares(analysis: Analysis, weighted) -> dict:
    """The share of each token's attention on special tokens, raw and norm-weighted, by layer."""
    return {MAXIMA_RAW: special_share(analysis.attentions, analysis.special_mask),
            MAXIMA_NORM: special_share(weighted, analysis.special_mask)}


def special_share_figure(model_name: str, shares: dict) -> ViewFigure:
    layers = list(range(len(shares[MAXIMA_RAW])))
    return ViewFigure(file_stem(model_name, "special-token-share"), special_share_chart(layers, shares),
                      pd.DataFrame({"layer": layers} | {f"{k} share on special tokens": v for k, v in shares.items()}))


# --- Long context --------------------------------------------------------------------------------------------------

LONG_SOURCES = {"haystack": "bundled long text", "sidebar": "the sidebar's text"}
LONG_LENGTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
LONG_DEFAULT_LENGTH = 2048
LONG_MEASURES = {"local": f"within {LOCAL_DISTANCE} tokens", "far": "far, sink excluded", "sink": "on the sink"}


def long_context_lengths(limit: int) -> list[int]:
    """The lengths the Long context page offers under the token limit ``limit``."""
    return [n for n in LONG_LENGTHS if n <= limit] or [limit]


@dataclass(frozen=True)
class LongText:
    """The text the Long context page measures: its token ids (at most the length chosen), its whole length in
    tokens, and how its first token, the sink, is named."""

    text: str
    ids: list[int]
    total: int
    first: str
    sink_label: str


def long_text(model, model_name: str, source: str, length: int, sidebar_text: str) -> LongText:
    """The bundled long text cut at a sentence end (``source`` "haystack") or the sidebar's text, read up to
    ``length`` tokens."""
    text = results.haystacks(model_name, (), length, True) if source == "haystack" else sidebar_text
    ids, total, first_is_added = text_ids(model.tokenizer, text, length)
    first = decoded_tokens(model.tokenizer, ids[:1])[0] if ids else ""
    if first_is_added:
        sink_label = f"the {quoted_token(first)} token the tokenizer adds (position 0)"
    else:
        sink_label = f"the first token {quoted_token(first)} (position 0; this tokenizer adds no token before the text)"
    return LongText(text, list(ids), total, first, sink_label)


def long_context_stem(model_name: str, source: str, profile) -> str:
    return file_stem(model_name, "long-context", source, profile.num_tokens)


def long_context_grid(profile, stem: str, measure: str) -> ViewFigure:
    """One measure of every head (local, far or on the sink) as a layer × head grid."""
    grid = {"local": profile.local, "far": profile.far, "sink": profile.sink_mean}[measure]
    titles = {"local": f"Share of attention within {LOCAL_DISTANCE} tokens",
              "far": f"Share at {profile.far_distance:,} tokens or more, sink excluded",
              "sink": "Share on the sink (position 0)"}
    return ViewFigure(f"{stem}-{measure}", head_heatmap(grid, title=titles[measure], colorbar="share", share=True),
                      lambda: head_table(profile), kinds_sentence(profile))


def long_context_distance(profile, stem: str, layer: int) -> ViewFigure:
    """One layer's heads, their attention by distance."""
    return ViewFigure(f"{stem}-distance-layer-{layer}", distance_heatmap(profile, layer),
                      lambda: distance_table(profile), layer_sentence(profile, layer))


def long_context_sink(profile, stem: str, layer: int, text: LongText) -> ViewFigure:
    """One layer's heads, their attention on the first token by query position (the sentence plain: a screen reader
    would read a markdown escape out)."""
    return ViewFigure(f"{stem}-sink-layer-{layer}", sink_heatmap(profile, layer, quoted_token(text.first)),
                      lambda: sink_table(profile, layer), sink_sentence(profile, text.sink_label))


# --- Predictions ---------------------------------------------------------------------------------------------------

MAX_MASKS_SHOWN = 8  # fill-in figures drawn (the table has every mask)
MAX_ROWS_SHOWN = 64  # positions the next-token heatmap draws (the table has them all)


def candidate_rows(predictions: Predictions, top_k: int) -> list[dict]:
    """One row per position and candidate, each token written by the app's one rule."""
    return [
        {"position": int(p), "token": readable_token(predictions.tokens[p]), "rank": r + 1,
         "candidate": readable_token(predictions.candidates[i][r]),
         "probability": float(predictions.probabilities[i, r])}
        for i, p in enumerate(predictions.positions) for r in range(top_k)
    ]


def fill_in_figure(model_name: str, predictions: Predictions, index: int, rows: list[dict]) -> ViewFigure:
    """An encoder's candidates for its mask ``index`` as bars."""
    position = predictions.positions[index]
    return ViewFigure(
        file_stem(model_name, "fill-in", position),
        fill_in_bars(predictions.candidates[index], predictions.probabilities[index],
                     title=f"Mask {index + 1} of {len(predictions.positions)} (token {position})"),
        pd.DataFrame([row for row in rows if row["position"] == position]))


def next_token_figure(model_name: str, predictions: Predictions, rows: list[dict], *, narrow: bool) -> ViewFigure:
    """A decoder's top guesses for the next token after each of the first ``MAX_ROWS_SHOWN`` positions."""
    shown = slice(0, MAX_ROWS_SHOWN)
    return ViewFigure(file_stem(model_name, "next-tokens"),
                      next_token_heatmap(predictions.tokens[shown], predictions.candidates[shown],
                                         predictions.probabilities[shown], narrow=narrow),
                      pd.DataFrame(rows))


# --- Head statistics -----------------------------------------------------------------------------------------------

STAT_SOURCES = {"text": "this text", "examples": "example sentences", "corpus": "corpus"}
STAT_NOT_SHARES = ("entropy", "distance", "diagonal")


def statistic_names(tokenizer) -> dict[str, str]:
    """The statistics of a model with one stack, as its Head statistics page names them (its own first and end
    tokens: BERT's [CLS] / [SEP], none for GPT-2)."""
    sinks = sink_names(tokenizer)
    return {**STATISTICS, "first": f"Share to {sinks.first}", "end": f"Share to {sinks.end}"}


def statistic_heatmap(model_name: str, table: pd.DataFrame, statistic: str, names: dict[str, str], about: str,
                      source: str, stack_kind: str = SINGLE_STACK) -> ViewFigure:
    """One statistic of every head as a layer × head heatmap."""
    return ViewFigure(
        file_stem(model_name, "head-stats", *(() if stack_kind == SINGLE_STACK else (stack_kind,)), statistic, source),
        head_heatmap(statistic_grid(table, statistic), title=f"{names[statistic]}: {about}", colorbar=statistic,
                     share=statistic not in STAT_NOT_SHARES),
        table)


def text_about(tokens: int) -> str:
    return f"this text ({tokens} tokens)"


def texts_about(texts: int, where: str) -> str:
    return f"{texts} texts from {where}, each counting once"
