"""DRAFT, not collected by pytest (the file name does not start with ``test_``): NOT VERIFIED.

Items 2 and 8 and the "every page" browser test of issue 19: on every page, change each option to a non-default value,
visit every other page, come back, reload, and check the page shows the same view with no error and no
foreign parameter in the URL. They could not be run to a pass before the deadline on the loaded
shared machine (load average 27 on 2 cores): the first page load timed out after 120 s, and on the senses
page the "Your sentences" segment was not found by its role and name (selector not verified). Rename to ``test_tour.py`` once it passes.
"""

from __future__ import annotations

import re

from tests.browser.test_navigation import (  # noqa: F401 - fixtures used by name
    choose, flip, main, navigate, patient, pick_radio, press_segment, query, same_view, slide_left, tiny_model_dir, view,
)

# --- item 2 ----------------------------------------------------------------------------------------


def test_pages_do_not_overwrite_each_other(app_page, tiny_model_dir):
    app = app_page
    app.open("attention", {"model": tiny_model_dir, "source": "rollout", "layer": "1"})
    attention = query(app.page)
    assert attention == {"model": tiny_model_dir, "source": "rollout", "layer": "1"}
    for _ in range(2):
        navigate(app, "senses")
        assert query(app.page) == {"model": tiny_model_dir}  # nothing of the attention page
        assert "slider 2" in widget_values(app.page)  # the senses page's own default layer (the last one)
        navigate(app, "attention")
        assert query(app.page) == attention
        assert "select Attention source=rollout" in widget_values(app.page)
    flip(app, "Word level")
    navigate(app, "maxima")
    assert query(app.page) == {"model": tiny_model_dir}
    navigate(app, "attention")
    assert query(app.page) == attention | {"words": "true"}
    app.assert_clean()


# --- item 8 ----------------------------------------------------------------------------------------


def test_senses_keeps_own_sentences_and_upload(app_page, tiny_model_dir, tmp_path):
    app = app_page
    app.open("senses", {"model": tiny_model_dir})
    press_segment(app, "Sentences", "Your sentences")
    lines = "river: The bank was steep.\nriver: Fish swam by the bank.\nmoney: The bank was closed.\nmoney: My bank pays interest."
    type_text(app, main(app.page).locator("textarea").first, lines)
    navigate(app, "attention")
    navigate(app, "senses")
    assert main(app.page).locator("textarea").first.input_value() == lines
    app.page.reload()  # the sentences are in the link too
    app.wait_until_idle()
    assert main(app.page).locator("textarea").first.input_value() == lines

    press_segment(app, "Sentences", "Upload CSV")
    csv = tmp_path / "mine.csv"
    csv.write_text("sentence;label\nThe bank of the river.;river\nWe walked the bank.;river\n"
                   "The bank lent money.;money\nThe bank charged fees.;money\n")
    settle(app, lambda: main(app.page).locator('input[type="file"]').set_input_files(str(csv)))
    main(app.page).locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    navigate(app, "drift")
    navigate(app, "senses")
    assert "Using mine.csv, uploaded earlier in this session (4 sentences)" in main(app.page).inner_text()
    main(app.page).locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    app.assert_clean()


# --- every page: options survive a tour of the other pages and a reload ------------------------------------

# (url path, [(action, label, choice, parameter it writes)]): non-default values for every bound option.
CHANGES = {
    "attention": [
        (choose, "Attention source", "norm-weighted", "source"), (choose, "Special tokens", "hide", "special"),
        (flip, "Word level", None, "words"), (pick_radio, "Colour scale", "per head", "scale"),
        (choose, "Palette", "viridis", "palette"), (choose, "Layer (counted from 0)", "1", "layer"),
        (choose, "Head (counted from 0)", "3", "head"), (press_segment, "View", "one layer", "view"),
    ],
    "maxima": [
        (pick_radio, "Attention source", "norm-weighted", "source"), (pick_radio, "Heads", "one head", "heads"),
        (choose, "Head (counted from 0)", "2", "head"), (flip, "Include special tokens", None, "special"),
        (choose, "Layer (counted from 0)", "1", "layer"),
    ],
    "stats": [(press_segment, "Average over", "example sentences", "over"), (choose, "Statistic", "previous token", "stat")],
    "inside": [
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (choose, "Query token", re.compile(r"^3: "), "query"),
    ],
    "compare": [
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (choose, "Word in both texts", "will", "word"),
    ],
    "predictions": [],  # a model without a language-model head: the page has no option to show
    "drift": [
        (pick_radio, "Compare layer k with", "previous", "reference"), (choose, "Pooling (tokens → one vector)", "max", "pooling"),
        (flip, "Subtract baseline", None, "adjust"),
    ],
    "senses": [
        (choose, "Word", "bass", "word"), (slide_left, "Layer", None, "layer"), (press_segment, "Projection", "PCA", "method"),
    ],
    "": [],
}


def test_every_page_keeps_its_view_through_the_others_and_a_reload(app_page, tiny_model_dir):
    app = app_page
    app.open("", {"model": tiny_model_dir})
    expected: dict[str, dict[str, str]] = {}  # each page's parameters once its options were changed
    app_params = {"model": tiny_model_dir}
    for url_path, changes in CHANGES.items():
        navigate(app, url_path)
        assert query(app.page) == app_params, url_path  # a page never changed shows no parameter of its own
        for action, label, choice, _param in changes:
            action(app, label, choice) if choice is not None else action(app, label)
        app.assert_clean()
        params = query(app.page)
        assert {p for *_, p in changes} | set(app_params) == set(params), (url_path, params)
        expected[url_path] = params
        shown = view(app)
        for other in CHANGES:
            if other == url_path:
                continue
            navigate(app, other)
            assert query(app.page) == expected.get(other, app_params), (url_path, other)  # nothing foreign, own kept
            app.assert_clean()
        navigate(app, url_path)
        assert query(app.page) == params, url_path
        same_view(app, shown)
        app.page.reload()
        app.wait_until_idle()
        assert query(app.page) == params, url_path
        same_view(app, shown)
        app.assert_clean()
