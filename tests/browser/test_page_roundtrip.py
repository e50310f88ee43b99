"""Issue 19 in a real browser, items 2 and 8 and the every-page round trip.

Pages keep their own options while the user moves between them, and the URL always shows exactly the
page on screen (see ``ui/page_state.py`` for the rules). These tests move with the sidebar navigation,
as users do, and reload.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.browser.test_navigation import (  # noqa: F401 - tiny_model_dir is a fixture used by name
    choose, flip, main, navigate, path, pick_radio, press_segment, query, same_view, settle, slide_left, tiny_model_dir,
    type_text, view, widget_values,
)
from tests.model_factory import build_tiny_bert_mlm
from tests.pages_registry import ROOT, landed_pages

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
        assert [v for v in values if v.startswith("slider")] == ["slider Layer=6"], values  # its own default: the last
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


# --- every page: options survive a tour of the other pages and a reload ------------------------------------

BASS_LINES = "fish: The bass swam away.\nfish: A bass took the hook.\nmusic: The bass was loud.\nmusic: He tuned the bass."


def write(app, label: str, text: str) -> None:
    """Type ``text`` into the page's text box whose label starts with ``label``, and apply it."""
    type_text(app, main(app.page).get_by_role("textbox", name=label), text)


# The options each page declares that the tour does not change, and why.
NOT_CHANGED = {
    ("attention", "bertviz"): "shown only in the BertViz view; the tour uses the one-layer view",
}
# url path -> [(action, widget label, choice, the parameter it writes)]: a non-default value for every option
# the page declares (``declared_options``), set by clicking the widget as a user does.
CHANGES = {
    "": [],  # the home page has no option of its own
    "attention": [  # the source last: norm-weighted disables the word-level toggle, which keeps its value
        (choose, "Special tokens", "hide", "special"), (flip, "Word level", None, "words"),
        (pick_radio, "Colour scale", "per head", "scale"), (choose, "Palette", "viridis", "palette"),
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "3", "head"),
        (press_segment, "View", "one layer", "view"), (choose, "Attention source", "norm-weighted", "source"),
    ],
    "maxima": [  # the source last: norm-weighted disables the word-level toggle, which keeps its value
        (pick_radio, "Heads", "one head", "heads"), (choose, "Head (counted from 0)", "2", "head"),
        (flip, "Include special tokens", None, "special"), (flip, "Word level", None, "words"),
        (choose, "Layer (counted from 0)", "1", "layer"), (pick_radio, "Attention source", "norm-weighted", "source"),
    ],
    "stats": [(press_segment, "Average over", "example sentences", "over"), (choose, "Statistic", "previous token", "stat")],
    "inside": [
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (choose, "Query token", re.compile(r"^3: "), "query"),
    ],
    "compare": [
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (write, "Text B", "I will walk the bank of a stream with my dog.", "text_b"),
        (choose, "Word in both texts", "will", "word"),
    ],
    "predictions": [(slide_left, "Candidates to show", None, "top_k")],
    "drift": [
        (pick_radio, "Compare hidden state k with", "previous", "reference"),
        (choose, "Pooling (tokens → one vector)", "max", "pooling"), (flip, "Subtract baseline", None, "adjust"),
    ],
    "senses": [
        (press_segment, "Sentences", "Your sentences", "source"), (choose, "Word", "bass", "word"),
        (write, "One sentence per line", BASS_LINES, "lines"),
        (slide_left, "Layer", None, "layer"), (press_segment, "Projection", "PCA", "method"),
    ],
}


def declared_options(page_file: str) -> set[str]:
    """The URL keys of the options ``page_file`` declares with ``option(..., key="...")`` (literal keys only)."""
    tree = ast.parse((ROOT / page_file).read_text())
    return {
        keyword.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "option"
        for keyword in node.keywords
        if keyword.arg == "key" and isinstance(keyword.value, ast.Constant) and not any(
            k.arg == "app" for k in node.keywords)
    }


def change_one_option(app) -> None:
    """For a page ``CHANGES`` has no entry for: move its first slider one step, or else flip its first switch,
    or else pick another entry in its first selectbox."""
    slider = main(app.page).get_by_role("slider").first
    if slider.count():
        before = slider.input_value()
        settle(app, lambda: slider.press("ArrowRight"))
        if slider.input_value() == before:  # it was at its maximum
            settle(app, lambda: slider.press("ArrowLeft"))
        return
    switch = main(app.page).locator('[data-testid="stCheckbox"]').filter(has=app.page.get_by_role("switch")).first
    if switch.count():
        settle(app, switch.locator("label").first.click)
        return
    box = main(app.page).get_by_role("combobox").first
    assert box.count(), "a page without a slider, a switch or a selectbox: add it to CHANGES"
    current = box.input_value()
    box.click()
    settle(app, app.page.get_by_role("option").filter(has_not_text=current).first.click)


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory) -> str:
    """A 2-layer × 4-head BERT with a masked-LM head, so the predictions page has its option too."""
    return str(build_tiny_bert_mlm(tmp_path_factory.mktemp("models") / "tour-bert"))


def test_every_page_keeps_its_view_through_the_others_and_a_reload(app_page, tiny_mlm_dir):
    """Every page of app.py's PAGES, with a tiny BERT (masked-LM head) chosen by a link.

    1. On each page in turn, every option the page declares (``option(..., key=...)`` in its file, less
       ``NOT_CHANGED``) is set to a non-default value by clicking its widget (``CHANGES``; the table must cover
       every declared option). A page missing from ``CHANGES`` (a page added later) gets one option changed
       generically. After each page: the URL holds the sidebar's and exactly the changed parameters.
    2. Then each page is visited again with the navigation, so between changing a page and coming back the
       test visited every other page (each holding its own changed options): the URL must hold that page's
       parameters and nothing foreign, and the page must show the same widget values and figure titles.
    3. Then each page's URL is loaded afresh (a reload: a new session from the URL), the last one with the
       browser's reload: same parameters, same widget values and figure titles.
    No error element, console error, dialog or outside request anywhere.
    """
    app = app_page
    app_params = {"model": tiny_mlm_dir}
    app.open("", app_params)
    pages = landed_pages()
    expected: dict[str, tuple[dict[str, str], tuple]] = {}
    for file, url_path in pages:
        navigate(app, url_path)
        assert query(app.page) == app_params, url_path  # a page not yet changed shows no parameter of its own
        changes = CHANGES.get(url_path)
        if changes is None:
            change_one_option(app)
            assert set(query(app.page)) > set(app_params), (url_path, query(app.page))
        else:
            covered = {param for *_, param in changes} | {p for page, p in NOT_CHANGED if page == url_path}
            assert declared_options(file) <= covered, (url_path, declared_options(file) - covered)
            for action, label, choice, param in changes:
                action(app, label, choice) if choice is not None else action(app, label)
                assert param in query(app.page), (url_path, label, query(app.page))
            assert set(query(app.page)) == set(app_params) | {param for *_, param in changes}, (url_path, query(app.page))
        app.assert_clean()
        expected[url_path] = (query(app.page), view(app))

    for _file, url_path in pages:
        navigate(app, url_path)
        params, shown = expected[url_path]
        assert query(app.page) == params, url_path
        same_view(app, shown)
        app.assert_clean()

    for _file, url_path in pages:
        params, shown = expected[url_path]
        app.open(url_path, params)
        for reload in range(2 if url_path == pages[-1][1] else 1):  # the last page also through the browser's reload
            if reload:
                app.page.reload()
                app.wait_until_idle()
            assert path(app.page) == url_path
            assert query(app.page) == params, url_path
            same_view(app, shown)
            app.assert_clean()
