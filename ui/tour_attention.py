"""The guided tour's attention track, "From tokens to a corpus" (``?track=attention``; the only track for a model that
is not a causal language model): ten steps from a text's tokens to a whole corpus, each with one live figure for the
model on screen. The page (app_pages/tour.py) steps through ``ATTENTION_STEPS``; the shared kit is ``ui/tour_kit.py``,
the sentences' wording ``viz/tour_sentences.py``."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import streamlit as st

from core.attention_heads.attention import head_attention
from core.attention_heads.head_checks import head_facts, largest_difference
from core.attention_heads.inside_head import compute_head
from core.causal.effects import EffectsError
from core.causal.effects_compare import sentence_cosine
from core.maths.numbers import percent
from core.model.layers import HIDDEN_STATE_SELECT_LABEL, head_code, hidden_state_label, numbering_caption
from core.model.recording import UnsupportedArchitecture
from core.model.tokens import token_labels
from core.representations import compare
from core.representations.drift import drift_table
from core.representations.senses import builtin_set
from core.teaching.examples import BANK_MONEY, BANK_RIVER
from core.teaching.tour import (
    added_special_tokens,
    clearest_sink_head,
    control_lead,
    falls_at_every_layer,
    first_builtin_word,
    knockout_shares,
    previous_is_sink,
    sink_heads,
    split_words,
    tour_query,
    word_lookups,
)
from ui import results
from ui.caveats import final_norm_note
from ui.corpus_state import current_corpus, current_corpus_name
from ui.page_state import option
from ui.placement import place_text, verdict
from ui.session import MAX_TEXT_CHARS, current_analysis, current_model, current_model_name, current_text, current_token_limit, presentation_mode
from ui.tour_kit import figure, full_page, not_here, previous_token_head, say, sink_names, try_this
from viz import attention as va
from viz import attention_tables as vt
from viz.common import COLORBLIND_SAFE, markdown_safe, plotly_safe
from viz.drift import documents_phrase, layer_violin_figure
from viz.effects import knockout_figure
from viz.inside import matrix_heatmap, stacked_token_bars
from viz.senses import add_own_sentence, highlighted_sentence, sense_projection_figure
from viz.tour import cosine_bars, same_vector_chart, token_table_figure
from viz.tour_sentences import KNOCKOUT_CAVEAT, id_phrase, knockout_sentences

SAME_SENSE_CONTROL = "We had a picnic on the grassy bank of the stream."
HELD_OUT = "I sat on the bank and fished."
LOOKUP_COMPONENTS = 64


# --- what every step draws with --------------------------------------------------------------


def own_text(label: str, key: str, default: str) -> str:
    return option(st.text_input, label, value=default, key=key, max_chars=MAX_TEXT_CHARS)


def two_sentences() -> tuple[list, str | None]:
    """The step's own sentences A and B (editable) and the word they share ("bank" if it is shared)."""
    name, limit = current_model_name(), current_token_limit()  # this run's, not the module's
    left, right = st.columns(2)
    texts = [
        option(side.text_input, f"Sentence {n}", value=default, key=n.lower(), max_chars=MAX_TEXT_CHARS)
        for side, n, default in zip((left, right), "AB", (BANK_RIVER, BANK_MONEY))
    ]
    if not all(t.strip() for t in texts):
        return [], None
    analyses = [results.analyses(name, t, max_tokens=limit) for t in texts]
    shared = compare.shared_words(*analyses)
    word = "bank" if "bank" in shared else max(shared, key=len, default=None)
    return analyses, word


# --- the steps ---------------------------------------------------------------------------------


def step_tokens() -> None:
    model = current_model()  # this run's, not the module's
    analysis = current_analysis()
    labels = token_labels(analysis)
    added, split = added_special_tokens(analysis), split_words(analysis)
    say(
        f"{markdown_safe(model.name)} does not read letters: it cuts your text (the sidebar's) into **{analysis.num_tokens} "
        f"tokens**, and each token is a row number, its **id**, in a vocabulary of {len(model.tokenizer):,} entries. "
        + (f"{len(added)} of them are special tokens the tokenizer adds ({markdown_safe(', '.join(dict.fromkeys(added)))}), "
           "not words you typed. " if added else "This tokenizer adds no special tokens to the text. ")
        + (f"Some words are split into pieces: {markdown_safe(', '.join(split[:6]))}." if split
           else "Every word of this text is a single token.")
    )
    figure(token_table_figure(labels, list(analysis.input_ids), list(analysis.special_mask), title=f"Your text as {model.name} reads it"),
           "tokens", pd.DataFrame({"position": range(analysis.num_tokens), "token": labels, "id": analysis.input_ids,
                                   "special": analysis.special_mask}))
    try_this("type a rare or made-up word in the sidebar, such as *unbelievability*, and watch it split into pieces.")
    full_page("./", "Open the token table on the Home page")


