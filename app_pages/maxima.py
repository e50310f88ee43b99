"""Maxima: which token each token attends to most, layer by layer; attention rollout and norm-weighted attention;
for an encoder-decoder, of the stack the user picks (cross-attention: the soft alignment of target to source)."""


import streamlit as st

from core.attention_heads.attention import attention_maxima, rollout
from core.model.attention_layers import SINGLE_STACK
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL, numbering_caption
from core.model.recording import UnsupportedArchitecture
from core.model.run import Run
from core.model.stacks import stacks_of
from core.teaching.about import neighbour_sink_sentence, special_share_sentence
from ui import results
from ui.ablation import knockout, with_ablation
from ui.caveats import WORD_LEVEL_HELP, attention_caveat, word_level_allowed
from ui.errors import friendly_fragment
from ui.explain import controls, explain
from ui.figures import columns_stacked, csv_download, show_figure
from ui.page_figures import (
    MAX_PANEL_TOKENS,
    MAXIMA_NORM,
    MAXIMA_RAW,
    MAXIMA_REDUCTIONS,
    MAXIMA_ROLLOUT,
    maxima_choice,
    maxima_figure,
    maxima_panels,
    special_share_figure,
    special_shares,
)
from ui.page_state import end_page, option
from ui.seq2seq import choose_stack, current_pair, current_run, current_stacks, not_defined
from ui.seq2seq_views import cross_alignment_section
from ui.session import current_model, current_model_name, current_text, current_token_limit
from viz.common import file_stem, markdown_safe

RAW, NORM, ROLLOUT = MAXIMA_RAW, MAXIMA_NORM, MAXIMA_ROLLOUT
PERCENT = st.column_config.NumberColumn(format="percent")

st.title("Which token does each token attend to most?")
explain(
    "For every layer and every token: the token it gives its largest attention weight (by default the maximum "
    "over heads, then the largest key). " + numbering_caption(current_model().num_layers)
)
attention_caveat()
stacks = current_stacks()
stack = choose_stack(stacks)  # an encoder-decoder's encoder, decoder or cross stack; a model's one stack
one_stack = stack.kind == SINGLE_STACK
model, analysis = current_model(), stack.queries  # the rows' tokens: the sidebar's text, or a source or target
name, text = current_model_name(), current_text()
limit = current_token_limit()
ablation = None
if one_stack:
    plain = analysis
    [analysis] = with_ablation(analysis)  # heads knocked out on the "Does it matter?" page, if the user turns it on
    ablation = None if analysis is plain else knockout()  # every panel below shows the same run
    [stack] = stacks_of(analysis)
weighted = rolled = None
if one_stack:
    try:
        with st.spinner("Weighting attention by vector norms…"):
            weighted = results.norm_weighted_attention(name, text, max_tokens=limit, ablation=ablation)
    except UnsupportedArchitecture as err:
        st.info(f"Norm-weighted attention is not available here. {err}")
    rolled = results.rollouts(name, text, max_tokens=limit, ablation=ablation)
elif not_defined(ROLLOUT, stack) is None:  # the encoder's: one token sequence with residual connections
    rolled = rollout(analysis)
missing = [f"{label} {why}" for label, view in (("norm-weighted attention", NORM), ("rollout", ROLLOUT))
           if (why := not_defined(view, stack)) is not None]
if missing:
    st.caption(f"For the {stack.label.lower()}: {'; '.join(missing)}.")

left, right = controls().columns(2)
source = option(
    left.radio, "Attention source", [RAW] + [NORM] * (weighted is not None) + [ROLLOUT] * (rolled is not None),
    key="source", horizontal=True,
)
reduction = option(
    left.radio, "Heads", MAXIMA_REDUCTIONS, key="heads",
    horizontal=True, disabled=source == ROLLOUT, help="Rollout already averages the heads.",
)
head = None  # counted from 0, as on the attention page
if reduction == "one head" and source != ROLLOUT:
    head = option(left.selectbox, "Head (counted from 0)", range(stack.num_heads), key="head")
include_special = option(right.toggle, "Include special tokens", key="special")
wanted_words = option(
    right.toggle, "Word level", key="words", disabled=not word_level_allowed(source), help=WORD_LEVEL_HELP,
)
words = wanted_words and word_level_allowed(source)
if wanted_words and not words:
    right.caption(f"Word level is switched on but not applied to {source}: the tokens are shown as they are. "
                  + WORD_LEVEL_HELP.split(". ", 1)[1])

