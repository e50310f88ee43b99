"""The Long context page on a phone (issue 50, item 16c): at 390 × 844 a review saw a colour bar's title clipped. Not
reproduced (2026-11-28, SmolLM2 and Gemma 3 at 2,048 tokens, presentation mode off and on, light and dark: every
colour-bar title inside its figure and the window); this test measures it on both bundled language models, so a
figure change that cuts it again fails here. It also measures every text of every figure (``slide_checks.measure``):
at 2,048 tokens the attention-by-distance figure's 12 labels overlapped (the fitting did not read its ticks)."""

from __future__ import annotations

import pytest

from tests.browser.slide_checks import measure

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PHONE = {"width": 390, "height": 844}
# Every drawn colour-bar title of the main column, with its figure's and the window's edges, in page pixels.
BAR_TITLES = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].flatMap(plot => {
    const f = plot.getBoundingClientRect();
    return [...plot.querySelectorAll('.colorbar .cbtitle text')].map(t => {
        const b = t.getBoundingClientRect();
        return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom, width: b.width,
                figure: [f.left, f.right, f.top, f.bottom], window: window.innerWidth};
    });
})"""
CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
    .filter(c => c.querySelector('.main-svg')).length >= 2"""


# SmolLM2 at 2,048 tokens (the page's default length): 12 distance bins, whose labels Plotly turned upright itself,
# 13 px apart, over each other (issue 50); the fitting now keeps every other one.
@pytest.mark.parametrize("model, present, scheme, length", [("SmolLM2-135M-Instruct", False, "light", "2048"),
                                                            ("gemma-3-270m", True, "dark", "512")])
def test_on_a_phone_every_colour_bar_title_is_inside_its_figure_and_the_window(app_page, model, present, scheme, length):
    app_page.page.set_viewport_size(PHONE)
    app_page.page.emulate_media(color_scheme=scheme)
    page = app_page.open("long-context", {"model": model, "length": length} | ({"present": "true"} if present else {}),
                         timeout_ms=600_000)
    page.wait_for_function(CHARTS_DRAWN, timeout=600_000)
    app_page.wait_until_idle(timeout_ms=600_000)
    titles = page.evaluate(BAR_TITLES)
    assert len(titles) >= 2, titles  # the distance and sink heatmaps' bars at least
    for t in titles:
        left, right, top, bottom = t["figure"]
        assert t["width"] > 0 and t["text"].strip(), t
        assert left - 1 <= t["left"] and t["right"] <= min(right, t["window"]) + 1, t
        assert top - 1 <= t["top"] and t["bottom"] <= bottom + 1, t
    # issue 50: the attention-by-distance figure's tick labels overlapped on a phone; every text of every figure whole,
    # inside its figure and apart from the others (as the slide checks measure them)
    problems = measure(page)
    assert not problems, "\n".join(problems)
    app_page.assert_clean()
