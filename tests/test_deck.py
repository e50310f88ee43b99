"""The slide deck's files (issue 53): the PowerPoint opened again with python-pptx (slide count, 16:9, each image
1920 × 1080 pixels, caption, speaker notes), hostile titles and texts kept as text in both formats, and the deck's
link (pins packed into one parameter and read back; a damaged one refused with a sentence)."""

from __future__ import annotations

import html
import io
import os
import zipfile

import plotly.graph_objects as go
import pytest
from PIL import Image
from pptx import Presentation

from ui.deck import BadDeckLink, Pin, decode_pins, encode_pins
from viz.deck import Deck, Slide, deck_file_stem, image_options, slide_figure
from viz.deck_html import html_deck
from viz.deck_pptx import figures_zip, pptx_bytes
from viz.deck_render import CHROMIUM, render_pngs

HOSTILE = '</script><script>alert("x")</script> & <b>bold</b> "quoted"'
WIDTH = 1232  # presentation mode's column (ui.figures.PRESENTATION_WIDTH)
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
                                    reason="no Chromium to draw the slides with")


def _figure(title: str) -> go.Figure:
    return go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.4, 0.6]], x=["a", "b"], y=["c", "d"]),
                     layout={"title": {"text": title}})


def _deck(title: str = "Heads at work", theme: str = "light", text: str = "The cat sat.") -> Deck:
    slides = tuple(Slide(_figure(f"Figure {i}"), f"Slide {i}", f"Head {i} sends 0.90 of its attention to b.",
                         f"http://localhost:8501/attention?layer={i}", "tiny-model", text,
                         "query,key,weight\na,b,0.9\nc,d,0.6\n", f"fig-{i}") for i in (1, 2))
    return Deck(title, "A. Lecturer", "2026-11-28", ("The model has 2 layers.", "It is a decoder."), "About tiny-model",
                slides, theme)


@needs_chromium
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_powerpoint_has_one_16_9_slide_per_pin_with_a_1920_by_1080_image(theme):
    deck = _deck(theme=theme)
    figures = [slide_figure(s.figure, WIDTH, theme) for s in deck.slides]
    seen = []
    pngs = render_pngs(figures, image_options(WIDTH), lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    prs = Presentation(io.BytesIO(pptx_bytes(deck, pngs)))
    assert len(prs.slides) == 4  # title, about, two figures
    assert prs.slide_width * 9 == prs.slide_height * 16
    texts = ["\n".join(shape.text_frame.text for shape in slide.shapes if shape.has_text_frame) for slide in prs.slides]
    assert "Heads at work" in texts[0] and "A. Lecturer" in texts[0] and "2026-11-28" in texts[0]
    assert "About tiny-model" in texts[1] and "It is a decoder." in texts[1]
    for slide, item, words in zip(list(prs.slides)[2:], deck.slides, texts[2:], strict=True):
        pictures = [shape for shape in slide.shapes if shape.shape_type == 13]
        assert len(pictures) == 1
        image = Image.open(io.BytesIO(pictures[0].image.blob))
        assert image.size == (1920, 1080)
        corner = image.convert("RGB").getpixel((2, 2))  # the figure's paper: white, or the dark theme's background
        assert corner == ((255, 255, 255) if theme == "light" else (14, 17, 23))
        assert abs(pictures[0].width / pictures[0].height - 16 / 9) < 0.01
        assert item.title in words and item.caption in words
        notes = slide.notes_slide.notes_text_frame.text
        assert item.link in notes and "a,b,0.9" in notes and "tiny-model" in notes
    archive = zipfile.ZipFile(io.BytesIO(figures_zip(deck, pngs)))
    assert sorted(archive.namelist()) == ["Heads_at_work/01-fig-1.csv", "Heads_at_work/01-fig-1.png",
                                          "Heads_at_work/02-fig-2.csv", "Heads_at_work/02-fig-2.png"]


def test_hostile_titles_and_texts_stay_text_in_the_powerpoint():
    deck = _deck(title=HOSTILE, text=HOSTILE)
    deck = Deck(deck.title, HOSTILE, deck.date, (HOSTILE,), deck.about_title,
                tuple(Slide(s.figure, HOSTILE, HOSTILE, s.link, s.model, s.text, s.table, s.name) for s in deck.slides))
    png = Image.new("RGB", (1920, 1080), "white")
    out = io.BytesIO()
    png.save(out, format="PNG")
    prs = Presentation(io.BytesIO(pptx_bytes(deck, [out.getvalue()] * 2)))
    texts = [shape.text_frame.text for slide in prs.slides for shape in slide.shapes if shape.has_text_frame]
    assert texts.count(HOSTILE) == 6  # deck title, about line, each slide's title and caption, read back as written
    assert texts[1] == f"{HOSTILE}\n2026-11-28"  # the author line
    notes = list(prs.slides)[-1].notes_slide.notes_text_frame.text
    assert f"Text: {HOSTILE}" in notes


def test_hostile_titles_and_texts_are_escaped_in_the_html_deck():
    base = _deck()
    slides = tuple(Slide(_figure(HOSTILE), HOSTILE, HOSTILE, 'http://x/"><script>alert(1)</script>', s.model,
                         HOSTILE, s.table, s.name) for s in base.slides)
    deck = Deck(HOSTILE, HOSTILE, base.date, (HOSTILE,), HOSTILE, slides)
    page = html_deck(deck, [slide_figure(s.figure, WIDTH) for s in deck.slides])
    body = page[page.index("<body>"):]
    assert '<script>alert("x")</script>' not in body  # neither in the slides nor in the figures' JSON
    assert "<script>alert(1)</script>" not in body
    assert body.count("<script") == 2  # the figures' JSON and the deck's own script, nothing a text opened
    assert html.escape(HOSTILE) in body
    assert "<title>" + html.escape(HOSTILE) + "</title>" in page


def test_the_html_deck_inlines_plotly_and_requests_nothing():
    page = html_deck(_deck(), [slide_figure(s.figure, WIDTH) for s in _deck().slides])
    assert "default-src 'none'" in page  # the Content-Security-Policy: no request to any host
    assert "<script src" not in page and "<link" not in page  # nothing loaded from elsewhere
    assert len(page) > 4_000_000  # plotly.js itself is in the file


def test_file_names_come_from_the_deck_title():
    assert deck_file_stem("Heads at work: 2026") == "Heads_at_work_2026"
    assert deck_file_stem("   ") == "deck"
    assert deck_file_stem("../../etc/passwd") == "etc_passwd"


def test_the_deck_link_holds_the_pins_and_refuses_a_damaged_one():
    pins = [Pin("attention", "layer=3&head=1&text=the+cat", "attention-layer3-head1", "Head 3.1",
                "Head 3.1 looks at the previous token.", "tiny", "the cat"),
            Pin("", "", "home-overview", HOSTILE, "", "tiny", "ü ∑ 文字")]
    value = encode_pins(pins)
    assert value.startswith("1.") and all(c.isalnum() or c in "-_." for c in value)
    assert decode_pins(value) == pins
    assert decode_pins("") == []
    for bad in ("1.not-base64!", "2." + value[2:], value[:-8], "1." + "A" * 70_000):
        with pytest.raises(BadDeckLink):
            decode_pins(bad)
