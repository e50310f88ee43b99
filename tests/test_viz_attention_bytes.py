"""What a click on /attention sends: heatmap values as integer codes whose hover is the true value rounded,
and no Plotly template (viz/attention.py)."""

from __future__ import annotations

import base64
import copy
import json
import zlib
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import plotly.io as pio
import pytest

from viz import attention as va
from viz import attention_cells as va_cells


def _softmax_rows(n: int, seed: int = 0, sharp: float = 3.0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(n, n)) * sharp
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def _rounded(value: np.float32, digits: int) -> str:
    """The float32 value, exactly as stored, rounded half up to ``digits`` decimals (as the browser's toFixed)."""
    return str(Decimal(float(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _hover_value(code: int, digits: int) -> str:
    """What the hover template ``0.%{z:0<digits>d}`` prints for ``code`` (d3-format: zero-padded integer)."""
    return f"0.{int(code):0{digits}d}"


def _wire_codes(fig, trace_index: int = -1) -> np.ndarray:
    """The trace's z as the browser receives it: JSON numbers, or decoded from the figure's JSON typed array."""
    z = json.loads(pio.to_json(fig, validate=False))["data"][trace_index]["z"]
    if isinstance(z, list):
        codes = np.array(z)
        assert codes.dtype.kind == "i" and codes.min() >= 0  # whole numbers, as the hover's %{z:0Nd} needs
        return codes
    shape = [int(d) for d in str(z["shape"]).split(",")]
    return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]).newbyteorder("<")).reshape(shape)


def _deflated(data: bytes) -> int:
    """Bytes of ``data`` through the websocket's permessage-deflate (uvicorn: a 4 kB window, memLevel 5)."""
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -12, 5)
    return len(deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH)) - 4


def test_decimal_codes_are_the_value_rounded_half_up_including_exact_ties():
    # 0.03125 = 1/32 is a float32 tie at 4 decimals; 0.0625 at 3; rounding half up as the browser does
    values = np.array([0.0, 0.03125, 0.0625, 0.12344999, 0.9949, 1e-5, 4.9999e-5, 5e-5], dtype=np.float32)
    for digits in (2, 3, 4):
        codes = va.decimal_codes(values, digits)
        assert codes is not None
        assert [_hover_value(c, digits) for c in codes] == [_rounded(v, digits) for v in values]
    assert va.decimal_codes(values, 4)[1] == 313 and va.decimal_codes(values, 3)[2] == 63


def test_decimal_codes_pick_the_smallest_type_and_refuse_what_the_hover_cannot_print():
    assert va.decimal_codes(np.array([0.0, 0.255]), 3).dtype == np.uint8
    assert va.decimal_codes(np.array([0.0, 0.256]), 3).dtype == np.uint16
    assert va.decimal_codes(np.array([0.5, 0.99996]), 4) is None  # rounds to 1.0000: "0.10000" would be wrong
    assert va.decimal_codes(np.array([0.5, 1.0]), 3) is None
    assert va.decimal_codes(np.array([0.5, np.nan]), 3) is None  # masked cells need a float gap
    assert va.decimal_codes(np.array([0.5, -0.1]), 3) is None
    with pytest.raises(ValueError):
        va.decimal_codes(np.array([0.5]), 5)


