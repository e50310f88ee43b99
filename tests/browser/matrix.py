"""Which combinations the browser tier opens in ``make test``, and which only in ``make test-full``.

A page load in Chromium costs about a CPU-second whatever it checks, so the matrices of pages × inputs, × models,
× windows and × themes are where the suite's time goes (docs/test-suite.md). ``make test`` opens every page once per
kind of model (encoder, language model, encoder-decoder) at one window, the themes alternating from page to page,
axe-core once per page, presentation mode in full HD on every page, the narrow windows on the pages that had
narrow-screen defects (``NARROW_DEFECTS``), and every regression test of a defect. ``make test-full``
(``FULL_MATRIX=1``) opens every pair: every page × every window × both themes × every degenerate input.

A combination only the full matrix opens is a ``pytest.param`` marked ``full`` (or a test marked ``full``):
``tests/conftest.py`` deselects them without ``FULL_MATRIX=1``, and pytest counts them as "deselected", never as
passed. ``tests/browser/test_matrix.py`` checks that what ``make test`` keeps still covers every page.
"""

from __future__ import annotations

import itertools
import os

import pytest

FULL_MATRIX = os.environ.get("FULL_MATRIX") == "1"
FULL = pytest.mark.full  # opened only by ``make test-full``
THEMES = ("light", "dark")

# The pages that had narrow-screen defects (390 × 844, or 1024 × 768 with the sidebar open), by url path: these are
# measured in the narrow windows in ``make test``; every page is in ``make test-full``.
NARROW_DEFECTS = {
    "": "issue 28: a link of Home's page list cut at the column's edge",
    "attention": "issue 28: the head's cell numbers 3 px and its key labels overlapping on a phone; issue 40 (14): the "
                 "overview's title under the toolbar",
    "maxima": "issue 28: words overlapping on a phone",
    "compare": "issue 28: heatmaps as strips at 1024 × 768; issue 40 (14): 31 layer ticks overlapping on a phone",
    "effects": "issue 28: heatmaps of ~60 px with head numbers piled up at 1024 × 768",
    "senses": "issue 28: the title cut at 1024 × 768",
    "predictions": "issue 40 (14): the top-next-tokens heatmap ~110 px wide on a phone",
    "inside": "issue 40 (14): the two columns so narrow at 1024 × 768 that the heading broke word by word",
    "drift": "2026-11-27 (docs/test-suite.md): opened from a link on a phone, the page reran for its column and never "
             "finished",
}
# The pages whose exported figures lost text (issue 28: the senses separation legend, the drift legend, the
# importance map's colour-bar title): every figure of these is saved as SVG and measured in ``make test``.
EXPORT_DEFECTS = {"senses", "drift", "effects"}
# Pages whose default view draws no figure until a figure is pinned or a room opened, and what they say instead
# (their figures: tests/browser/test_deck_html.py, test_room_live.py).
NO_FIGURE_YET = {"deck": "No figure is pinned yet", "room": "Open a room"}


def theme(index: int) -> str:
    """The theme of the ``index``-th page of a pass: light and dark in turn, so a pass covers both."""
    return THEMES[index % 2]


def full_only(*values):
    """A parameter set only ``make test-full`` opens."""
    return pytest.param(*values, marks=FULL)


def in_turn(rows: list, columns: list) -> list:
    """Every ``(row, column)`` pair: in ``make test`` each row once, with the columns taken in turn (so each row and
    each column is opened); the other pairs only in ``make test-full``."""
    if len(rows) < len(columns):
        raise ValueError(f"{len(rows)} rows cannot take {len(columns)} columns in turn")
    turn = {(row, columns[i % len(columns)]) for i, row in enumerate(rows)}
    return [pair if pair in turn else full_only(*pair) for pair in itertools.product(rows, columns)]


