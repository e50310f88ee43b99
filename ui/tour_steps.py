"""The guided tour's last two steps (app_pages/tour.py): does attention explain, and a whole corpus."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.causal.effects import EffectsError
from core.causal.effects_compare import sentence_cosine
from core.maths.numbers import percent
from core.model.layers import head_code, hidden_state_label
from core.model.recording import UnsupportedArchitecture
from core.representations.drift import drift_table
from core.teaching.tour import clearest_sink_head, falls_at_every_layer, previous_is_sink
from ui import results
from ui.caveats import final_norm_note
from ui.corpus_state import current_corpus, current_corpus_name
from ui.session import current_analysis, current_model, current_model_name, current_text, current_token_limit
from ui.tour_kit import figure, full_page, not_here, previous_token_head, say, sink_names, try_this
from viz.common import markdown_safe
from viz.drift import documents_phrase, layer_violin_figure
from viz.effects import knockout_figure

# One knock-out on one text: two heads' changes of the sentence embedding (1 − cosine) within a factor of 1.5 of each
# other are not told apart, since another text can swap their order; the step says "about as much".
KNOCKOUT_RATIO = 1.5


def step_explain() -> None:
    model, name, limit = current_model(), current_model_name(), current_token_limit()
    analysis = current_analysis()
    previous, chance, table, roles = previous_token_head(analysis)
    if previous_is_sink(roles):  # "the token before" is the sink itself: no previous-token head to contrast
        previous = None
    sink = clearest_sink_head(table)
    caveat = ("A heatmap shows where a head looks, not what it changes (Jain & Wallace 2019): whether a head matters is "
              "a question for an experiment, switching it off and measuring what changes.")
    chosen = list(dict.fromkeys(h[:2] for h in (sink, previous) if h is not None))  # the same head once
    if not chosen:
        say(caveat)
        not_here("Your text has no ordinary token to measure where a head looks, so there is no head to single out.")
        return
    try:
        with st.spinner("Running your text with one head switched off…"):
            ablated = [results.analyses(name, current_text(), max_tokens=limit, ablation=((head,), "zero"))
                       for head in chosen]
    except (UnsupportedArchitecture, EffectsError) as err:
        say(caveat)
        not_here(f"Switching a head off is not possible here: {markdown_safe(str(err))}")
        return
    changes = [1.0 - sentence_cosine(analysis, run) for run in ablated]
    effect = dict(zip(chosen, changes))
    row = table.set_index(["layer", "head"])
    sinks_of = [float(row.loc[h, "first"] + row.loc[h, "end"]) for h in chosen]
    previous_of = [float(row.loc[h, "previous"]) for h in chosen]
    total = model.num_layers * model.num_heads
    mean_sink = float(np.nanmean(table["first"] + table["end"]))
    said = [caveat]
    if sink is not None:
        said.append(f"On your text **layer {sink[0]}, head {sink[1]}** gives the largest share of its attention to "
                    f"{sink_names(roles)}, **{percent(sink[2])}** (the mean over all {total} heads is {percent(mean_sink, 1)}); "
                    f"zero-ablated, it leaves the sentence embedding at cosine **{1 - effect[sink[:2]]:.4f}** to the "
                    "original run.")
    if previous is not None and (sink is None or previous[:2] != sink[:2]):
        said.append(f"The previous-token head of step 4, **layer {previous[0]}, head {previous[1]}** "
                    f"({percent(previous[2])} to the token before; an even spread gives {percent(chance)}), leaves it at cosine "
                    f"**{1 - effect[previous[:2]]:.4f}**.")
    if len(chosen) == 2:
        said.append(knockout_comparison(effect[sink[:2]], effect[previous[:2]], sink_names(roles)))
    else:
        said.append(f"1 − cosine is {changes[0]:.2g}; the importance map compares it with every other head.")
    say(" ".join(said))
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


def knockout_comparison(sink_change: float, previous_change: float, sinks: str) -> str:
    """The sentence comparing two knock-outs' changes of the sentence embedding (1 − cosine): the head that looks
    hardest at ``sinks`` and the previous-token head; within ``KNOCKOUT_RATIO`` of each other it is "about as much"."""
    low, high = sorted((sink_change, previous_change))
    if high <= low * KNOCKOUT_RATIO:
        more = "about as much as"
    else:
        more = "less than" if sink_change < previous_change else "more than"
    return (f"So the head that looks hardest at {sinks} changes your sentence {more} the previous-token head "
            f"({sink_change:.2g} vs {previous_change:.2g} in 1 − cosine): one knock-out on one text, and where "
            "attention and importance disagree the importance map shows it.")


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
           f"{anisotropy:.2f} (the dotted line), so compare with that, not with 0. " if np.isfinite(anisotropy) else "")
        + final_norm_note(model)
    )
    figure(layer_violin_figure(table, titles, value="cosine_similarity", value_label="cosine similarity",
                               title="static → layer: cosine similarity per document (mean pooling)",
                               baseline=table.drop_duplicates("layer") if len(corpus) > 1 else None),
           "drift", table)
    try_this("paste your own documents on the Drift page and come back: this step uses the same corpus.")
    full_page("drift", "Open the Drift page")
