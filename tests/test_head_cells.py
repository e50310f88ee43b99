"""The head switch's data (viz.head_cells, ui.head_switch.data_for): the codes decode to the weights, masked cells
stay masked, labels travel as data, and the layer is sent again only when the browser does not already show the head."""

from __future__ import annotations

import json

import numpy as np

from ui.head_switch import data_for
from viz.head_cells import decode_codes, from_wire, layer_cells, to_wire


def _softmax_heads(heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=3.0, size=(heads, n, n))
    scores[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = -np.inf  # causal
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)).astype(np.float32)


def test_codes_decode_to_the_weights_within_1e4_and_the_future_is_masked():
    weights = _softmax_heads(4, 23)
    masked = np.where(np.tri(23, dtype=bool), weights, np.nan)  # as the page draws a decoder: the future as NaN
    layer = layer_cells(masked, [f"t{i}" for i in range(23)], layer=1, colorscale="Cividis", per_head_scale=False)
    for head, packed in enumerate(layer["heads"]):
        decoded = decode_codes(packed, layer["step"], (23, 23))
        assert np.array_equal(np.isnan(decoded), ~np.tri(23, dtype=bool))
        below = np.tri(23, dtype=bool)
        assert np.abs(decoded[below] - weights[head][below].astype(np.float64)).max() <= 1e-4
        # the code is the weight's 4-decimal rounding, half up, computed here with Decimal from the float32 weight
        from decimal import ROUND_HALF_UP, Decimal
        by_hand = [float(Decimal(float(w)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)) for w in weights[head][below]]
        np.testing.assert_array_equal(np.round(decoded[below], 4), by_hand)
    assert layer["tops"] == [1.0] * 4


def test_values_above_one_and_a_sliding_window_keep_their_precision():
    values = np.abs(np.random.default_rng(1).normal(size=(2, 9, 9))) * 3  # norm-weighted attention exceeds 1
    hidden = np.zeros((9, 9), dtype=bool)
    hidden[8, 0] = True
    layer = layer_cells(values, list("abcdefghi"), layer=0, colorscale="Viridis", per_head_scale=True, hidden=hidden)
    decoded = decode_codes(layer["heads"][1], layer["step"], (9, 9))
    assert np.isnan(decoded[8, 0]) and np.isfinite(np.delete(decoded.ravel(), 8 * 9)).all()
    assert values.max() > 6.5534 or layer["step"] == 1e-4
    np.testing.assert_allclose(np.nan_to_num(decoded), np.where(hidden, 0, values[1]), atol=max(1e-4, values.max() / 65534))
    assert layer["tops"] == [float(values[0].max()), float(values[1].max())]


def test_labels_travel_as_json_text_never_as_markup():
    hostile = ["</script><img src=x onerror=alert(1)>", '"quoted"', "·the", "\\n"]
    layer = layer_cells(_softmax_heads(1, 4), hostile, layer=0, colorscale="Cividis", per_head_scale=False)
    wire = to_wire(layer)
    assert json.loads(wire[4:4 + int.from_bytes(wire[:4], "little")])["rows"] == hostile == layer["cols"]  # data, drawn as text
    assert from_wire(wire) == layer  # what the browser unpacks: every field, each head's codes byte for byte
    shown = to_wire(layer, raw=0)  # the head to show inflated: its planes, high bytes then low bytes, by hand here
    weights = _softmax_heads(1, 4)[0].astype(np.float64)
    codes = np.floor(weights * 10_000 + 0.5).astype(np.uint16).ravel()
    assert shown.endswith((codes >> 8).astype(np.uint8).tobytes() + (codes & 0xFF).astype(np.uint8).tobytes())
    assert from_wire(shown) == layer
    js = (__import__("pathlib").Path(__file__).parents[1] / "ui" / "head_switch.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "outerHTML" not in js


def test_another_layers_first_message_carries_the_shown_head_alone():
    heads = _softmax_heads(12, 40)
    layer = layer_cells(heads, [f"t{i}" for i in range(40)], layer=3, colorscale="Cividis", per_head_scale=False)
    whole, first = to_wire(layer, raw=5), to_wire(layer, raw=5, only=5)
    got = from_wire(first)
    assert got.pop("partial") is True and [h is not None for h in got["heads"]] == [h == 5 for h in range(12)]
    assert got["heads"][5] == layer["heads"][5] and got["digest"] == layer["digest"]  # the same layer: its digest
    codes = np.floor(heads[5].astype(np.float64) * 10_000 + 0.5).astype(np.uint16).ravel()  # by hand, inflated
    assert first.endswith((codes >> 8).astype(np.uint8).tobytes() + (codes & 0xFF).astype(np.uint8).tobytes())
    assert len(first) < len(whole) - sum(len(h) for i, h in enumerate(layer["heads"]) if i != 5) + 200
    assert "partial" not in from_wire(whole)


def test_the_layer_is_sent_again_only_when_the_browser_does_not_show_the_head():
    layer = layer_cells(_softmax_heads(3, 5), list("abcde"), layer=0, colorscale="Cividis", per_head_scale=False)
    first, record = data_for(layer, 0, None, None)
    assert (first["head"], first["nonce"]) == (0, 0)
    # the browser chose head 2 (its state {2, seq 7}) and the option followed: the same data, cached by the browser
    again, record2 = data_for(layer, 2, record, (2, 7))
    assert again == first and record2 == record
    # another control chose head 1: the data names it, with a new nonce
    moved, record3 = data_for(layer, 1, record2, (2, 7))
    assert (moved["head"], moved["nonce"]) == (1, 1)
    # the browser's old choice (2, seq 7) no longer describes what it shows; choosing 2 elsewhere sends it
    back, _ = data_for(layer, 2, record3, (2, 7))
    assert (back["head"], back["nonce"]) == (2, 2)
    # another layer: new data
    other = layer_cells(_softmax_heads(3, 5, seed=2), list("abcde"), layer=1, colorscale="Cividis", per_head_scale=False)
    new, record4 = data_for(other, 2, record3, (2, 7))
    assert new["digest"] != first["digest"] and new["head"] == 2
    # head 0 clicked on the layer before, its click landing after this layer was sent: the browser shows head 2 of
    # this layer, so the data names head 0 with a new nonce (and a click on this layer is cached as before)
    late, record5 = data_for(other, 0, record4, (0, 8, first["digest"]))
    assert (late["head"], late["nonce"]) == (0, record4[2] + 1)
    here, _ = data_for(other, 1, record5, (1, 9, other["digest"]))
    assert here == late
