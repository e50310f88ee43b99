"""Long context: how far each head looks over a long text (attention by distance), how much lands on the first token
(attention sinks), and where a layer's sliding window cuts attention off."""

import streamlit as st

from core.attention_heads.long_context import FAR_SHARE, LOCAL_DISTANCE, LOCAL_SHARE, SINK_SHARE
from core.attention_heads.retrieval import HAYSTACK_SOURCE
from core.model.layers import BLOCK_SELECT_HELP, BLOCK_SELECT_LABEL
from ui import results
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import show_figure
from ui.page_figures import (
    LONG_DEFAULT_LENGTH,
    LONG_MEASURES,
    LONG_SOURCES,
    LongText,
    long_context_distance,
    long_context_grid,
    long_context_lengths,
    long_context_sink,
    long_context_stem,
    long_text,
)
from ui.page_state import end_page, option
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_model, current_model_name, current_text, current_token_limit
from ui.stoppable import StopFlag, progress_with_stop
from viz.common import markdown_safe
from viz.long_context import sink_sentence, window_sentence

SOURCES, DEFAULT_LENGTH, MEASURES = LONG_SOURCES, LONG_DEFAULT_LENGTH, LONG_MEASURES
STOPPED = StopFlag("_long_context_stopped")  # the (model, text, length) whose measurement the reader stopped

st.title("Long context")
explain(
    "How far does each head look? Over a long text, each head's attention is split by the **distance** from the query "
    "to the key (in tokens, log-spaced bins: 0, 1, 2–3, 4–7, …), so local heads, heads bounded by a sliding window and "
    "heads that reach across the whole text tell themselves apart. Many heads also park much of their attention on "
    "the first token whatever it is, an **attention sink** (Xiao et al., 2023, *Efficient Streaming Language Models "
    "with Attention Sinks*). Every share is a mean over the query positions, shown beside what attention spread "
    "evenly over the keys a query may see would give (**uniform**): the chance level. Attention is recomputed one "
    "layer at a time from the recorded queries and keys, never all heads' weights at once."
)
model = current_model()
stop_unless_one_stack("This page reads models with one stack of layers (an encoder such as the MiniLM, or a "
                      "language model such as SmolLM2), so it does not apply.")
name = current_model_name()
limit = current_token_limit()
left, right = st.columns(2)
source = option(left.segmented_control, "Text", list(SOURCES), format_func=SOURCES.get, default="haystack",
                required=True, key="source")
lengths = long_context_lengths(limit)
if len(lengths) > 1:
    length = option(right.select_slider, "Length (tokens)", lengths,
                    value=DEFAULT_LENGTH if DEFAULT_LENGTH in lengths else lengths[-1], key="length",
                    help="The text is read up to this many tokens (the bundled text is cut at a sentence end).")
else:
    length = lengths[0]
added = len(model.tokenizer("", add_special_tokens=True)["input_ids"])  # BOS, [CLS] … around the text
if length - added < 2:
    st.info(f"This app reads at most {limit} token(s) with {markdown_safe(model.name)}, {added} of them the tokenizer's "
            "own, too few to measure how far attention goes.", icon=":material/info:")
    end_page()
measured = long_text(model, name, source, length, current_text())
text, ids, total = measured.text, measured.ids, measured.total
if source == "haystack":
    st.caption(f"The text: {HAYSTACK_SOURCE}, cut at a sentence end to at most {length:,} tokens. Lengths up to "
               f"{lengths[-1]:,} tokens fit this app's limit of {limit:,} with {model.name}.")
if len(ids) < 2:
    st.info("The text needs at least two tokens: type a longer text in the sidebar, or pick the bundled long text.",
            icon=":material/edit:")
    end_page()
if total > len(ids):
    cut = (f"this app reads at most {limit:,} with {model.name}" if length == limit else
           f"the length chosen is {length:,}")
    st.info(f"The text has {total:,} tokens and {cut}, so only the first {len(ids):,} are measured.",
            icon=":material/content_cut:")
sink_label = measured.sink_label


key = (name, text, length)
profile = results.long_context_profiles.peek(name, text, source, max_tokens=length)
if profile is None:
    if STOPPED.stopped(key):
        STOPPED.offer_to_go_on("You stopped the measurement; nothing is shown until it runs to the end.",
                               "Measure again", "long-context-restart")
        end_page()
    with progress_with_stop(f"Running {model.name} over {len(ids):,} tokens…",
                            "Attention by distance: {done} of {total} layers measured",
                            button_key="long-context-stop", on_stop=STOPPED.stop, args=(key,)) as progress:
        profile = results.long_context_profiles(name, text, source, max_tokens=length, progress=progress)

direction = "query − key: a query sees only earlier keys" if profile.causal else "|query − key|: an encoder sees both ways"
st.caption(f"{markdown_safe(model.name)}, {profile.num_tokens:,} tokens; distance is {direction}. The sink is "
           f"{markdown_safe(sink_label)}.")
stem = long_context_stem(name, source, profile)

st.header("How far each head looks")
explain(
    f"A head is **local** when at least {LOCAL_SHARE:.0%} of its attention stays within {LOCAL_DISTANCE} tokens, a "
    f"**sink** head when at least {SINK_SHARE:.0%} lands on the sink, and **long-range** when at least "
    f"{FAR_SHARE:.0%}, and no less than uniform attention's share, goes {profile.far_distance:,} tokens or more away "
    "to keys other than the sink ("
    + ("the smallest sliding window of this model)." if profile.far_distance in profile.windows else
       "this model has no sliding window; that is this page's far distance).")
    + " The thresholds are this page's definitions; the shares beside them are measured.",
    caption=True,
)


@friendly_fragment
def overview(profile, stem: str) -> None:
    """The layer × head grid of one measure; picking another reruns only this part."""
    measure = option(st.columns(2)[0].segmented_control, "Share", list(MEASURES), format_func=MEASURES.get,
                     default="local", required=True, key="measure")
    grid = long_context_grid(profile, stem, measure)
    show_figure(grid.figure, name=grid.name, data=grid.data, key="long-context-grid", alt=grid.sentence)
    st.markdown(grid.sentence)


overview(profile, stem)


@friendly_fragment
def one_layer(profile, model, stem: str, measured: LongText) -> None:
    """One layer's heads by distance and on the sink by query position (``measured``: the text, its first token and
    how captions name it)."""
    st.header("Attention by distance, one layer")
    layer = option(st.columns(2)[0].selectbox, BLOCK_SELECT_LABEL, list(range(model.num_layers)), key="layer",
                   help=BLOCK_SELECT_HELP)
    distance = long_context_distance(profile, stem, layer)
    show_figure(distance.figure, name=distance.name, data=distance.data, key="long-context-distance",
                alt=distance.sentence)
    st.markdown(distance.sentence + " " + window_sentence(profile, markdown_safe(model.name)))
    st.header("Attention on the first token")
    # the screen reader's text is plain (a markdown escape such as "\(" would be read out), the page's is markdown
    sink = long_context_sink(profile, stem, layer, measured)
    show_figure(sink.figure, name=sink.name, data=sink.data, key="long-context-sink", alt=sink.sentence)
    st.markdown(sink_sentence(profile, markdown_safe(measured.sink_label)))


one_layer(profile, model, stem, measured)
