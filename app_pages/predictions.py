"""Predictions: the model's own fill-ins for a mask token, or its next-token guesses along the text."""

import pandas as pd
import streamlit as st

from core.model.tokens import BYTE_TOKEN, PARTIAL_BYTES_NOTE, readable_token
from core.outputs.predictions import MAX_TOP_K, NoLanguageModelHead
from core.teaching.examples import BANK_RIVER
from ui import results
from ui.errors import friendly_fragment
from ui.explain import explain
from ui.figures import main_column_width, show_figure
from ui.models import language_model_of
from ui.page_figures import MAX_MASKS_SHOWN, MAX_ROWS_SHOWN, candidate_rows, fill_in_figure, next_token_figure
from ui.page_state import end_page, option, set_option
from ui.seq2seq import stop_unless_one_stack
from ui.session import current_model, current_model_name, current_text, current_token_limit
from viz.common import markdown_safe
from viz.predictions import NARROW_PX

st.title("Predictions")
explain(
    "What the model itself would write. An encoder such as BERT was trained to fill in hidden words: put its "
    "mask token in the text and see its top candidates. A decoder such as GPT-2 was trained to continue a text: "
    "see its top guesses for the next token after every position. Probabilities are the softmax of the model's "
    "language-model head over its whole vocabulary."
)
model = current_model()
stop_unless_one_stack("Its prediction is the target itself: leave the sidebar's Target text empty and the model writes "
                      "one (greedy decoding), so this page does not apply.")
try:
    with st.spinner(f"Loading the language-model head of {model.name}…"):
        language_model = language_model_of(current_model_name())
except NoLanguageModelHead as err:
    st.info(str(err), icon=":material/info:")
    end_page()
text = current_text()
if not text.strip():
    st.info("There is no text yet: type a sentence in the sidebar.", icon=":material/edit:")
    end_page()
@friendly_fragment
def candidates(model, language_model, text: str) -> None:
    """The number of candidates and everything it changes: moving the slider reruns only this part."""
    top_k = option(st.slider, "Candidates to show", 1, MAX_TOP_K, 5, key="top_k")
    limit = current_token_limit()
    with st.spinner("Running the model…"):
        predictions = results.predictions(current_model_name(), text, max_tokens=limit).top(top_k)
    all_ids = language_model.tokenizer(text)["input_ids"]  # the whole text, to tell what the cut left out
    if len(all_ids) > limit:
        reason = (f"{markdown_safe(model.name)} reads at most {limit}" if limit >= model.max_tokens
                  else f"this app is set to analyse at most {limit}")
        whole_page = " by every part of this page (the guesses, the next token, the generation and the lens)"
        st.info(f"The text has {len(all_ids):,} tokens and {reason}, so only the first {limit} are used"
                f"{whole_page if predictions.kind == 'next' else ''}.", icon=":material/content_cut:")
    rows = candidate_rows(predictions, top_k)

    if predictions.kind == "masked":
        mask = model.tokenizer.mask_token
        masks_in_text = sum(1 for i in all_ids if i == model.tokenizer.mask_token_id)
        if masks_in_text > len(predictions.positions):
            st.warning(f"{masks_in_text - len(predictions.positions)} of the {masks_in_text} {markdown_safe(mask)} tokens "
                       f"lie past the first {limit} tokens, which is all this page reads: move them earlier or "
                       "shorten the text to see their fill-ins.", icon=":material/content_cut:")
            if not len(predictions.positions):
                return
        if not len(predictions.positions):
            example = BANK_RIVER.replace("bank", mask)

            st.info(f"Your text has no {markdown_safe(mask)}. Put {markdown_safe(mask)} where a word should be, "
                    f"for example: {markdown_safe(example)}", icon=":material/info:")
            if st.button("Use this example", on_click=set_option, args=("text", example), kwargs={"app": True},
                         icon=":material/edit:"):
                st.rerun(scope="app")  # the sidebar's text changed: the whole page, not only this part
            return
        explain(f"Each {markdown_safe(mask)} is predicted on its own, from the whole text around it (all masks "
                    "are predicted in the same pass, none sees another's answer).")
        filled = text
        for candidates in predictions.candidates:
            filled = filled.replace(mask, candidates[0].strip(), 1)
        st.caption("The text with every mask replaced by its most likely candidate:")
        st.code(filled, language=None, wrap_lines=True)
        columns = st.columns(2)
        for i in range(min(len(predictions.positions), MAX_MASKS_SHOWN)):
            with columns[i % 2]:
                bars = fill_in_figure(model.name, predictions, i, rows)
                show_figure(bars.figure, name=bars.name, data=bars.data, key=f"predictions-mask-{i}", share=0.5)
        if len(predictions.positions) > MAX_MASKS_SHOWN:
            st.caption(f"The first {MAX_MASKS_SHOWN} masks are drawn; the table below has them all.")
    else:
        explain("Row i shows what the model expects after reading the text up to token i, which it sees together "
                    "with everything before it (and nothing after: it is a decoder). The table also shows the token "
                    "that really came next and the probability the model gave it.")
        narrow = main_column_width() < NARROW_PX
        if narrow:
            st.caption("On this narrow screen the colour bar is left out: colours run from probability 0 to 1 as on a "
                       "wide one; touch or hover a cell for its probability.")
        heatmap = next_token_figure(model.name, predictions, rows, narrow=narrow)
        show_figure(heatmap.figure, name=heatmap.name, data=heatmap.data, key="predictions-next")
        if len(predictions.positions) > MAX_ROWS_SHOWN:
            st.caption(f"The first {MAX_ROWS_SHOWN} positions are drawn; the table below has them all.")
        next_tokens = [readable_token(t) for t in predictions.tokens[1:]] + ["(end of text)"]
        rows = [  # the table: one row per position, each token written by the app's one rule
            {"position": int(p), "text so far ends with": readable_token(predictions.tokens[p]),
             "most likely next": readable_token(candidates[0]),
             "probability": float(predictions.probabilities[i, 0]), "actual next token": next_tokens[p],
             "its probability": float(predictions.actual_probabilities[p])}
            for i, (p, candidates) in enumerate(zip(predictions.positions, predictions.candidates))
        ]
    if any(BYTE_TOKEN.search(t) for t in [*predictions.tokens, *(c for row in predictions.candidates for c in row)]):
        st.caption(markdown_safe(PARTIAL_BYTES_NOTE))
    st.dataframe(pd.DataFrame(rows), hide_index=True, height=min(420, 38 + 35 * len(rows)))

candidates(model, language_model, text)
if language_model.kind == "next":
    from ui.lm_lens import lens_view
    from ui.lm_views import sampling_and_generation

    sampling_and_generation(text)
    lens_view(text)
