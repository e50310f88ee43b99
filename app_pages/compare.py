"""Compare two sentences: their attention side by side, and one shared word's embedding in each."""

from functools import partial

import pandas as pd
import streamlit as st

from core.attention_heads.attention import head_attention
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL, hidden_state_label
from core.model.tokens import token_labels
from core.representations.compare import (
    SAME_SENSE_CONTROL,
    control_sentence,
    lookup_similarity,
    shared_words,
    word_attention,
    word_occurrences,
    word_positions,
    word_similarity,
)
from core.teaching.examples import BANK_MONEY, BANK_RIVER
from ui import results
from ui.ablation import knockout, with_ablation
from ui.caveats import attention_caveat, final_norm_note
from ui.errors import friendly_fragment
from ui.explain import controls, explain
from ui.figures import show_figure
from ui.page_state import end_page, option
from ui.seq2seq import stop_unless_one_stack
from ui.session import MAX_TEXT_CHARS, current_model, current_model_name, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.compare import attention_heatmap, similarity_by_layer_chart
from viz.inside import token_bars

st.title("Compare two sentences")
explain(
    "Does a word get a different embedding in every sentence? Type two texts (this page uses its own "
    "boxes, not the sidebar's text; the model is the sidebar's). The word-embedding lookup gives a word the "
    "same vector everywhere; the layers then mix in its context, so the two vectors drift apart. The third box is a "
    "control: the word in the same sense as in text A, in other words, so that you can see how far any change of "
    "context moves it."
)
attention_caveat()
model = current_model()
stop_unless_one_stack("Comparing two sentences runs one stack over each text; with a source and a target per text "
                      "this page does not apply.")
sides = controls("Texts").columns(2)
texts = [
    option(side.text_area, f"Text {name}", value=default, key=f"text_{name.lower()}", max_chars=MAX_TEXT_CHARS, height=90)
    for side, name, default in zip(sides, "AB", (BANK_RIVER, BANK_MONEY))
]
if not all(text.strip() for text in texts):
    st.info("Type a text in both boxes to compare them.", icon=":material/edit:")
    end_page()
with st.spinner("Running the model…"):
    analyses = [results.analyses(current_model_name(), text, max_tokens=current_token_limit()) for text in texts]
plain = analyses
analyses = with_ablation(*analyses)  # heads knocked out on the "Does it matter?" page, if the user turns it on
ablation = None if all(a is b for a, b in zip(analyses, plain)) else knockout()
for name, analysis in zip("AB", analyses):
    if analysis.truncated:
        st.info(f"Text {name} has {analysis.num_input_tokens} tokens; only the first {analysis.num_tokens} are used.")
labels = [token_labels(analysis) for analysis in analyses]

def attention_rows(matrix, names: list[str]) -> pd.DataFrame:
    """One row per (query, key) pair of one head's ``[n, n]`` attention, for the CSV."""
    return pd.DataFrame([{"query": q, "key": k, "attention": float(matrix[i, j])}
                         for i, q in enumerate(names) for j, k in enumerate(names)])

