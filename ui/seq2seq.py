"""The Streamlit side of encoder-decoder models: the sidebar's target box, generation with progress
and a stop button, the cached ``PairAnalysis`` every page reads for these models, and the stack selector a page
iterates over (``current_stacks``: one "self" stack for other models, encoder, decoder and cross for these)."""

from __future__ import annotations

import dataclasses

import streamlit as st

from core.errors import AnalysisError
from core.model.attention_layers import SINGLE_STACK
from core.model.run import Run
from core.model.seq2seq import MAX_GENERATED_TOKENS, PairAnalysis
from core.model.stacks import STACK_LABELS, AttentionStack, stacks_of
from ui import results
from ui.models import run_of
from ui.page_state import end_page, option, option_value, set_option
from ui.session import MAX_TEXT_CHARS, current_analysis, current_model, current_model_name, current_text, current_token_limit
from ui.trace_progress import trace_of

TARGET_KEY = "target"  # an app-wide option, like the sidebar's text: ?target=…
_STOPPED = "_generation_stopped"  # (model, source, limit) whose generation the user stopped
_WRITTEN = "_target_written_for"  # (model, source, limit, text): the target box holds the model's own text
STACK_HELP = (
    "Encoder self-attention: source tokens attending to source tokens (every token sees all). Decoder "
    "self-attention: target tokens attending to earlier target tokens (causal). Cross-attention: each target token "
    "(query, from the decoder) attending to the source tokens (keys and values, from the encoder's last layer)."
)


def sidebar_model_is_encoder_decoder() -> bool:
    """True when the sidebar's model loads and is an encoder-decoder (a model that fails to load is
    reported by the page, not here)."""
    try:
        return current_model().is_encoder_decoder
    except Exception:  # noqa: BLE001 - the page shows the loading error as a sentence
        return False


def render_target_box() -> None:
    """The sidebar's **Target text** box, drawn only for encoder-decoder models; call inside the sidebar."""
    if not sidebar_model_is_encoder_decoder():
        return
    option(
        st.text_area,
        "Target text",
        value="",
        key=TARGET_KEY,
        app=True,
        max_chars=MAX_TEXT_CHARS,
        height=90,
        help="What the decoder reads (for a translation model: the translation). The text above is the source, "
        f"read by the encoder. Leave this empty and the model writes a target itself (greedy, at most "
        f"{MAX_GENERATED_TOKENS} tokens), which then fills this box.",
    )


def current_target() -> str:
    return option_value(TARGET_KEY, app=True) or ""


def _stop(key: tuple[str, str, int]) -> None:
    st.session_state[_STOPPED] = key


def _restart() -> None:
    st.session_state[_STOPPED] = None


def _generate(name: str, source: str, limit: int) -> str:
    """The model's own target for ``source``, with a progress bar and a stop button; cached per (model, source, limit)."""
    key = (name, source, limit)
    if st.session_state.get(_STOPPED) == key:
        st.info("You stopped the generation. Type a target text in the sidebar, or write one with the model.",
                icon=":material/stop_circle:")
        st.button("Let the model write a target", key="seq2seq-generate", on_click=_restart, icon=":material/play_arrow:")
        end_page()
    slot = st.empty()
    with slot.container():
        bar = st.progress(0.0, text=f"{name} is writing a target for your text (at most {MAX_GENERATED_TOKENS} tokens)…")
        st.button("Stop", key="seq2seq-stop", on_click=_stop, args=(key,), icon=":material/stop:")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"{name} is writing a target: {done} of at most {total} tokens")

    text = results.generated_targets(name, source, max_tokens=limit, progress=progress)
    slot.empty()
    return text



def current_run(one_stack: bool, ablation: tuple | None = None) -> Run:
    """The ``Run`` a page's figures are drawn from: the sidebar's text through its model (an encoder-decoder's source
    and target when ``one_stack`` is False), with the page's token limit and the knock-out ``ablation``."""
    texts = (current_text(),) if one_stack else (current_text(), current_target())
    return run_of(current_model_name(), texts, current_token_limit(), ablation)

