"""Senses: one ambiguous word across many sentences, its contextual embeddings projected layer by layer."""

from collections import Counter

import pandas as pd
import streamlit as st

from core.errors import AnalysisError
from core.maths.alignment import align_point
from core.maths.projection import METHOD_NAMES, MIN_POINTS_NONLINEAR, distinct_points, identical_points_note
from core.model.layers import HIDDEN_STATE_SELECT_LABEL, hidden_state_label, numbering_caption
from core.representations.senses import (
    MAX_SENTENCES,
    builtin_set,
    builtin_words,
    chance_sentence,
    knn_chance_level,
    measured_labels,
    parse_labelled_lines,
    read_sentence_csv,
    sentences_with_word,
    token_positions,
)
from ui import results
from ui.caveats import final_norm_note
from ui.errors import friendly_fragment
from ui.explain import controls, explain
from ui.figures import show_figure
from ui.page_state import end_page, option
from ui.placement import place_text, show_placement
from ui.progress_text import bar_progress
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_model, current_settings, current_text
from ui.umap_warmup import start_umap_warmup
from viz.common import file_stem, markdown_safe, plotly_safe
from viz.senses import OWN_SENTENCE, UNLABELLED, add_own_sentence, highlighted_sentence, sense_projection_figure, separation_figure

UPLOAD_KEY = "senses.upload"  # (file id, name, sentences, labels) of the last CSV read
SOURCES = ["Built-in sentences", "Your sentences", "Upload CSV", "Search the corpus"]
METHODS = {name: method for method, name in METHOD_NAMES.items()}
EXAMPLE_LINES = (
    "river: We sat on the bank of the river.\nriver: Ducks nest on the bank of the pond.\n"
    "river: The bank was muddy after the flood.\nmoney: The bank lent us the money.\n"
    "money: I paid the cheque into the bank.\nmoney: The bank raised its fees."
)

def corpus_sentences(word: str) -> tuple[list[str], list[str]]:
    """Sentences of the drift page's corpus that contain ``word``, labelled by their document's genre (or title)."""
    try:
        from ui.corpus_state import current_corpus, current_corpus_name  # noqa: PLC0415 - optional: without the drift corpus this page still works
    except ImportError:
        st.info("The drift page's corpus is not available in this version of the app.")
        return [], []
    st.caption(f"Searching {markdown_safe(current_corpus_name())} (choose it on the Drift page); sentences are labelled by genre.")
    return sentences_with_word(((d.text, d.genre or d.title) for d in current_corpus()), word)

def uploaded_sentences() -> tuple[list[str], list[str]]:
    """The sentences of the CSV uploaded on this page, kept for the session (an upload cannot live in a link)."""
    upload = st.file_uploader("A CSV file with a `sentence` column and an optional `label` column", type=["csv"],
                              key="senses.csv_file")
    kept = st.session_state.get(UPLOAD_KEY)
    if upload is not None and (kept is None or kept[0] != upload.file_id):
        try:
            if upload.size > current_settings().max_upload_bytes:
                raise AnalysisError(f"The file has {upload.size / 1e6:.1f} MB; this app accepts at most "
                                    f"{current_settings().max_upload_mb} MB of sentences.")
            kept = (upload.file_id, upload.name, *read_sentence_csv(upload.getvalue()))
        except AnalysisError as err:
            keeps = f" The page keeps using {kept[1]}." if kept else ""
            st.error(f"{err}{keeps}", icon=":material/error:")
        else:
            st.session_state[UPLOAD_KEY] = kept
    if kept is None:
        return [], []
    if upload is None:
        st.caption(f"Using {markdown_safe(kept[1])}, uploaded earlier in this session ({len(kept[2]):,} sentences); "
                   "upload another file to replace it.")
    return kept[2], kept[3]

def chosen_sentences(source: str, word: str) -> tuple[list[str], list[str]]:
    if source == SOURCES[0]:
        sentences, labels = builtin_set(word)
        if not sentences:
            st.info(f"There is no built-in set for “{markdown_safe(word)}”. Built-in words: {', '.join(builtin_words())}.")
        return sentences, labels
    if source == SOURCES[1]:
        text = option(st.text_area, "One sentence per line, optionally starting with a label such as `river:`",
                      value=EXAMPLE_LINES, key="lines", height=160)
        return parse_labelled_lines(text)
    if source == SOURCES[2]:
        return uploaded_sentences()
    return corpus_sentences(word)


