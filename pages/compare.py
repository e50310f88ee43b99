"""Compare two sentences: their attention side by side, and one shared word's embedding in each."""

from ui.shell import require_app_shell

require_app_shell()

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.compare import (  # noqa: E402
    lookup_similarity, shared_words, word_attention, word_occurrences, word_positions, word_similarity,
)
from core.examples import BANK_MONEY, BANK_RIVER  # noqa: E402
from core.tokens import token_labels  # noqa: E402
from ui.cache import cached_analysis  # noqa: E402
from ui.explain import controls, explain  # noqa: E402
from ui.figures import show_figure  # noqa: E402
from ui.page_state import option  # noqa: E402
from ui.session import MAX_TEXT_CHARS, current_model, current_model_name, current_token_limit  # noqa: E402
from viz.common import file_stem  # noqa: E402
from viz.compare import attention_heatmap, similarity_by_layer_chart  # noqa: E402
from viz.common import markdown_safe  # noqa: E402
from viz.inside import token_bars  # noqa: E402

st.title("Compare two sentences")
explain(
    "Does a word get a different embedding in every sentence? Type two texts (this page uses its own two "
    "boxes, not the sidebar's text; the model is the sidebar's). The word-embedding lookup gives a word the "
    "same vector everywhere; every layer then mixes in its context, so the two vectors drift apart."
)
model = current_model()
sides = controls("Texts").columns(2)
texts = [
    option(side.text_area, f"Text {name}", value=default, key=f"text_{name.lower()}", max_chars=MAX_TEXT_CHARS, height=90)
    for side, name, default in zip(sides, "AB", (BANK_RIVER, BANK_MONEY))
]
if not all(text.strip() for text in texts):
    st.info("Type a text in both boxes to compare them.", icon=":material/edit:")
    st.stop()
with st.spinner("Running the model…"):
    analyses = [cached_analysis(current_model_name(), text, current_token_limit()) for text in texts]
for name, analysis in zip("AB", analyses):
    if analysis.truncated:
        st.info(f"Text {name} has {analysis.num_input_tokens} tokens; only the first {analysis.num_tokens} are used.")
labels = [token_labels(analysis) for analysis in analyses]

left, right = st.columns(2)
layer = option(left.selectbox, "Layer (counted from 0)", range(model.num_layers), key="layer",
                       help="Layer i reads hidden state i and writes hidden state i + 1.")
head = option(right.selectbox, "Head (counted from 0)", range(model.num_heads), key="head")
st.subheader(f"Attention of layer {layer}, head {head}")
for side, name, analysis, names in zip(st.columns(2), "AB", analyses, labels):
    rows = [{"query": q, "key": k, "attention": float(analysis.attentions[layer, head, i, j])}
            for i, q in enumerate(names) for j, k in enumerate(names)]
    with side:
        show_figure(attention_heatmap(analysis.attentions[layer, head], names, title=f"Text {name}"),
                    name=file_stem(model.name, f"text{name}", "attention", layer, head), data=pd.DataFrame(rows),
                    key=f"compare-attention-{name}", share=0.5)

shared = shared_words(*analyses)
if not shared:
    st.info("The two texts have no word in common, so there is no word to compare.", icon=":material/info:")
    st.stop()
longest = max(len(w) for w in shared)
default = max(i for i, w in enumerate(shared) if len(w) == longest)  # the longest shared word, the last on a tie
word = option(st.selectbox, "Word in both texts", shared, index=default, key="word",
                    help="Case-insensitive whole words. A word split into several tokens is the mean of its "
                    "tokens' vectors. If it occurs more than once, the first occurrence is used.")
word_md = markdown_safe(word)
st.subheader(f"Where “{word_md}” looks (layer {layer}, head {head})")
for side, name, analysis, names in zip(st.columns(2), "AB", analyses, labels):
    row = word_attention(analysis, word, layer, head)
    with side:
        if word_occurrences(analysis, word) > 1:
            st.caption(f"“{word_md}” occurs more than once in text {name}; this is its first occurrence.")
        show_figure(token_bars(row, names, title=f"Text {name}: attention from “{word}”", y_title="attention"),
                    name=file_stem(model.name, f"text{name}", word, "attention", layer, head),
                    data=pd.DataFrame({"position": range(len(names)), "key token": names, "attention": row}),
                    key=f"compare-row-{name}", share=0.5)

st.subheader(f"Is “{word_md}” the same vector in both texts?")
similarity = word_similarity(*analyses, word)
lookup = lookup_similarity(model, *analyses, word)
show_figure(similarity_by_layer_chart(similarity, word, lookup), name=file_stem(model.name, word, "similarity-by-layer"),
            data=similarity.assign(word_embedding_lookup=lookup), key="compare-similarity")
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
            + (": a decoder's token sees only the tokens before it, and those are the same" if model.is_decoder else ""))
st.markdown(
    f"- **Word-embedding lookup: {lookup:.4f}**, the same table row for the same token ids, whatever the sentence.\n"
    f"- **Hidden state 0 (embedding layer output): {at_zero:.4f}**: {zero_note}.\n"
    f"- **Last hidden state ({len(similarity) - 1}): {at_top:.4f}**: {top_note}."
    + (" (For GPT-2 the last hidden state includes the final LayerNorm `ln_f`.)" if model.model_type == "gpt2" else "")
)