def step_static() -> None:
    model = current_model()  # this run's, not the module's
    analyses, word = two_sentences()
    if word is None:
        not_here("The two sentences need a word in common (and some text each).")
        return
    lookups, ids, similarity = word_lookups(model, analyses, word)
    table = model.model.get_input_embeddings().weight
    w = markdown_safe(word)
    say(
        f"Before any layer runs, every token is looked up in the model's **word-embedding table** ({table.shape[0]:,} rows "
        f"× {table.shape[1]} numbers). "
        + (f"“{w}” is {id_phrase(ids[0])} in both sentences, so both get **the same row**: the cosine similarity of the "
           f"two lookups is **{similarity:.4f}**. The river and the money make no difference yet."
           if ids[0] == ids[1] else
           f"Here “{w}” became different tokens ({id_phrase(ids[0])} in A, {id_phrase(ids[1])} in B), so even its lookups differ: cosine "
           f"{similarity:.4f}.")
    )
    shown = lookups[:, :LOOKUP_COMPONENTS]
    figure(matrix_heatmap(shown, [f"“{word}” in A", f"“{word}” in B"], row_title="",
                          title=f"Word-embedding rows of “{word}” (first {shown.shape[1]} of {table.shape[1]} numbers)",
                          colorbar="value", symmetric=True),
           "static-embedding", pd.DataFrame(lookups, index=["A", "B"]).T.rename_axis("component").reset_index())
    try_this("change *river* in sentence A to *money*: the two rows stay identical, because a lookup never sees the other words.")
    full_page("compare", "Open the two sentences on the Compare page",
              {"text_a": analyses[0].text, "text_b": analyses[1].text, "word": word})


def step_position() -> None:
    model = current_model()  # this run's, not the module's
    analyses, word = two_sentences()
    if word is None:
        not_here("The two sentences need a word in common (and some text each).")
        return
    lookup = compare.lookup_similarity(model, *analyses, word)
    at_zero = float(compare.word_similarity(*analyses, word)["cosine_similarity"].iloc[0])
    positions = [compare.word_positions(a, word)[0] for a in analyses]
    embeddings = getattr(model.model, "embeddings", None)
    parts = ["word", "position"] + (["token-type"] if hasattr(embeddings, "token_type_embeddings") else [])
    norm = " and then applies LayerNorm" if hasattr(embeddings, "LayerNorm") else ""
    w = markdown_safe(word)
    where = (f"“{w}” is token {positions[0]} in A and token {positions[1]} in B, so it gets different position embeddings"
             if positions[0] != positions[1] else f"“{w}” is token {positions[0]} in both, so it gets the same position embedding")
    say(
        f"The first hidden state, `hidden_states[0]`, is not the lookup: the embedding layer adds {' + '.join(parts)} "
        f"embeddings{norm}. {where}: the cosine of its two `hidden_states[0]` vectors is **{at_zero:.4f}**, against "
        f"**{lookup:.4f}** for the lookups. No attention has run yet: the difference is position, not meaning."
    )
    figure(cosine_bars(["word-embedding lookup", "hidden_states[0]"], [lookup, at_zero],
                       title=f"“{word}” in A vs B, before any attention"),
           "position", pd.DataFrame({"vector": ["word-embedding lookup", "hidden_states[0]"], "cosine_similarity": [lookup, at_zero]}))
    try_this(f"put the same number of tokens before “{w}” in both sentences: its `hidden_states[0]` vectors become identical.")
    full_page("compare", "Open every layer on the Compare page",
              {"text_a": analyses[0].text, "text_b": analyses[1].text, "word": word})