def current_pair() -> PairAnalysis:
    """The sidebar's source and target through the sidebar's encoder-decoder model (cached).

    An empty target box: the model writes a target (progress bar, stop button), the box is filled
    with it and the page runs again. ``generated`` is True while the box holds the model's own text;
    when the source changes while it does, the model writes a new one.
    """
    name, source, limit = current_model_name(), current_text(), current_token_limit()
    model = current_model()
    if not source.strip():
        raise AnalysisError("There is no text to analyse: type a source sentence in the sidebar first.")
    target = current_target()
    written = st.session_state.get(_WRITTEN)
    if written and written[3] == target and written[:3] != (name, source, limit):
        target = ""  # the box holds what the model wrote for another source: write a new one
    if not target.strip():
        if not model.can_generate:
            st.info(
                f"{model.name} has no trained language-model head in its checkpoint, so it cannot write a target "
                "itself: type a target text in the sidebar.",
                icon=":material/edit:",
            )
            end_page()
        text = _generate(name, source, limit)
        set_option(TARGET_KEY, text, app=True)  # fills the box on the next run
        st.session_state[_WRITTEN] = (name, source, limit, text)
        st.rerun()
    if results.pairs.peek(name, (source, target), max_tokens=limit) is None:
        trace_of(name, (source, target), limit)  # the one pass, with progress and Stop on long texts
    with st.spinner("Running the model…"):
        pair = results.pairs(name, (source, target), max_tokens=limit)
    generated = results.generated_targets.peek(name, source, max_tokens=limit)
    if generated is not None and generated == target:
        pair = dataclasses.replace(pair, generated=True)
    for side, analysis in (("source", pair.source), ("target", pair.target)):
        if analysis.truncated:
            st.info(
                f"The {side} has {analysis.num_input_tokens} tokens and this app reads at most {analysis.num_tokens}, "
                f"so only the first {analysis.num_tokens} are shown.",
                icon=":material/content_cut:",
            )
    return pair


def pair_caption(pair: PairAnalysis) -> str:
    """One sentence saying what the encoder and decoder read."""
    made = " (written by the model itself: greedy decoding)" if pair.generated else ""
    return (
        f"The encoder read the source ({pair.source.num_tokens} tokens); the decoder read the target{made}, "
        f"shifted right behind its start token `{pair.target.tokens[0]}` ({pair.target.num_tokens} tokens), "
        "as in training: each target token is predicted from the tokens before it."
    )


def stop_unless_one_stack(what: str) -> None:
    """For a page that applies only to a model with one stack of blocks: when the sidebar's model is an
    encoder-decoder, say so (``what``: why, one sentence) and stop the page; otherwise return."""
    if current_model().is_encoder_decoder:
        not_applicable(what)


def not_applicable(what: str) -> None:
    """The sentence a page shows instead of its content for an encoder-decoder model, then stops the page."""
    model = current_model()
    st.info(f"{model.name} is an encoder-decoder model (it reads a source and writes a target). {what} "
            "The Attention, Maxima and Head statistics pages show its encoder, decoder and cross-attention.",
            icon=":material/info:")
    end_page()

# Why a view of the attention is not drawn for an encoder-decoder's stack (the end of a sentence naming the view)
_NOT_DEFINED = {
    "norm-weighted": "needs each head's value vectors and output projection, which the app takes apart for models "
                     "with one stack of layers only",
    ("rollout", "decoder"): "would leave out what each decoder layer also adds from the source through "
                            "cross-attention, so it is not defined for the decoder's self-attention alone",
    ("rollout", "cross"): "multiplies attention through the layers of one token sequence, and cross-attention "
                          "maps target tokens to source tokens",
}


def not_defined(view: str, stack: AttentionStack) -> str | None:
    """Why ``view`` ("norm-weighted" or "rollout"; any other is raw weights) is not drawn for ``stack``, as the end
    of a sentence that names the view ("… needs each head's value vectors …"); None when it is drawn (every view of
    a model with one stack, the encoder's rollout)."""
    if stack.kind == SINGLE_STACK:
        return None
    return _NOT_DEFINED.get(view) or _NOT_DEFINED.get((view, stack.kind))


def current_stacks() -> tuple[AttentionStack, ...]:
    """The sidebar's run as ``core.model.stacks`` stacks: one "self" stack for a model with one stack of layers, the
    encoder's, the decoder's and the cross-attention stacks of ``current_pair()`` for an encoder-decoder."""
    model = current_model()
    return current_pair().stacks if model.is_encoder_decoder else stacks_of(current_analysis())


def stack_selector(stacks: tuple[AttentionStack, ...], key: str = "stack") -> AttentionStack:
    """The **Encoder self-attention / Decoder self-attention / Cross-attention** selector (bound to the URL by label)."""
    label = option(st.segmented_control, "Attention", [s.label for s in stacks], key=key, default=STACK_LABELS["cross"],
                   required=True, help=STACK_HELP)
    return next(s for s in stacks if s.label == label)


def choose_stack(stacks: tuple[AttentionStack, ...], *, caption: bool = True) -> AttentionStack:
    """The one stack of a model with one, else the user's pick among an encoder-decoder's (under the pair caption
    when ``caption``)."""
    if len(stacks) == 1:
        return stacks[0]
    if caption:
        st.caption(pair_caption(current_pair()))
    return stack_selector(stacks)


def axis_titles(stack: AttentionStack) -> tuple[str, str]:
    """(rows, columns) of one head's heatmap: "query (attending)" …, with the side for an encoder-decoder ("source
    token: query (attending)"); for cross-attention the side that asks (the decoder) and the side asked (the encoder)."""
    if stack.is_cross:
        return f"{stack.query_side} token: query (decoder)", f"{stack.key_side} token: key (encoder)"
    if not stack.query_side:
        return "query (attending)", "key (attended to)"
    return f"{stack.query_side} token: query (attending)", f"{stack.key_side} token: key (attended to)"
