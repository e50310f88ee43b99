"""Needle in a haystack: a sentence hidden in a long public-domain text, a question about it, the model's answer, and
the heads that copy the answer from the needle (retrieval heads, Wu et al. 2024), knocked out against random ones."""

import streamlit as st

from core.attention_heads.retrieval import DEFAULT_ANSWER, DEFAULT_NEEDLE, DEFAULT_QUESTION, HAYSTACK_SOURCE, top_and_random_heads
from core.errors import AnalysisError
from core.model.layers import head_code
from core.outputs.predictions import NoLanguageModelHead
from ui import results
from ui.errors import friendly_errors
from ui.explain import explain
from ui.figures import show_figure
from ui.models import language_model_of
from ui.needle_page import depth_length_view, grid_lengths
from ui.page_state import end_page, option
from ui.session import app_token_limit, current_model, current_model_name, current_token_limit, presentation_mode
from viz.common import file_stem, markdown_safe
from viz.head_stats import head_heatmap
from viz.needle import SLIDE_GRID_HEIGHT, answer_sentence, knockout_sentence, random_heads_caption, scores_sentence, scores_table

LENGTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DEFAULT_LENGTH = 256
KNOCKOUT_COUNTS = (1, 3, 5, 10, 20)
MAX_INPUT_CHARS = 300

st.title("Needle in a haystack")
explain(
    "A *needle* sentence is hidden at a chosen depth of a long text (the *haystack*), a question about it follows, "
    "and the model answers. To see which heads fetch the answer, the expected answer is appended and read with the "
    "prompt: at each answer token, a head **copies** when the earlier position it attends to most lies inside the "
    "needle and holds that same token. A head's **retrieval score** is the fraction of the answer's needle tokens it "
    "copies (Wu et al., 2024, *Retrieval Head Mechanistically Explains Long-Context Factuality*). Knocking the "
    "top-scoring heads out, against as many random heads, tests whether the answer depends on them. A score is a "
    "correlation on one prompt, not a proof of what a head does."
)
st.caption(f"The haystack: {HAYSTACK_SOURCE}. It is cut at a sentence end to the length chosen and never repeated.")
model = current_model()
if not model.is_decoder or model.is_encoder_decoder:
    st.info(f"{model.name} is not a causal language model: answering a question after a long text needs one (a "
            "decoder such as SmolLM2). Choose one in the sidebar.", icon=":material/info:")
    end_page()
name = current_model_name()
try:
    with st.spinner(f"Loading the language-model head of {model.name}…"):
        lm = language_model_of(name)
except NoLanguageModelHead as err:
    st.info(str(err), icon=":material/info:")
    end_page()

needle = option(st.text_input, "Needle (a sentence hidden in the haystack)", value=DEFAULT_NEEDLE, key="needle",
                max_chars=MAX_INPUT_CHARS)
question = option(st.text_input, "Question (after the haystack)", value=DEFAULT_QUESTION, key="question",
                  max_chars=MAX_INPUT_CHARS)
answer = option(st.text_input, "Expected answer (a phrase of the needle)", value=DEFAULT_ANSWER, key="answer",
                max_chars=MAX_INPUT_CHARS)
if not (needle.strip() and question.strip() and answer.strip()):
    st.info("Write a needle sentence, a question and its expected answer.", icon=":material/edit:")
    end_page()
limit = current_token_limit()
# the needle, question and answer take tokens of the limit too (a few more for the spaces and blank line between)
extra = sum(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in (needle, question, answer)) + 4
lengths = [n for n in LENGTHS if n + extra <= limit]
if not lengths:
    st.info(f"The needle, question and answer take about {extra} tokens, and this app reads at most {limit} with "
            f"{model.name}: shorten them.", icon=":material/info:")
    end_page()
left, right = st.columns(2)
depth = option(left.slider, "Needle depth (% of the haystack)", 0, 100, 50, step=5, key="depth")
length = option(right.select_slider, "Haystack length (tokens)", lengths,
                value=DEFAULT_LENGTH if DEFAULT_LENGTH in lengths else lengths[-1], key="length")
app_limit = app_token_limit()
within = (f"this page's limit of {limit:,} tokens (other pages read up to {app_limit:,} with {model.name}; this one "
          "keeps every layer's queries and keys)" if limit < app_limit else
          f"the {limit:,} tokens this app reads with {model.name}")
st.caption(markdown_safe(f"Lengths up to {lengths[-1]:,} tokens leave room for the needle, question and answer within "
                         f"{within}."))

with friendly_errors("finding the needle"):
    bar = st.progress(0.0, text=f"Reading {length:,} tokens with the answer appended…")
    try:
        result = results.needle_scores(name, (), length, needle, question, answer, depth / 100)
    except AnalysisError as err:  # the user's input (an answer not in the needle): a sentence, not an error
        bar.empty()
        st.warning(markdown_safe(err), icon=":material/edit:")
        end_page()
    bar.progress(0.4, text="The model writes its own answer…")
    written = results.needle_answers(name, (), tuple(result.prompt_ids), result.answer_span[1] - result.answer_span[0])
    bar.empty()

    st.header("The model's answer")
    st.markdown(answer_sentence(result, depth / 100, written, answer))

    st.header("Retrieval scores")
    copyable = int(result.copyable.sum())
    scores = result.scores
    grid = head_heatmap(scores, title="Retrieval score of each head", colorbar="retrieval score", share=True)
    if presentation_mode():
        grid.update_layout(height=min(grid.layout.height, SLIDE_GRID_HEIGHT))
    show_figure(grid, name=file_stem(name, "retrieval-scores", length, depth), data=scores_table(scores),
                key="needle-scores", alt=scores_sentence(scores, copyable))
    st.markdown(scores_sentence(scores, copyable))

    st.header("Knocking the retrieval heads out")
    count = option(st.segmented_control, "Heads to knock out", list(KNOCKOUT_COUNTS), default=5, required=True,
                   key="heads")
    scoring = int((scores > 0).sum())
    if scoring == 0:
        st.info("No head scored above 0 on this prompt, so there are no retrieval heads to knock out.",
                icon=":material/info:")
    else:
        count = min(count, scoring)
        top, random, only_silent = top_and_random_heads(scores, count)
        bar = st.progress(0.0, text=f"Knocking out the top {count} retrieval head(s)…")
        ids, span = tuple(result.token_ids), result.answer_span
        after_top = results.needle_knock_outs(name, (), ids, span, tuple(top))
        bar.progress(0.5, text=f"Knocking out {count} random head(s)…")
        after_random = results.needle_knock_outs(name, (), ids, span, tuple(random))
        bar.empty()
        codes = [", ".join(head_code(layer, head, model.num_layers, model.num_heads) for layer, head in heads)
                 for heads in (top, random)]
        st.markdown(knockout_sentence(result.answer_log_probability, after_top, after_random, count))
        st.caption(random_heads_caption(codes[0], codes[1], only_silent, int((scores == 0).sum())))

    depth_length_view(name, needle, question, answer, grid_lengths(lengths))
