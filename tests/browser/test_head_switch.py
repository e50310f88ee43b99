"""The Attention page's head switch in a real browser: a click or an arrow key draws another head of the layer from
what the browser holds, before any message from the server; the drawn cells are the model's weights; the choice
reaches the link; axe-core finds nothing serious on the control."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.browser.axe import require_axe, violations_in_light_and_dark
from tests.browser.fragments import Recorder
from tests.browser.test_long_attention import long_server  # noqa: F401 - the long-text server fixture, shared

pytestmark = pytest.mark.browser

TEXT = "The cat sat on the mat near the river bank."
LAYER = 2
TITLE = '[data-testid="stMain"] .head-switch .title'
# the centre of every cell of the drawn head as [r, g, b] (device pixels of the heat canvas)
CELLS_JS = """() => {
    const heat = [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot).filter(Boolean)
        .map(r => r.querySelector('.grid canvas[role="img"]')).find(Boolean);
    const g = heat.getContext('2d');
    const n = Number(heat.dataset.n);
    const side = heat.width / n;
    const out = [];
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) {
        const p = g.getImageData(Math.floor((c + 0.5) * side), Math.floor((r + 0.5) * side), 1, 1).data;
        out.push([p[0], p[1], p[2]]);
    }
    return {head: Number(heat.dataset.head), n, cells: out};
}"""
# Times (performance.now) of every websocket message the page receives, of each click, and of each change of the
# switch's title, with the first animation frame after it (the new head painted).
TIMES_JS = """(() => {
    const times = window.__switchTimes = {messages: [], clicks: [], titles: [], painted: []};
    const Socket = window.WebSocket;
    window.WebSocket = class extends Socket {
        constructor(...args) { super(...args); this.addEventListener('message', () => times.messages.push(performance.now())); }
    };
    window.addEventListener('click', () => times.clicks.push(performance.now()), true);
    const watch = () => {
        const title = [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot).filter(Boolean)
            .map(r => r.querySelector('.title')).find(Boolean);
        if (!title) { setTimeout(watch, 50); return; }
        new MutationObserver(() => {
            times.titles.push(performance.now());
            requestAnimationFrame(() => times.painted.push(performance.now()));
        }).observe(title, {childList: true, characterData: true, subtree: true});
    };
    document.addEventListener('DOMContentLoaded', watch);
})();"""


# [heads the long view's switch still waits for, its title], or null before it is drawn
SWITCH_STATE = """() => { const root = [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot)
    .filter(Boolean).map(r => r.querySelector('.head-switch')).find(Boolean);
    const pooled = root && root.querySelector('.pooled'), title = root && root.querySelector('.title');
    return pooled && title ? [pooled.dataset.pending, title.textContent] : null; }"""


def click_times(page) -> dict:
    """The page's ``TIMES_JS`` record."""
    return page.evaluate("() => window.__switchTimes")


@pytest.fixture(scope="module")
def attentions():
    """Every layer's weights of every head, from the bundled MiniLM loaded plainly (eager attention)."""
    from transformers import AutoModel, AutoTokenizer

    from core.model.models import load_model

    folder = load_model().source
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(**tokenizer(TEXT, return_tensors="pt"), output_attentions=True)
    return [layer[0].numpy() for layer in out.attentions]


@pytest.fixture(scope="module")
def weights(attentions):
    """Layer ``LAYER``'s weights of every head."""
    return attentions[LAYER]


def _palette() -> np.ndarray:
    """Cividis (the page's default palette) at the app's 254 colour levels, sampled here from Plotly's colour scale."""
    import plotly.colors as pc

    colours = pc.sample_colorscale("cividis", list(np.linspace(0, 1, 254)), colortype="rgb")
    return np.array([pc.unlabel_rgb(c) for c in colours]).round()


