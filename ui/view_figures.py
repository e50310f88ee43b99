"""A pinned figure drawn again from its view's link, without its page: what the Deck page does for a deck opened from a
shared link or after a restart, when this server does not keep the pinned figures (``ui.deck``).

``REDRAWS`` maps a page (its url path) to the function that draws that page's figures from the options in a link. Each
reads the same cached results (``ui.results``) and builds the figure with the same function as its page
(``ui.page_figures``), so the figure drawn again is the page's own, with its title and file name. A page missing from
the registry, a view that needs what a link does not carry (a corpus uploaded on the Drift page) or that is not drawn
from a link yet (an encoder-decoder's, a long text's attention), raises ``NotFromLink`` with one sentence the slide shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from core.attention_heads.attention import attention_maxima, window_hidden
from core.errors import UserFacingError
from core.model.attention_layers import SINGLE_STACK
from core.model.models import DEFAULT_MODEL, LoadedModel, ModelLoadError, bundled_name
from core.model.recording import UnsupportedArchitecture
from core.model.stacks import stacks_of
from core.outputs.predictions import MAX_TOP_K
from core.teaching.examples import BANK_RIVER, EXAMPLE_SENTENCES
from ui import page_figures as pf
from ui import results
from ui.caveats import word_level_allowed
from ui.deck import Pin
from ui.linked_texts import ID_SUFFIX, linked_texts
from ui.models import language_model_of, loaded_model, run_of
from ui.option_values import MISSING, OptionSpec, valid_value, value_from_url
from ui.page_figures import ViewFigure
from ui.seq2seq import axis_titles
from ui.session import current_settings, token_limit_on
from viz.common import file_stem


class NotFromLink(UserFacingError):
    """A pinned figure that cannot be drawn from its link alone; the message is the sentence its slide shows."""


@dataclass(frozen=True)
class LinkedView:
    """A view as its link names it: page, URL parameters, the sidebar's model and text (as the page would read
    them: a parameter left out takes the sidebar's default), and the name of the figure wanted."""

    page: str  # url path ("home" for the home page)
    params: dict[str, str]  # the link's URL parameters
    model_name: str
    text: str
    name: str  # the pinned figure's file name

    @property
    def model(self) -> LoadedModel:
        """The link's model, loaded (refused when this server does not offer it)."""
        if not current_settings().model_allowed(self.model_name):
            raise NotFromLink("This server does not load the model this figure was drawn with, so it cannot draw it.")
        return loaded_model(self.model_name)

    @property
    def limit(self) -> int:
        """Tokens the page reads: the app's limit with the model (its window, capped by the deployment setting),
        capped by the page's own (as ``ui.session.current_token_limit`` on that page)."""
        return token_limit_on(self.page, self.model)

    def choice(self, key: str, choices, default=None):
        """The option ``key`` as the link gives it when it is one of ``choices``, else the page's default (the first
        choice unless ``default``)."""
        choices = list(choices)
        return self._read(key, OptionSpec("choice", choices[0] if default is None else default, choices,
                                          [str(c) for c in choices]))

    def index(self, key: str, count: int) -> int:
        """A layer or head number of ``count`` (a picker's): 0 when the link has none."""
        return self.number(key, 0, 0, count - 1)

    def number(self, key: str, default: int, low: int, high: int) -> int:
        """A whole number clamped to ``low``..``high``, as a page clamps a link's value (``default`` when it is none
        or not a whole number)."""
        return self._read(key, OptionSpec("number", default, low=low, high=high))

    def flag(self, key: str) -> bool:
        return self._read(key, OptionSpec("bool", False))

    def _read(self, key: str, spec: OptionSpec):
        """The link's ``key`` read as ``ui.page_state.option`` reads a link: ``spec``'s value, or its default."""
        raw = self.params.get(key)
        return valid_value(spec, MISSING if raw is None else value_from_url(spec, raw))


REDRAWS: dict[str, Callable[[LinkedView], ViewFigure]] = {}


def redraws(page: str):
    """Register the decorated function as the one that draws ``page``'s figures from a link."""
    def register(draw: Callable[[LinkedView], ViewFigure]) -> Callable[[LinkedView], ViewFigure]:
        REDRAWS[page] = draw
        return draw
    return register


