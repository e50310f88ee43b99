"""BertViz's head, model and neuron views as self-contained HTML that needs no network.

BertViz's own HTML loads require.js, d3 and jQuery from a CDN. Here the page is built
from BertViz's view scripts in the installed ``bertviz`` package, with jQuery from
``XStatic-jQuery`` and d3 v5 from ``mpld3`` inlined (read from the installed packages
at run time; nothing third-party is copied into this repository) and require.js
replaced by a few-line shim that hands those two libraries to BertViz's module.

Tokens are user text: they only ever reach the page inside JSON whose ``<``, ``>``,
``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes, so no token can close the
``<script>`` element or open a comment; BertViz draws them with d3's ``.text()``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from functools import cache
from pathlib import Path

import numpy as np

# Above this many attention weights one BertViz view becomes too heavy to draw
# (it draws one SVG line per weight); the page then restricts the layers it sends.
MAX_WEIGHTS = 300_000
DECIMALS = 4

_SHIM = """
(function () {
  var modules = {jquery: window.jQuery, d3: window.d3};
  function require(names, callback) {
    callback.apply(null, names.map(function (name) {
      if (!(name in modules)) { throw new Error("offline BertViz: unknown module " + name); }
      return modules[name];
    }));
  }
  require.config = function () {};
  window.require = window.requirejs = require;
})();
"""

_ROOT_ID = "bertviz"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"The package {name!r} is not installed; the BertViz views need it (see requirements.txt).")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _asset(package: str, relative: str) -> str:
    """Text of a file inside an installed package, with any source-map comment removed."""
    text = (_package_dir(package) / relative).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//# sourceMappingURL")]
    return _script_safe_js("\n".join(lines))


def _script_safe_js(code: str) -> str:
    """JavaScript made safe inside an inline ``<script>``: ``</script`` can never end it early."""
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def script_json(value: object) -> str:
    """JSON that can sit inside an inline ``<script>``: ``<``, ``>``, ``&``, U+2028, U+2029 escaped."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def layer_budget(num_heads: int, num_units: int, max_weights: int = MAX_WEIGHTS) -> int:
    """How many layers of ``num_heads`` × ``num_units``² weights one BertViz view may carry (0: none)."""
    return max_weights // max(1, num_heads * num_units * num_units)


def layers_near(layer: int, num_layers: int, count: int) -> list[int]:
    """``count`` layers closest to ``layer`` (ties: the lower layer), in increasing order."""
    order = sorted(range(num_layers), key=lambda i: (abs(i - layer), i))
    return sorted(order[: max(0, count)])


def layers_to_send(num_layers: int, num_heads: int, num_units: int, layer: int) -> tuple[list[int], str | None]:
    """The layers a head or model view may carry (around ``layer``), and why, when not all of them."""
    sent = layers_near(layer, num_layers, layer_budget(num_heads, num_units))
    per_layer = num_heads * num_units * num_units
    if not sent:
        return [], (f"BertViz draws one line per query–key pair and head: at {num_units} tokens one layer is {per_layer:,} "
                    f"lines, more than a browser draws smoothly ({MAX_WEIGHTS:,}). The heatmaps above show every weight; "
                    "for BertViz, use a shorter text or word level.")
    if len(sent) < num_layers:
        return sent, (f"At {num_units} tokens BertViz gets only layers {sent[0]}–{sent[-1]} (around layer {layer}): all "
                      f"{num_layers} layers would be {num_layers * per_layer:,} lines, too many for a browser. "
                      "Pick another layer above to move the window.")
    return sent, None


def _rounded(array: np.ndarray) -> list:
    return np.round(np.nan_to_num(np.asarray(array, dtype=np.float64), nan=0.0), DECIMALS).tolist()


def _page(markup: str, view_script: str, params_script: str = "") -> str:
    jquery = _asset("xstatic", "pkg/jquery/data/jquery.min.js")
    d3 = _asset("mpld3", "js/d3.v5.min.js")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<style>body{margin:0;background:white;font-family:'Helvetica Neue',Helvetica,Arial,sans-serif}</style>"
        f"</head><body>{markup}"
        f"<script>{jquery}</script><script>{d3}</script><script>{_SHIM}</script>"
        f"{params_script}<script>{view_script}</script></body></html>"
    )


