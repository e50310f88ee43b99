"""What is genuinely encoder-decoder only on the pages (T5, BART, Marian …): BertViz's encoder-decoder view and the
home page's two token sequences, the Maxima page's soft alignment of cross-attention, and what each stack's head
reads (``READS``, for Inside one head).

Each reads the model's blocks through one contract, ``core.model.stacks.AttentionStack`` (``PairAnalysis.stacks``: encoder
self-attention, decoder self-attention and cross-attention; target rows = queries, source columns = keys). The
Attention, Maxima, Head statistics and Inside one head pages draw every stack with one body each
(``ui.seq2seq.current_stacks``, ``choose_stack``). Pages that apply
only to a model with one stack call ``ui.seq2seq.stop_unless_one_stack``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.attention_heads.attention import reduce_heads
from core.attention_heads.cross_attention import cross_alignment, cross_attention_view
from core.model.run import Run
from core.model.stacks import AttentionStack, stack_of
from ui import results
from ui.figures import show_figure
from ui.page_state import option
from ui.seq2seq import current_pair, pair_caption
from ui.session import current_model
from viz import attention_tables as vt
from viz import bertviz_offline as bv
from viz.common import file_stem
from viz.cross_attention import alignment_figure, alignment_grid

BERTVIZ = {"head view": "head", "model view": "model"}


def pair_bertviz(stacks: tuple[AttentionStack, ...], stack: AttentionStack, run: Run, special: str, words: bool,
                 layer: int) -> None:
    """BertViz's encoder-decoder view of the three ``stacks`` (``run``: of the model, source and target, token limit)."""
    kind = BERTVIZ[option(st.radio, "BertViz view", list(BERTVIZ), key="bertviz", horizontal=True)]
    st.caption("BertViz's own encoder-decoder view: its *Attention* menu switches between Encoder, Decoder and Cross "
               "(cross-attention: target tokens on the left, source tokens on the right). BertViz's neuron view "
               "does not take encoder-decoder models.")
    encoder, decoder, cross = (results.pair_views.at(run, part.kind, special, words) for part in stacks)
    if not (encoder.labels and decoder.labels):
        st.info("Hiding special tokens leaves the source or the target empty; choose *show* for special tokens.")
        return
    common = min(encoder.matrices.shape[0], decoder.matrices.shape[0])
    heads = encoder.matrices.shape[1]
    budget = bv.seq2seq_budget(heads, len(encoder.labels), len(decoder.labels))
    sent = bv.layers_near(min(layer, common - 1), common, budget)
    if not sent:
        st.warning(f"BertViz draws one line per query–key pair and head: at {len(encoder.labels)} source and "
                   f"{len(decoder.labels)} target tokens one layer is more than a browser draws smoothly "
                   f"({bv.MAX_WEIGHTS:,} lines). The heatmaps show every weight; for BertViz use shorter texts or word level.")
        return
    if len(sent) < common:
        st.info(f"BertViz gets layers {sent[0]}–{sent[-1]} (around layer {layer}): every layer would be too many lines "
                "for a browser. Pick another layer above to move the window.")
    if encoder.matrices.shape[0] != decoder.matrices.shape[0]:
        st.info(f"The encoder has {encoder.matrices.shape[0]} layers and the decoder {decoder.matrices.shape[0]}; "
                f"BertViz shows the first {common} of each.")
    show = stack.kind.capitalize()  # BertViz's own names: Encoder, Decoder, Cross
    html = bv.seq2seq_view_html(kind, encoder.matrices, decoder.matrices, cross.matrices, encoder.labels, decoder.labels,
                                layers=sent, layer=min(layer, common - 1), show=show)
    n = max(len(encoder.labels), len(decoder.labels))
    st.iframe(html, height=bv.view_height(kind, n, len(sent), heads))


def cross_alignment_section(model, pair, stack: AttentionStack, heads, head: int | None, what: str,
                            include_special: bool, words: bool) -> None:
    """The Maxima page's cross-attention part: for every decoder layer and target token the source token it attends
    to most (``heads``: "max", "mean" or one head's index; ``what`` names that choice), one layer's matrix with rings
    on those, and the table."""
    alignment = cross_alignment(pair, heads=heads, skip_special=not include_special, words=words)
    if not len(alignment.queries):
        st.info("Every target token is a special token: switch on **Include special tokens** to see them.")
        return
    st.markdown(
        "**Soft alignment.** For every decoder layer and every target token: the source token it attends to most "
        "through cross-attention (heads reduced first). In a trained translation model the middle and upper layers "
        "often line each target word up with the source word it translates; in a random model the picture is noise."
    )
    show_figure(alignment_grid(alignment, title=f"Most-attended source token per target token ({what})"),
                name=file_stem(model.name, "alignment", "head", head), data=alignment.long_table(),
                key="seq2seq-alignment-grid")
    layer = option(st.selectbox, "Decoder layer (counted from 0)", range(stack.num_layers), key="layer")
    view = cross_attention_view(pair, words=words)
    matrix = reduce_heads(view.matrices[layer : layer + 1], heads)[0]
    show_figure(alignment_figure(matrix, view.labels, view.key_labels, alignment, layer,
                                 title=f"Cross-attention, layer {layer} ({what}); rings: most attended"),
                name=file_stem(model.name, "alignment", "layer", layer, "head", head),
                data=vt.matrix_table(matrix, view.labels, causal=False, key_labels=view.key_labels),
                key="seq2seq-alignment-matrix")
    table = alignment.wide_table()
    st.dataframe(table, hide_index=True)
    st.download_button("Download the table (CSV)", table.to_csv(index=False).encode("utf-8"),
                       file_name=f"{file_stem(model.name, 'alignment-table', 'head', head)}.csv", mime="text/csv",
                       on_click="ignore", key="seq2seq-alignment-csv", icon=":material/download:")


READS = {  # per stack kind
    "encoder": "hidden state {layer} of the encoder (the source tokens)",
    "decoder": "hidden state {layer} of the decoder (the target tokens it read)",
    "cross": "queries: the decoder's hidden state {layer} after this block's self-attention (residual added, LayerNorm "
           "as the model places it); keys and values: the encoder's output, its last hidden state",
}


def tokens_page() -> None:
    """The home page's "what the model saw" for an encoder-decoder: the source's and the decoder's tokens."""
    model, pair = current_model(), current_pair()
    st.caption(
        f"{model.name}: an encoder-decoder, {pair.source.num_layers} encoder and {pair.num_decoder_layers} decoder layers × "
        f"{pair.source.num_heads} heads, hidden size {model.hidden_size}. " + pair_caption(pair)
    )
    for stack in (stack_of(pair, "encoder"), stack_of(pair, "decoder")):  # the two token sequences
        analysis = stack.queries
        st.markdown(f"**{stack.query_side.capitalize()} ({'decoder input' if stack.causal else 'encoder'})**")
        table = pd.DataFrame({"position": range(analysis.num_tokens), "token": analysis.tokens, "id": analysis.input_ids,
                              "special": analysis.special_mask})
        st.dataframe(table, hide_index=True, height=min(400, 38 + 35 * len(table)))