def linked_view(pin: Pin) -> LinkedView:
    """``pin``'s view as its link names it; raises ``NotFromLink`` when the link's text is no longer on this server."""
    params = dict(parse_qsl(pin.query, keep_blank_values=True))
    name = (params.get("model") or DEFAULT_MODEL).strip() or DEFAULT_MODEL
    if "text" in params:
        text = params["text"]
    elif f"text{ID_SUFFIX}" in params:
        text = linked_texts().get(params[f"text{ID_SUFFIX}"])
        if text is None:
            raise NotFromLink("This figure's text was too long for a link and this server no longer keeps it, so the "
                              "figure cannot be drawn again.")
    else:
        text = BANK_RIVER  # the sidebar's default text, which a link leaves out
    return LinkedView(pin.page or "home", params, bundled_name(name) or name, text, pin.name)


def redraw(pin: Pin) -> ViewFigure:
    """``pin``'s figure drawn again from its link; raises ``NotFromLink`` (its sentence) when it cannot be."""
    draw = REDRAWS.get(pin.page or "home")
    if draw is None:
        raise NotFromLink("This page's figures are not drawn again from a link yet: open the view once and the figure "
                          "is kept.")
    try:
        drawn = draw(linked_view(pin))
    except NotFromLink:
        raise
    except ModelLoadError as err:
        raise NotFromLink(f"The model of this figure could not be loaded: {err}") from err
    except UserFacingError as err:
        raise NotFromLink(str(err)) from err
    if drawn.name != pin.name:
        raise NotFromLink("Its link now draws another figure than the one pinned, so open the view to pin it again.")
    return drawn


def _one_stack(view: LinkedView) -> LoadedModel:
    model = view.model
    if model.is_encoder_decoder:
        raise NotFromLink("An encoder-decoder's figures are not drawn again from a link yet: open the view once and "
                          "the figure is kept.")
    return model


@redraws("home")
def _home(view: LinkedView) -> ViewFigure:
    model = _one_stack(view)
    return pf.static_similarity(model.name, results.analyses(view.model_name, view.text, max_tokens=view.limit))


@redraws("attention")
def _attention(view: LinkedView) -> ViewFigure:
    model = _one_stack(view)
    name, text, limit = view.model_name, view.text, view.limit
    analysis = results.analyses(name, text, max_tokens=limit)
    if pf.is_long(analysis):
        raise NotFromLink("A long text's attention is drawn at screen resolution as the page is scrolled, so open the "
                          "view to draw it.")
    source = view.choice("source", pf.ATTENTION_SOURCES)
    special = view.choice("special", pf.ATTENTION_SPECIAL)
    words = view.flag("words") and word_level_allowed(source)
    try:
        matrices = results.attention_views(name, text, source, special, words, max_tokens=limit)
    except UnsupportedArchitecture:  # as the page does: raw attention instead
        source, matrices = "raw", results.attention_views(name, text, "raw", special, words, max_tokens=limit)
    if not matrices.labels:
        raise NotFromLink("Every token is a special token, so hiding them leaves nothing to draw.")
    (stack,) = stacks_of(analysis)
    style = {"causal": stack.causal, "colorscale": pf.ATTENTION_PALETTES[view.choice("palette", pf.ATTENTION_PALETTES)],
             "per_head_scale": view.choice("scale", ["fixed", "per head"]) == "per head", "large": view.flag("present")}
    layers, heads = matrices.matrices.shape[:2]
    hidden = None if source == "rollout" else window_hidden(matrices, analysis.sliding_windows)
    drawn = pf.AttentionFigures(run_of(name, (text,), limit, None), (source, special, words), matrices, style,
                                model.name, model.name, SINGLE_STACK, pf.head_names_of(source, heads), None, hidden,
                                analysis.sliding_windows)
    overview = drawn.overview(pf.overview_title(drawn.who, source))
    if overview.name == view.name:
        return overview
    layer, shown = view.index("layer", layers), view.choice("view", pf.ATTENTION_VIEWS)
    if shown == "one layer":
        return drawn.layer(layer)
    return drawn.head(layer, view.index("head", heads), axis_titles(stack))


@redraws("stats")
def _stats(view: LinkedView) -> ViewFigure:
    model = _one_stack(view)
    names = pf.statistic_names(model.tokenizer)
    source, statistic = view.choice("over", pf.STAT_SOURCES), view.choice("stat", names)
    if source == "text":
        table, _ = results.head_stats(view.model_name, view.text, "attention", max_tokens=view.limit)
        about = pf.text_about(results.analyses(view.model_name, view.text, max_tokens=view.limit).num_tokens)
    elif source == "examples":
        texts = tuple(EXAMPLE_SENTENCES.values())
        table = results.corpus_head_stats(view.model_name, texts, max_tokens=view.limit)
        about = pf.texts_about(len(texts), "the example sentences")
    else:
        raise NotFromLink("This figure averages the corpus loaded on the Drift page, which a link does not carry: "
                          "open the view with that corpus to draw it.")
    if table[statistic].isna().all():
        raise NotFromLink("This text has no query token to average over, so there is nothing to draw.")
    return pf.statistic_heatmap(model.name, table, statistic, names, about, source)


