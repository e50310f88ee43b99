"""Issue 19 in a real browser: pages keep their own state, links and reloads reproduce the view.

Moves between pages with the sidebar navigation, reloads, and opens links in new tabs, the way
workshop participants do. See ``ui/page_state.py`` for the rules being tested.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import EVERY_CHART_DRAWN
from tests.browser.slide_checks import REFITTED_JS
from tests.model_factory import build_tiny_bert
from tests.pages_registry import page_titles
from ui.linked_texts import URL_TEXT_MAX_BYTES

pytestmark = pytest.mark.browser

APP_PARAMS = {"model", "text", "text_id", "present", "img"}
NAV_TITLES = page_titles()  # url path -> the title in the sidebar navigation


@pytest.fixture(autouse=True)
def patient(app_page):
    """A shared 2-core machine can be slow to answer a click: wait as long as the page loads may take."""
    app_page.context.set_default_timeout(120_000)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    """A 2-layer × 4-head BERT folder: every page answers fast, and the model is not the default."""
    return str(build_tiny_bert(tmp_path_factory.mktemp("models") / "nav-bert"))


def query(page) -> dict[str, str]:
    """The URL's query parameters as the browser holds them now."""
    return {key: values[-1] for key, values in parse_qs(urlparse(page.evaluate("location.href")).query).items()}


def path(page) -> str:
    return urlparse(page.evaluate("location.href")).path.strip("/")


def settle(app, action) -> None:
    """Run ``action`` (a click, a key press) and wait for the rerun it causes to start and finish.

    On a loaded machine the rerun can start later than ``wait_until_idle``'s settling time, so
    the start is watched for explicitly (the tab's run counter, ``conftest.WATCH_RUNS_JS``; briefly: an action that
    changes nothing starts no run).
    """
    started = app.page.evaluate("window.__runs.started")
    action()
    try:
        app.page.wait_for_function("(before) => window.__runs.started > before", arg=started, timeout=15_000)
    except PlaywrightTimeout:
        pass
    app.wait_until_idle()


def navigate(app, url_path: str) -> None:
    """Click the page's entry in the sidebar navigation (the in-app way of changing pages)."""
    settle(app, lambda: app.page.locator('[data-testid="stSidebarNav"] a').filter(has_text=NAV_TITLES[url_path]).first.click())
    app.page.wait_for_function("(p) => location.pathname.replace(/\\//g, '') === p", arg=url_path)


def main(page):
    return page.locator('[data-testid="stMain"]')


