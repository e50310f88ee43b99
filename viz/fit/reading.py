"""Reading a Plotly figure the way the fitting rules need it (its axes, their labels and domains, its legend
entries) and writing its layout fast: shared by the slide rules (``viz.fit.width``) and the page fit (``viz.fit.page``)."""

from __future__ import annotations

import base64
import re
from numbers import Real

import numpy as np
import plotly.graph_objects as go

from viz.fit.text import LINE_BREAK, LINE_HEIGHT, line_count, text_width

# Plotly validates every property written through its objects again (0.2-0.6 ms per update, about half of the 35 ms a
# 128-token head's fitting took on every click). What the fitting writes are plain numbers, strings and dicts computed
# here, so ``write_layout`` merges them into the figure's own dicts instead. True: write through Plotly's validated path
# (tests/test_slide_rules.py fits every figure of the app both ways and compares them).
VALIDATE_WRITES = False


def _merge(target: dict, changes: dict) -> None:
    for key, value in changes.items():
        if isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value)
        else:
            target[key] = value


def write_layout(obj, **changes) -> None:
    """``obj.update(**changes)`` for a layout or a trace of a figure, nested dicts merged, without validation."""
    props = getattr(obj, "_props", None)
    if VALIDATE_WRITES or not isinstance(props, dict):
        obj.update(changes)
    else:
        _merge(props, changes)


def axes_of(fig: go.Figure, letter: str) -> list[str]:
    """Names of the figure's x (or y) axes, "xaxis" first, including the default one when only traces use it."""
    names = {k for k in fig.layout.to_plotly_json() if re.fullmatch(letter + r"axis\d*", k)}
    if fig.data:
        names.add(letter + "axis")
    return sorted(names, key=lambda k: int(k[5:] or 1))


def _axis_id(name: str) -> str:
    return name[0] + name[5:]  # "xaxis2" -> "x2"


def _traces_on(fig: go.Figure, name: str) -> list:
    axis_id = _axis_id(name)
    return [t for t in fig.data if (getattr(t, name[0] + "axis", None) or name[0]) == axis_id]


def domain_share(axis) -> float:
    domain = axis.domain or (0.0, 1.0)
    return max(0.05, float(domain[1]) - float(domain[0]))


def plain_array(data) -> np.ndarray:
    """A trace's data array as numpy: also when it is Plotly's typed-array form ``{"dtype", "bdata"[, "shape"]}``,
    in which ``to_dict`` (and so ``copy_figure``) writes a numpy array; read as one value, it hid every coordinate."""
    if isinstance(data, dict) and "bdata" in data and "dtype" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        shape = data.get("shape")
        if shape is not None:
            flat = flat.reshape([int(n) for n in str(shape).split(",")] if isinstance(shape, str) else shape)
        return flat.astype(object)
    return np.asarray(data, dtype=object)


def _coordinates(trace, letter: str) -> list:
    """A trace's x (or y) values as a list (empty when it has none)."""
    data = getattr(trace, letter, None)
    return [] if data is None else [v.item() if isinstance(v, np.generic) else v for v in plain_array(data).ravel()]


def category_labels(fig: go.Figure, name: str) -> list[str] | None:
    """The category names drawn on a category axis (from its traces), in order; None if not one."""
    axis = fig.layout[name]
    values = []
    for trace in _traces_on(fig, name):
        data = _coordinates(trace, name[0])
        if data and isinstance(data[0], str):
            seen = set(values)
            values.extend(v for v in data if not (v in seen or seen.add(v)))
    if axis.type == "category" or (values and axis.type in (None, "-")):
        return values or None
    return None


