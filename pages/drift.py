"""Drift: how far each layer moves the documents of a corpus away from their static embeddings."""

import pandas as pd
import streamlit as st

from core.drift import POOLINGS, REFERENCES, cls_table, drift_table
from core.models import pooler_sentence
from ui.cache import cached_corpus_embeddings
from ui.corpus_state import current_corpus, current_corpus_name, render_corpus_picker
from ui.explain import controls, explain
from ui.figures import show_figure
from ui.page_state import option
from ui.session import current_model, current_model_name, current_token_limit
from ui.shell import require_app_shell
from viz.common import file_stem
from viz.drift import cls_violin_figure, layer_violin_figure

require_app_shell()
st.title("Drift: how far each layer moves a document")
explain(
    "Does a word get a different embedding in every sentence, and where does that happen? Each document is pooled "
    "into one vector per layer; each point below is one document's cosine similarity between layer k and either its "
    "static embedding (the embedding layer's output, `hidden_states[0]`) or the layer before. Lower means moved further."
)
with controls("Corpus"):
    render_corpus_picker()
corpus = current_corpus()
model = current_model()
st.caption(f"{len(corpus)} documents from {current_corpus_name()}, through {model.name} ({model.num_layers} layers).")

left, middle, right = controls().columns([2, 2, 1])
# Options are short words because the URL holds the option as shown; the captions explain them.
reference = option(
    left.radio, "Compare layer k with", list(REFERENCES), captions=list(REFERENCES.values()), key="reference"
)
pooling = option(middle.selectbox, "Pooling (tokens → one vector)", list(POOLINGS), key="pooling")
middle.caption(POOLINGS[pooling])
adjusted = option(
    right.toggle,
    "Subtract baseline",
    key="adjust",
    help="Show similarity minus the baseline: how much more a document resembles its own reference layer than another document's.",
)

progress_slot = st.empty()
embeddings = cached_corpus_embeddings(
    current_model_name(),
    tuple(doc.text for doc in corpus),
    current_token_limit(),
    progress=lambda done, total: progress_slot.progress(done / total, text=f"Running the model: {done} of {total} documents"),
)
progress_slot.empty()

titles = [doc.title for doc in corpus]
documents = pd.DataFrame({"document": range(len(corpus)), "title": titles, "genre": [doc.genre for doc in corpus]})
if embeddings.truncated.any():
    cut = documents[embeddings.truncated].assign(
        tokens=embeddings.num_input_tokens[embeddings.truncated], read=embeddings.num_tokens[embeddings.truncated]
    )
    limit = current_token_limit()  # the deployment's cut, which may be below the model's own limit
    reader = model.name if limit >= model.max_tokens else f"this app analyses per text ({model.name} itself reads {model.max_tokens})"
    st.warning(
        f"{len(cut)} of {len(corpus)} documents have more tokens than {reader}: only their first {limit} tokens count.",
        icon=":material/content_cut:",
    )
    st.dataframe(cut, hide_index=True)

table = documents.merge(drift_table(embeddings, reference=reference, pooling=pooling), on="document")
if adjusted and len(corpus) < 2:
    st.info("The baseline compares different documents, so it needs at least two; showing raw similarity.")
    adjusted = False
kind = "static → layer" if reference == "static" else "layer → layer"
show_figure(
    layer_violin_figure(
        table,
        titles,
        value="adjusted_similarity" if adjusted else "cosine_similarity",
        value_label="cosine similarity − baseline" if adjusted else "cosine similarity",
        title=f"{kind}: cosine similarity per document ({pooling} pooling)",
        baseline=None if adjusted or len(corpus) < 2 else table.drop_duplicates("layer"),
    ),
    name=file_stem(model.name, "drift", reference, pooling, "adjusted" if adjusted else None),
    data=table,
    key="drift-violins",
)
explain(
    "**Baselines.** Vectors of a layer tend to share one direction (*anisotropy*, Ethayarajh 2019), so even unrelated "
    "documents have a high cosine in deep layers. The dotted line is that anisotropy: the mean cosine between different "
    "documents within layer k. The dashed line makes the same comparison as the violins but between different documents "
    "(document i's reference layer vs document j's layer k); *Subtract baseline* subtracts it, so 0 means "
    "\"no closer to its own reference than to another document's\"."
)

st.subheader("[CLS] static vs contextual")
if model.is_decoder:
    st.caption(
        f"{model.name} is a decoder: it has no [CLS], and under causal attention its first token sees only itself, "
        "so the first token's vectors do not depend on the rest of the document."
    )
else:
    explain("The static [CLS] vector is the same for every document (same token, position 0): the spread comes from context.", caption=True)
cls = documents.merge(cls_table(embeddings), on="document")
show_figure(
    cls_violin_figure(cls, titles, title="First token: static vector against the last layer"),
    name=file_stem(model.name, "drift-cls"),
    data=cls,
    key="drift-cls",
)
explain(
    "The first token's row of `hidden_states[0]` against its row of the last hidden state. "
    + (pooler_sentence(model) + " Its cosine with a hidden state compares vectors from different spaces and measures "
       "no drift, so it is not drawn." if not model.is_decoder else ""),
    caption=True,
)
with st.expander("What is `hidden_states[0]`?"):
    st.markdown(
        "It is the output of the embedding layer, not the raw word-embedding lookup: for BERT-style models the word "
        "embedding plus the position embedding plus the token-type embedding, passed through LayerNorm; for GPT-2 the "
        "word plus position embeddings. Layer k (1 … L) is the output of block k. For GPT-2 the last hidden state also "
        "has the final LayerNorm (`ln_f`) applied, so part of the last layer's change comes from that normalisation."
    )
