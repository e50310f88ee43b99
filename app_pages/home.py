"""Home: what the app shows, links to every page, and a first look at the sidebar's text."""

import pandas as pd
import streamlit as st

from core.maths.similarity import token_static_similarity
from core.model.tokens import token_labels
from core.teaching.about import facts_lines, static_similarity_sentence
from ui import results
from ui.caveats import with_final_norm_note
from ui.explain import explain
from ui.figures import show_figure
from ui.page_figures import static_similarity
from ui.page_state import end_page
from ui.session import current_analysis, current_model, current_model_name, current_text, current_token_limit
from viz.common import markdown_safe

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

TABLE_ROWS = 20
PAGE_LINKS = [
    ("app_pages/tour.py", "Guided tour: ten steps from tokens to a whole corpus, each with a live figure."),
    ("app_pages/attention.py", "Attention: every head of every layer as heatmaps, and BertViz's views."),
    ("app_pages/maxima.py", "Maxima: which token each token attends to most, layer by layer; rollout and norm-weighted attention."),
    ("app_pages/stats.py", "Head statistics: find the heads that look at the previous token, at one sink token, or everywhere."),
    ("app_pages/inside.py", "Inside one head: the query, key and value arithmetic, step by step, from the real weights."),
    ("app_pages/compare.py", "Compare two sentences: does a word get a different embedding in every sentence?"),
    ("app_pages/predictions.py", "Predictions: what the model itself would fill in or say next."),
    ("app_pages/effects.py", "Does it matter?: knock heads out and measure what changes; attribution and the logit lens."),
    ("app_pages/patching.py", "Patching: for a language model, which layer, position, head or MLP carries the answer."),
    ("app_pages/needle.py", "Needle in a haystack: for a language model, which heads fetch a fact hidden in a long text."),
    ("app_pages/long-context.py", "Long context: how far each head looks over a long text, attention sinks and sliding windows."),
    ("app_pages/flow.py", "Information flow: for a language model, which attention edges and MLPs carried what it holds at one token."),
    ("app_pages/drift.py", "Drift: how far each layer moves a whole corpus away from the static embeddings."),
    ("app_pages/senses.py", "Senses: one ambiguous word across many sentences, its senses pulled apart layer by layer."),
    ("app_pages/qk-map.py", "Queries and keys: one head's queries and keys over a whole corpus on one map, and every head's map at a glance."),
    ("app_pages/deck.py", "Deck: the figures you pinned, as slides to download as PowerPoint or one offline HTML file."),
    ("app_pages/room.py", "Workshop room: every learner's sentence on the projector's map, or a vote for the previous-token head."),
]
for page_file, description in PAGE_LINKS:
    st.page_link(page_file, label=description)

st.header("What the model saw")
model = current_model()
if model.is_encoder_decoder:
    from ui.seq2seq_views import tokens_page

    tokens_page()
    end_page()
analysis = current_analysis()
labels = token_labels(analysis)
kind = "decoder (each token sees itself and the tokens before it)" if model.is_decoder else "encoder (each token sees all tokens)"
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
        "word": ["" if w is None else str(w) for w in analysis.word_ids],  # a special token belongs to no word
        "characters": [f"{s}–{e}" for s, e in analysis.offsets],
        "special": analysis.special_mask,
    }
)
# Every row shown up to TABLE_ROWS (35 px a row and the header, 3 px of border): no scrollbar hiding two of 12 rows.
st.dataframe(table, hide_index=True, height=35 * (min(len(table), TABLE_ROWS) + 1) + 3)

with st.expander("About this model", expanded=True, icon=":material/info:"):
    facts = results.model_facts(current_model_name(), current_text(), max_tokens=current_token_limit())
    st.markdown("\n".join(f"- {markdown_safe(line)}" for line in facts_lines(facts)))
    st.caption(
        "Computed from the loaded model: the sink from your text, anisotropy from 8 short reference sentences. "
        "Findings in the literature were measured on other models; check them here before expecting them."
    )

similarity = token_static_similarity(analysis)
explain(with_final_norm_note(
    "Each column is one token; each row a hidden state. The colour is the cosine similarity between the token's "
    "vector at that hidden state and its vector at hidden state 0 (the embedding layer's output), which is 1 by "
    "definition. " + markdown_safe(static_similarity_sentence(similarity, analysis.special_mask)) + " A lower value "
    "means the layers have moved the vector: attention mixes in context, but the feed-forward layers and LayerNorm "
    "move it too, so this is not by itself a measure of context. Whether a word gets a different vector in every "
    "context is measured on the Drift page (self-similarity).", model
))
similar = static_similarity(model.name, analysis)
show_figure(similar.figure, name=similar.name, data=similar.data, key="home-drift")
