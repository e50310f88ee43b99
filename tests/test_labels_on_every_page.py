"""Issue 50 item 10: one way to write a token on every page. Each page is opened once per bundled model (``make
test``: on the MiniLM and one language model in turn) on a text with double spaces, a newline, an emoji and Arabic,
and every table cell, picker option and sentence it shows is read: no empty label, no byte-level mark "Ġ" or
SentencePiece mark "▁", no "##" on a tokenizer that has none (SmolLM2, Gemma 3), no "�" (a token that is part of a
character is written as its bytes, <0xF0>)."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.attention_heads.qk_map import record_corpus
from core.causal.flow_details import decode
from core.causal.unembedding import top_tokens
from core.model.inference import analyze
from core.model.tokens import token_labels
from tests.browser.matrix import in_turn
from tests.pages_registry import landed_pages
from tests.test_app import APP

TEXT = "The bank  of the river\nwas 🙂 quiet. ذهبت إلى البنك"
MODELS = {"all-MiniLM-L6-v2": False, "SmolLM2-135M-Instruct": True, "gemma-3-270m": True}  # True: no "##" pieces
PAGE_QUERIES = {  # pages that read their own texts are pointed at the same one
    "app_pages/qk-map.py": {"corpus": "Your documents", "docs": TEXT, "query": "4"},
    "app_pages/predictions.py": {"top_k": "3"},
    "app_pages/effects.py": {"steps": "32"},  # the fewest integration steps: the labels are the same
    "app_pages/long-context.py": {"source": "sidebar"},  # the text above, not the bundled English one (and no 2,048-token pass)
}
# make test reads every page on the MiniLM (WordPiece, 0.2 s a page) and on one language model, SmolLM2 (byte-level
# BPE) and Gemma 3 (SentencePiece) in turn (``matrix.in_turn``: 1.5–26 s a page); make test-full, every page on both.
LANGUAGE_MODELS = [name for name, no_wordpiece in MODELS.items() if no_wordpiece]
# Home's "token" column is the tokenizer's own piece ("Ġbank"), shown on purpose beside "shown as", the label; its
# "word" column is empty for a special token, which belongs to no word.
RAW_COLUMNS = {("app_pages/home.py", "token"), ("app_pages/home.py", "word")}


def _shown(at, page: str) -> list[tuple[str, str]]:
    """``(where, text)`` for every string a user reads: table cells, picker options, sentences."""
    found = []
    for frame in at.dataframe:
        table = frame.value
        for column in table.columns:
            if (page, str(column)) in RAW_COLUMNS:
                continue
            found += [(f"table column {column!r}", v) for v in table[column] if isinstance(v, str)]
    for widget in [*at.selectbox, *at.radio, *at.multiselect]:
        found += [(f"picker {widget.label!r}", str(o)) for o in widget.options]
    for element in [*at.markdown, *at.caption, *at.info, *at.warning, *at.subheader]:
        found.append(("sentence", str(element.value)))
    return found


def _problems(shown: list[tuple[str, str]], no_wordpiece: bool) -> list[str]:
    bad = []
    for where, text in shown:
        if where.startswith("table") and not text.strip():
            bad.append(f"{where}: an empty cell")
        if where.startswith("picker") and (not text.strip() or text.rstrip().endswith(":")):
            bad.append(f"{where}: an empty label {text!r}")
        if "“”" in text or "“ ”" in text:
            bad.append(f"{where}: an empty quoted token in {text[:120]!r}")
        for mark in ("\ufffd", "Ġ", "▁"):
            if mark in text:
                bad.append(f"{where}: {mark!r} in {text[:120]!r}")
        if no_wordpiece and "##" in text:
            bad.append(f"{where}: '##' in {text[:120]!r}")
    return bad


def _pick_flow_items(at) -> list:
    """Flow's detail tables show only once an item is picked: an MLP node (its neurons), a hidden-state node (its
    lens) and an attention edge (its heads and what the top head writes), each a run of its own."""
    runs = []
    box = next((b for b in at.selectbox if b.label.startswith("Details of an edge")), None)
    if box is None:
        return runs
    options = list(box.options)
    for wanted, edge in (("MLP", False), ("hidden state", False), ("attention (top head", True)):
        choice = next((o for o in options[1:] if wanted in o and ("→" in o) == edge), None)
        if choice is not None:
            box.select(choice).run()
            runs.append(_shown(at, "app_pages/flow.py"))
            box = next(b for b in at.selectbox if b.label.startswith("Details of an edge"))
    return runs


@pytest.mark.app
@pytest.mark.integration
@pytest.mark.parametrize(("page", "model"), [
    *[(file, "all-MiniLM-L6-v2") for file, _ in landed_pages()],
    *in_turn([file for file, _ in landed_pages()], LANGUAGE_MODELS)])
def test_every_label_on_the_page_follows_the_rule(page, model):
    at = AppTest.from_file(APP, default_timeout=600)  # the slowest pages on Gemma 3 on a shared machine
    for key, value in ({"model": model, "text": TEXT} | PAGE_QUERIES.get(page, {})).items():
        at.query_params[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = _shown(at, page)
    if page == "app_pages/flow.py" and MODELS[model]:  # a language model: the lens and MLP tables
        for more in _pick_flow_items(at):
            shown += more
    assert shown, "the page showed nothing to read"
    assert _problems(shown, MODELS[model]) == []


@pytest.mark.integration
@pytest.mark.parametrize("fixture", ["bundled_lm", "bundled_gemma"])
def test_flow_tables_write_spaces_newlines_and_bytes_by_the_rule(fixture, request):
    """The lens and neuron tables' tokens (``top_tokens``, ``decode``): a space token, a newline token and a token
    that is one byte of a character, each made the top entry of a logit vector in turn."""
    model = request.getfixturevalue(fixture)
    tok = model.tokenizer
    space, newline = tok.convert_tokens_to_ids(tok.tokenize(" x")[0][:1]), tok.encode("\n", add_special_tokens=False)[-1]
    partial = tok.encode("🙂", add_special_tokens=False)[0]
    by_hand = {space: "·", newline: "\\n"}
    vocab = len(tok)
    for token_id, label in by_hand.items():
        logits = np.zeros(vocab)
        logits[token_id] = 1.0
        assert top_tokens(model, logits, 1)[0][0] == label
        assert decode(model, np.array([token_id])) == [label]
    logits = np.zeros(vocab)
    logits[partial] = 1.0
    shown = top_tokens(model, logits, 1)[0][0]
    if len(tok.encode("🙂", add_special_tokens=False)) > 1:  # split into bytes: the first holds only 0xF0 and more
        assert shown.startswith("<0xF0>") and "\ufffd" not in shown
    else:
        assert shown == "🙂"


@pytest.mark.integration
@pytest.mark.parametrize("fixture", ["bundled_lm", "bundled_gemma"])
def test_queries_and_keys_label_tokens_as_the_figures_do(fixture, request):
    model = request.getfixturevalue(fixture)
    corpus = record_corpus(model, [TEXT], layers={0})
    assert list(corpus.tokens) == token_labels(analyze(model, TEXT))
    assert not any("##" in label or not label.strip() for label in corpus.tokens)
