"""The needle page's depth × length grid: one cached teacher-forced pass per cell (``core.attention_heads.retrieval.answer_success``),
measured with a progress bar and a Stop button; a stopped grid shows the cells measured so far and can go on."""

from __future__ import annotations

import streamlit as st

from core.attention_heads.retrieval import AnswerSuccess, depth_length_grid
from ui import results
from ui.figures import show_figure
from ui.page_state import option
from ui.stoppable import StopFlag, progress_with_stop
from viz.common import file_stem
from viz.needle import grid_heatmap, grid_sentence, grid_table

DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
GRID_LENGTHS = (256, 512, 1024, 2048)
MAX_GRID_LENGTHS = 4
STOPPED = StopFlag("_needle_grid_stopped")  # the grid (model, needle, question, answer, lengths) whose measuring was stopped


def _cell(model_name: str, length: int, needle: str, question: str, answer: str, depth: float,
          compute: bool) -> AnswerSuccess | None:
    """One cell, from the cache, or measured when ``compute`` (else None when it is not cached)."""
    cell = results.needle_grid_cells if compute else results.needle_grid_cells.peek
    return cell(model_name, (), length, needle, question, answer, depth)


def grid_lengths(lengths: list[int]) -> list[int]:
    """The grid's haystack lengths: those of ``GRID_LENGTHS`` the page offers when at least two are, else the
    ``MAX_GRID_LENGTHS`` longest it offers (a smaller token limit or window)."""
    chosen = [n for n in GRID_LENGTHS if n in lengths]
    return chosen if len(chosen) >= 2 else lengths[-MAX_GRID_LENGTHS:]


def depth_length_view(model_name: str, needle: str, question: str, answer: str, lengths: list[int]) -> None:
    """The section: a switch to measure the grid; then the grid with progress and Stop, its figure and sentence."""
    st.header("Depth × length")
    cells = len(DEPTHS) * len(lengths)
    on = option(st.toggle, "Measure the answer at every depth and length", value=False, key="grid",
                help=f"{cells} passes of the model, one per cell ({len(DEPTHS)} depths × haystacks of "
                     f"{', '.join(f'{n:,}' for n in lengths)} tokens), each with the answer appended.")
    if not on:
        st.caption(f"The grid reads the prompt {cells} times, at needle depths of "
                   f"{', '.join(f'{d:.0%}' for d in DEPTHS)} and haystacks of {', '.join(f'{n:,}' for n in lengths)} "
                   "tokens: switch it on to measure it.")
        return
    key = (model_name, needle, question, answer, tuple(lengths))
    if STOPPED.stopped(key):
        STOPPED.offer_to_go_on("You stopped the measuring: the cells measured until then are shown.",
                               "Go on measuring", "needle-grid-go-on")
        grid = depth_length_grid(lambda d, n: _cell(model_name, n, needle, question, answer, d, False), DEPTHS, lengths)
    else:
        with progress_with_stop(f"Measuring {cells} cells…", "{done} of {total} cells measured",
                                button_key="needle-grid-stop", on_stop=STOPPED.stop, args=(key,)) as progress:
            grid = depth_length_grid(lambda d, n: _cell(model_name, n, needle, question, answer, d, True), DEPTHS,
                                     lengths, progress)
    sentence = grid_sentence(grid)
    if grid.measured.any():
        show_figure(grid_heatmap(grid), name=file_stem(model_name, "needle-depth-length"), data=lambda: grid_table(grid),
                    key="needle-grid", alt=sentence)
    st.markdown(sentence)