def assert_drawn(page, head: int, weights) -> None:
    """Every cell of the heatmap the switch draws is head ``head``'s weight (``weights[head]``) in the palette."""
    drawn = page.evaluate(CELLS_JS)
    assert drawn["head"] == head
    w = weights[head]
    assert drawn["n"] == w.shape[0]
    expected = _palette()[np.rint(np.clip(w / max(1.0, w.max()), 0, 1) * 253).astype(int)].reshape(-1, 3)
    np.testing.assert_allclose(np.array(drawn["cells"]), expected, atol=1)


def _open_switch(app_page, head: int):
    """The Attention page on ``TEXT`` at layer ``LAYER``, head ``head``, recording its messages and times; idle."""
    recorder = Recorder(app_page.page)
    app_page.context.add_init_script(TIMES_JS)
    page = app_page.open("attention", {"text": TEXT, "layer": str(LAYER), "head": str(head)})
    page.wait_for_selector(TITLE, timeout=60_000)
    app_page.wait_until_idle()
    return recorder, page


def test_heads_switch_in_the_browser_before_any_rerun(app_page, weights):
    recorder, page = _open_switch(app_page, 0)
    assert page.locator(TITLE).text_content() == f"Layer {LAYER}, head 0"
    assert_drawn(page, 0, weights)
    for head in (3, 7, 11):
        recorder.start()
        page.get_by_role("radio", name=f"Head {head}", exact=True).click()
        assert page.locator(TITLE).text_content() == f"Layer {LAYER}, head {head}"
        assert_drawn(page, head, weights)
        app_page.wait_until_idle()
        times = click_times(page)
        clicked, titled = times["clicks"][-1], times["titles"][-1]
        after = [t for t in times["messages"] if t > clicked]
        assert clicked <= titled and after and titled < after[0], times  # drawn before the server said anything
        reply = recorder.reply()
        assert reply.fragment_run and not reply.full_run, reply  # the choice did reach Python, after the draw
        assert f"head={head}" in page.url
        assert page.get_by_role("radio", name=f"Head {head}", exact=True).get_attribute("aria-checked") == "true"
    # the hover names both tokens and the weight at 4 decimals, rounded half up here from the model's float32 weight
    from decimal import ROUND_HALF_UP, Decimal

    heat = page.locator('[data-testid="stMain"] .head-switch canvas[role="img"]')
    box = heat.bounding_box()
    cell = box["width"] / weights.shape[-1]
    heat.hover(position={"x": cell * 4.5, "y": cell * 2.5})  # query 2 ("cat"), key 4 ("on")
    printed = Decimal(float(weights[11][2, 4])).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
    tip = page.locator('[data-testid="stMain"] .head-switch .tip')
    assert tip.text_content() == f"query cat (2) → key on (4): {printed}", tip.text_content()
    # the head's Plotly figure is not drawn (the switch is the heatmap); its image is drawn on the server when asked
    assert page.locator(".js-plotly-plot .gtitle", has_text=f"layer {LAYER}, head").count() == 0
    with page.expect_download(timeout=120_000) as saving:
        page.get_by_role("button", name="Download image (PNG)").click()
    saved = saving.value
    png = Path(saved.path()).read_bytes()
    assert saved.suggested_filename.endswith(f"layer-{LAYER}-head-11.png"), saved.suggested_filename
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1920  # as the camera saves
    app_page.assert_clean()


