"""Measuring a drawn page for slides: what sticks out of its figure, which tick labels overlap.

Everything is measured in the browser from the SVG Plotly drew (``page.evaluate``), so the
numbers are what a projector shows. Shared by ``test_slides.py`` and ``scripts/screenshots.py``.
"""

from __future__ import annotations

from tests.browser.matrix import FULL_MATRIX

# Viewports a workshop meets: full HD, the common laptop, and the usual projector.
VIEWPORTS = [(1920, 1080), (1366, 768), (1280, 720)]
# And where people read the page itself (issue 28): a small laptop with the sidebar open, and a phone held upright.
NARROW_VIEWPORTS = [(1024, 768), (390, 844)]
# The windows the suite measures. The server fits a figure to the smaller of the width it assumes (``ui.figures``: a
# 1280-pixel window in presentation mode, ``NORMAL_WIDTH`` beside the sidebar) and the main column the browser
# measured (``ui.viewport``), and the chart is drawn as wide as its column. Measured in Chromium: outside presentation
# mode the three windows of ``VIEWPORTS`` all get figures fitted for 820 pixels, drawn 1460, 906 and 820 wide; in
# presentation mode fitted for 1232, 1232 and 1220, drawn 1872, 1318 and 1232 wide. So 1280 × 720, the narrowest and
# the shortest, leaves the figures' texts the least room of the three. Narrower windows get figures of their own:
# refitted to the laptop's column (560), stacked on the phone.
# ``make test`` measures presentation mode in full HD, where it opens (``test_slides._open`` says why), and the tour's
# steps also at 1280 × 720 (issue 28: a step did not fit a 1280 × 720 projector); outside presentation mode the narrow
# windows on the pages that had narrow-screen defects (``matrix.NARROW_DEFECTS``), after 1280 × 720 where the page's
# figures are saved as SVG (``matrix.EXPORT_DEFECTS``). ``make test-full`` (``FULL_MATRIX=1``) measures every window
# of both lists on every page and step (each one a rerun and a redraw of the page).
SLIDE_VIEWPORTS = VIEWPORTS if FULL_MATRIX else [VIEWPORTS[0]]
PROJECTOR_VIEWPORTS = VIEWPORTS if FULL_MATRIX else [VIEWPORTS[0], VIEWPORTS[-1]]
PAGE_VIEWPORTS = (VIEWPORTS if FULL_MATRIX else [VIEWPORTS[-1]]) + NARROW_VIEWPORTS

# True once every figure of the page is fitted to the main column the browser last measured (ui.viewport writes it on
# the page; ui.figures writes what each figure was fitted for beside it) and drawn.
REFITTED_JS = """() => {
  const column = document.documentElement.dataset.mainColumn;
  const alts = [...document.querySelectorAll('[data-testid="stMain"] .figure-alt')];
  const charts = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')];
  return Boolean(column) && alts.every(a => a.dataset.mainColumn === column)
    && charts.every(c => c.querySelector('.js-plotly-plot .main-svg'));
}"""

# True once the probe has measured the column again since ``before`` (its count of measurements then) and at least
# ``least`` milliseconds have passed since ``since`` (``performance.now()``; the probe's own measurement comes a quarter
# second after the column stops changing, an earlier one is a rerun's), or ``patience`` milliseconds when it has not
# measured: a resize that leaves the column's width as it was is not measured at all (the probe watches the column).
MEASURED_AGAIN_JS = """([before, since, least, patience]) => {
  const waited = performance.now() - since;
  return (Number(document.documentElement.dataset.mainColumnMeasured || 0) > before && waited >= least) || waited > patience;
}"""


def resize_and_wait_for_measurement(page, width: int, height: int, least_ms: int = 300, patience_ms: int = 600) -> None:
    """Set the window's size, then wait until the main-column probe has measured the new column (a quarter second
    after the column stops changing; at least ``least_ms``), or ``patience_ms`` when the column kept its size."""
    if page.viewport_size == {"width": width, "height": height}:
        return  # nothing changed
    before, now = page.evaluate("() => [Number(document.documentElement.dataset.mainColumnMeasured || 0), performance.now()]")
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_function(MEASURED_AGAIN_JS, arg=[before, now, least_ms, patience_ms], polling=50, timeout=60_000)


