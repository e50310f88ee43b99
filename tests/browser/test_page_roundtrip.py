"""Issue 19 in a real browser, items 2 and 8 and the every-page round trip.

Pages keep their own options while the user moves between them, and the URL always shows exactly the
page on screen (see ``ui/page_state.py`` for the rules). These tests move with the sidebar navigation,
as users do, and reload.
"""

from __future__ import annotations

import pytest

from tests.browser.test_navigation import main, navigate, press_segment, query, settle, tiny_model_dir, type_text, widget_values  # noqa: F401 - tiny_model_dir is a fixture used by name

pytestmark = pytest.mark.browser

# The shared 2-core machine can take minutes for a first page load: wait that long, never sleep.
PATIENCE_MS = 400_000


@pytest.fixture(autouse=True)
def patient(app_page):
    app_page.patience_ms = PATIENCE_MS
    app_page.context.set_default_timeout(PATIENCE_MS)


# --- item 2 ----------------------------------------------------------------------------------------


def test_pages_do_not_overwrite_each_other(app_page):
    """The issue's steps with the default model (6 layers): ``/attention?source=rollout&layer=4`` → Senses →
    Attention → Senses → Attention; then Maxima → Attention."""
    app = app_page
    app.open("attention", {"source": "rollout", "layer": "4"})
    attention = {"source": "rollout", "layer": "4"}
    assert query(app.page) == attention
    for _ in range(2):
        navigate(app, "senses")
        assert query(app.page) == {}  # nothing of the attention page
        values = widget_values(app.page)
        assert [v for v in values if v.startswith("slider")] == ["slider Hidden state=6"], values  # its own default: the last
        navigate(app, "attention")
        assert query(app.page) == attention
        values = widget_values(app.page)
        assert "select Attention source=rollout" in values and "select Layer (counted from 0)=4" in values, values
    navigate(app, "maxima")
    assert query(app.page) == {}
    assert "radio raw" in " ".join(widget_values(app.page))  # the maxima page's own default source
    navigate(app, "attention")
    assert query(app.page) == attention  # no maxima parameter came along
    app.assert_clean()


# --- item 8 ----------------------------------------------------------------------------------------


def test_senses_keeps_own_sentences_and_upload(app_page, tiny_model_dir, tmp_path):
    app = app_page
    app.open("senses", {"model": tiny_model_dir})
    press_segment(app, "Sentences", "Your sentences")
    box = main(app.page).get_by_role("textbox", name="One sentence per line", exact=False)
    lines = "river: The bank was steep.\nriver: Fish swam by the bank.\nmoney: The bank was closed.\nmoney: My bank pays interest."
    type_text(app, box, lines)
    assert query(app.page)["lines"] == lines
    navigate(app, "attention")
    navigate(app, "senses")
    assert box.input_value() == lines
    assert query(app.page) == {"model": tiny_model_dir, "source": "Your sentences", "lines": lines}
    app.page.reload()  # the sentences are in the link too
    app.wait_until_idle()
    assert box.input_value() == lines

    press_segment(app, "Sentences", "Upload CSV")
    csv = tmp_path / "mine.csv"
    csv.write_text("sentence,label\nThe bank of the river.,river\nWe walked the bank.,river\n"
                   "The bank lent money.,money\nThe bank charged fees.,money\n")
    settle(app, lambda: main(app.page).locator('input[type="file"]').set_input_files(str(csv)))
    main(app.page).locator(".js-plotly-plot").first.wait_for()
    navigate(app, "drift")
    navigate(app, "senses")
    assert "Using mine.csv, uploaded earlier in this session (4 sentences)" in main(app.page).inner_text()
    main(app.page).locator(".js-plotly-plot").first.wait_for()
    press_segment(app, "Sentences", "Your sentences")  # and the typed sentences are still there
    assert box.input_value() == lines
    app.assert_clean()
