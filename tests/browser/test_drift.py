"""The drift page in a real browser: violins paint for the sample corpus, for an upload, and from a link."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

DATA = Path(__file__).resolve().parent.parent / "data"
VIOLINS = ".js-plotly-plot .violinlayer .trace"
# The first figure's traces, as Plotly holds them in the page: (trace type, hover customdata).
FIRST_FIGURE_DATA = """() => {
    const plot = document.querySelector('.js-plotly-plot');
    return plot.data.map(t => [t.type, t.customdata || []]);
}"""


def _main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _upload(app_page, path: Path):
    page = app_page.page
    page.locator('[data-testid="stMain"] button', has_text="Upload a file").click()
    app_page.wait_until_idle()
    # the page's own uploader: the sidebar has one too, for a .txt text
    page.locator('[data-testid="stMain"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    page.wait_for_selector(f"text={path.name}")
    app_page.wait_until_idle()


def test_sample_corpus_paints_violins_that_name_the_documents(app_page):
    page = app_page.open("drift")
    page.wait_for_selector(VIOLINS, timeout=60_000)
    assert "66 documents from the sample corpus" in _main_text(page)
    traces = page.evaluate(FIRST_FIGURE_DATA)
    violin_type, names = traces[0]
    assert violin_type == "violin"
    points = page.locator(".js-plotly-plot").first.locator(".violinlayer .point")
    assert points.count() == 66 * 6  # every document drawn at each of the 6 layers
    assert "Lighthouse" in names and "Banana bread" in names
    # the baselines: different documents (dotted), random words (dash-dotted), the violins' own comparison (dashed)
    assert [t[0] for t in traces[1:]] == ["scatter", "scatter", "scatter"]
    assert page.locator(".js-plotly-plot").count() == 3  # the layer violins, self-similarity, the [CLS] violins
    assert page.get_by_text("Download data (CSV)").count() == 3
    app_page.assert_clean()


def test_a_link_opens_the_adjusted_layer_to_layer_view(app_page):
    page = app_page.open("drift", {"reference": "previous", "pooling": "max", "adjust": "true"})
    page.wait_for_selector(VIOLINS, timeout=60_000)
    title = page.locator(".js-plotly-plot .gtitle").first.text_content()
    assert "layer → layer" in title and "max pooling" in title
    assert page.evaluate(FIRST_FIGURE_DATA)[1:] == []  # adjusted: a zero line instead of baseline traces
    app_page.assert_clean()


def test_an_uploaded_csv_becomes_the_corpus(app_page):
    page = app_page.open("drift")
    _upload(app_page, DATA / "drift_upload.csv")
    assert "5 documents from drift_upload.csv" in _main_text(page)
    page.wait_for_selector(VIOLINS, timeout=60_000)
    names = page.evaluate(FIRST_FIGURE_DATA)[0][1]
    assert "Morning ferry" in names
    assert "Tomato soup &lt;b&gt;bold&lt;/b&gt;" in names  # escaped: shown as text, never as markup
    assert page.locator(".js-plotly-plot b").count() == 0
    app_page.assert_clean()


def test_a_binary_upload_is_refused_and_the_previous_corpus_kept(app_page):
    page = app_page.open("drift")
    _upload(app_page, DATA / "drift_binary.csv")
    assert any("binary file" in e and "keeps using the sample corpus" in e for e in app_page.error_texts())
    assert "66 documents from the sample corpus" in _main_text(page)
    page.wait_for_selector(VIOLINS, timeout=60_000)
    assert not app_page.blocked and not app_page.unexplained_console_errors() and not app_page.dialogs