chosen = maxima_choice(source, reduction, head, stack.attentions, weighted, rolled)
matrices, heads, what, head_part = chosen.matrices, chosen.heads, chosen.what, chosen.head_part
if stack.is_cross:  # target rows, source columns: the soft alignment instead of a token's own neighbours
    cross_alignment_section(model, current_pair(), stack, heads, head, what, include_special, words)
    end_page()
stem = () if one_stack else (stack.kind,)
if not one_stack:
    what = f"{stack.label.lower()}, {what}"
maxima = attention_maxima(
    analysis, matrices=matrices, heads=heads, skip_special=not include_special, words=words
)
if not len(maxima.queries):
    st.info("Every token of this text is a special token: switch on **Include special tokens** to see them.")
else:
    explain(
        "Each cell is one query token (column) at one layer (row); its text is the token it attends to most. "
        "The colour is the distance to that token: white = itself, orange = to its left, purple = to its right."
    )
    grid = maxima_figure(model.name, maxima, chosen, what, ablated=bool(ablation), stem=stem)
    show_figure(grid.figure, name=grid.name, data=grid.data, key="maxima-grid")
    if source != ROLLOUT and not words:
        st.caption(markdown_safe(neighbour_sink_sentence(analysis, matrices=matrices, heads=heads)))
    st.markdown(
        "**Per layer**: how many distinct targets, the share of tokens whose target is at most one position "
        "away, and the most frequent target."
    )
    st.dataframe(maxima.layer_summary(), hide_index=True, column_config={"local_share": PERCENT, "its_share": PERCENT})
    st.markdown("**Every token, every layer**: the most-attended token and its weight.")
    table = maxima.wide_table()
    st.dataframe(table, hide_index=True)
    csv_download("Download the table (CSV)", table, file_name=f"{file_stem(model.name, 'maxima-table', *stem, source, *head_part)}.csv",
                 key="maxima-table-csv")

st.header("Beyond raw attention")
explain(
    "**Attention rollout** (Abnar & Zuidema 2020) follows attention through the residual connections: per layer "
    "the heads are averaged, mixed half and half with the identity (0.5·A + 0.5·I) and the rows renormalised; "
    "the layers are then multiplied from layer 0 up, so layer *l* is an estimate of how much of each input token "
    "reaches each token after blocks 0 to *l*. It is a heuristic: it assumes the residual connection carries exactly "
    "half of each token and ignores the value vectors, the feed-forward layers and LayerNorm.  \n"
    "**Norm-weighted attention** (Kobayashi et al. 2020) multiplies each weight "
    "α by ‖f(x)‖, the length of the vector the attended token actually adds through that head (its value vector "
    "passed through the head's slice of the output projection), so attention to a token that adds little shrinks."
)
@friendly_fragment
def raw_norm_rollout(model, stack, weighted, rolled, run: Run, head: int | None) -> None:
    """Raw, norm-weighted and rollout maps of one layer of ``stack``: moving the layer reruns only this part.
    ``weighted``, ``rolled``: norm-weighted and rollout matrices, each None where not drawn; ``run``: what they were
    computed from (the text, or an encoder-decoder's source and target, with the token limit and knock-out)."""
    analysis = stack.queries
    layer = option(st.selectbox, BLOCK_SELECT_LABEL, range(stack.num_layers), key="layer", help=BLOCK_SELECT_HELP)
    st.caption(f"{f'Head {head}' if head is not None else 'Mean over heads'}; every token, special ones included.")
    if analysis.num_tokens <= MAX_PANEL_TOKENS:
        maps = maxima_panels(model.name, run, stack, weighted, rolled, layer, head, columns_stacked())
        show_figure(maps.figure, name=maps.name, data=maps.data, key="maxima-panels")
    else:
        st.info(f"The maps are drawn for texts of up to {MAX_PANEL_TOKENS} tokens; this one has {analysis.num_tokens}.")

raw_norm_rollout(model, stack, weighted, rolled, current_run(one_stack, ablation), head)

if weighted is not None and analysis.special_mask.any() and not analysis.special_mask.all():
    shares = special_shares(analysis, weighted)
    explain(
        "How much of each token's attention lands on special tokens, raw and norm-weighted. Kobayashi et al. (2020) "
        "found that in BERT raw attention parks much of its weight there while the value vectors of those tokens, "
        "after the output projection W_O, are short: the sink adds little to the output, but not nothing. "
        + markdown_safe(special_share_sentence(shares[RAW], shares[NORM]))
    )
    share_chart = special_share_figure(model.name, shares)
    show_figure(share_chart.figure, name=share_chart.name, data=share_chart.data, key="maxima-special-share")