def tick_labels(fig: go.Figure, name: str) -> tuple[list, list[str], float] | None:
    """``(positions, texts, units spanned)`` of an axis whose labels the figure fixes; None when Plotly places them."""
    axis = fig.layout[name]
    if axis.showticklabels is False:
        return None
    # "array" is Plotly's tickmode when tickvals are given and no mode is: the long-context distance figure set only
    # tickvals and ticktext, so its 10 labels were never thinned or turned, and overlapped on a phone (issue 50)
    if axis.tickmode in ("array", None) and axis.tickvals is not None and len(axis.tickvals):
        values = list(axis.tickvals)
        texts = [str(t) for t in (axis.ticktext if axis.ticktext is not None else values)]
        if all(isinstance(v, Real) for v in values):
            low, high = (min(axis.range), max(axis.range)) if axis.range else (min(values) - 0.5, max(values) + 0.5)
            return values, texts, max(1.0, float(high - low))
        return values, texts, float(len(values))
    categories = category_labels(fig, name)
    if categories:
        return categories, categories, float(len(categories))
    if axis.dtick is not None and isinstance(axis.dtick, Real):
        data = [float(v) for t in _traces_on(fig, name) for v in _coordinates(t, name[0]) if isinstance(v, Real)]
        if not data:
            return None
        low, high = min(data), max(data)
        values = list(np.arange(low, high + axis.dtick / 2, axis.dtick))
        return values, [f"{v:g}" for v in values], max(1.0, float(high - low) + 1)
    return None


def numbered_in_order(axis, categories: list[str] | None) -> bool:
    """Whether an axis declared ``category`` numbers ``categories`` 0, 1, … in the order the traces give them
    (Plotly's default), so that a linear ``tick0``/``dtick`` picks the same labels as a list of them would."""
    return (bool(categories) and axis.type == "category" and axis.tickmode in (None, "auto", "linear")
            and axis.categoryarray is None
            and axis.categoryorder in (None, "trace"))


def legend_traces(fig: go.Figure) -> list:
    """Traces that may have a legend entry (an image or a heatmap never does)."""
    return [t for t in fig.data if getattr(t, "showlegend", None) is not False and getattr(t, "name", None) is not None
            and t.type not in ("image", "heatmap")]


# A horizontal legend's entry: its symbol and the gap to its name (Plotly's textGap) and the gap to the next entry
# (itemGap); each row at least 16 px plus 3 between rows, the legend 10 px of padding (plotly.js legend/constants).
LEGEND_SYMBOL_PX, LEGEND_GAP_PX, LEGEND_ROW_GAP_PX, LEGEND_PAD_PX = 40, 5, 3, 10


def legend_height_px(fig: go.Figure, room_px: float | None, font_px: float) -> float:
    """Estimated height of a horizontal legend whose rows are ``room_px`` wide (its title on the left of the first
    row, as Plotly sets it, or on a row of its own when its side is "top"): entries packed into rows as Plotly packs
    them, names 10 % wider than estimated. ``None``: the whole legend in one row."""
    names = [str(t.name) for t in legend_traces(fig)]
    row_px = max(LINE_HEIGHT * font_px * max(map(line_count, names), default=1), 16) + LEGEND_ROW_GAP_PX
    if room_px is None:
        return row_px + LEGEND_PAD_PX
    title = fig.layout.legend.title.text
    above = bool(title) and str(fig.layout.legend.title.side or "").startswith("top")  # a row of its own
    room = room_px - (1.1 * text_width(title, font_px) + LEGEND_SYMBOL_PX / 2 if title and not above else 0)
    rows, used = 1 + above, 0.0
    for name in names:
        width = LEGEND_SYMBOL_PX + 1.1 * max(text_width(line, font_px) for line in LINE_BREAK.split(name))
        if used and used + width > room:
            rows, used = rows + 1, 0.0
        used += width + LEGEND_GAP_PX
    return rows * row_px + LEGEND_PAD_PX


def copy_figure(fig: go.Figure) -> go.Figure:
    """A deep copy of a figure, without plotly's property validation (``fig`` was validated when it was built;
    validating again costs tens of ms per figure on every rerun)."""
    return go.Figure(fig.to_dict(), _validate=False)
