"""A deck as one self-contained HTML file: Plotly's JavaScript inlined, the figures interactive, the arrow keys (and
Page Up/Down, Space, Home, End) move between slides, and a print stylesheet puts one slide on each page for a PDF
from the browser. A Content-Security-Policy forbids every request: the file opens the same without a network.

Every text from the user (titles, author, captions, links, the model card) is HTML-escaped; the figures' JSON sits in
a ``<script type="application/json">`` whose ``<`` are written as ``\\u003c`` so no text can close it."""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import lru_cache

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline

from viz.deck import Deck

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The installed plotly.js (4.8 MB), read once."""
    return plotly.offline.get_plotlyjs()


def _style(deck: Deck) -> str:
    c = deck.colours
    return f"""
html, body {{ margin: 0; height: 100%; background: {c['background']}; color: {c['text']};
  font-family: "Source Sans Pro", "Open Sans", Arial, sans-serif; }}
.slide {{ position: absolute; inset: 0; box-sizing: border-box; padding: 2vh 3vw; display: flex; flex-direction: column;
  visibility: hidden; }}
.slide.current {{ visibility: visible; }}
.slide h1 {{ font-size: 6vh; margin: auto 0 2vh; }}
.slide h2 {{ font-size: 4vh; margin: 0 0 1vh; }}
.slide .byline {{ font-size: 3vh; color: {c['muted']}; margin: 0 0 auto; white-space: pre-line; }}
.slide ul {{ font-size: 2.6vh; line-height: 1.4; }}
.figure {{ flex: 1 1 auto; min-height: 0; }}
.caption {{ font-size: 2.4vh; color: {c['muted']}; margin: 1vh 0 0; }}
.link {{ font-size: 1.6vh; margin: 0.5vh 0 0; overflow-wrap: anywhere; }}
.link a {{ color: {c['muted']}; }}
.counter {{ position: fixed; right: 1.5vw; bottom: 1vh; font-size: 1.6vh; color: {c['muted']}; }}
@media print {{
  @page {{ size: 16in 9in; margin: 0; }}
  html, body {{ height: auto; -webkit-print-color-adjust: exact; print-color-adjust: exact; }}
  .slide {{ position: relative; visibility: visible; width: 16in; height: 9in; break-after: page; }}
  .counter {{ display: none; }}
}}
"""


SCRIPT = """
const slides = [...document.querySelectorAll('.slide')];
const figures = JSON.parse(document.getElementById('deck-figures').textContent);
const counter = document.querySelector('.counter');
let current = 0;
function show(index) {
  current = Math.max(0, Math.min(slides.length - 1, index));
  slides.forEach((slide, i) => slide.classList.toggle('current', i === current));
  counter.textContent = `${current + 1} / ${slides.length}`;
  const plot = slides[current].querySelector('.figure');
  if (plot) Plotly.Plots.resize(plot);
  if (location.hash !== `#${current + 1}`) history.replaceState(null, '', `#${current + 1}`);
}
document.addEventListener('keydown', (event) => {
  if (['ArrowRight', 'ArrowDown', 'PageDown', ' '].includes(event.key)) show(current + 1);
  else if (['ArrowLeft', 'ArrowUp', 'PageUp'].includes(event.key)) show(current - 1);
  else if (event.key === 'Home') show(0);
  else if (event.key === 'End') show(slides.length - 1);
  else return;
  event.preventDefault();
});
const drawn = figures.map((figure, i) => {
  const layout = Object.assign({}, figure.layout, {autosize: true, width: undefined, height: undefined});
  return Plotly.newPlot(`figure-${i}`, figure.data, layout,
                        {responsive: true, displaylogo: false, displayModeBar: 'hover'});
});
Promise.all(drawn).then(() => { document.body.dataset.painted = String(drawn.length); });
window.addEventListener('beforeprint', () => document.querySelectorAll('.figure').forEach((f) => Plotly.Plots.resize(f)));
show((parseInt(location.hash.slice(1), 10) || 1) - 1);
"""


def _safe_json(value) -> str:
    """JSON that can stand inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left as they are."""
    return value.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_deck(deck: Deck, figures: Sequence[go.Figure]) -> str:
    """``deck`` as one HTML file; ``figures[i]`` is ``deck.slides[i]``'s figure already fitted (``slide_figure``)."""
    e = html.escape
    sections = [f'<section class="slide title-slide"><h1>{e(deck.title)}</h1>'
                f'<p class="byline">{e(chr(10).join(p for p in (deck.author, deck.date) if p))}</p></section>']
    if deck.about:
        items = "".join(f"<li>{e(line)}</li>" for line in deck.about)
        sections.append(f'<section class="slide about-slide"><h2>{e(deck.about_title)}</h2><ul>{items}</ul></section>')
    for index, item in enumerate(deck.slides):
        caption = f'<p class="caption">{e(item.caption)}</p>' if item.caption else ""
        link = f'<p class="link"><a href="{e(item.link, quote=True)}">{e(item.link)}</a></p>' if item.link else ""
        sections.append(f'<section class="slide figure-slide"><h2>{e(item.title)}</h2>'
                        f'<div class="figure" id="figure-{index}" role="img" aria-label="{e(item.caption or item.title)}">'
                        f"</div>{caption}{link}</section>")
    data = _safe_json("[" + ",".join(pio.to_json(fig, validate=False) for fig in figures) + "]")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(deck.title)}</title><style>{_style(deck)}</style>"
            f"<script>{plotly_js()}</script></head><body>\n" + "\n".join(sections)
            + f'\n<div class="counter" aria-live="polite"></div>'
            f'<script type="application/json" id="deck-figures">{data}</script>'
            f"<script>{SCRIPT}</script></body></html>\n")