@redraws("predictions")
def _predictions(view: LinkedView) -> ViewFigure:
    _one_stack(view)
    language_model_of(view.model_name)  # raises NoLanguageModelHead (a sentence) for a checkpoint without one
    top_k = view.number("top_k", 5, 1, MAX_TOP_K)
    predictions = results.predictions(view.model_name, view.text, max_tokens=view.limit).top(top_k)
    rows = pf.candidate_rows(predictions, top_k)
    if predictions.kind == "next":  # drawn wide: a slide has room for the colour bar
        return pf.next_token_figure(view.model.name, predictions, rows, narrow=False)
    for index in range(min(len(predictions.positions), pf.MAX_MASKS_SHOWN)):
        bars = pf.fill_in_figure(view.model.name, predictions, index, rows)
        if bars.name == view.name:
            return bars
    raise NotFromLink("Its link's text no longer has this mask, so open the view to pin it again.")


@redraws("maxima")
def _maxima(view: LinkedView) -> ViewFigure:
    model = _one_stack(view)
    name, text, limit = view.model_name, view.text, view.limit
    (stack,) = stacks_of(results.analyses(name, text, max_tokens=limit))
    try:
        weighted = results.norm_weighted_attention(name, text, max_tokens=limit)
    except UnsupportedArchitecture:
        weighted = None
    rolled = results.rollouts(name, text, max_tokens=limit)
    if view.name == file_stem(model.name, "special-token-share") and weighted is not None:
        return pf.special_share_figure(model.name, pf.special_shares(stack.queries, weighted))
    source = view.choice("source", [pf.MAXIMA_RAW] + [pf.MAXIMA_NORM] * (weighted is not None) + [pf.MAXIMA_ROLLOUT])
    reduction = view.choice("heads", pf.MAXIMA_REDUCTIONS)
    head = view.index("head", stack.num_heads) if reduction == "one head" and source != pf.MAXIMA_ROLLOUT else None
    if "raw-norm-weighted-rollout" in view.name:
        if stack.queries.num_tokens > pf.MAX_PANEL_TOKENS:
            raise NotFromLink(f"The maps are drawn for texts of up to {pf.MAX_PANEL_TOKENS} tokens; this one has "
                              f"{stack.queries.num_tokens}.")
        return pf.maxima_panels(model.name, run_of(name, (text,), limit, None), stack, weighted, rolled,
                             view.index("layer", stack.num_layers), head, False)
    chosen = pf.maxima_choice(source, reduction, head, stack.attentions, weighted, rolled)
    maxima = attention_maxima(stack.queries, matrices=chosen.matrices, heads=chosen.heads,
                              skip_special=not view.flag("special"),
                              words=view.flag("words") and word_level_allowed(source))
    if not len(maxima.queries):
        raise NotFromLink("Every token of this text is a special token, so there is nothing to draw.")
    return pf.maxima_figure(model.name, maxima, chosen, chosen.what, ablated=False)


@redraws("long-context")
def _long_context(view: LinkedView) -> ViewFigure:
    model = _one_stack(view)
    lengths = pf.long_context_lengths(view.limit)
    wanted = view.number("length", pf.LONG_DEFAULT_LENGTH, lengths[0], lengths[-1])
    length = wanted if wanted in lengths else pf.LONG_DEFAULT_LENGTH if pf.LONG_DEFAULT_LENGTH in lengths else lengths[-1]
    source = view.choice("source", pf.LONG_SOURCES, "haystack")
    measured = pf.long_text(model, view.model_name, source, length, view.text)
    if len(measured.ids) < 2:
        raise NotFromLink("Its text has fewer than two tokens, so there is nothing to measure.")
    profile = results.long_context_profiles(view.model_name, measured.text, source, max_tokens=length)
    stem, layer = pf.long_context_stem(view.model_name, source, profile), view.index("layer", model.num_layers)
    for drawn in (lambda: pf.long_context_grid(profile, stem, view.choice("measure", pf.LONG_MEASURES, "local")),
                  lambda: pf.long_context_distance(profile, stem, layer),
                  lambda: pf.long_context_sink(profile, stem, layer, measured)):
        figure = drawn()
        if figure.name == view.name:
            return figure
    return figure  # redraw says that the link now draws another figure