@friendly_fragment
def layer_head_and_word(model, texts: list[str], analyses: list, labels: list[list[str]], ablation) -> None:
    """Layer, head, shared-word and control pickers and what they change: a pick reruns only this part.

    ``ablation``: the knock-out shown instead of the plain runs (part of every figure's cache key), or None."""
    left, right = st.columns(2)
    layer = option(left.selectbox, BLOCK_SELECT_LABEL, range(model.num_layers), key="layer", help=BLOCK_SELECT_HELP)
    head = option(right.selectbox, "Head (counted from 0)", range(model.num_heads), key="head")
    st.header(f"Attention of layer {layer}, head {head}")
    for side, name, analysis, names in zip(st.columns(2), "AB", analyses, labels):
        with side:
            show_figure(results.figures(current_model_name(), analysis.text, "compare-attention", name, layer, head,
                                        max_tokens=current_token_limit(), ablation=ablation,
                                        build=partial(attention_heatmap, head_attention(model, analysis, layer, head), names,
                                                      title=f"Text {name}")),
                        name=file_stem(model.name, f"text{name}", "attention", layer, head),
                        data=partial(attention_rows, head_attention(model, analysis, layer, head), names), key=f"compare-attention-{name}", share=0.5)

    shared = shared_words(*analyses)
    if not shared:
        st.info("The two texts have no word in common, so there is no word to compare.", icon=":material/info:")
        return
    longest = max(len(w) for w in shared)
    default = max(i for i, w in enumerate(shared) if len(w) == longest)  # the longest shared word, the last on a tie
    word = option(st.selectbox, "Word in both texts", shared, index=default, key="word",
                  help="Case-insensitive whole words. A word split into several tokens is the mean of its "
                  "tokens' vectors. If it occurs more than once, the first occurrence is used.")
    word_md = markdown_safe(word)
    st.header(f"Where “{word_md}” looks (layer {layer}, head {head})")
    for side, name, analysis, names in zip(st.columns(2), "AB", analyses, labels):
        row = word_attention(analysis, word, layer, head)
        with side:
            if word_occurrences(analysis, word) > 1:
                st.caption(f"“{word_md}” occurs more than once in text {name}; this is its first occurrence.")
            show_figure(token_bars(row, names, title=f"Text {name}: attention from “{word}”", y_title="attention"),
                        name=file_stem(model.name, f"text{name}", word, "attention", layer, head),
                        data=partial(pd.DataFrame, {"position": range(len(names)), "key token": names, "attention": row}),
                        key=f"compare-row-{name}", share=0.5)

    st.header(f"Is “{word_md}” the same vector in both texts?")
    control_text = option(
        st.text_area, "Control text: the word in the same sense as in text A", value=SAME_SENSE_CONTROL, key="text_c",
        max_chars=MAX_TEXT_CHARS, height=84,  # two lines above the character count (ui.explain.PAGE_CSS)
        help="Leave empty for no control. The default is a river bank, like the default text A.",
    )
    similarity = word_similarity(*analyses, word)
    lookup = lookup_similarity(model, *analyses, word)
    control = None
    if control_text.strip():
        control_analysis = results.analyses(current_model_name(), control_text, max_tokens=current_token_limit())
        if word_occurrences(control_analysis, word):
            control = word_similarity(analyses[0], control_analysis, word)
        else:
            st.caption(f"“{word_md}” is not a word of the control text, so there is no control curve.")
    data = similarity.assign(word_embedding_lookup=lookup)
    if control is not None:
        data = data.assign(control_cosine_similarity=control["cosine_similarity"].to_numpy())
    show_figure(results.figures(current_model_name(), (*texts, control_text if control is not None else ""),
                                "compare-similarity", word, max_tokens=current_token_limit(), ablation=ablation,
                                build=partial(similarity_by_layer_chart, similarity, word, lookup, control)),
                name=file_stem(model.name, word, "similarity-by-layer"), data=data, key="compare-similarity")
    if control is not None:
        last = len(similarity) - 1
        st.markdown(markdown_safe(control_sentence(word, float(similarity["cosine_similarity"].iloc[-1]),
                                                   float(control["cosine_similarity"].iloc[-1]), last)))
    positions = [word_positions(analysis, word)[0] for analysis in analyses]
    ids = [[analysis.input_ids[p] for p in word_positions(analysis, word)] for analysis in analyses]
    at_zero, at_top = similarity["cosine_similarity"].iloc[0], similarity["cosine_similarity"].iloc[-1]
    if ids[0] != ids[1]:
        zero_note = f"“{word_md}” became different tokens in the two texts ({ids[0]} vs {ids[1]}), so even its lookups differ"
    elif at_zero < 1 - 1e-6:
        zero_note = (f"already below 1, because the embedding layer adds a position embedding and “{word_md}” is token "
                     f"{positions[0]} in A but token {positions[1]} in B")
    else:
        zero_note = "identical: same token ids" + (" at the same position" if positions[0] == positions[1] else "")
    top_note = ("context has pulled the two vectors apart" if at_top < 1 - 1e-6 else "still identical"
                + (": a decoder's token sees itself and the tokens before it, and those are the same" if model.is_decoder else ""))
    st.markdown(
        f"- **Word-embedding lookup: {lookup:.4f}**, the same table row for the same token ids, whatever the sentence.\n"
        f"- **{hidden_state_label(0).capitalize()}: {at_zero:.4f}**: {zero_note}.\n"
        f"- **Last: {hidden_state_label(len(similarity) - 1)}: {at_top:.4f}**: {top_note}."
        + (f"\n\n{note}" if (note := final_norm_note(model)) else "")
    )

layer_head_and_word(model, texts, analyses, labels, ablation)
