"""Head statistics: find the interesting heads by the numbers, over one text or a whole corpus; for an encoder-decoder,
of the stack the user picks (cross-attention has its own statistics)."""

import streamlit as st

from core.attention_heads.cross_attention import CROSS_DEFINITIONS, CROSS_STATISTICS, cross_head_statistics
from core.attention_heads.head_statistics import DEFINITIONS, STATISTICS, UNIFORM_ENTROPY, analysis_statistics, rank_heads, sink_names, statistic_grid
from core.maths.numbers import percent
from core.model.attention_layers import SINGLE_STACK
from core.model.layers import numbering_caption
from core.model.recording import UnsupportedArchitecture
from core.teaching.examples import EXAMPLE_SENTENCES
from ui import results
from ui.caveats import attention_caveat
from ui.corpus_state import current_corpus, current_corpus_name
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import show_figure
from ui.page_figures import STAT_NOT_SHARES, STAT_SOURCES, statistic_heatmap, statistic_names, text_about, texts_about
from ui.page_state import end_page, link_url, option, set_option
from ui.progress_text import bar_progress
from ui.seq2seq import choose_stack, current_pair, current_stacks, not_defined
from ui.session import current_analysis, current_model, current_model_name, current_text, current_token_limit
from viz.common import file_stem
from viz.head_stats import head_heatmaps

ATTENTION_PAGE = "attention"  # url path: ranked heads link there
# Display labels are what the URL holds (?over=corpus&stat=previous+token), so they are short.
SOURCES, NOT_SHARES = STAT_SOURCES, STAT_NOT_SHARES
model = current_model()
# What the first and end tokens are called in sentences, from the special tokens this model's tokenizer adds (BERT's
# [CLS] / [SEP], BART's <s> / </s>, T5's </s> only, none for GPT-2). The picker's labels, which links hold, are the
# same for every model.
SINKS = sink_names(model.tokenizer)
FIRST, END = SINKS.first, SINKS.end
SHORT_NAMES = {
    "entropy": "entropy", "first": "first token", "end": "end tokens", "punctuation": "punctuation",
    "self": "self", "previous": "previous token", "next": "next token", "distance": "distance",
    "diagonal": "alignment diagonal",
}
NAMES = statistic_names(model.tokenizer)  # as this model's page names them
RANKINGS = {
    "previous": "The heads that most attend to the previous token",
    "entropy": "The broadest heads (highest entropy)",
    "end": f"The heads that park attention on {END}",
    "first": f"The heads that park attention on {FIRST}",
}

st.title("Head statistics")
explain(
    f"Which heads look at the previous token, which spread their attention broadly, which park it on "
    f"{' / '.join(SINKS.end_tokens) or FIRST}? "
    "These are the per-head numbers of Clark et al. (2019) and Vig & Belinkov (2019). Each is averaged over the **query "
    + ("tokens**: every token except the first, which can only attend to itself. " if model.is_decoder else
       f"tokens**: every token except special ones ({', '.join(SINKS.added) or 'none here'}). ")
    + numbering_caption(model.num_layers)
)
attention_caveat()
stacks = current_stacks()
stack = choose_stack(stacks)  # an encoder-decoder's encoder, decoder or cross stack; a model's one stack
one_stack = stack.kind == SINGLE_STACK
statistics, definitions = (CROSS_STATISTICS, CROSS_DEFINITIONS) if stack.is_cross else (STATISTICS, DEFINITIONS)
names = NAMES if one_stack else statistics  # [CLS] / [SEP] wording is for a model with one stack
left, _ = st.columns(2)
source = "text" if not one_stack else option(
    left.segmented_control,
    "Average over",
    list(SOURCES),
    format_func=SOURCES.get,
    default="text",
    required=True,
    key="over",
    help="The corpus is the drift page's: its sample corpus unless you uploaded or pasted one there.",
)
limit = current_token_limit()

if not one_stack:
    st.caption("Statistics are computed for the sidebar's source and target only: example sentences and a corpus are "
               "averaged for models with one stack of layers.")
    if stack.is_cross:
        table, roles = cross_head_statistics(current_pair()), None
    else:
        table, roles = analysis_statistics(stack.queries, model.tokenizer)
    about = f"{stack.label.lower()}, this {stack.query_side} ({stack.num_query_tokens} tokens)"
elif source == "text":
    analysis = current_analysis()
    table, roles = results.head_stats(current_model_name(), current_text(), "attention", max_tokens=limit)
    about = text_about(analysis.num_tokens)
else:
    if source == "corpus":
        texts, about = tuple(doc.text for doc in current_corpus()), current_corpus_name()
    else:
        texts, about = tuple(EXAMPLE_SENTENCES.values()), "the example sentences"
    about = texts_about(len(texts), about)
    roles = None  # token roles are per text: only the single-text view uses them
    bar = st.empty()
    table = results.corpus_head_stats(
        current_model_name(),
        texts,
        max_tokens=limit,
        progress=bar_progress(bar, "Running the model: {done} of {total} texts"),
    )
    bar.empty()

