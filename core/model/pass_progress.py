"""How far a forward pass has gone, as the progress bar writes it: "layer 12 of 30, about 20 s left".

The time left is estimated from the layers done: the seconds so far per layer done, times the layers still to run (the
blocks of a model take about as long as each other). Plain text, no Streamlit: ``ui.trace_progress`` writes the bar
with it, ``core.model.trace.record(progress=…)`` tells it the layers done.
"""

from __future__ import annotations

import math


def _nearest(x: float, step: int) -> int:
    """``x`` rounded to a multiple of ``step``, halves up (Python's ``round`` sends 2.5 to 2)."""
    return step * math.floor(x / step + 0.5)


def time_left(seconds: float) -> str:
    """``seconds`` still to wait, as a reader takes it in at a glance: under 1 s "under a second left"; to the second
    under 10 s; to 5 s under a minute; to 10 s under 10 minutes; to the minute above ("about 1 min 10 s left",
    "about 12 min left", "about 1 h 5 min left")."""
    s = max(0.0, float(seconds))
    if s < 1:
        return "under a second left"
    n = _nearest(s, 1 if s < 10 else 5 if s < 60 else 10 if s < 600 else 60)
    hours, rest = divmod(n, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v} {unit}" for v, unit in ((hours, "h"), (minutes, "min"), (secs, "s")) if v]
    return f"about {' '.join(parts)} left"


def layer_progress(done: int, total: int, elapsed: float) -> str:
    """``done`` of ``total`` layers after ``elapsed`` seconds: "layer 12 of 30, about 20 s left"; "layer 0 of 30"
    before the first layer has finished (nothing to estimate from) and "layer 30 of 30" once all have."""
    said = f"layer {done} of {total}"
    if done <= 0 or done >= total:
        return said
    return f"{said}, {time_left(elapsed / done * (total - done))}"
