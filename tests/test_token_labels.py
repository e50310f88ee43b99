"""One token-label rule for every view and tokenizer (issue 40, items 8, 11, 12, 13, 20 and 22).

Expected labels are written by hand or from the tokenizer's own decode and transformers' byte table, never from
``core.model.tokens``.
"""

from __future__ import annotations

import string

import numpy as np
import pytest
from transformers.convert_slow_tokenizer import bytes_to_unicode

import core.model.tokens as tokens  # its names looked up in each test: each fails alone on code without them
from core.model.inference import analyze
from tests.test_app import open_app, page_errors

YESTERDAY = "Yesterday my grandmother went\n to the Eiffel city."
DRAWABLE = set(string.printable) - set(string.whitespace) | {" ", "·", "“", "”", "∅", "…"}


def _by_hand(decoded: str) -> str:
    """The README's rule written out: a space as "·", a newline as backslash-n."""
    return decoded.replace(" ", "·").replace("\n", "\\n")


# --- items 8 and 11: one rule, from the token's decoded text ------------------------------------------------------

def test_byte_level_labels_are_the_decoded_tokens_with_spaces_shown(tiny_gpt2):
    text = "the bank\nof it"
    analysis = analyze(tiny_gpt2, text)
    decoded = [tiny_gpt2.tokenizer.decode([i]) for i in analysis.input_ids]
    assert "".join(decoded) == text  # the tiny tokenizer adds nothing: every token is text
    assert tokens.token_labels(analysis) == [_by_hand(d) for d in decoded]
    assert not any(label.startswith("##") or "Ġ" in label for label in tokens.token_labels(analysis))


def test_wordpiece_keeps_its_own_marks_and_the_case_typed(tiny_bert):
    labels = tokens.token_labels(analyze(tiny_bert, "Zebra bank"))
    assert labels == ["[CLS]", "Z", "##e", "##b", "##r", "##a", "bank", "[SEP]"]


def test_sentences_quote_tokens_by_the_same_rule():
    from core.outputs.generation import Distribution
    from viz.generation import distribution_sentence

    d = Distribution(order=np.array([5, 6]), raw=np.array([0.9, 0.1]), scaled=np.array([0.9, 0.1]),
                     kept=np.array([True, True]), probs=np.array([0.9, 0.1]), entropy_before=0.3, entropy_after=0.3,
                     temperature=1.0, top_k=0, top_p=1.0)
    assert "The most likely, “·Paris”, has" in distribution_sentence(d, [" Paris", "\n"])


# --- item 12: the newline and other invisible tokens ----------------------------------------------------------------

def test_invisible_tokens_are_labelled_in_plain_ascii():
    assert tokens.readable_token("\n") == "\\n" and tokens.readable_token(" \t") == "·\\t" and tokens.readable_token("") == "∅"
    for code in [*range(0x20), 0x7F, 0x85, 0xA0, 0x200B, 0x2028, 0xFEFF]:
        label = tokens.readable_token(chr(code))
        assert set(label) <= DRAWABLE, (hex(code), label)


def test_figures_draw_no_control_pictures():
    from viz.common import plotly_safe

    assert plotly_safe("a\nb\x00") == "a\\nb\\x00"
    assert not any(0x2400 <= ord(c) <= 0x2426 for c in plotly_safe("".join(map(chr, range(0x20)))))


# --- item 20: parts of a character -----------------------------------------------------------------------------------

def test_a_token_that_is_part_of_a_character_shows_its_bytes(tiny_gpt2):
    char_of_byte = bytes_to_unicode()  # transformers' own byte table, independent of core.model.tokens
    tok = tiny_gpt2.tokenizer
    vocab = tok.get_vocab()
    piece = char_of_byte[0xD8]
    assert piece in vocab and tok.decode([vocab[piece]]) == "\ufffd"  # what the page used to show
    assert tokens.decoded_tokens(tok, [vocab[piece]]) == ["<0xD8>"]
    whole = tok("م", add_special_tokens=False)["input_ids"]
    assert "".join(tokens.decoded_tokens(tok, whole)) in ("م", "<0xD9><0x85>")


# --- item 13: the lens grid is legible --------------------------------------------------------------------------------

