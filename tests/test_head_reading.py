"""A long head's three numbers (core.attention_heads.head_reading) against sums written out by hand, cell by cell, on
small synthetic matrices; the sentences say those numbers (a pooled head of a tiny model read as its eager weights:
tests/test_long_heatmap.py)."""

from __future__ import annotations

import numpy as np
import pytest

from core.attention_heads.head_reading import LOCAL_TOKENS, HeadReading, keys_seen, region_reading, region_sentence


def sink_matrix(n: int, sink: float, *, window: int | None = None) -> np.ndarray:
    """A decoder head putting ``sink`` on token 0 and the rest evenly on the other keys each query sees."""
    m = np.zeros((n, n))
    for q in range(n):
        keys = [k for k in range(q + 1) if window is None or k > q - window]
        others = [k for k in keys if k != 0]
        if 0 in keys and others:
            m[q, 0] = sink
            for k in others:
                m[q, k] = (1 - sink) / len(others)
        else:
            for k in keys:
                m[q, k] = 1 / len(keys)
    return m


def reading_by_hand(m: np.ndarray, *, window: int | None = None):
    """(first, uniform_first, local, reach) with plain loops over every cell."""
    n = m.shape[0]
    first = sum(m[q, 0] for q in range(n)) / n
    seen = [sum(1 for k in range(q + 1) if window is None or k > q - window) for q in range(n)]
    uniform = sum(1 / s for s in seen) / n
    local = sum(m[q, k] for q in range(n) for k in range(n) if abs(q - k) <= LOCAL_TOKENS) / n
    cells = sorted((abs(q - k), m[q, k]) for q in range(n) for k in range(n))
    total, running, reach = sum(w for _, w in cells), 0.0, None
    for d, w in cells:
        running += w
        if running >= 0.95 * total - 1e-12:
            reach = d
            break
    return first, uniform, local, reach


@pytest.mark.parametrize("window", [None, 8])
@pytest.mark.parametrize("sink", [0.0, 0.6])
def test_the_three_numbers_are_the_sums_by_hand(sink, window):
    n = 60
    m = sink_matrix(n, sink, window=window)
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    reading = HeadReading(n, causal=True, window=window)
    reading.add(m[:25], range(25))  # in two bands, as a long head is read
    reading.add(m[25:], range(25, n))
    first, uniform, local, reach = reading_by_hand(m, window=window)
    assert reading.queries == n
    assert reading.first == pytest.approx(first) and reading.uniform_first == pytest.approx(uniform)
    assert reading.local == pytest.approx(local) and reading.reach == reach


def test_uniform_causal_attention_is_read_as_uniform():
    n = 40
    m = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    reading = HeadReading(n, causal=True, window=None)
    reading.add(m, np.arange(n))
    assert reading.first == pytest.approx(reading.uniform_first)  # spreading evenly: exactly the uniform share
    assert reading.first == pytest.approx(sum(1 / (q + 1) for q in range(n)) / n)
    assert reading.local == pytest.approx(np.mean([(min(q, 16) + 1) / (q + 1) for q in range(n)]))


def test_keys_seen_by_a_decoder_an_encoder_and_a_window():
    rows = np.array([0, 3, 9])
    assert keys_seen(rows, 10, causal=True, window=None).tolist() == [1, 4, 10]
    assert keys_seen(rows, 10, causal=True, window=4).tolist() == [1, 4, 4]
    assert keys_seen(rows, 10, causal=False, window=None).tolist() == [10, 10, 10]


def test_the_sentence_says_the_numbers():
    n = 100
    m = sink_matrix(n, 0.5)
    reading = HeadReading(n, causal=True, window=None)
    reading.add(m, np.arange(n))
    first, uniform, local, reach = reading_by_hand(m)
    text = reading.done().sentence("&lt;bos&gt;")
    assert f"puts {round(first * 100)}% of a query's attention on the first token, &lt;bos&gt;" in text
    assert f"against {uniform * 100:.1f}% if it spread it evenly" in text
    assert f"({first / uniform:,.0f} times as much)" in text
    assert f"{round(local * 100)}% on keys at most 16 tokens from the query" in text
    assert f"95% of all its attention lies within {reach:,} tokens of the query" in text


def test_the_zooms_sentence_reads_the_region_shown():
    values = np.array([[0.2, 0.1, 0.0], [0.05, 0.7, 0.1], [0.3, 0.3, 0.3]], dtype=np.float32)
    hidden = np.array([[False, False, True], [False, False, False], [False, False, False]])
    values[0, 2] = np.nan  # a masked cell: never counted
    queries, keys = range(100, 103), range(95, 98)
    reading = region_reading(values, hidden, queries, keys)
    assert reading.share == pytest.approx((0.3 + 0.85 + 0.9) / 3)
    assert (reading.strongest, reading.query, reading.key) == (pytest.approx(0.7), 101, 96)
    text = region_sentence(reading, queries, keys, "·cat", "·sat")
    assert "Queries 100–102 put on average 68% of their attention on keys 95–97" in text
    assert "the strongest weight here, 0.70, is from ·cat (101) to ·sat (96), 5 tokens back." in text


def test_a_small_strongest_weight_keeps_two_significant_digits():
    values, hidden = np.full((2, 2), 0.00071, dtype=np.float32), np.zeros((2, 2), dtype=bool)
    reading = region_reading(values, hidden, range(0, 2), range(0, 2))
    assert "the strongest weight here, 0.00071, is from" in region_sentence(reading, range(0, 2), range(0, 2), "a", "b")
