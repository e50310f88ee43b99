"""The logit lens views of Predictions and the tour: a window of positions at a time, its sentence and its figure."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.model.recording import UnsupportedArchitecture
from core.model.tokens import readable_token
from core.outputs.causal_lm import encode
from core.outputs.lens import lens_summary
from ui import results
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import show_figure
from ui.models import language_model_of
from ui.page_state import option
from ui.session import current_model_name, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.lens_grid import final_rank_grid, lens_sentence
from viz.wording import rank_colour_key

LENS_POSITIONS = 32  # positions per lens grid: each costs the head over the whole vocabulary at every hidden state


def lens_window(text: str, start: int = 0) -> tuple[int, int, int]:
    """``(start, end, count)``: the positions ``start`` to ``end - 1`` the lens grid shows (at most
    ``LENS_POSITIONS``), of the ``count`` tokens the app reads of ``text``."""
    count = len(encode(language_model_of(current_model_name()), text, current_token_limit()))
    start = max(0, min(int(start), count - LENS_POSITIONS))
    return start, min(count, start + LENS_POSITIONS), count


def lens_parts(text: str, start: int = 0):
    """``(sentence, figure, table)`` of the logit lens at the positions of ``lens_window(text, start)``: a plain-text
    sentence (the colours' key, then when the final predictions settle), and the table as a function (built for the
    CSV only). Raises ``UnsupportedArchitecture`` where the lens does not apply."""
    start, end, count = lens_window(text, start)
    # A decoder's hidden states at the first ``end`` tokens do not depend on later ones: the analysis of those
    # tokens alone is enough (the whole text's, shared with the other pages, when the window reaches its end).
    lens = results.logit_lenses(current_model_name(), text, 1, start, max_tokens=current_token_limit() if end == count else end)
    summary = lens_summary(lens.final_ranks)
    top = [[c[0] for c in layer] for layer in lens.candidates]
    final = top[-1]

    def table() -> pd.DataFrame:
        return pd.DataFrame([{"hidden_state": l, "position": start + t, "token": readable_token(lens.tokens[t]),
                              "top_token": readable_token(top[l][t]), "final_prediction": readable_token(final[t]),
                              "rank_of_final": int(lens.final_ranks[l, t]) + 1,
                              "stays_top_from": int(summary.settled[t])}
                             for l in range(len(top)) for t in range(len(final))])
    fig = final_rank_grid(lens.tokens, top, lens.final_ranks, summary, final, first=start)
    return (f"{rank_colour_key(fig.data[0])}. " + lens_sentence(lens.tokens, final, summary, lens.final_ranks.shape[0] - 1,
                                                                first=start, total=count), fig, table)


@friendly_fragment
def lens_view(text: str) -> None:
    """The logit lens at ``LENS_POSITIONS`` positions at a time (a slider moves them): each layer's top token,
    coloured by the final prediction's rank."""
    st.header("When the prediction becomes readable: the logit lens")
    explain("The model's own final norm and head applied to the hidden state after every layer show what it would "
            "predict if it stopped there. Each cell is that layer's top token; its colour is the rank there of the "
            "token the model finally predicts (the sentence below gives the key). An outline marks the layer from which "
            "it stays on top. The lens shows when the answer becomes readable through the final norm and head, not "
            "where it is decided: a hidden state can carry the answer before the head can read it. Patching (the "
            "Patching page) measures where a detail is carried.")
    try:
        _, _, count = lens_window(text)
        start = 0
        if count > LENS_POSITIONS:
            start = option(st.slider, "First position shown", 0, count - LENS_POSITIONS, 0, key="lens_from",
                           help=f"The grid shows {LENS_POSITIONS} positions at a time; each is computed when shown.")
        sentence, fig, table = lens_parts(text, start)
    except UnsupportedArchitecture as err:
        st.info(str(err), icon=":material/info:")
        return
    st.markdown(markdown_safe(sentence))
    show_figure(fig, name=file_stem(current_model_name(), "lens-final-rank", start or None), key="predictions-lens",
                data=table)