@pytest.mark.parametrize("n", [64, 128, 300])
def test_head_hover_prints_every_cell_as_the_true_weight_rounded(n):
    w = _softmax_rows(n, seed=n)
    fig = va.head_figure(w, [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis")
    (trace,) = fig.data
    digits = va.hover_digits(n, n)
    assert digits == (4 if n <= va.LONG_HEAD else 3)
    assert trace.hovertemplate == f"%{{y}} → %{{x}}: 0.%{{z:0{digits}d}}<extra></extra>"
    codes = _wire_codes(fig)
    assert codes.max() < 10**digits and codes.shape == (n, n)
    rng = np.random.default_rng(1)
    cells = [(0, 0), (n - 1, n - 1)] + [tuple(c) for c in rng.integers(0, n, size=(300, 2))]
    for i, j in cells:
        assert _hover_value(codes[i, j], digits) == _rounded(w[i, j], digits), (i, j, w[i, j])
    # the colours: codes on 0..10^digits, i.e. the fixed 0..1 weight scale, within half a unit of the last digit
    assert (trace.zmin, trace.zmax) == (0.0, 10**digits)
    assert np.abs(va_cells.shown_values(trace) - w).max() <= 0.5 * 10**-digits + 1e-9
    labels = dict(zip(trace.colorbar.tickvals, trace.colorbar.ticktext))
    assert labels[0.0] == "0" and labels[float(10**digits)] == "1"


def test_per_head_scale_keeps_the_colour_bar_in_weights():
    w = _softmax_rows(50) * 0.3
    fig = va.head_figure(w, [f"t{i}" for i in range(50)], title="t", causal=False, colorscale="Viridis", per_head_scale=True)
    (trace,) = fig.data
    assert trace.zmax == pytest.approx(float(w.max()) * 10**4)
    assert all(float(text) * 10**4 == pytest.approx(val) for val, text in zip(trace.colorbar.tickvals, trace.colorbar.ticktext))
    assert max(trace.colorbar.tickvals) <= trace.zmax


def test_values_the_hover_cannot_print_as_codes_stay_float32():
    w = _softmax_rows(40)
    w[0] = 0.0
    w[0, 0] = 1.0  # a token attending only to itself
    fig = va.head_figure(w, [f"t{i}" for i in range(40)], title="t", causal=False, colorscale="Viridis")
    (trace,) = fig.data
    assert trace.hovertemplate.endswith("%{z:.4f}<extra></extra>")
    assert np.array_equal(np.asarray(trace.z, dtype=np.float32), w)


def test_a_512_token_head_sends_half_the_float32_bytes_and_no_template():
    n = 512
    w = _softmax_rows(n, sharp=2.0)
    fig = va.head_figure(w, [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis")
    spec = pio.to_json(fig, validate=False)
    assert len(spec) < 0.55 * (n * n * 4 * 4 / 3)  # float32 in base64 would be 1.4 MB
    assert len(json.dumps(json.loads(spec)["layout"]["template"])) < 100  # no 3.6 kB theme in every figure


def test_layer_grid_sends_codes_at_the_grids_precision():
    n = 60
    m = np.stack([_softmax_rows(n, seed=s) for s in range(4)])
    fig = va.layer_grid_figure(m, [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis")
    assert len(json.dumps(json.loads(pio.to_json(fig, validate=False))["layout"]["template"])) < 100
    for h, trace in enumerate(fig.data):
        codes = np.asarray(trace.z)
        assert codes.dtype == np.uint8 and trace.hovertemplate.endswith(f"0.%{{z:0{va.GRID_DIGITS}d}}<extra></extra>")
        i, j = 7, 11
        assert _hover_value(codes[i, j], va.GRID_DIGITS) == _rounded(m[h, i, j], va.GRID_DIGITS)


@pytest.mark.parametrize("n", [64, 128])
def test_codes_of_a_head_up_to_128_tokens_travel_as_json_numbers_that_deflate_smaller(n):
    """Deflate (the websocket's compression) packs decimal digits tighter than base64, which scatters each code's
    bits over several characters; past ``NUMBER_CODES_MAX_CELLS`` the typed array stays (cheaper to serialise)."""
    w = _softmax_rows(n, seed=n)
    fig = va.head_figure(w, [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis")
    z = json.loads(pio.to_json(fig, validate=False))["data"][-1]["z"]
    assert isinstance(z, list) and all(isinstance(c, int) for row in z for c in row)
    codes = va.decimal_codes(w, va.hover_digits(n, n))
    as_numbers = json.dumps(z, separators=(",", ":")).encode()
    as_base64 = base64.b64encode(codes.astype("<u2").tobytes()).decode().encode()
    assert _deflated(as_numbers) < 0.95 * _deflated(as_base64)
    long = va.head_figure(_softmax_rows(va.LONG_HEAD + 1), [f"t{i}" for i in range(va.LONG_HEAD + 1)], title="t",
                          causal=False, colorscale="Viridis")
    assert "bdata" in json.loads(pio.to_json(long, validate=False))["data"][-1]["z"]


def test_number_codes_are_shared_by_figure_copies_not_copied_again():
    """plotly deep-copies a figure's data on every ``to_dict`` (each fitted copy, each rerun's serialisation): the
    codes, 16,384 Python ints at 128 tokens, are shared read-only instead."""
    from viz.fit.page import fit_for_page

    n = va.LONG_HEAD
    fig = va.head_figure(_softmax_rows(n), [f"t{i}" for i in range(n)], title="t", causal=False, colorscale="Viridis")
    codes = fig.data[-1].z
    assert not codes.flags.writeable
    assert copy.deepcopy(codes) is codes  # plotly's deep copy of the data takes the codes as they are
    assert type(fit_for_page(fig, 820).data[-1].z) is type(codes)  # and so does every later copy of a fitted copy
    assert np.array_equal(_wire_codes(fit_for_page(fig, 820)), np.asarray(codes, dtype=np.int64))


def _printed(number: float, digits: int) -> str:
    """What d3-format's ``.<digits>f`` (the browser's toFixed) prints for the JSON number ``number``."""
    return str(Decimal(number).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def test_printed_numbers_print_exactly_what_the_true_weights_print_at_both_precisions():
    # values next to a half at 2 decimals, where the 4-decimal rounding alone would tip the cell's text over it
    tricky = np.array([0.124996, 0.00499996, 0.005, 0.03125, 0.995, 0.99996, 1.0, 0.0, 1e-5, 0.6749999], dtype=np.float32)
    w = np.concatenate([tricky, _softmax_rows(20, seed=3).ravel()])
    numbers = va.printed_numbers(w, (va_cells.HEAD_DIGITS, va.CELL_TEXT_DIGITS))
    for value, number in zip(w, numbers):
        assert isinstance(number, float)
        for digits in (va_cells.HEAD_DIGITS, va.CELL_TEXT_DIGITS):
            assert _printed(number, digits) == _rounded(value, digits), (value, number, digits)
        assert abs(number - float(value)) <= 0.5 * 10**-va_cells.HEAD_DIGITS + 1e-12
    assert _rounded(np.float32(0.124996), 4) == "0.1250" and numbers[0] != 0.125  # the case a plain rounding gets wrong
    longer = [n for n in numbers[len(tricky):] if len(repr(n)) > len("0.1234")]
    assert len(longer) <= 0.05 * (len(numbers) - len(tricky)), longer  # 4 decimals wherever they suffice
    assert va.printed_numbers(np.array([0.5, np.nan]), (4, 2)).tolist() == [0.5, None]  # masked: a gap (null)


@pytest.mark.parametrize("causal", [False, True])
def test_a_head_with_cell_text_sends_numbers_that_print_its_weights_and_deflate_smaller(causal):
    """Up to CELL_TEXT_MAX tokens the head's cells print 2 decimals and the hover 4: its z travels as JSON numbers
    (``printed_numbers``) rather than float32 in base64, about half the bytes through the websocket's deflate."""
    n = 12
    w = _softmax_rows(n, seed=5)
    fig = va.head_figure(w, [f"t{i}" for i in range(n)], title="t", causal=causal, colorscale="Viridis")
    trace = json.loads(pio.to_json(fig, validate=False))["data"][-1]
    assert trace["texttemplate"] == "%{z:.2f}" and trace["hovertemplate"].endswith("%{z:.4f}<extra></extra>")
    z = trace["z"]
    assert isinstance(z, list)
    for i in range(n):
        for j in range(n):
            if causal and j > i:
                assert z[i][j] is None  # masked: a gap
                continue
            for digits in (2, 4):
                assert _printed(z[i][j], digits) == _rounded(w[i, j], digits), (i, j)
    as_numbers = json.dumps(z, separators=(",", ":")).encode()
    as_float32 = base64.b64encode(va.masked_upper(w, causal).astype("<f4").tobytes())
    assert _deflated(as_numbers) < 0.75 * _deflated(as_float32)