def _switch_messages(frames: list[bytes]) -> list[dict]:
    """The head switch's data in each websocket message of ``frames`` that carries it (``viz.head_cells.from_wire``)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from viz.head_cells import from_wire

    found = []
    for frame in frames:
        msg = ForwardMsg()
        msg.ParseFromString(frame)
        if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            if element.WhichOneof("type") == "bidi_component" and element.bidi_component.component_name.endswith(
                    "attention_head_switch"):
                found.append(from_wire(element.bidi_component.bytes))
    return found


# each change of the switch's title as [its text, how many heads the browser held when it changed, when]
HELD_JS = """() => { const root = [...document.querySelectorAll('[data-testid="stMain"] *')].map(e => e.shadowRoot)
    .filter(Boolean).map(r => r.querySelector('.head-switch')).find(Boolean);
    window.__held = [];
    new MutationObserver(() => { const title = root.querySelector('.title').textContent, last = window.__held.at(-1);
        if (!last || last[0] !== title) window.__held.push([title, root.querySelector('canvas[role="img"]').dataset.held, performance.now()]); })
        .observe(root, {childList: true, characterData: true, subtree: true}); }"""


def _choose_layer(page, layer: int) -> None:
    box = page.locator('[data-testid="stMain"]').get_by_role("combobox", name="Layer (counted from 0)", exact=True)
    box.click()
    box.press_sequentially(str(layer))  # as the bench does: typing filters the list
    page.get_by_role("option", name=str(layer), exact=True).click()


def test_another_layer_sends_its_shown_head_first_then_the_rest(app_page, attentions):
    recorder, page = _open_switch(app_page, 4)
    page.evaluate(HELD_JS)
    recorder.start()
    _choose_layer(page, LAYER + 1)
    page.wait_for_function("() => window.__held.some(([t]) => t === 'Layer 3, head 4')", timeout=60_000)
    app_page.wait_until_idle()
    sent = _switch_messages(recorder.reply_frames())
    # the first message carries the shown head alone, the next the whole layer (the same layer: its digest)
    assert [d["layer"] for d in sent[:2]] == [LAYER + 1] * 2 and sent[0]["digest"] == sent[1]["digest"], sent
    assert sent[0]["partial"] and [h is not None for h in sent[0]["heads"]] == [h == 4 for h in range(12)]
    assert all(h is not None for h in sent[1]["heads"]) and "partial" not in sent[1]
    held = page.evaluate("() => window.__held")
    assert held[0][:2] == ["Layer 3, head 4", "1"], held  # drawn while the browser held that head alone
    assert_drawn(page, 4, attentions[LAYER + 1])
    assert page.evaluate(CELLS_JS.replace("return {head", "return {held: heat.dataset.held, head"))["held"] == "12"
    # a head of the new layer is drawn from what the browser holds, before the server says anything
    page.get_by_role("radio", name="Head 9", exact=True).click()
    assert page.locator(TITLE).text_content() == f"Layer {LAYER + 1}, head 9"
    assert_drawn(page, 9, attentions[LAYER + 1])
    app_page.wait_until_idle()
    times, held = click_times(page), page.evaluate("() => window.__held")
    clicked = times["clicks"][-1]
    titled = next(when for title, _, when in held if title == f"Layer {LAYER + 1}, head 9")
    after = [t for t in times["messages"] if t > clicked]
    assert clicked <= titled and after and titled < after[0], (times, held)
    # a head clicked at once after choosing another layer (perhaps before the rest arrives) is the one drawn
    _choose_layer(page, LAYER + 2)
    page.get_by_role("radio", name="Head 1", exact=True).click()
    page.wait_for_function("(t) => window.__held.some(([title]) => title === t)", arg=f"Layer {LAYER + 2}, head 1",
                           timeout=60_000)
    app_page.wait_until_idle()
    assert page.locator(TITLE).text_content() == f"Layer {LAYER + 2}, head 1"
    assert_drawn(page, 1, attentions[LAYER + 2])
    page.wait_for_function("() => location.search.includes('head=1') && location.search.includes('layer=4')",
                           timeout=30_000)
    app_page.assert_clean()


def test_arrow_keys_move_between_heads_and_the_link_reopens_the_head(app_page, browser, app_server, weights):
    from tests.browser.conftest import AppPage

    page = app_page.open("attention", {"text": TEXT, "layer": str(LAYER), "head": "5"})
    page.wait_for_selector(TITLE, timeout=60_000)
    app_page.wait_until_idle()
    page.get_by_role("radio", name="Head 5", exact=True).focus()
    for key, head in (("ArrowRight", 6), ("ArrowRight", 7), ("ArrowLeft", 6), ("End", 11), ("Home", 0), ("ArrowLeft", 0)):
        page.keyboard.press(key)
        assert page.locator(TITLE).text_content() == f"Layer {LAYER}, head {head}", key
        focused = page.evaluate("() => { let e = document.activeElement; while (e && e.shadowRoot && e.shadowRoot.activeElement)"
                                " e = e.shadowRoot.activeElement; return e && e.textContent; }")
        assert focused == f"Head {head}"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")  # head 3
    app_page.wait_until_idle()
    page.wait_for_function("() => location.search.includes('head=3')", timeout=30_000)
    link = page.url
    # one tab stop for the group: the checked head only
    tabbable = page.get_by_role("radiogroup", name="Head", exact=True).get_by_role("radio").evaluate_all("bs => bs.map(b => b.tabIndex)")
    assert sorted(tabbable) == [-1] * 11 + [0]
    require_axe()
    found = violations_in_light_and_dark(page)
    assert not found, found
    app_page.assert_clean()
    fresh = AppPage(browser, app_server)
    try:
        again = fresh.page
        again.goto(link, wait_until="domcontentloaded")
        again.wait_for_selector(TITLE, timeout=60_000)
        fresh.wait_until_idle()
        assert again.locator(TITLE).text_content() == f"Layer {LAYER}, head 3"
        assert_drawn(again, 3, weights)
        assert re.search(r"head=3\b", again.url)
        fresh.assert_clean()
    finally:
        fresh.close()



def test_a_long_texts_pooled_heads_switch_in_the_browser_pixel_for_pixel(browser, long_server):
    """A long text: the switch appears with the shown head alone, before the layer's other heads are pooled; once
    they are it holds them as images, and a click shows another head at once, one image pixel per device pixel (at
    ratio 2), the image the page's pooled figure of that head draws."""
    from tests.browser.conftest import AppPage, title_words
    from tests.test_long_heatmap import long_text

    url, folder = long_server
    tab = AppPage(browser, url, device_scale_factor=2)
    tab.patience_ms = 300_000
    # every (heads still being pooled, title) the switch showed, polled from the page's first moment
    tab.context.add_init_script(f"""window.__switchSeen = []; setInterval(() => {{ const now = ({SWITCH_STATE})();
        const last = window.__switchSeen[window.__switchSeen.length - 1];
        if (now && (!last || now[0] !== last[0] || now[1] !== last[1])) window.__switchSeen.push(now); }}, 50);""")
    try:
        page = tab.open("attention", {"model": folder, "text": long_text(1500), "layer": "1", "head": "0"})
        page.wait_for_selector(TITLE, timeout=300_000)
        tab.wait_until_idle()
        page.wait_for_function(f"() => ({SWITCH_STATE})()[0] === '0'", timeout=120_000)  # every head pooled, held
        assert page.locator(TITLE).text_content() == "Layer 1, head 0"
        seen = page.evaluate("() => window.__switchSeen")
        assert any(int(pending) > 0 and title == "Layer 1, head 0" for pending, title in seen), seen  # shown early
        heads = page.get_by_role("radiogroup", name="Head", exact=True).get_by_role("radio")
        assert heads.count() >= 2
        heads.nth(1).click()
        assert page.locator(TITLE).text_content() == "Layer 1, head 1"  # drawn from the images it holds
        shown = page.locator('[data-testid="stMain"] .head-switch .pooled img:not([hidden])')
        assert shown.count() == 1
        size = shown.evaluate("img => [img.naturalWidth, img.getBoundingClientRect().width, img.src]")
        assert size[0] == round(size[1] * 2), size  # not resampled
        tab.wait_until_idle()
        figure = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".gtitle", has_text=title_words("layer 1, head 1")))
        figure.first.locator(".imagelayer image").wait_for(timeout=120_000)
        assert figure.first.locator(".imagelayer image").get_attribute("href") == size[2]
        assert "head=1" in page.url
        tab.assert_clean()
    finally:
        tab.close()
