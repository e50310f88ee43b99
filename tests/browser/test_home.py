"""Home in a real browser: the token table shows every row of a short text without a scrollbar."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_the_token_table_of_twelve_tokens_has_no_scrollbar(app_page):
    """Issue 28: the default text (12 tokens) hid 2 rows behind a scrollbar."""
    page = app_page.open("")
    page.wait_for_selector('[data-testid="stDataFrame"]')
    scroller = page.locator('[data-testid="stDataFrame"] .dvn-scroller').first
    scroller.wait_for()
    heights = scroller.evaluate("e => [e.scrollHeight, e.clientHeight]")
    assert heights[0] <= heights[1], heights
    app_page.assert_clean()