def step_one_head() -> None:
    model, present = current_model(), presentation_mode()  # this run's, not the module's
    analysis = current_analysis()
    best, chance, _, roles = previous_token_head(analysis)
    if best is None:
        not_here("Your text has no ordinary token with a token before it, so there is no previous-token head to find.")
        return
    layer, head, share = best
    intro = (f"Each of the {model.num_layers * model.num_heads} attention heads decides, for every token, how much to "
             "take from every other token. ")
    if previous_is_sink(roles):
        before = "the first token" if roles.start_is_first_token else "a [CLS]/[SEP]-like special token"
        say(intro + f"On your text the token just before every word is {before}, so a head that looks at the "
            f"previous token cannot be told from one that parks its attention there: **layer {layer}, head {head}** "
            f"gives it **{percent(share, 1)}** (an even spread would give {percent(chance, 1)}). Type a longer text in the sidebar to "
            "find a real previous-token head.")
    else:
        say(intro + f"Measured on your text, **layer {layer}, head {head}** attends most to the previous token: on "
            f"average **{percent(share, 1)}** of a token's attention goes to the token just before it, where spreading "
            f"attention evenly would give {percent(chance, 1)}. "
        + ("In the heatmap (rows = the token looking, columns = the tokens looked at) that is the bright line just left "
           "of the diagonal." if share > 0.5 else
           "No head of this model is a clean previous-token head on this text; this is the closest."))
    labels = token_labels(analysis)
    figure(va.head_figure(head_attention(model, analysis, layer, head), labels, title=f"{model.name} · layer {layer}, head {head}",
                          causal=model.is_decoder, colorscale=COLORBLIND_SAFE, large=present),
           f"layer{layer}-head{head}", vt.matrix_table(head_attention(model, analysis, layer, head), labels, causal=model.is_decoder))
    try_this("type a longer sentence in the sidebar: a previous-token head keeps its diagonal on any text.")
    full_page("attention", "Open this head on the Attention page", {"source": "raw", "layer": layer, "head": head, "view": "one head"})


def step_every_head() -> None:
    model, present = current_model(), presentation_mode()  # this run's, not the module's
    analysis = current_analysis()
    best, _, table, roles = previous_token_head(analysis)
    total = model.num_layers * model.num_heads
    if table[["first", "end"]].isna().all(axis=None):
        sinks = "Your text has no ordinary token to measure the sink heads on."
    else:
        sinks = (f"In **{sink_heads(table)} of the {total}** heads more than half of the attention goes to "
                 f"{sink_names(roles)}, often read as parking attention when a head has nothing to look at.")
    say(
        f"All {model.num_layers} layers × {model.num_heads} heads of your text at once, each thumbnail a heatmap like the "
        f"last step's. {sinks}"
        + (f" The previous-token head of the last step is layer {best[0]}, head {best[1]}."
           if best and not previous_is_sink(roles) else "")
    )
    figure(va.overview_figure(analysis.attentions, title=f"{model.name}: every layer × head", causal=model.is_decoder,
                              colorscale=COLORBLIND_SAFE, large=present), "every-head", table)
    try_this("make your text twice as long and see which thumbnails keep their pattern.")
    full_page("attention", "Open the overview on the Attention page", {"source": "raw"})


def step_inside() -> None:
    model = current_model()  # this run's, not the module's
    analysis = current_analysis()
    best, _, _, _ = previous_token_head(analysis)
    layer, head = (best[0], best[1]) if best else (0, 0)
    try:
        step = compute_head(model, analysis, layer, head)
    except UnsupportedArchitecture as err:
        not_here(str(err))
        return
    labels = token_labels(analysis)
    query, facts = tour_query(analysis), head_facts(step)
    d, kept, top = facts.head_size, step.keep_mask[query], int(step.weights[query].argmax())
    difference = largest_difference(step, head_attention(model, analysis, layer, head))
    scale = f"1/√{d}" if facts.standard_scale else "this model's configured scale"
    who = markdown_safe(labels[query])
    say(
        f"What does layer {layer}, head {head} compute for “{who}” (token {query})? It turns each token's vector into a "
        f"**query** and a **key** of {d} numbers, takes the dot product q·k of this token's query with every key, "
        f"multiplies by {step.scale:.4f} ({scale}), and a **softmax** turns the scores into weights that sum to 1: the "
        f"largest, {step.weights[query, top]:.2f}, goes to “{markdown_safe(labels[top])}”. The head's output is the "
        f"weighted sum of the **value** vectors. Recomputed from the model's weights, these weights match the model's "
        f"own attention to within {difference:.1e}."
        + (" A decoder's token cannot look ahead: later tokens get −∞ before the softmax." if analysis.is_decoder else "")
    )
    rows = [("q·k", step.scores[query], None), ("scaled", step.scaled[query], kept), ("weight", step.weights[query], kept)]
    figure(stacked_token_bars(rows, labels, title=f"From scores to weights for “{labels[query]}” (layer {layer}, head {head})"),
           "inside", pd.DataFrame({"key token": labels, "q·k": step.scores[query], "scaled": step.scaled[query],
                                   "weight": step.weights[query]}))
    try_this("pick another query token on the full page and see which key wins.")
    full_page("inside", "Open every step on the Inside one head page", {"layer": layer, "head": head, "query": query})


