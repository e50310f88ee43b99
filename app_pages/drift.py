"""Drift: how far each layer moves the documents of a corpus away from their static embeddings, and how much
a word's vector depends on its context (self-similarity)."""

import pandas as pd
import streamlit as st

from core.model.layers import numbering_caption
from core.model.models import pooler_sentence
from core.representations.contextuality import MIN_OCCURRENCES, contextuality_sentence
from core.representations.drift import POOLINGS, REFERENCES, baseline_sentences, baseline_table, cls_table, drift_table
from ui import results
from ui.caveats import with_final_norm_note
from ui.corpus_state import current_corpus, current_corpus_name, render_corpus_picker
from ui.errors import friendly_fragment
from ui.explain import controls, explain
from ui.figures import show_figure
from ui.page_state import option
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_model, current_model_name, current_token_limit
from viz.common import file_stem, markdown_safe
from viz.drift import cls_violin_figure, contextuality_figure, documents_phrase, layer_violin_figure

st.title("Drift: how far each layer moves a document")
explain(
    "How far does each layer move a text away from where it started? Each document is pooled into one vector per "
    "hidden state; each point below is one document's cosine similarity between hidden state k and either its static "
    "embedding (the embedding layer's output, `hidden_states[0]`) or the hidden state before. Lower means moved further. "
    "This measures the whole transformation (attention, the feed-forward layers and LayerNorm together), not how much "
    "a word depends on its context: a layer that moved every text the same way would lower it too. Whether a word gets "
    "a different vector in every context is answered further down, by **self-similarity**."
)
stop_unless_one_stack("Drift pools one text into one vector per layer of a single stack; a corpus has no targets for "
                      "the decoder, so this page does not apply.")
with controls("Corpus"):
    render_corpus_picker()
corpus = current_corpus()
model = current_model()
st.caption(with_final_norm_note(f"{documents_phrase(len(corpus))} from {markdown_safe(current_corpus_name())}, through "
                                 f"{markdown_safe(model.name)} ({model.num_layers} layers).", model))

titles = [doc.title for doc in corpus]
documents = pd.DataFrame({"document": range(len(corpus)), "title": titles, "genre": [doc.genre for doc in corpus]})

def self_similarity(model, context, adjusted: bool) -> None:
    """Self-similarity and intra-sentence similarity (Ethayarajh 2019) beside their random-word baseline."""
    st.header("Does a word get a different vector in every context?")
    st.markdown(
        "**Self-similarity** (Ethayarajh 2019): for each word that occurs at least "
        f"{MIN_OCCURRENCES} times in the corpus, the mean cosine between its vectors in different documents, averaged "
        "over those words. 1 would mean one vector whatever the context, as a static embedding; lower means the context "
        "changes it. **Intra-sentence similarity**: the mean cosine between each word and its sentence's mean word vector. "
        "Both are read against the baseline of random words from different documents, which *Subtract baseline* removes."
    )
    if context.num_words == 0:
        st.info(
            f"No word occurs {MIN_OCCURRENCES} times or more in at least two documents of this corpus, so there is no "
            "self-similarity to show. Add documents, or choose the sample corpus.",
            icon=":material/info:",
        )
        return  # an empty chart would say nothing more
    show_figure(
        contextuality_figure(
            context.table,
            adjusted=adjusted,
            title=f"Self-similarity of {context.num_words} words and intra-sentence similarity of {context.num_sentences} sentences",
        ),
        name=file_stem(model.name, "self-similarity", "adjusted" if adjusted else None),
        data=context.table,
        key="drift-contextuality",
    )
    if context.num_words:
        st.caption(markdown_safe(contextuality_sentence(context.table)))
        with st.expander("Per word"):
            last = context.words[context.words["layer"] == model.num_layers].sort_values("self_similarity")
            st.dataframe(last.rename(columns={"self_similarity": f"self-similarity at hidden state {model.num_layers}"}),
                         hide_index=True)

def corpus_embeddings(corpus: list, progress=None):
    """Every pooling of every hidden state of the corpus, from one cached pass of the model (which also measures the
    words' self-similarity: ``contextuality``)."""
    return results.corpus_passes(current_model_name(), tuple(doc.text for doc in corpus),
                                 max_tokens=current_token_limit(), progress=progress)[0]


def contextuality(corpus: list):
    """The words' self-similarity per hidden state, from the same cached pass as ``corpus_embeddings``."""
    return results.corpus_passes(current_model_name(), tuple(doc.text for doc in corpus),
                                 max_tokens=current_token_limit())[1]

@friendly_fragment
def drift_violins(model, corpus: list, documents: pd.DataFrame, titles: list[str]) -> None:
    """Reference, pooling and baseline options and the violins they change: a change reruns only this part and
    reuses the corpus embeddings."""
    left, middle, right = controls().columns([2, 2, 1])
    # Options are short words because the URL holds the option as shown; the captions explain them.
    reference = option(
        left.radio, "Compare hidden state k with", list(REFERENCES), captions=list(REFERENCES.values()), key="reference"
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
    embeddings = corpus_embeddings(
        corpus, progress=lambda done, total: progress_slot.progress(done / total, text=f"Running the model: {done} of {documents_phrase(total)}"),
    )
    progress_slot.empty()
    context = contextuality(corpus)

    if embeddings.truncated.any():
        cut = documents[embeddings.truncated].assign(
            tokens=embeddings.num_input_tokens[embeddings.truncated], read=embeddings.num_tokens[embeddings.truncated]
        )
        limit = current_token_limit()  # the deployment's cut, which may be below the model's own limit
        reader = model.name if limit >= model.max_tokens else f"this app analyses per text ({model.name} itself reads {model.max_tokens})"
        st.warning(
            f"{len(cut)} of {documents_phrase(len(corpus))} {'has' if len(cut) == 1 else 'have'} more tokens than {reader}: "
            f"only their first {limit} tokens count.",
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
            token_baseline=None if adjusted or len(corpus) < 2 else context.table,
            adjusted=adjusted,
        ),
        name=file_stem(model.name, "drift", reference, pooling, "adjusted" if adjusted else None),
        data=table,
        key="drift-violins",
    )
    explain(
        "**Baselines.** The vectors of one hidden state can share a common direction (*anisotropy*, Ethayarajh 2019), "
        "which raises every cosine in it. The dotted line is the mean cosine between different documents within hidden "
        "state k; the dash-dotted line the same for single words (random words from different documents, Ethayarajh's "
        "own baseline). The dashed line makes the same comparison as the violins but between different documents "
        "(document i's reference vs document j's hidden state k); *Subtract baseline* subtracts it, so 0 means "
        "\"no closer to its own reference than to another document's\".  \n"
        + (
            markdown_safe(baseline_sentences(baseline_table(embeddings, pooling=pooling), context.table, pooling=pooling))
            if len(corpus) >= 2
            else "With a single document there is no baseline."
        )
    )
    self_similarity(model, context, adjusted)

drift_violins(model, corpus, documents, titles)
embeddings = corpus_embeddings(corpus)

st.header(("First token" if model.is_decoder else "[CLS]") + ": static vs contextual")
if model.is_decoder:
    st.caption(
        f"{model.name} is a decoder: under causal attention its first token sees only itself, "
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
        "word plus position embeddings. " + numbering_caption(model.num_layers) + " For GPT-2 the last hidden state "
        "also has the final LayerNorm (`ln_f`) applied, so part of the last layer's change comes from that normalisation."
    )
