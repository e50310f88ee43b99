"""The app shell in a real browser: links carry the state, nothing leaves localhost (every page from a link, with its
sidebar holding the text: ``test_hostile.test_a_crafted_link_runs_nothing``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser


def test_home_paints_on_the_bundled_model(app_page):
    page = app_page.open()
    page.wait_for_selector("text=What the model saw")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=60_000)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    app_page.assert_clean()


def test_typed_text_reaches_the_model_and_the_url(app_page):
    page = app_page.open()
    box = page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse")
    box.fill("Zebras graze quietly.")
    box.press("Control+Enter")
    app_page.wait_until_idle()
    page.wait_for_function("() => location.search.includes('Zebras')")
    # the figure's token axis now shows the new words
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === 'quietly')"
    )
    app_page.assert_clean()


def test_switching_pages_keeps_the_text(app_page):
    file, path = landed_pages()[1]
    page = app_page.open("", {"text": "Keep this text."})
    page.locator('[data-testid="stSidebarNav"] a').nth(1).click()
    app_page.wait_until_idle()
    assert path in page.url and "Keep+this+text" in page.url.replace("%20", "+")
    assert page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse").input_value() == "Keep this text."
    app_page.assert_clean()


APP_BACKGROUND = "() => getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"


def _is_dark(rgb: str) -> bool:
    red, green, blue = (int(c) for c in re.findall(r"\d+", rgb)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255 < 0.3


def test_a_presenter_chooses_the_dark_theme_in_the_app_and_a_dark_link_stays_dark(app_page):
    """Issue 40, item 16. The ⋮ menu offers System, Light and Dark (Streamlit 1.67, toolbarMode "viewer"), and a link
    with Streamlit's ``embed_options=dark_theme`` opens dark. Streamlit's page navigation dropped that parameter (it
    keeps embed_options only with embed=true), so the address bar lost the theme at the first page switch."""
    page = app_page.open("", {"text": "Keep this text.", "embed_options": "dark_theme", "img": "SVG"})
    assert _is_dark(page.evaluate(APP_BACKGROUND)), page.evaluate(APP_BACKGROUND)
    page.locator('[data-testid="stMainMenu"] button').click()
    assert page.locator('[data-testid="stMainMenuItem-theme-Dark"]').is_visible()
    assert page.locator('[data-testid="stMainMenuItem-theme-Light"]').is_visible()
    page.keyboard.press("Escape")
    page.locator('[data-testid="stSidebarNav"] a[href$="/attention"]').click()
    app_page.wait_until_idle()
    page.wait_for_function("() => location.pathname.endsWith('/attention') && location.search.includes('Keep')")
    assert "embed_options=dark_theme" in page.url and "img=SVG" in page.url, page.url
    assert _is_dark(page.evaluate(APP_BACKGROUND))
    app_page.assert_clean()


# Where the last line of a text box scrolled to its end is drawn down to (its content box), and where the character
# count and "Press Ctrl+Enter to apply", drawn inside the box's bottom edge, begin.
TEXT_BOX_BOTTOM = """() => {
    const area = document.querySelector('[data-testid="stSidebar"] [data-testid="stTextArea"]');
    const box = area.querySelector('textarea'), style = getComputedStyle(box), rect = box.getBoundingClientRect();
    const note = area.querySelector('[data-testid="InputInstructions"]');
    return {textEnd: rect.bottom - parseFloat(style.borderBottomWidth) - parseFloat(style.paddingBottom),
            noteTop: note.getBoundingClientRect().top, note: note.textContent,
            scrolledToEnd: Math.abs(box.scrollTop + box.clientHeight - box.scrollHeight) <= 1};
}"""


def test_the_text_box_count_is_not_drawn_over_the_last_line_of_a_long_text(module_tab):
    """Issue 40, item 19: the count ("17647/100000") stood over the last line of a long text."""
    module_tab.forget()
    page = module_tab.open("tour")
    box = page.locator('[data-testid="stSidebar"]').get_by_label("Text to analyse")
    box.fill(("The bank of the river was steep and muddy. " * 420)[:17647])
    box.evaluate("e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_function("() => document.querySelector('[data-testid=\"InputInstructions\"]')")
    bottom = page.evaluate(TEXT_BOX_BOTTOM)
    assert "17647/100000" in bottom["note"] and bottom["scrolledToEnd"], bottom
    assert bottom["textEnd"] <= bottom["noteTop"], bottom
    module_tab.assert_clean()


def test_a_deep_link_asks_the_server_only_at_its_base_path(app_page):
    """Loaded from /tour, the frontend used to probe /tour/_stcore/health and /tour/_stcore/host-config first: two
    404s in the console on every page but Home. serve.py's middleware gives it the base URL up front."""
    requested: list[str] = []
    app_page.page.on("request", lambda r: requested.append(r.url))
    for path in ("tour", "attention"):
        app_page.open(path)
    assert app_page.page.evaluate("() => window.__streamlit && window.__streamlit.BACKEND_BASE_URL") == (
        app_page.base_url + "/")
    probes = [url for url in requested if "/tour/_stcore/" in url or "/attention/_stcore/" in url]
    assert not probes, probes
    assert not app_page.failed_responses, app_page.failed_responses
    app_page.assert_clean()


def _material_icon_names() -> set[str]:
    """Every Material icon the app names in its source (``:material/arrow_back:`` → ``arrow_back``)."""
    root = Path(__file__).resolve().parents[2]
    sources = [*root.glob("*.py"), *root.glob("app_pages/*.py"), *root.glob("ui/*.py")]
    return {name for path in sources for name in re.findall(r":material/(\w+):", path.read_text())}


@pytest.mark.parametrize("query", [{"step": "2"}, {"step": "2", "present": "true"}], ids=["page", "present"])
def test_no_icon_name_is_read_aloud(app_page, query):
    """A Material icon is a ligature: its name is the element's text ("arrow_back Back ←"). Every icon the app draws
    must be hidden from assistive technology, so no accessible name or text a screen reader reads contains one."""
    page = app_page.open("tour", query)
    tree = page.locator("body").aria_snapshot()
    icons = _material_icon_names()
    # a ligature is read first ("info About this"); a name with an underscore is no English word anywhere
    words = [re.findall(r"[\w]+", re.sub(r"^\s*- [\w ]+?[:\s\"']+", "", line)) for line in tree.splitlines()]
    read_aloud = [" ".join(w) for w in words if w and (w[0] in icons or any("_" in x and x in icons for x in w))]
    assert not read_aloud, read_aloud
    assert page.get_by_role("button", name=re.compile(r"^Back\b")).count() == 1  # not "arrow_back Back"
    app_page.assert_clean()