def _lens_figure():
    from core.outputs.lens import lens_summary
    from viz.lens_grid import final_rank_grid

    rng = np.random.default_rng(0)
    rows, columns = 31, 12
    ranks = rng.integers(0, 40000, size=(rows, columns))
    ranks[20:] = 0
    ranks[np.arange(rows) % 5 == 3, :] = 30  # mid-range cells, teal
    tops = [[" grandmother" if (l + t) % 3 else "\n" for t in range(columns)] for l in range(rows)]
    return ranks, final_rank_grid([" my"] * columns, tops, ranks, lens_summary(ranks), tops[-1])


def _srgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)


def _luminance(rgb: np.ndarray) -> float:
    c = rgb / 255
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(c @ [0.2126, 0.7152, 0.0722])


def test_lens_grid_cells_are_legible_and_in_contrast():
    import plotly.colors as pc

    ranks, fig = _lens_figure()
    heatmap = fig.data[0]
    texts = [trace for trace in fig.data if trace.type == "scatter" and trace.mode == "text"]
    assert len(texts) == 1 and texts[0].textfont.size >= 11
    assert heatmap.text is None and heatmap.texttemplate is None  # no second, automatically sized copy
    # The cell colour as Plotly draws it: reversed Viridis over [zmin, zmax], interpolated in RGB.
    z = np.log10(ranks + 1)
    t = 1 - (np.clip(z, heatmap.zmin, heatmap.zmax) - heatmap.zmin) / (heatmap.zmax - heatmap.zmin)
    scale = pc.get_colorscale("Viridis")
    stops = [p for p, _ in scale]
    rgb = np.array([pc.hex_to_rgb(c) for _, c in scale], dtype=float)
    colours = texts[0].textfont.color
    for k, (l, c) in enumerate(zip(texts[0].y, texts[0].x)):
        cell = np.array([np.interp(t[l, c], stops, rgb[:, i]) for i in range(3)])
        a, b = _luminance(cell), _luminance(_srgb(colours[k]))
        assert (max(a, b) + 0.05) / (min(a, b) + 0.05) >= 4.5, (l, c, colours[k], cell)
    assert all("\n" not in s and "␊" not in s for s in texts[0].text)


def test_lens_grid_marks_cells_on_their_edges_and_shows_only_the_hidden_states():
    ranks, fig = _lens_figure()
    rows = ranks.shape[0]
    assert tuple(fig.layout.yaxis.range) == (-0.5, rows - 0.5)
    assert not any(getattr(trace.marker, "symbol", None) == "circle-open" and trace.x[0] is not None
                   for trace in fig.data if trace.type == "scatter")
    for shape in fig.layout.shapes:  # outlines around whole cells: the text in the middle stays clear
        assert shape.x1 - shape.x0 == 1 and shape.y1 - shape.y0 == 1


# --- item 22: the sink sentence is written from the attention --------------------------------------------------------

def _hand_analysis(attentions: np.ndarray, special: list[bool]):
    from core.model.analysis import Analysis

    t = attentions.shape[-1]
    return Analysis(
        text="abcdefgh"[:t], model_name="hand", tokens=[f"t{i}" for i in range(t)], input_ids=list(range(t)),
        attentions=attentions.astype(np.float32), hidden_states=np.ones((attentions.shape[0] + 1, t, 2), np.float32),
        special_mask=np.array(special), word_ids=[None if s else i for i, s in enumerate(special)],
        offsets=[(i, i + 1) for i in range(t)], truncated=False, num_input_tokens=t, is_decoder=True,
    )


def test_a_plain_first_token_is_measured_as_the_sink():
    from core.teaching.about import neighbour_sink_sentence

    t = 6
    early = np.tril(np.eye(t) + np.eye(t, k=-1))  # itself and its left neighbour
    late = np.tril(np.ones((t, t))) * 0.1
    late[:, 0] = 0.9  # everyone looks at the first token, which is not special
    analysis = _hand_analysis(np.stack([early, early, late, late])[:, None], [False] * t)
    text = neighbour_sink_sentence(analysis)
    assert "no sink token" not in text
    assert "with the first token “a” left out" in text
    assert "0% attend most to it in layer 0 and 100% in layer 3" in text  # queries 1..5: none, then all on token 0
    assert "At least half of them do in 2 of the 4 layers (2, 3)" in text


