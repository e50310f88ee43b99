"""The width of the page's main column, measured in the browser, so figures are fitted to the screen they are drawn on.

Streamlit tells the server nothing about the window. A small component (``st.components.v2``, public API) measures the
main column's content width and whether Streamlit has stacked its columns (a narrow window), and reports it only when
it is narrower than the width figures are fitted for anyway (``ui.figures.NORMAL_WIDTH``): a desktop window never
reruns for it, a 1024-pixel laptop with the sidebar open or a phone reruns once, and again when its width changes.
It also reports the device pixel ratio when it is not 1 (a high-density screen, a zoomed page: once), so pictures
drawn pixel for pixel (``viz.long_heatmap``) are pooled for the screen's own pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

PROBE_KEY = "main-column-probe"
STEP_PX = 20  # widths are reported in steps, so a window being resized reruns the page a few times, not at every pixel
# Streamlit puts columns under each other in a window narrower than this (its ``columns`` breakpoint, measured in
# Chromium 1.67: side by side at 641 px, stacked at 640).
STACK_BELOW_PX = 641

# Runs in the page (the component is trusted code of ours; it reads only sizes). It reports {width, stacked} a
# quarter second after the column stops changing size, and only when that differs from what the server last knew:
# what it fitted for (``data``), or what this probe last reported. Comparing with ``data`` alone reported the same
# column again on every change of the page's height, and each report reran the page: a page still computing when
# the probe first measured (Drift opened from a link on a phone) restarted its computation every few tenths of a
# second and never finished. ``documentElement.dataset.mainColumn`` says what was last measured and
# ``mainColumnMeasured`` how many times, so a test can wait for the measurement after a resize and then for the
# refitted figures.
PROBE_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  if (!main) return;
  let timer = null;
  let known = {width: data.width, stacked: data.stacked, dpr: data.dpr};
  const measure = () => {
    const style = getComputedStyle(main);
    const inner = main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const width = Math.min(data.widest, Math.floor(inner / data.step) * data.step);
    const stacked = window.innerWidth < data.stackBelow;
    const dpr = Math.round((window.devicePixelRatio || 1) * 100) / 100;
    const root = document.documentElement;
    root.dataset.mainColumn = `${width}${stacked ? ' stacked' : ''}`;
    root.dataset.mainColumnMeasured = String(Number(root.dataset.mainColumnMeasured || 0) + 1);
    if (width !== known.width || stacked !== known.stacked || dpr !== known.dpr) {
      const app = document.querySelector('[data-testid="stApp"]');
      if (app && app.getAttribute('data-test-script-state') === 'running') {
        clearTimeout(timer);  // after the run on screen, at once: a report now would stop it, and with it the
        timer = setTimeout(measure, 40);  // options a link set (Streamlit starts the report's rerun when it ends)
        return;
      }
      known = {width, stacked, dpr};
      setStateValue('column', known);
    }
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(measure, 250); };
  const observer = new ResizeObserver(later);
  observer.observe(main);
  measure();
  return () => { observer.disconnect(); clearTimeout(timer); };
}
"""
PROBE_CSS = f".st-key-{PROBE_KEY} {{ display: none; }}"  # a rule of ui.explain.PAGE_CSS: the probe takes no room

_probe = st.components.v2.component("main_column_probe", js=PROBE_JS)


@dataclass(frozen=True)
class MainColumn:
    """The main column's content width in CSS pixels (at most the ``widest`` figures are fitted for), whether
    Streamlit draws ``st.columns`` under each other in this window, and the window's device pixel ratio."""

    width: int
    stacked: bool = False
    dpr: float = 1.0

    def __str__(self) -> str:
        """As the probe writes it on the page (``documentElement.dataset.mainColumn``): "564", or "358 stacked"."""
        return f"{self.width}{' stacked' if self.stacked else ''}"

    def figure_width(self, share: float, gap_px: float) -> float:
        """The width of a figure in a column taking ``share`` of the main column's width less its gaps (``gap_px``
        between neighbours; two columns, or ``1 / share`` equal ones), or all of it when columns are stacked."""
        if share >= 1 or self.stacked:
            return float(self.width)
        gaps = max(1, round(1 / share) - 1) if share <= 0.5 else 1
        return (self.width - gaps * gap_px) * share


def current_column(widest: int) -> MainColumn:
    """The main column as the probe last measured it (this run's state), at most ``widest``; ``widest`` columns side
    by side until the browser has said otherwise (AppTest, a first paint, a wide window, outside the app)."""
    state = st.session_state.get(PROBE_KEY) or {}
    column = state.get("column") if hasattr(state, "get") else None
    if isinstance(column, dict) and isinstance(column.get("width"), (int, float)) and column["width"] > 0:
        dpr = column.get("dpr")
        dpr = float(dpr) if isinstance(dpr, (int, float)) and 0.25 <= dpr <= 8 else 1.0
        return MainColumn(min(widest, int(column["width"])), bool(column.get("stacked")), dpr)
    return MainColumn(widest)


def main_column(widest: int) -> MainColumn:
    """Mount the probe (once per run, before any figure; ``PROBE_CSS`` on the page hides it) and return the column
    as last measured (``current_column``)."""
    measured = current_column(widest)
    _probe(key=PROBE_KEY, data={"width": measured.width, "stacked": measured.stacked, "dpr": measured.dpr, "widest": widest,
                                "step": STEP_PX, "stackBelow": STACK_BELOW_PX},
           on_column_change=lambda: None)
    return measured