# The browser tests ``make test`` runs, each with why (issue 49's decision): the passes above, the harness's own checks,
# and the regression test of each defect a user hit. Every other browser test (a feature checked in Chromium: its
# numbers, widgets and round trips are also checked by the AppTest and unit tiers) runs in ``make test-full`` only:
# ``tests/conftest.py`` marks it ``full``. A new browser test is in ``make test-full`` until it is listed here.
PASS = "a pass of make test's browser tier (docs/test-suite.md)"
HARNESS = "the harness's own check: without it every other browser test could pass by not looking"
MAKE_TEST = {
    # the passes: every page once per kind of model, axe-core once per page, presentation mode, the narrow windows
    "test_hostile::test_a_crafted_link_runs_nothing": PASS + ": every page on the encoder, axe-core, themes in turn",
    "test_every_page_on_smollm2::test_view_paints_on_smollm2": PASS + ": every page on the language model",
    "test_seq2seq::test_a_hostile_deep_link_runs_nothing_on_an_encoder_decoder": PASS + ": every page on T5 and BART",
    "test_slides::test_default_view_fits_every_screen_exports_a_slide_and_passes_axe": PASS + ": presentation mode",
    "test_slides::test_every_tour_step_fits_every_screen_and_passes_axe": PASS + ": the tour on a projector",
    "test_slides_outside_presentation_mode::test_default_view_fits_every_screen_and_passes_axe_outside_presentation_mode":
        PASS + ": the narrow windows on the pages that had narrow-screen defects",
    "test_tour::test_every_step_from_a_deep_link_with_hostile_text": PASS + ": the tour's hostile deep links",
    "test_harness::test_a_request_to_another_host_is_blocked_in_chromium_and_recorded": HARNESS,
    "test_harness::test_a_page_is_not_idle_while_an_elements_code_is_still_loading": HARNESS,
    # regression tests of defects users hit (each test's docstring tells the defect)
    "test_hostile::test_hostile_text_typed_into_the_box_runs_nothing": "typed markup ran as HTML (issue 5)",
    "test_hostile::test_a_hostile_model_id_is_only_a_message": "a crafted model id reached the loader",
    "test_hostile::test_identical_sense_vectors_through_t_sne_leave_the_server_running": "t-SNE on identical vectors "
                                                                                          "stopped the server",
    "test_hostile::test_a_token_limit_below_the_special_tokens_is_a_sentence": "a limit below the special tokens "
                                                                               "raised",
    "test_attention::test_the_overview_title_is_clear_of_the_toolbar_on_a_phone": "issue 40, item 14",
    "test_home::test_the_token_table_of_twelve_tokens_has_no_scrollbar": "issue 28",
    "test_maxima::test_one_unknown_token_standing_for_400_emoji_draws_without_console_errors": "issue 28",
    "test_inside::test_a_laptop_with_the_sidebar_open_stacks_text_and_figures": "issue 40, item 14",
    "test_flow::test_on_a_phone_the_route_fits_labels_every_token_and_a_node_opens_its_details": "issue 50, items 12 and 16b",
    "test_flow::test_smollm2s_route_has_rows_apart_and_its_named_edge_opens": "issue 50, item 11",
    "test_needle::test_in_presentation_mode_the_retrieval_grid_and_its_heading_fit_one_slide": "issue 50, item 16d",
    "test_qk_map::test_every_option_is_whole_on_a_laptop_with_the_sidebar_open": "issue 50, item 16a",
    "test_sidebar_upload::test_a_second_file_replaces_the_first_files_sentence": "issue 50, item 15",
    "test_long_context::test_on_a_phone_every_colour_bar_title_is_inside_its_figure_and_the_window":
        "issue 50, item 16c",
    "test_page_roundtrip::test_pages_do_not_overwrite_each_other": "pages overwrote each other's options",
    "test_navigation::test_a_link_keeps_its_option_when_the_widget_is_drawn_after_the_second_run":
        "a link's option was lost on a phone",
    "test_startup::test_a_slow_page_opened_on_a_phone_reruns_once_for_its_column_and_finishes":
        "Drift from a link on a phone never finished",
    "test_fragments::test_a_click_fetches_no_favicon_and_the_csv_is_the_head_on_screen":
        "the CSV button gave an earlier head's data",
    "test_patching::test_stop_ends_a_generation_in_the_browser_and_keeps_its_text": "issue 27, item 2: Stop",
    "test_tour::test_the_lm_track_walks_through_its_steps_on_a_tiny_language_model": "issue 27, item 7",
    "test_shell::test_a_presenter_chooses_the_dark_theme_in_the_app_and_a_dark_link_stays_dark": "issue 40, item 16",
    "test_shell::test_the_text_box_count_is_not_drawn_over_the_last_line_of_a_long_text": "issue 40, item 19",
    "test_shell::test_a_deep_link_asks_the_server_only_at_its_base_path": "two 404s on every page but Home",
    "test_shell::test_no_icon_name_is_read_aloud": "icon names read aloud by screen readers",
    "test_bidi_labels::test_right_to_left_tokens_keep_their_prefix_and_position_in_place":
        "right-to-left tokens lost their prefix",
    # issue 51's head switch on a short text (its long-text test, 35–140 s, is make test-full's)
    "test_head_switch::test_heads_switch_in_the_browser_before_any_rerun": "issue 51: heads drawn in the browser",
    "test_head_switch::test_arrow_keys_move_between_heads_and_the_link_reopens_the_head": "issue 51: keys and the link",
}


def browser_test_name(nodeid: str) -> str:
    """``"test_file::test_name"`` of a browser test's node id (its parameters left out)."""
    path, name = nodeid.split("::")[:2]
    return f"{path.rsplit('/', 1)[-1].removesuffix('.py')}::{name.split('[')[0]}"
