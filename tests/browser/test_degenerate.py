"""Degenerate input in a real browser: every page draws text made only of [UNK] tokens, a single token, or only
special tokens without an error on the page or in the console: every page with each of the three, in ``make test-full``
(``matrix``). AppTest opens every page with each of them in ``make test`` (``tests/test_robustness.py``), and the
degenerate text that broke a page in Chromium has its own test in this tier (``test_maxima``: one [UNK] for 400
emoji)."""

from __future__ import annotations

import itertools

import pytest

from tests.browser.matrix import full_only
from tests.pages_registry import landed_pages

pytestmark = pytest.mark.browser

DEGENERATE = {
    "all-unk": "🙂🙂🙂 🎉🎉",  # every piece is [UNK] for the bundled tokenizer
    "one-token": "bank",
    "only-special": "[CLS] [SEP]",
}


@pytest.mark.parametrize(("path", "kind"), [full_only(path, kind) for (_, path), kind in itertools.product(landed_pages(), DEGENERATE)])
def test_degenerate_text_draws_cleanly(module_tab, path, kind):
    text = DEGENERATE[kind]
    module_tab.forget()
    module_tab.open(path, {"text": text, "text_a": text, "text_b": text})
    module_tab.wait_until_drawn()
    module_tab.assert_clean()


def test_all_unk_is_what_the_bundled_tokenizer_makes():
    from core.model.models import load_model

    tokenizer = load_model().tokenizer
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(DEGENERATE["all-unk"])["input_ids"])
    assert set(tokens[1:-1]) == {tokenizer.unk_token}
    special = tokenizer.convert_ids_to_tokens(tokenizer(DEGENERATE["only-special"])["input_ids"])
    assert set(special) <= set(tokenizer.all_special_tokens)