def _bertviz_script(file: str) -> str:
    """One of BertViz's view scripts without its ``require.config`` block (the CDN addresses)."""
    code, found = re.subn(r"require\.config\(\{.*?\}\);", "", _asset("bertviz", file), count=1, flags=re.S)
    if not found:
        raise RuntimeError(f"bertviz's {file} has no require.config block; this BertViz version is not supported.")
    return code


def _view_script(file: str, params: dict) -> str:
    code = _bertviz_script(file)
    if "PYTHON_PARAMS" not in code:
        raise RuntimeError(f"bertviz's {file} has no PYTHON_PARAMS marker; this BertViz version is not supported.")
    return code.replace("PYTHON_PARAMS", script_json(params))


def _check(attention: np.ndarray, labels: list[str], layers: list[int]) -> None:
    if attention.ndim != 4 or attention.shape[2:] != (len(labels), len(labels)):
        raise ValueError(f"attention must be [layers, heads, {len(labels)}, {len(labels)}], got {attention.shape}")
    if not layers or any(not 0 <= i < attention.shape[0] for i in layers):
        raise ValueError(f"layers must be a non-empty list of indices below {attention.shape[0]}, got {layers}")


def head_view_html(attention: np.ndarray, labels: list[str], *, layers: list[int], layer: int | None = None) -> str:
    """BertViz head view of ``attention`` ``[layers, heads, n, n]`` over ``labels``; only ``layers`` are sent."""
    _check(attention, labels, layers)
    params = {
        "attention": [{"name": None, "attn": _rounded(attention[layers]), "left_text": labels, "right_text": labels}],
        "default_filter": "0",
        "root_div_id": _ROOT_ID,
        "layer": layer if layer in layers else None,
        "heads": None,
        "include_layers": layers,
    }
    markup = (
        f"<div id='{_ROOT_ID}'><span style='user-select:none'>Layer: <select id='layer'></select></span>"
        "<div id='vis'></div></div>"
    )
    return _page(markup, _view_script("head_view.js", params))


def model_view_html(attention: np.ndarray, labels: list[str], *, layers: list[int], display_mode: str = "light") -> str:
    """BertViz model view (every head of ``layers`` as thumbnails; click one for detail)."""
    _check(attention, labels, layers)
    heads = attention.shape[1]
    params = {
        "attention": [{"name": None, "attn": _rounded(attention[layers]), "left_text": labels, "right_text": labels}],
        "default_filter": "0",
        "display_mode": display_mode,
        "root_div_id": _ROOT_ID,
        "include_layers": layers,
        "include_heads": list(range(heads)),
        "total_heads": heads,
    }
    markup = f"<div id='{_ROOT_ID}'><span style='user-select:none'></span><div id='vis'></div></div>"
    return _page(markup, _view_script("model_view.js", params))


# BertViz's own names for the three attentions of an encoder-decoder (its ``encoder_attention`` /
# ``decoder_attention`` / ``cross_attention`` inputs), in its order.
SEQ2SEQ_PARTS = ("Encoder", "Decoder", "Cross")


def seq2seq_budget(num_heads: int, num_source: int, num_target: int, max_weights: int = MAX_WEIGHTS) -> int:
    """How many layers one encoder-decoder BertViz view may carry: each layer sends encoder (S²),
    decoder (T²) and cross-attention (T·S) weights for every head."""
    per_layer = num_heads * (num_source**2 + num_target**2 + num_source * num_target)
    return max_weights // max(1, per_layer)