def step_same_vector() -> None:
    model, name, limit = current_model(), current_model_name(), current_token_limit()  # this run's, not the module's
    analyses, word = two_sentences()
    control_text = own_text("Sentence C: the same sense as A (the control)", "c", SAME_SENSE_CONTROL)
    if word is None or not control_text.strip():
        not_here("The sentences need some text each and a word in common.")
        return
    control = results.analyses(name, control_text, max_tokens=limit)
    if word not in compare.shared_words(analyses[0], control):
        not_here(f"Sentence C needs the word “{markdown_safe(word)}” too.")
        return
    pair = compare.word_similarity(*analyses, word)
    same = compare.word_similarity(analyses[0], control, word)
    lookup = compare.lookup_similarity(model, *analyses, word)
    gap = same["cosine_similarity"].to_numpy() - pair["cosine_similarity"].to_numpy()  # > 0: the control is closer
    last = len(pair) - 1
    w = markdown_safe(word)
    say(
        f"After each layer, is “{w}” still the same vector? A against B: cosine "
        f"**{pair['cosine_similarity'].iloc[0]:.3f}** at hidden state 0 and **{pair['cosine_similarity'].iloc[-1]:.3f}** "
        f"at {hidden_state_label(last, model.num_layers)}. The control, A against C (the same sense as A), ends at "
        f"**{same['cosine_similarity'].iloc[-1]:.3f}**. "
        + control_lead(gap)
        + (f" (A decoder's token sees only the words before it: words after “{w}” cannot change its vector.)"
           if model.is_decoder else "")
        + (f" {note}" if (note := final_norm_note(model)) else "")
    )
    fig = same_vector_chart(pair, same, word, lookup)
    figure(fig, "same-vector", pair.rename(columns={"cosine_similarity": "a_vs_b"}).assign(a_vs_c=same["cosine_similarity"]))
    try_this("change *river* in sentence A to *money* and watch the last layers: now A and B are the same-sense pair.")
    full_page("compare", "Open the Compare page", {"text_a": analyses[0].text, "text_b": analyses[1].text, "word": word})


def step_senses() -> None:
    model, name = current_model(), current_model_name()  # this run's, not the module's
    sidebar_word = first_builtin_word(current_text())
    if sidebar_word:
        text, word, whose = current_text(), sidebar_word, "the sidebar's text"
    else:
        text = own_text("A sentence with bank, bass, bat, crane, mouse, plant, seal or spring", "sentence", HELD_OUT)
        word, whose = first_builtin_word(text), "the sentence above"
    if not word:
        not_here("Type a sentence with one of the words that have a built-in sense set.")
        return
    sentences, senses = builtin_set(word)
    occurrences = results.occurrences(name, tuple(sentences), word)
    labels = [senses[i] for i in occurrences.sentence_ids]
    layer = option(st.slider, HIDDEN_STATE_SELECT_LABEL, 0, model.num_layers, model.num_layers, key="layer",
                   help="The slider counts hidden states. " + numbering_caption(model.num_layers))
    placed = place_text(name, word, tuple(sentences), labels, text, layer, "pca") if occurrences.count >= 2 else None
    if placed is None:
        not_here(f"The model did not read “{markdown_safe(word)}” in this text (it may lie past the token limit).")
        return
    hovers = [highlighted_sentence(sentences[i], span) for i, span in zip(occurrences.sentence_ids, occurrences.spans, strict=True)]
    say(
        f"Each dot is “{markdown_safe(word)}” in one of {occurrences.count} built-in sentences labelled by sense, at "
        f"{hidden_state_label(layer, model.num_layers)}, drawn with PCA; the black star is {whose}, placed into the same map. "
        f"{verdict(placed, layer)}"
        + (f" {note}" if layer == model.num_layers and (note := final_norm_note(model)) else "")
    )
    fig = sense_projection_figure(placed.coords, labels, hovers, title=f"“{plotly_safe(word)}” at hidden state {layer}: PCA", axis="PCA")
    figure(add_own_sentence(fig, placed.xy, highlighted_sentence(placed.text, placed.span)), f"senses-{word}-hidden-state-{layer}",
           placed.votes)
    try_this("drag the slider down to hidden state 0 and find the first hidden state from which your sentence's "
             "neighbours agree.")
    link = {"word": word, "layer": layer, "method": "PCA", "source": "Built-in sentences"} | ({} if sidebar_word else {"text": text})
    full_page("senses", "Open the Senses page with your sentence", link)