def position_balance_sentence(model, word: str, sentences: list[str], labels: list[str], first_knn: float,
                              chance: float) -> str:
    """Whether, with this model's tokenizer, the word's token positions have the same counts in every sense, and
    what that means for ``first_knn``, the 1-NN accuracy at hidden state 0, against the ``chance`` line."""
    by_sense = {
        label: sorted(Counter(token_positions(model, [s for s, l in zip(sentences, labels) if l == label], word)).items())
        for label in sorted(set(labels))
    }
    if len({tuple(counts) for counts in by_sense.values()}) == 1:
        return (
            f"With {model.name}'s tokenizer the word sits at the same token positions in every sense of this set (the "
            "same count at each position), so at hidden state 0, where its vector depends only on its token and "
            f"position, the senses cannot be told apart{chance_sentence(first_knn, chance)} What rises above chance "
            "later comes from context."
        )
    return (
        f"With {model.name}'s tokenizer the word's token positions differ between the senses of this set, so part of "
        "the separation, even at hidden state 0, can come from position alone."
    )


st.title("Senses: one word, many sentences")
explain(
    "A static embedding gives **bank** one vector whatever the sentence; each layer then mixes in the context, "
    "so river banks and money banks drift apart. Each point is one occurrence of the word, coloured by its sense."
)
model = current_model()
stop_unless_one_stack("Senses follows one word through the layers of a single stack over many sentences, which have "
                      "no targets for the decoder, so this page does not apply.")
options = controls()
source = option(options.segmented_control, "Sentences", SOURCES, default=SOURCES[0], key="source", required=True)
word = (option(options.selectbox, "Word", builtin_words(), key="word", accept_new_options=True,
                     help="Pick a built-in word or type your own.") or "bank").strip()
sentences, labels = chosen_sentences(source, word)
if len(sentences) > MAX_SENTENCES:
    st.warning(f"Only the first {MAX_SENTENCES:,} of {len(sentences):,} sentences are used.")
    sentences, labels = sentences[:MAX_SENTENCES], labels[:MAX_SENTENCES]
if not sentences:
    st.info("Add some sentences that contain the word to see its senses.")
    end_page()

bar = st.empty()
occurrences = results.occurrences(
    model.name, tuple(sentences), word, progress=bar_progress(bar, "Running the model: {done}/{total} sentences")
)
bar.empty()
if occurrences.missing:
    with st.expander(f"{len(occurrences.missing)} sentence(s) without “{markdown_safe(word)}” (whole word, any case), left out"):
        st.dataframe(pd.DataFrame({"sentence": [sentences[i] for i in occurrences.missing]}), hide_index=True)
if occurrences.count == 0:
    st.warning(f"“{markdown_safe(word)}” does not occur as a whole word in any of these sentences.")
    end_page()