# Returns a list of problems, one sentence each, for every Plotly figure that is drawn in the
# main area: text (title and subtitle, axis titles, tick labels, legend, annotations, colour bar
# title and ticks) outside the figure's edge, and any two of these texts (or the labels on bars)
# drawn over each other.
# Texts are oriented rectangles (Plotly rotates tick labels and the y title with a transform):
# two overlap when neither one's sides separate them, each side shrunk by the tolerance.
MEASURE_JS = r"""
([tolerance, scope]) => {
  const problems = [];
  const rect = (el) => el.getBoundingClientRect();
  const outside = (r, f) => r.left < f.left - tolerance || r.right > f.right + tolerance
    || r.top < f.top - tolerance || r.bottom > f.bottom + tolerance;
  const meets = (a, b) => a.left < b.right - tolerance && b.left < a.right - tolerance
    && a.top < b.bottom - tolerance && b.top < a.bottom - tolerance;
  const label = (el) => (el.textContent || '').trim().slice(0, 50);
  // A text's drawn box in screen pixels as an oriented rectangle: centre, width along its direction,
  // height across it, angle (getBBox is in the text's own space, getScreenCTM adds its rotation).
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
  // Two oriented rectangles overlap (by more than the tolerance) when no side of either separates them.
  const overlap = (a, b) => {
    const dx = b.x - a.x, dy = b.y - a.y;
    for (const angle of [a.angle, a.angle + Math.PI / 2, b.angle, b.angle + Math.PI / 2]) {
      const ux = Math.cos(angle), uy = Math.sin(angle);
      const reach = (r) => Math.abs(r.w / 2 * (Math.cos(r.angle) * ux + Math.sin(r.angle) * uy))
        + Math.abs(r.h / 2 * (-Math.sin(r.angle) * ux + Math.cos(r.angle) * uy));
      if (Math.abs(dx * ux + dy * uy) >= reach(a) + reach(b) - tolerance) return false;
    }
    return true;
  };
  // Every text a figure draws around its data; in-cell values, hover labels and the toolbar are not among them.
  const KINDS = [
    ['title', '[class^="g-gtitle"] text'],
    ['axis title', '[class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text'],
    ['annotation', '.annotation text'],
    ['legend entry', '.legend text'],
    ['colour bar title', '.cbtitle text'],
    ['colour bar tick label', '.cbaxis text'],
    ['tick label', '.xaxislayer-above text, .yaxislayer-above text'],
    ['bar label', '.bartext'],
  ];
  const plots = [...document.querySelectorAll(scope)];
  plots.forEach((plot, index) => {
    const frame = rect(plot);
    if (frame.width === 0 || frame.height === 0) return;  // folded away (closed expander or popover)
    const name = label(plot.querySelector('.gtitle') || plot) || `figure ${index + 1}`;
    const where = `figure ${index + 1} (“${name.slice(0, 40)}”)`;
    if (frame.right > window.innerWidth + tolerance || frame.left < -tolerance) {
      problems.push(`${where} is ${Math.round(frame.width)} px wide and runs past the window`);
    }
    const seen = new Set();
    const drawn = [];
    for (const [kind, selector] of KINDS) {
      for (const el of plot.querySelectorAll(selector)) {
        if (seen.has(el) || !label(el)) continue;
        seen.add(el);
        const r = rect(el);
        if (r.width === 0 || r.height === 0) continue;
        if (kind !== 'bar label' && outside(r, frame)) {
          problems.push(`${where}: ${kind} “${label(el)}” is outside the figure `
            + `(${Math.round(r.left - frame.left)}..${Math.round(r.right - frame.left)} of ${Math.round(frame.width)} px wide, `
            + `${Math.round(r.top - frame.top)}..${Math.round(r.bottom - frame.top)} of ${Math.round(frame.height)} px high)`);
        }
        const axis = el.closest('.xaxislayer-above, .yaxislayer-above');
        drawn.push({kind, axis, box: oriented(el)});
      }
    }
    // Text against text: any two of the figure's texts, except two tick labels of one axis (counted below).
    const collisions = [];
    for (let i = 0; i < drawn.length; i++) {
      for (let j = i + 1; j < drawn.length; j++) {
        const a = drawn[i], b = drawn[j];
        if (a.axis && a.axis === b.axis) continue;
        if (overlap(a.box, b.box)) collisions.push(`${a.kind} “${a.box.text}” and ${b.kind} “${b.box.text}”`);
      }
    }
    if (collisions.length) {
      problems.push(`${where}: ${collisions.length} overlapping text pair(s): ${collisions.slice(0, 3).join('; ')}`);
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
      const boxes = [...axis.querySelectorAll('text')].filter((t) => label(t) && rect(t).width > 0).map(oriented);
      let overlaps = 0, example = '';
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          if (overlap(boxes[i], boxes[j])) {
            overlaps += 1;
            if (!example) example = `“${boxes[i].text}” and “${boxes[j].text}”`;
          }
        }
      }
      if (overlaps) problems.push(`${where}: ${overlaps} overlapping tick label pair(s), e.g. ${example}`);
    }
  });
  return problems;
}
"""


# Every figure the app draws in its main area (the first page of a fresh server also holds a hidden chart, ui.startup).
PAGE_FIGURES = '[data-testid="stMain"] .js-plotly-plot:not(.st-key-plotly-preload *)'


def measure(page, tolerance: float = 1.0, scope: str = PAGE_FIGURES) -> list[str]:
    """Problems of every figure drawn in the page's main area, or of the figures ``scope`` selects
    (empty when they are slide-ready)."""
    return page.evaluate(MEASURE_JS, [tolerance, scope])


def measure_exported_svg(page, svg: str, tolerance: float = 1.0) -> list[str]:
    """The same measurement on a figure as the camera button saved it (SVG; a PNG is this SVG drawn), shown alone
    in ``page`` at its own size: every title, legend entry, tick label and colour-bar title whole and apart."""
    page.set_content(f"<!doctype html><html><body style='margin:0'>{svg}</body></html>")
    page.set_viewport_size({"width": 4000, "height": 3000})  # larger than any export, so none runs past the window
    return measure(page, tolerance, "body > svg")


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