def step_explain() -> None:
    model, name, limit = current_model(), current_model_name(), current_token_limit()
    analysis = current_analysis()
    previous, chance, table, roles = previous_token_head(analysis)
    if previous_is_sink(roles):  # "the token before" is the sink itself: no previous-token head to contrast
        previous = None
    sink = clearest_sink_head(table)
    chosen = list(dict.fromkeys(h[:2] for h in (sink, previous) if h is not None))  # the same head once
    if not chosen:
        say(KNOCKOUT_CAVEAT)
        not_here("Your text has no ordinary token to measure where a head looks, so there is no head to single out.")
        return
    try:
        with st.spinner("Running your text with one head switched off…"):
            ablated = [results.analyses(name, current_text(), max_tokens=limit, ablation=((head,), "zero"))
                       for head in chosen]
    except (UnsupportedArchitecture, EffectsError) as err:
        say(KNOCKOUT_CAVEAT)
        not_here(f"Switching a head off is not possible here: {markdown_safe(str(err))}")
        return
    changes = [1.0 - sentence_cosine(analysis, run) for run in ablated]
    sinks_of, previous_of, mean_sink = knockout_shares(table, chosen)
    total = model.num_layers * model.num_heads
    say(knockout_sentences(sink, previous, chance, dict(zip(chosen, changes)), sink_names(roles), total, mean_sink))
    names = [head_code(layer, head, model.num_layers, model.num_heads) for layer, head in chosen]
    fig = knockout_figure(names, {f"on {sink_names(roles)}": sinks_of, "on the previous token": previous_of}, changes,
                          chance=chance, title=f"{model.name}: switching one head off (zero ablation)")
    figure(fig, "knock-out", pd.DataFrame({"head": names, "attention share on start/end tokens": sinks_of,
                                           "attention share on the previous token": previous_of,
                                           "cosine, plain vs ablated sentence embedding": [1 - c for c in changes]}))
    try_this("knock out a head of your own on the Does it matter? page, or several at once, and compare the importance map "
             "with the attention those heads give a token.")
    full_page("effects", "Open this knock-out on the Does it matter? page",
              {"heads": " ".join(names), "ablation": "zero", "measure": "sentence embedding"})


def step_corpus() -> None:
    model, name, limit = current_model(), current_model_name(), current_token_limit()
    corpus = current_corpus()
    bar = st.empty()
    embeddings = results.corpus_passes(
        name, tuple(doc.text for doc in corpus), max_tokens=limit,
        progress=lambda done, total: bar.progress(done / total, text=f"Running the model: {done} of {documents_phrase(total)}"),
    )[0]
    bar.empty()
    titles = [doc.title for doc in corpus]
    table = drift_table(embeddings, reference="static", pooling="mean")
    medians = table.groupby("layer")["cosine_similarity"].median()
    first, last = int(medians.index.min()), int(medians.index.max())
    steady = falls_at_every_layer(medians.to_numpy())
    anisotropy = table.loc[table["layer"] == last, "anisotropy"].iloc[0]
    say(
        f"Now every document of {markdown_safe(current_corpus_name())} ({documents_phrase(len(corpus))}), each pooled into one "
        f"vector per layer (mean over its tokens) and compared with its own static embedding, `hidden_states[0]`. The "
        f"median cosine is **{medians.loc[first]:.2f}** at {hidden_state_label(first, model.num_layers)} and "
        f"**{medians.loc[last]:.2f}** at {hidden_state_label(last, model.num_layers)}"
        + (": each layer moves the text further from where it started. " if steady else ". ")
        + (f"Mind the baseline: at hidden state {last} two *different* documents already have a mean cosine of "
           f"{anisotropy:.2f} (the dotted line), so compare with that, not with 0. " if math.isfinite(anisotropy) else "")
        + final_norm_note(model)
    )
    figure(layer_violin_figure(table, titles, value="cosine_similarity", value_label="cosine similarity",
                               title="static → layer: cosine similarity per document (mean pooling)",
                               baseline=table.drop_duplicates("layer") if len(corpus) > 1 else None),
           "drift", table)
    try_this("paste your own documents on the Drift page and come back: this step uses the same corpus.")
    full_page("drift", "Open the Drift page")


ATTENTION_STEPS: list[tuple[str, Callable[[], None]]] = [
    ("Text becomes tokens and ids", step_tokens),
    ("The static embedding: one row per token", step_static),
    ("Position, and hidden_states[0]", step_position),
    ("One attention head", step_one_head),
    ("Every head at once", step_every_head),
    ("What one head computes", step_inside),
    ("Still the same vector?", step_same_vector),
    ("Where does your sentence land?", step_senses),
    ("Does attention explain?", step_explain),
    ("A whole corpus", step_corpus),
]