@friendly_fragment
def layer_and_projection(model, source: str, word: str, sentences: list[str], labels: list[str], occurrences) -> None:
    """Layer slider, projection and the two charts they change: moving them reruns only this part, not the model."""
    point_labels = [labels[i] for i in occurrences.sentence_ids]
    left, right = st.columns([3, 2])
    layer = option(
        left.slider, HIDDEN_STATE_SELECT_LABEL, 0, model.num_layers, model.num_layers, key="layer",
        help="The slider counts hidden states. Hidden state 0 is the embedding layer's output (token + position "
        "embeddings, for BERT after LayerNorm, before any attention). " + numbering_caption(model.num_layers),
    )
    method_name = option(right.segmented_control, "Projection", list(METHODS), default="UMAP", key="method", required=True)
    if layer == model.num_layers and (note := final_norm_note(model)):
        st.caption(note)
    method = METHODS[method_name]
    distinct = distinct_points(occurrences.vectors[layer], method)  # identical vectors are drawn as one point
    if method != "pca" and distinct.count < MIN_POINTS_NONLINEAR:
        st.info(f"{method_name} needs at least {MIN_POINTS_NONLINEAR} different occurrence vectors; with {distinct.count} "
                "the page shows PCA.")
        method, method_name = "pca", METHOD_NAMES["pca"]
        distinct = distinct_points(occurrences.vectors[layer], method)
    if (identical := identical_points_note(distinct)) is not None:
        st.caption(identical)
    warmup = start_umap_warmup(now=method == "umap")
    if method == "umap" and warmup.is_alive():
        with st.status("Preparing UMAP: numba compiles it once per server start (10 s or more). PCA is ready at once.") as status:
            warmup.join()
            status.update(label="UMAP is ready.", state="complete")
    if model.is_decoder:
        st.caption(f"{markdown_safe(model.name)} is a decoder: each occurrence sees only the words before it, never the words after.")

    if method == "tsne":  # fitted anew for every hidden state: 8-12 s for the 24 built-in sentences on 2 busy cores
        st.caption("t-SNE is fitted anew for every hidden state and word, which takes several seconds (about 10 s for "
                   "the 24 built-in sentences on a small server); PCA is much faster.")
    with st.spinner(f"Projecting {occurrences.count} points with {method_name}…"):
        coords = results.aligned_projections(model.name, tuple(sentences), word, layer, method)
        # The sidebar's text, if it has the word, is placed into the same fitted map (never a refit),
        # then moved by the same alignment as the map's points.
        placed = place_text(model.name, word, tuple(sentences), point_labels, current_text(), layer, method)
        placed_xy = None
        if placed is not None and placed.xy is not None and placed.coords is not None:
            placed_xy = align_point(placed.coords, coords, placed.xy)
    hovers = [highlighted_sentence(sentences[i], span)
              + (f"<br>(drawn as one point with {n - 1} identical other{'s' if n > 2 else ''})" if n > 1 else "")
              for i, span, n in zip(occurrences.sentence_ids, occurrences.spans, distinct.copies, strict=True)]
    points = pd.DataFrame({
        "sentence_id": occurrences.sentence_ids, "sentence": [sentences[i] for i in occurrences.sentence_ids],
        "label": point_labels, "start": [s for s, _ in occurrences.spans], "end": [e for _, e in occurrences.spans],
        "layer": layer, "method": method_name, "x": coords[:, 0], "y": coords[:, 1], "identical_points": distinct.copies,
    })
    plot, chart = st.columns([3, 2])
    with plot:
        title = f"“{plotly_safe(word)}” at {hidden_state_label(layer)}: {method_name} of {occurrences.count} occurrences"
        figure = sense_projection_figure(coords, point_labels, hovers, title=title, axis=method_name)
        if placed_xy is not None:
            figure = add_own_sentence(figure, placed_xy, highlighted_sentence(placed.text, placed.span))
            points = pd.concat([points, pd.DataFrame([{
                "sentence_id": -1, "sentence": placed.text, "label": OWN_SENTENCE, "start": placed.span[0], "end": placed.span[1],
                "layer": layer, "method": method_name, "x": placed_xy[0], "y": placed_xy[1], "identical_points": 1}])],
                ignore_index=True)
        show_figure(figure, name=file_stem(model.name, "senses", word, method, "layer", layer), data=points, key="senses-projection", share=0.6)
        show_placement(placed, word, layer)
    with chart:
        table = results.separations(model.name, tuple(sentences), word, tuple(point_labels))
        interval = results.separation_intervals(model.name, tuple(sentences), word, tuple(point_labels))
        chance = knn_chance_level(point_labels)
        show_figure(separation_figure(table, layer, chance=chance, interval=interval), name=file_stem(model.name, "senses", word, "separation"),
                    data=table.merge(interval, on="layer").assign(knn_chance=chance), key="senses-separation", share=0.4)
        measured, left_out = measured_labels(point_labels)
        if len(measured) < 2:
            st.info(f"The scores need at least two labels with two or more occurrences each ({UNLABELLED} points do not count).")
        elif left_out:
            st.caption(f"Labels with a single occurrence are left out of the scores: {markdown_safe(', '.join(left_out))}.")
        explain(
            "UMAP and t-SNE distort distances, so how far apart the clusters look means little; this chart, measured in the "
            f"model's own {model.hidden_size}-dimensional space (cosine), is the honest number. 1-NN accuracy: the share of "
            "occurrences whose most similar other occurrence has the same sense; the dashed line is what it would be if the "
            f"senses were assigned at random ({chance:.2f} here). Silhouette: −1 to 1, 0 means no cluster structure, higher "
            f"is better separated. The shaded bands are 90% bootstrap intervals over the {occurrences.count} occurrences: "
            "with this few points a difference inside a band may be noise.",
            caption=True,
        )
        if source == SOURCES[0]:
            st.caption(position_balance_sentence(model, word, sentences, labels, float(table["knn_accuracy"].iloc[0]), chance))

layer_and_projection(model, source, word, sentences, labels, occurrences)
