"""A deck as a PowerPoint file (``python-pptx``): 16:9, a title slide, the optional "about the model" slide, then one
slide per figure with its title, the 1920 × 1080 image, the sentence as a caption and the link and numbers in the
speaker notes; and the figures' PNGs and CSVs as a zip."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Emu, Pt

from viz.common import file_stem
from viz.deck import Deck, deck_file_stem, notes_of

WIDTH, HEIGHT = Emu(12_192_000), Emu(6_858_000)  # 13.333 × 7.5 inches: PowerPoint's own 16:9
BLANK_LAYOUT = 6
MARGIN = Emu(457_200)  # half an inch
TITLE_HEIGHT = Emu(820_000)
CAPTION_HEIGHT = Emu(700_000)


def _rgb(colour: str) -> RGBColor:
    return RGBColor.from_string(colour.lstrip("#").upper())


def _text_box(slide, left, top, width, height, text: str, size: int, colour: str, *, bold: bool = False):
    box = slide.shapes.add_textbox(left, top, width, height)
    frame = box.text_frame
    frame.word_wrap = True
    for index, line in enumerate(text.split("\n")):
        paragraph = frame.paragraphs[0] if index == 0 else frame.add_paragraph()
        run = paragraph.add_run()
        run.text = line  # python-pptx writes XML text: escaped by lxml
        run.font.size, run.font.bold, run.font.color.rgb = Pt(size), bold, _rgb(colour)
    return box


def _new_slide(prs, deck: Deck):
    slide = prs.slides.add_slide(prs.slide_layouts[BLANK_LAYOUT])
    slide.background.fill.solid()
    slide.background.fill.fore_color.rgb = _rgb(deck.colours["background"])
    return slide


def pptx_bytes(deck: Deck, pngs: Sequence[bytes]) -> bytes:
    """``deck`` as a .pptx file, ``pngs[i]`` the image of ``deck.slides[i]`` (1920 × 1080, 16:9)."""
    if len(pngs) != len(deck.slides):
        raise ValueError(f"{len(deck.slides)} slides but {len(pngs)} images")
    prs = Presentation()
    prs.slide_width, prs.slide_height = WIDTH, HEIGHT
    prs.core_properties.title = deck.title
    prs.core_properties.author = deck.author
    colours = deck.colours
    inner = WIDTH - 2 * MARGIN
    cover = _new_slide(prs, deck)
    _text_box(cover, MARGIN, Emu(2_200_000), inner, Emu(1_400_000), deck.title, 40, colours["text"], bold=True)
    byline = "\n".join(part for part in (deck.author, deck.date) if part)
    if byline:
        _text_box(cover, MARGIN, Emu(3_800_000), inner, Emu(1_000_000), byline, 22, colours["muted"])
    if deck.about:
        about = _new_slide(prs, deck)
        _text_box(about, MARGIN, MARGIN, inner, TITLE_HEIGHT, deck.about_title, 32, colours["text"], bold=True)
        _text_box(about, MARGIN, MARGIN + TITLE_HEIGHT, inner, HEIGHT - 2 * MARGIN - TITLE_HEIGHT,
                  "\n".join(deck.about), 18, colours["text"])
    for item, png in zip(deck.slides, pngs, strict=True):
        slide = _new_slide(prs, deck)
        _text_box(slide, MARGIN, Emu(150_000), inner, TITLE_HEIGHT, item.title, 28, colours["text"],
                  bold=True)
        room_top = Emu(150_000) + TITLE_HEIGHT
        room_height = HEIGHT - room_top - CAPTION_HEIGHT - Emu(100_000)
        picture_width = min(inner, int(room_height * 16 / 9))  # the image keeps 16:9
        picture_height = int(picture_width * 9 / 16)
        slide.shapes.add_picture(io.BytesIO(png), Emu((WIDTH - picture_width) // 2), room_top,
                                 Emu(picture_width), Emu(picture_height))
        if item.caption:
            _text_box(slide, MARGIN, HEIGHT - CAPTION_HEIGHT - Emu(60_000), inner, CAPTION_HEIGHT, item.caption, 14,
                      colours["muted"])
        slide.notes_slide.notes_text_frame.text = notes_of(item)
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def figures_zip(deck: Deck, pngs: Sequence[bytes]) -> bytes:
    """The PNG and the CSV (when it has numbers) of every figure of ``deck``, numbered in slide order, in one zip."""
    out = io.BytesIO()
    folder = deck_file_stem(deck.title)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for number, (item, png) in enumerate(zip(deck.slides, pngs, strict=True), start=1):
            stem = f"{folder}/{number:02d}-{file_stem(item.name)}"
            archive.writestr(f"{stem}.png", png)
            if item.table:
                archive.writestr(f"{stem}.csv", item.table)
    return out.getvalue()
