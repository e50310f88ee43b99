"""Measuring a drawn page for slides: what sticks out of its figure, which tick labels overlap.

Everything is measured in the browser from the SVG Plotly drew (``page.evaluate``), so the
numbers are what a projector shows. Shared by ``test_slides.py`` and ``scripts/screenshots.py``.
"""

from __future__ import annotations

# Viewports a workshop meets: full HD, the common laptop, and the usual projector.
VIEWPORTS = [(1920, 1080), (1366, 768), (1280, 720)]

# Returns a list of problems, one sentence each, for every Plotly figure that is drawn in the
# main area. Tick labels are oriented rectangles (Plotly rotates them with a transform): two
# labels of one axis overlap when they overlap both along their direction and across it.
MEASURE_JS = r"""
(tolerance) => {
  const problems = [];
  const rect = (el) => el.getBoundingClientRect();
  const outside = (r, f) => r.left < f.left - tolerance || r.right > f.right + tolerance
    || r.top < f.top - tolerance || r.bottom > f.bottom + tolerance;
  const meets = (a, b) => a.left < b.right - tolerance && b.left < a.right - tolerance
    && a.top < b.bottom - tolerance && b.top < a.bottom - tolerance;
  const label = (el) => (el.textContent || '').trim().slice(0, 50);
  const oriented = (t) => {
    const b = t.getBBox();
    const m = t.getScreenCTM();
    const cx = b.x + b.width / 2, cy = b.y + b.height / 2;
    return {
      x: m.a * cx + m.c * cy + m.e, y: m.b * cx + m.d * cy + m.f,
      w: b.width * Math.hypot(m.a, m.b), h: b.height * Math.hypot(m.c, m.d),
      angle: Math.atan2(m.b, m.a), text: label(t),
    };
  };
  const plots = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')];
  plots.forEach((plot, index) => {
    const frame = rect(plot);
    if (frame.width === 0 || frame.height === 0) return;  // folded away (closed expander or popover)
    const name = label(plot.querySelector('.gtitle') || plot) || `figure ${index + 1}`;
    const where = `figure ${index + 1} (“${name.slice(0, 40)}”)`;
    if (frame.right > window.innerWidth + tolerance || frame.left < -tolerance) {
      problems.push(`${where} is ${Math.round(frame.width)} px wide and runs past the window`);
    }
    const texts = [
      ['title', '.infolayer .gtitle'],
      ['axis title', '.infolayer [class*="title"]:not(.gtitle):not(.cbtitle) text, .infolayer text[class$="title"]:not(.gtitle)'],
      ['subplot title or note', '.infolayer .annotation-text'],
      ['colour bar title', '.infolayer .cbtitle text'],
      ['legend entry', '.legend .traces'],
      ['tick label', '.xaxislayer-above text, .yaxislayer-above text'],
    ];
    const seen = new Set();
    for (const [kind, selector] of texts) {
      for (const el of plot.querySelectorAll(selector)) {
        if (seen.has(el)) continue;
        seen.add(el);
        const r = rect(el);
        if (r.width === 0 && r.height === 0) continue;
        if (outside(r, frame)) {
          problems.push(`${where}: ${kind} “${label(el)}” is outside the figure `
            + `(${Math.round(r.left - frame.left)}..${Math.round(r.right - frame.left)} of ${Math.round(frame.width)} px wide, `
            + `${Math.round(r.top - frame.top)}..${Math.round(r.bottom - frame.top)} of ${Math.round(frame.height)} px high)`);
        }
      }
    }
    const areas = [...plot.querySelectorAll('.draglayer .nsewdrag')].map(rect);
    for (const [kind, selector] of [['colour bar', '.colorbar'], ['legend', '.legend']]) {
      for (const el of plot.querySelectorAll(selector)) {
        const r = rect(el);
        if (r.width === 0 || r.height === 0) continue;
        if (areas.some((a) => meets(r, a))) problems.push(`${where}: the ${kind} covers the plotting area`);
      }
    }
    for (const axis of plot.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
      const boxes = [...axis.querySelectorAll('text')].filter((t) => t.textContent).map(oriented);
      let overlaps = 0, example = '';
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const a = boxes[i], b = boxes[j];
          const ux = Math.cos(a.angle), uy = Math.sin(a.angle);
          const dx = b.x - a.x, dy = b.y - a.y;
          const along = Math.abs(dx * ux + dy * uy), across = Math.abs(-dx * uy + dy * ux);
          if (along < (a.w + b.w) / 2 - tolerance && across < (a.h + b.h) / 2 - tolerance) {
            overlaps += 1;
            if (!example) example = `“${a.text}” and “${b.text}”`;
          }
        }
      }
      if (overlaps) problems.push(`${where}: ${overlaps} overlapping tick label pair(s), e.g. ${example}`);
    }
  });
  return problems;
}
"""


def measure(page, tolerance: float = 1.0) -> list[str]:
    """Problems of every figure drawn in the page's main area (empty when it is slide-ready)."""
    return page.evaluate(MEASURE_JS, tolerance)


def long_text(min_words: int = 520) -> str:
    """Plain English of at least ``min_words`` words: past the bundled model's 512 tokens once tokenized."""
    sentences = [
        "The river bank was muddy after the storm, so we walked along the road instead.",
        "She paid the cheque into the bank on Monday and asked about the new fees.",
        "A heron waited by the water while the children threw bread to the ducks.",
        "Transformers read every token at once and let each one look at all the others.",
        "In the evening the market closed early, and the streets were quiet again.",
    ]
    words: list[str] = []
    while len(words) < min_words:
        for sentence in sentences:
            words.extend(sentence.split())
    return " ".join(words)
