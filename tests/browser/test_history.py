"""Issue 28 in a real browser: Back and Forward move between pages, each shown as it was left.

Changing an option replaces the URL of the current history entry (the URL always reproduces the view); moving to
another page with the navigation adds one entry. See ``ui/page_state.py`` and ``ui/view_url.py``.
"""

from __future__ import annotations

import pytest

from tests.browser.test_every_page_roundtrip import write
from tests.browser.test_navigation import choose, navigate, path, patient, query, same_view, settle, tiny_model_dir, view, widget_values  # noqa: F401 - fixtures used by name

pytestmark = pytest.mark.browser

TEXT_A = "I will sit on the bank of the river."
TEXT_B = "I will walk the bank of a stream with my dog."


def entries(page) -> int:
    return page.evaluate("history.length")


def wait_for_url(page, expected: dict[str, str]) -> None:
    """Wait until the address bar's parameters are ``expected`` (the URL is replaced once the run has finished)."""
    page.wait_for_function(
        """(want) => {
            const got = new URLSearchParams(location.search);
            return [...got.keys()].length === Object.keys(want).length
                && Object.entries(want).every(([name, value]) => got.getAll(name).length === 1 && got.get(name) === value);
        }""",
        arg=expected,
    )
    assert query(page) == expected


def test_back_and_forward_move_between_pages_each_as_it_was_left(app_page, tiny_model_dir):
    app = app_page
    page = app.open("compare", {"model": tiny_model_dir})
    before = entries(page)

    write(app, "Text A", TEXT_A)
    write(app, "Text B", TEXT_B)
    choose(app, "Layer (counted from 0)", "1")
    choose(app, "Head (counted from 0)", "2")
    choose(app, "Word in both texts", "of")
    compare = {"model": tiny_model_dir, "text_a": TEXT_A, "text_b": TEXT_B, "layer": "1", "head": "2", "word": "of"}
    wait_for_url(page, compare)
    assert entries(page) == before, "an option change added a history entry"
    left = view(app)
    assert f"text {TEXT_A}" in left[0] and f"text {TEXT_B}" in left[0]

    navigate(app, "attention")
    assert entries(page) == before + 1, "a page switch adds exactly one history entry"
    choose(app, "Layer (counted from 0)", "1", in_fragment=True)  # the attention view's layer reruns its fragment
    attention = {"model": tiny_model_dir, "layer": "1"}
    wait_for_url(page, attention)
    assert entries(page) == before + 1
    attention_view = view(app)

    settle(app, page.go_back)
    assert path(page) == "compare"
    wait_for_url(page, compare)
    same_view(app, left)  # its options and both typed texts, as left
    assert entries(page) == before + 1

    settle(app, page.go_forward)
    assert path(page) == "attention"
    wait_for_url(page, attention)
    same_view(app, attention_view)

    settle(app, page.go_back)
    wait_for_url(page, compare)
    page.reload(wait_until="domcontentloaded")
    app.wait_until_idle()
    assert path(page) == "compare"
    wait_for_url(page, compare)
    same_view(app, left)  # a reload of the URL reproduces the view
    assert f"text {TEXT_A}" in widget_values(page)
    app.assert_clean()