@pytest.mark.integration
def test_maxima_on_smollm2_finds_the_first_token_sink(bundled_lm):
    analysis = analyze(bundled_lm, YESTERDAY)
    top = analysis.attentions.max(axis=1).argmax(axis=-1)[:, 1:]  # [layers, queries 1..T-1]: their argmax key
    on_first = (top == 0).mean(axis=1)
    at = open_app({"model": "SmolLM2-135M-Instruct", "text": YESTERDAY}, page="app_pages/maxima.py")
    assert not page_errors(at)
    said = "\n".join(c.value for c in at.caption).replace("\\", "")
    assert "no sink token" not in said
    last = len(on_first) - 1
    assert f"attend most to it in layer 0 and {on_first[last]:.0%} in layer {last}" in said
    assert f"in {int((on_first >= 0.5).sum())} of the {len(on_first)} layers" in said


@pytest.mark.integration
def test_smollm2_views_label_tokens_alike(bundled_lm):
    """The lens grid's axis, Attention's labels and the decoded tokens Predictions shows agree on SmolLM2."""
    from core.outputs.lens import lens_summary, logit_lens
    from core.outputs.predictions import load_language_model
    from viz.lens_grid import final_rank_grid

    analysis = analyze(bundled_lm, YESTERDAY)
    expected = [_by_hand(bundled_lm.tokenizer.decode([i])) for i in analysis.input_ids]
    assert expected[:3] == ["Y", "esterday", "·my"] and "\\n" in expected
    assert tokens.token_labels(analysis) == expected
    lens = logit_lens(load_language_model(bundled_lm), analysis, k=1)
    top = [[c[0] for c in layer] for layer in lens.candidates]
    fig = final_rank_grid(lens.tokens, top, lens.final_ranks, lens_summary(lens.final_ranks), top[-1])
    assert list(fig.layout.xaxis.ticktext) == expected


SHOPPING = "Shopping list:\n- eggs\n- milk\n- خبز"  # SmolLM2 goes on with a newline, and with parts of Arabic letters


def _shown_by_hand(tokenizer, token_id: int) -> str:
    """The label the README's rule gives a token, from the tokenizer's decode and transformers' byte table."""
    text = tokenizer.decode([token_id])
    if "\ufffd" in text:  # part of a character: its bytes, each as <0xNN> unless they make whole characters
        byte_of = {c: b for b, c in bytes_to_unicode().items()}
        data = bytes(byte_of[c] for c in tokenizer.convert_ids_to_tokens(token_id))
        text = "".join(chr(b) if b < 0x80 else f"<0x{b:02X}>" for b in data)
    return "“" + _by_hand(text) + "”"


@pytest.mark.integration
def test_generation_headings_and_buttons_label_newlines_and_bytes_alike(bundled_lm):
    """Items 12 and 20 on one Predictions page: the newline is “\\n” (ASCII) in the step headings and in the
    buttons alike, a part of a character is <0xD8> there too, and the page says why once."""
    import re

    import torch

    at = open_app({"model": "SmolLM2-135M-Instruct", "text": SHOPPING, "steps": "3"}, page="app_pages/predictions.py")
    assert not page_errors(at)
    unescape = lambda markdown: re.sub(r"\\(.)", r"\1", markdown)  # noqa: E731 - markdown's escapes, as read
    captions = [unescape(c.value) for c in at.caption]
    assert sum("only part of a character" in c for c in captions) == 1
    tok = bundled_lm.tokenizer
    ids = tok(SHOPPING, return_tensors="pt")["input_ids"]
    with torch.inference_mode():  # greedy by hand, on the plainly loaded weights
        from core.outputs.predictions import load_language_model

        model = load_language_model(bundled_lm).model
        written = []
        for _ in range(3):
            nxt = int(model(input_ids=ids).logits[0, -1].argmax())
            written.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    headings = [unescape(m.value) for m in at.markdown if re.match(r"\*\*\d+\.\*\* ", unescape(m.value))]
    assert [h.split(" ", 1)[1].rsplit(" ", 1)[0] for h in headings] == [_shown_by_hand(tok, i) for i in written]
    buttons = [b for b in at.button if (b.key or "").startswith("alt-")]
    for button in buttons:
        token = int(button.key.rsplit("-", 1)[1])
        assert unescape(button.label).rsplit(" ", 1)[0] == _shown_by_hand(tok, token)
    labels = [h.split(" ", 1)[1] for h in headings] + [unescape(b.label) for b in buttons]
    assert any(label.startswith("“\\n”") for label in labels) and any("<0xD8>" in label for label in labels)
    assert not any("\ufffd" in label or any(0x2400 <= ord(c) <= 0x2426 for c in label) for label in labels)