def open_list(app, box, target, attempts: int = 4) -> None:
    """Open the selectbox ``box`` until its option ``target`` shows.

    A rerun that redraws the box (a page's second run, a page switch replacing the last page's box of the same label)
    can close a list opened a moment before it, or take the click: then the list is closed and opened again.
    """
    for attempt in range(attempts):
        box.click()
        if box.get_attribute("aria-expanded") != "true":  # a click can focus the box without opening its list
            box.press("ArrowDown")
        try:
            target.first.wait_for(state="visible", timeout=10_000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            app.page.keyboard.press("Escape")
            app.wait_until_idle()


def choose(app, label: str, choice: str | re.Pattern, *, in_fragment: bool = False) -> None:
    """Pick ``choice`` (exact text, or a pattern) in the selectbox labelled ``label``. ``in_fragment``: the box is in a
    fragment, whose rerun alone is not a run of the app's script (nothing to watch start; it is waited for as idle)."""
    box = main(app.page).get_by_role("combobox", name=label, exact=True)
    options = app.page.get_by_role("option")
    target = options.filter(has_text=choice) if isinstance(choice, re.Pattern) else app.page.get_by_role("option", name=choice, exact=True)
    open_list(app, box, target)
    if in_fragment:
        target.first.click()
        app.wait_until_idle()
    else:
        settle(app, target.first.click)


def pick_radio(app, label: str, choice: str) -> None:
    settle(app, main(app.page).locator('[data-testid="stRadio"]').filter(has_text=label).get_by_text(choice, exact=True).click)


def press_head(app, label: str, choice: str) -> None:
    """Click the Attention page's head switch button "``label`` ``choice``" (``ui.head_switch``: a radio button)."""
    settle(app, main(app.page).get_by_role("radio", name=f"{label} {choice}", exact=True).click)


def flip(app, label: str) -> None:
    box = main(app.page).locator('[data-testid="stCheckbox"]').filter(has=app.page.get_by_role("switch", name=label))
    settle(app, box.locator("label").first.click)


def press_segment(app, label: str, choice: str) -> None:
    """Choose ``choice`` in the segmented control labelled ``label`` (a radio group of buttons in Streamlit 1.67)."""
    group = main(app.page).locator('[data-testid="stButtonGroup"]').get_by_role("radiogroup", name=label, exact=True)
    settle(app, group.get_by_role("radio", name=choice, exact=True).click)


def slide_left(app, label: str) -> None:
    slider = main(app.page).locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider")
    settle(app, lambda: slider.press("ArrowLeft"))


def type_text(app, box, text: str) -> None:
    box.fill(text)
    settle(app, lambda: box.press("Control+Enter"))


def sidebar_text(page):
    return page.locator('[data-testid="stSidebar"] textarea').first


def widget_values(page) -> list[str]:
    """What the page's widgets show: selectboxes, switches, radios, segmented controls, sliders, text boxes.

    As Streamlit 1.67 draws them: a slider thumb is an ``input type="range"`` (no ``aria-valuenow``), a
    segmented control a radio group of buttons with ``aria-checked``.
    """
    return page.evaluate(
        """() => {
            const main = document.querySelector('[data-testid="stMain"]');
            const out = [];
            main.querySelectorAll('input[role="combobox"]').forEach(e => out.push(`select ${e.getAttribute('aria-label')}=${e.value}`));
            main.querySelectorAll('input[role="switch"]').forEach(e => out.push(`switch ${e.getAttribute('aria-label')}=${e.checked}`));
            main.querySelectorAll('input[type="radio"]:checked').forEach(e => out.push(`radio ${e.closest('label').innerText}`));
            main.querySelectorAll('[data-testid="stButtonGroup"] button')
                .forEach(e => out.push(`segment ${e.innerText}=${e.getAttribute('aria-checked')}`));
            main.querySelectorAll('input[type="range"]').forEach(e => out.push(`slider ${e.getAttribute('aria-label')}=${e.value}`));
            main.querySelectorAll('textarea, input[type="text"]:not([role="combobox"])').forEach(e => out.push(`text ${e.value}`));
            return out;
        }"""
    )


def view(app) -> tuple[list[str], list[str]]:
    """The page's widget values and its figure titles, once the figures have been drawn."""
    page = app.page
    page.wait_for_function(EVERY_CHART_DRAWN)
    titles = page.locator(".js-plotly-plot .gtitle").evaluate_all("els => els.map(e => e.textContent)")
    return widget_values(page), sorted(titles)


def same_view(app, expected) -> None:
    """Figures draw after the script has finished: poll briefly before comparing."""
    for _ in range(40):
        now = view(app)
        if now == expected:
            return
        app.page.wait_for_timeout(500)
    assert now == expected


# --- item 1 ----------------------------------------------------------------------------------------


def test_maxima_after_special_tokens_hidden_on_attention(app_page, tiny_model_dir):
    app = app_page
    app.open("maxima", {"model": tiny_model_dir})
    navigate(app, "attention")
    for choice in ("hide", "renormalise"):
        choose(app, "Special tokens", choice)
        assert query(app.page)["special"] == choice
        navigate(app, "maxima")
        app.assert_clean()
        assert "special" not in query(app.page)  # the attention page's choice is not the maxima page's toggle
        assert widget_values(app.page).count("switch Include special tokens=false") == 1
        navigate(app, "attention")
        assert query(app.page)["special"] == choice  # and the attention page kept it
    app.assert_clean()


# --- item 3 ----------------------------------------------------------------------------------------


def test_ranked_head_links_open_the_same_view_in_a_new_tab(app_page, tiny_model_dir):
    app = app_page
    text = "The cat sat on the mat near the bank."
    app.open("attention", {"model": tiny_model_dir, "text": text, "source": "rollout"})  # a choice the link must undo
    navigate(app, "stats")
    link = main(app.page).get_by_role("link", name=re.compile(r"^layer \d+, head \d+: ")).first
    name = link.inner_text()
    layer, head = re.match(r"layer (\d+), head (\d+)", name).groups()
    href = link.get_attribute("href")
    assert link.get_attribute("target") == "_blank"
    linked = {key: values[-1] for key, values in parse_qs(urlparse(href).query).items()}
    assert linked == {"model": tiny_model_dir, "text": text, "source": "raw", "layer": layer, "head": head}
    with app.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.wait_for_load_state("domcontentloaded")
    original, app.page = app.page, tab
    try:
        app.wait_until_idle()
        assert path(tab) == "attention"
        assert sidebar_text(tab).input_value() == text
        assert tab.get_by_role("combobox", name="Model").input_value() == tiny_model_dir
        values = widget_values(tab)
        assert "select Attention source=raw" in values
        assert f"select Layer (counted from 0)={layer}" in values
        tab.get_by_role("radio", name=f"Head {head}", exact=True).wait_for(timeout=60_000)  # the head switch's choice
        assert tab.get_by_role("radio", name=f"Head {head}", exact=True).get_attribute("aria-checked") == "true"
        # the head drawn: the switch's heatmap, titled with it (its Plotly figure is built only for its downloads)
        title = tab.locator('[data-testid="stMain"] .head-switch .title')
        title.wait_for(timeout=60_000)
        assert title.text_content() == f"Layer {layer}, head {head}", title.text_content()
        app.assert_clean()
    finally:
        app.page = original


# --- item 4 ----------------------------------------------------------------------------------------


def test_cjk_text_at_the_url_limit_reloads(app_page, tiny_model_dir):
    app = app_page
    text = ("銀行の川岸で座った。" * 30)[: URL_TEXT_MAX_BYTES // 9]  # 222 characters, 1,998 bytes encoded
    app.open("", {"model": tiny_model_dir, "text": text})
    assert query(app.page)["text"] == text
    app.page.reload()
    app.wait_until_idle()
    assert sidebar_text(app.page).input_value() == text
    assert query(app.page)["text"] == text
    app.assert_clean()


def test_longer_text_is_linked_by_a_content_id(app_page, browser, app_server, tiny_model_dir):
    from tests.browser.conftest import AppPage

    app = app_page
    app.open("attention", {"model": tiny_model_dir, "layer": "1"})
    text = "銀行の川岸で座った。" * 200  # 2,000 CJK characters, 18 KB encoded
    type_text(app, sidebar_text(app.page), text)
    params = query(app.page)
    assert "text" not in params and re.fullmatch(r"[0-9a-f]{12}", params["text_id"]), params
    assert len(app.page.evaluate("location.href")) < 400
    assert "works while this server runs" in app.page.locator('[data-testid="stSidebar"]').inner_text()
    app.page.reload()
    app.wait_until_idle()
    assert sidebar_text(app.page).input_value() == text
    assert query(app.page) == params
    other = AppPage(browser, app_server)  # the link sent to someone else: a new session
    try:
        other.page.goto(app.page.evaluate("location.href"))
        other.wait_until_idle()
        assert sidebar_text(other.page).input_value() == text
        assert "select Layer (counted from 0)=1" in widget_values(other.page)
        other.assert_clean()
    finally:
        other.close()
    app.assert_clean()


def test_unknown_content_id_is_a_sentence(app_page, tiny_model_dir):
    app = app_page
    app.open("", {"model": tiny_model_dir, "text_id": "0123456789ab"})
    assert "does not have it" in app.page.locator('[data-testid="stSidebar"]').inner_text()
    assert "text_id" not in query(app.page)
    app.assert_clean()


# --- item 5 ----------------------------------------------------------------------------------------


def test_query_token_follows_a_new_text(app_page, tiny_model_dir):
    app = app_page
    app.open("inside", {"model": tiny_model_dir, "text": "I sat on the river bank today."})
    choose(app, "Query token", "6: bank")
    assert query(app.page)["query"] == "6"
    type_text(app, sidebar_text(app.page), "The cat sat on the mat near the bank.")
    box = main(app.page).get_by_role("combobox", name="Query token")
    assert box.input_value() == "6: mat"  # the same position, labelled with the new text's token
    assert query(app.page)["query"] == "6"
    app.page.reload()
    app.wait_until_idle()
    assert main(app.page).get_by_role("combobox", name="Query token").input_value() == "6: mat"
    type_text(app, sidebar_text(app.page), "A cat.")  # fewer tokens: the index is clamped to the last one
    assert main(app.page).get_by_role("combobox", name="Query token").input_value() == "4: [SEP]"
    assert query(app.page)["query"] == "4"
    app.assert_clean()


# --- a link whose widgets are drawn late ------------------------------------------------------------------------

# (url path, link parameters, the widget's code file in Streamlit's static/js, what widget_values shows for the link)
LATE_WIDGETS = [
    ("tour", {"step": "6"}, "Slider", "slider Step=6"),
    ("attention", {"layer": "1"}, "Selectbox", "select Layer (counted from 0)=1"),
    ("stats", {"over": "examples"}, "ButtonGroup", "segment example sentences=true"),
]


# The run the probe's report started has ended: the app idle after a finished run, with figures on the page, all fitted
# to the column the probe measured (``slide_checks.REFITTED_JS``).
PROBE_RUN_ENDED = """() => Boolean(window.__runs && window.__runs.finished >= 1
  && document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state') === 'notRunning'
  && document.querySelector('[data-testid="stMain"] .figure-alt') && (""" + REFITTED_JS + """)())"""


@pytest.mark.parametrize("url_path, params, code, shown", LATE_WIDGETS, ids=[c for _, _, c, _ in LATE_WIDGETS])
def test_a_link_keeps_its_option_when_the_widget_is_drawn_after_the_second_run(app_page, tiny_model_dir, url_path,
                                                                                params, code, shown):
    """A new tab loads each widget type's code on first use. On a phone that code can arrive after the page's second
    run (the column probe's, ui.viewport, within a second of the first) has started: the widget is then drawn from
    the second run, which does not send the link's value again (the session already has it). Holding the widget's
    code until the second run has ended makes that order certain; the widget must show the link's value, and keep it.
    (Before ui.option_values.starting_value_argument it showed its default and wrote that back: a link to the tour's
    step 6 opened in a 390-pixel window came up at step 1 in 2 of 4 fresh tabs, the widget's code not held.)"""
    app = app_page
    app.page.set_viewport_size({"width": 390, "height": 844})  # narrow: the probe reruns the page
    held = []
    app.context.route(f"**/static/js/{code}.*.js", lambda route: held.append(route))
    query_string = urlencode({"model": tiny_model_dir} | params)
    app.page.goto(f"{app.base_url}/{url_path}?{query_string}", wait_until="domcontentloaded")
    # The probe's run has ended: the app is idle with its figures fitted to the column the probe measured (the run
    # the report stopped, if it was still running, never reports an end of its own: Streamlit starts the next at once).
    app.page.wait_for_function(PROBE_RUN_ENDED, timeout=120_000)
    assert held, f"the page drew no {code} before its second run ended: nothing was held back"
    for route in held:
        route.continue_()
    app.context.unroute(f"**/static/js/{code}.*.js")
    app.wait_until_idle()
    assert shown in widget_values(app.page), widget_values(app.page)
    assert query(app.page) == {"model": tiny_model_dir} | params  # the sidebar's model picker (a Selectbox) kept its value too
    app.assert_clean()