def seq2seq_view_html(
    kind: str,
    encoder: np.ndarray,
    decoder: np.ndarray,
    cross: np.ndarray,
    encoder_labels: list[str],
    decoder_labels: list[str],
    *,
    layers: list[int],
    layer: int | None = None,
    show: str = "Cross",
    display_mode: str = "light",
) -> str:
    """BertViz's head (``kind="head"``) or model view (``"model"``) of an encoder-decoder, as BertViz builds it
    from ``encoder_attention`` ``[L, H, S, S]``, ``decoder_attention`` ``[L, H, T, T]`` and ``cross_attention``
    ``[L, H, T, S]``: one menu switches between the three (``show`` opens one of ``SEQ2SEQ_PARTS``).
    Cross-attention has the target (decoder) tokens on the left and the source tokens on the right.
    ``layers`` are sent for all three, so they must exist in both stacks.
    """
    if kind not in ("head", "model"):
        raise ValueError(f"kind must be 'head' or 'model', got {kind!r}")
    s, t = len(encoder_labels), len(decoder_labels)
    _check(encoder, encoder_labels, layers)
    _check(decoder, decoder_labels, layers)
    if cross.ndim != 4 or cross.shape[2:] != (t, s) or cross.shape[0] != decoder.shape[0]:
        raise ValueError(f"cross must be [{decoder.shape[0]}, heads, {t}, {s}], got {cross.shape}")
    parts = [
        {"name": "Encoder", "attn": _rounded(encoder[layers]), "left_text": encoder_labels, "right_text": encoder_labels},
        {"name": "Decoder", "attn": _rounded(decoder[layers]), "left_text": decoder_labels, "right_text": decoder_labels},
        {"name": "Cross", "attn": _rounded(cross[layers]), "left_text": decoder_labels, "right_text": encoder_labels},
    ]
    chosen = SEQ2SEQ_PARTS.index(show)
    options = "".join(
        f'<option value="{i}"{" selected" if i == chosen else ""}>{name}</option>' for i, name in enumerate(SEQ2SEQ_PARTS)
    )
    menu = f"Attention: <select id='filter'>{options}</select>"
    params: dict = {"attention": parts, "default_filter": str(chosen), "root_div_id": _ROOT_ID, "include_layers": layers}
    if kind == "head":
        params |= {"layer": layer if layer in layers else None, "heads": None}
        markup = (f"<div id='{_ROOT_ID}'><span style='user-select:none'>Layer: <select id='layer'></select> {menu}</span>"
                  "<div id='vis'></div></div>")
        return _page(markup, _view_script("head_view.js", params))
    heads = encoder.shape[1]
    params |= {"display_mode": display_mode, "include_heads": list(range(heads)), "total_heads": heads}
    markup = f"<div id='{_ROOT_ID}'><span style='user-select:none'>{menu}</span><div id='vis'></div></div>"
    return _page(markup, _view_script("model_view.js", params))


def neuron_view_html(
    attention: np.ndarray,
    queries: np.ndarray,
    keys: np.ndarray,
    labels: list[str],
    *,
    bidirectional: bool,
    layer: int = 0,
    head: int = 0,
    display_mode: str = "light",
) -> str:
    """BertViz neuron view: query and key vectors ``[layers, heads, n, d]`` and how q·k/√d becomes each weight.

    The view's script divides q·k by √d itself, so the vectors must come from a model
    whose attention uses exactly that scale. Its layer menu numbers every layer sent.
    """
    layers = list(range(attention.shape[0]))
    _check(attention, labels, layers)
    if queries.shape != keys.shape or queries.shape[:3] != attention.shape[:3]:
        raise ValueError(f"queries {queries.shape} and keys {keys.shape} must be [layers, heads, n, d] like {attention.shape}")
    params = {
        "attention": {"all": {"attn": _rounded(attention), "queries": _rounded(queries), "keys": _rounded(keys),
                              "left_text": labels, "right_text": labels}},
        "default_filter": "all",
        "root_div_id": _ROOT_ID,
        "bidirectional": bidirectional,
        "display_mode": display_mode,
        "layer": layer,
        "head": head,
    }
    markup = (
        f"<div id='{_ROOT_ID}' style='padding:8px'><span style='user-select:none'>"
        "<span class='dropdown-label'>Layer: </span><select id='layer'></select> "
        "<span class='dropdown-label'>Head: </span><select id='att_head'></select></span>"
        "<div id='vis'></div></div>"
    )
    params_script = f"<script>window.bertviz_params = {script_json(params)};</script>"
    return _page(markup, _bertviz_script("neuron_view.js"), params_script)


def view_height(view: str, num_units: int, num_layers: int, num_heads: int) -> int:
    """Pixels the iframe needs for a view, from BertViz's own layout constants."""
    if view == "head":
        return int(num_units * 22.5 + 90)
    if view == "model":
        thumbnail = num_units * 7 * 12 / num_heads + 10
        return int(max(num_layers * thumbnail + 40, num_units * 18 + 55) + 40)
    return int(num_units * 26 + 200)
