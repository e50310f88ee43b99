"""The "Does it matter?" page's own Streamlit helpers (app_pages/effects.py): what a knock-out changes, drawn for the
measure the page chose. The numbers come from ``core.causal``; this module reads the options and draws."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.causal.effects_compare import default_word, sentence_cosine
from core.representations.compare import shared_words, word_similarity
from core.teaching.examples import BANK_MONEY, BANK_RIVER
from ui import results
from ui.figures import show_figure
from ui.page_state import option_value
from viz.common import file_stem, markdown_safe
from viz.effects import knockout_target_sentence
from viz.predictions import fill_in_bars, visible_spaces


def position_label(labels: list[str], i: int) -> str:
    """How the page's token pickers name token ``i``."""
    return f"{labels[i]} (position {i})"


def compare_page_texts() -> tuple[str, str]:
    """The Compare page's two texts (its own examples until it has been opened): the knock-out is read against them."""
    return (option_value("text_a", page="compare") or BANK_RIVER, option_value("text_b", page="compare") or BANK_MONEY)


def target_knockout(name: str, text: str, target: str | None, limit: int, ablation: tuple) -> None:
    """The target token's log-probability and the top predictions before and after knocking out ``ablation``."""
    change = results.target_changes(name, text, target, 5, max_tokens=limit, ablation=ablation)
    token = markdown_safe(visible_spaces(change.target.token))
    st.markdown(knockout_target_sentence(token, change.target.position, change.target_logp_before,
                                         change.target_logp_after))
    columns = st.columns(2)
    for column, title, candidates, probs, tag in (
        (columns[0], "Before", change.before_candidates, change.before_probs, "before"),
        (columns[1], "After the knock-out", change.after_candidates, change.after_probs, "after"),
    ):
        with column:
            show_figure(fill_in_bars(candidates, probs, title=title), name=file_stem(name, "predictions", tag),
                        data=pd.DataFrame({"rank": range(1, len(probs) + 1), "candidate": candidates, "probability": probs}),
                        key=f"effects-predictions-{tag}", share=0.5)


def embedding_knockout(name: str, text: str, analysis, limit: int, ablation: tuple) -> None:
    """The sentence embedding's cosine to the knocked-out run, beside the Compare page's two texts for scale, and
    the change in their shared word's similarity."""
    ablated = results.analyses(name, text, max_tokens=limit, ablation=ablation)
    cosine = sentence_cosine(analysis, ablated)
    texts = compare_page_texts()
    pair = [results.analyses(name, t, max_tokens=limit) for t in texts]
    scale = sentence_cosine(*pair)
    c1, c2 = st.columns(2)
    c1.metric("Cosine, original vs ablated sentence embedding", f"{cosine:.4f}",
              help="1 = the knock-out did not change the sentence embedding's direction.")
    c2.metric("For scale: cosine of the compare page's two texts", f"{scale:.4f}",
              help="Two different sentences (the compare page's text A and text B) through the unablated model.")
    shared = shared_words(*pair)
    if not shared:
        return
    word = default_word(shared, option_value("word", page="compare"))
    ablated_pair = [results.analyses(name, t, max_tokens=limit, ablation=ablation) for t in texts]
    before = float(word_similarity(*pair, word)["cosine_similarity"].iloc[-1])
    after = float(word_similarity(*ablated_pair, word)["cosine_similarity"].iloc[-1])
    st.markdown(f"“{markdown_safe(word)}” in the compare page's two texts, last hidden state: cosine "
                f"**{before:.4f}** → **{after:.4f}** with the knock-out ({after - before:+.4f}).")