if table[list(statistics)].isna().all(axis=None):
    st.info("There is no query token to average over: type at least one ordinary word "
            "(two for a decoder, whose first token can only attend to itself).")
    end_page()

@friendly_fragment
def statistic_views(model, limit: int, source: str, table, roles, about: str, stack, names: dict[str, str],
                    definitions: dict[str, str]) -> None:
    """The statistic picker and everything it changes: picking another statistic reruns only this part. ``stack``:
    the stack ``table`` describes; ``names``/``definitions``: its statistics' names and definitions."""
    one_stack = stack.kind == SINGLE_STACK
    statistic = option(st.columns(2)[0].selectbox, "Statistic", list(names), format_func=SHORT_NAMES.get, key="stat")
    share = statistic not in NOT_SHARES
    heatmap = statistic_heatmap(model.name, table, statistic, names, about, source, stack.kind)
    show_figure(heatmap.figure, name=heatmap.name, data=heatmap.data, key="stats-heatmap")
    note = definitions[statistic]
    if statistic == "entropy" and stack.is_cross:
        note += f" Attention spread evenly over the source would score {table[UNIFORM_ENTROPY].mean():.2f} nats."
    elif statistic == "entropy":
        note += (
            f" Attention spread evenly would score {table[UNIFORM_ENTROPY].mean():.2f} nats: the mean over the query "
            "tokens of ln n, n = the keys a query sees (every token for an encoder, tokens 0..i for decoder query i)."
        )
    explain(note, caption=True)

    st.header("Ranked heads")
    explain("Each head opens on the attention page in a new tab, with the same model and text.", caption=True)
    rankings = {name: heading for name, heading in RANKINGS.items() if name in names}
    if "diagonal" in names:
        rankings["diagonal"] = "The heads closest to the alignment diagonal (lowest distance)"
    for column, (name, heading) in zip(st.columns(len(rankings)), rankings.items()):
        with column:
            st.markdown(f"**{heading}**")
            st.button("Show as heatmap", key=f"rank-{name}", on_click=set_option, args=("stat", name), icon=":material/grid_on:")
            ranked = rank_heads(table.assign(**{name: -table[name]}) if name == "diagonal" else table, name)
            if name == "diagonal":
                ranked[name] = -ranked[name]
            elif not (ranked[name] > 0).any():
                st.caption("No head attends to these tokens here.")
                continue
            for row in ranked.itertuples():
                text = f"layer {row.layer}, head {row.head}: {getattr(row, name):.3f}"
                # a new tab with the sidebar's model and text (and stack), raw attention, this head
                link = link_url(ATTENTION_PAGE, source="raw", layer=row.layer, head=row.head,
                                stack=None if one_stack else stack.label)
                st.markdown(f"[{text}]({link})")

    if not one_stack:
        st.caption(f"Norm-weighted attention {not_defined('norm-weighted', stack)}, so the statistics are of raw attention.")
    elif source == "text":
        st.header("The same statistic over norm-weighted attention")
        explain(
            "Norm-weighted attention (Kobayashi et al. 2020) weights each attention weight by the length of what the key "
            "token actually adds, ‖f(x_j)‖ (its value vector through the head's slice of the output projection); each row "
            f"is then taken as a share of its norm-weighted total. Attention parked on {FIRST} or {END} whose value vectors "
            "(after the output projection W_O) are short adds little to the output, though not nothing (Kobayashi et al. "
            "2020): it shrinks on the right."
        )
        try:
            weighted, _ = results.head_stats(current_model_name(), current_text(), "norm-weighted", max_tokens=limit)
        except UnsupportedArchitecture as err:
            st.info(str(err), icon=":material/info:")
        else:
            grids = [statistic_grid(table, statistic), statistic_grid(weighted, statistic)]
            both = table.merge(weighted, on=["layer", "head"], suffixes=("_attention", "_norm_weighted"))
            show_figure(
                head_heatmaps(grids, titles=["attention", "norm-weighted attention"], colorbar=statistic, share=share),
                name=file_stem(model.name, "head-stats-norm-weighted", statistic),
                data=both,
                key="stats-norm-weighted",
            )
            st.caption(
                " ".join(
                    f"{NAMES[sink]}, mean over all heads: {percent(table[sink].mean(), 1)} of attention, "
                    f"{percent(weighted[sink].mean(), 1)} of norm-weighted attention."
                    for sink in ("first", "end")
                    if sink == "first" or roles.end.any()
                )
            )

statistic_views(model, limit, source, table, roles, about, stack, names, definitions)
if one_stack and model.is_decoder:
    from ui.lm_views import induction_view

    induction_view(model)
