"""Issue 50 item 15: the sidebar's upload says one thing, about the file last chosen. A refused file's sentence used
to stay beside the browser's own refusal of the next file (too big for the widget's 1 MB, or not named .txt)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

DROPZONE = '[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInput"]'


def _sidebar_text(page) -> str:
    return page.locator('[data-testid="stSidebar"]').inner_text()


def _choose(app_page, path) -> None:
    app_page.page.locator(DROPZONE).set_input_files(str(path))
    app_page.page.wait_for_selector(f'[data-testid="stSidebar"] >> text={path.name}')
    app_page.wait_until_idle()


def test_a_second_file_replaces_the_first_files_sentence(app_page, tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9 au lait")  # not UTF-8: the app's own sentence
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 300_000)  # 1.5 MB of text: over the text box's 1 MB
    notes = tmp_path / "notes.md"
    notes.write_text("A text file not named .txt.", encoding="utf-8")
    page = app_page.open()
    _choose(app_page, latin)
    assert "The file latin.txt is not UTF-8 text" in _sidebar_text(page)
    _choose(app_page, big)
    sidebar = _sidebar_text(page)
    assert "latin.txt" not in sidebar, sidebar
    assert "The file big.txt has 1,500,000 bytes, more than the 1,048,576 this app accepts" in sidebar
    assert "or smaller" not in sidebar  # the widget's own refusal ("File must be 1.0MB or smaller.")
    _choose(app_page, notes)
    sidebar = _sidebar_text(page)
    assert "big.txt" not in sidebar and "not allowed" not in sidebar.lower(), sidebar
    assert page.locator('[data-testid="stSidebar"] textarea').first.input_value() == "A text file not named .txt."
    app_page.assert_clean()
