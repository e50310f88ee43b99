"""Home: what the app shows, links to every page, and a first look at the sidebar's text."""

import pandas as pd
import streamlit as st

from core.similarity import token_static_similarity
from core.tokens import token_labels
from ui.explain import explain
from ui.figures import show_figure
from ui.shell import require_app_shell
from ui.session import current_analysis, current_model
from viz.common import file_stem
from viz.tokens import token_layer_heatmap

require_app_shell()
st.title("See what a transformer does with a sentence")
explain(
    """
A transformer first turns each token into a **static embedding**: the same vector for
"bank" in every sentence (plus a vector for its position). Each layer then lets every token
look at the others through **attention weights** (how much of each other token it mixes in)
and rewrites its vector, so by the top layer "bank" has a **contextual embedding** that
depends on the river or the money around it. Type a sentence in the sidebar; every page
reads the same text and model.
"""
)

PAGE_LINKS = [
    ("pages/attention.py", "Attention: every head of every layer as heatmaps, and BertViz's views."),
    ("pages/maxima.py", "Maxima: which token each token attends to most, layer by layer; rollout and norm-weighted attention."),
    ("pages/stats.py", "Head statistics: find the heads that look at the previous token, at [SEP], or everywhere."),
    ("pages/inside.py", "Inside one head: the query, key and value arithmetic, step by step, from the real weights."),
    ("pages/compare.py", "Compare two sentences: does a word get a different embedding in every sentence?"),
    ("pages/predictions.py", "Predictions: what the model itself would fill in or say next."),
    ("pages/drift.py", "Drift: how far each layer moves a whole corpus away from the static embeddings."),
    ("pages/senses.py", "Senses: one ambiguous word across many sentences, its senses pulled apart layer by layer."),
]
for page_file, description in PAGE_LINKS:
    st.page_link(page_file, label=description)

st.subheader("What the model saw")
model = current_model()
analysis = current_analysis()
labels = token_labels(analysis)
kind = "decoder (each token sees only the tokens before it)" if model.is_decoder else "encoder (each token sees all tokens)"
st.caption(
    f"{model.name}: {model.num_layers} layers × {model.num_heads} heads, hidden size {model.hidden_size}, "
    f"{kind}. Your text became {analysis.num_tokens} tokens."
)
table = pd.DataFrame(
    {
        "position": range(analysis.num_tokens),
        "token": analysis.tokens,
        "shown as": labels,
        "id": analysis.input_ids,
        "word": pd.array(analysis.word_ids, dtype="Int64"),
        "characters": [f"{s}–{e}" for s, e in analysis.offsets],
        "special": analysis.special_mask,
    }
)
st.dataframe(table, hide_index=True, height=min(400, 38 + 35 * len(table)))

similarity = token_static_similarity(analysis)
explain(
    "Each column is one token; each row a layer. The colour is the cosine similarity between the token's vector "
    "at that layer and its vector at layer 0 (the embedding layer). It starts at 1 and falls as context is mixed in."
)
rows = [
    {"layer": layer, "position": i, "token": labels[i], "cosine_to_layer_0": float(similarity[layer, i])}
    for layer in range(similarity.shape[0])
    for i in range(similarity.shape[1])
]
show_figure(
    token_layer_heatmap(similarity, labels, title="Cosine similarity to the embedding layer", colorbar="cosine"),
    name=file_stem(model.name, "static-similarity"),
    data=pd.DataFrame(rows),
    key="home-drift",
)
