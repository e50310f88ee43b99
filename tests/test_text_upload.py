"""Long texts into the sidebar (issue 41): an uploaded .txt file, hostile files and words, and each page's own limit
said before it computes."""

from __future__ import annotations

import pytest
from transformers import AutoConfig

from core.model.settings import load_settings
from tests.pages_registry import landed_pages
from tests.test_app import open_app, page_errors
from ui.page_limits import PAGE_LIMITS, limit_sentence
from ui.text_upload import TextUploadError, text_from_upload

MB = 1024 * 1024


def test_an_uploaded_file_is_its_utf8_text():
    text = "Line one, é and 東京.\r\nLine two.\n"
    assert text_from_upload("a.txt", text.encode("utf-8"), MB, 1000) == ("Line one, é and 東京.\nLine two.\n", None)
    assert text_from_upload("b.txt", "\ufeffbom".encode(), MB, 1000)[0] == "bom"
    assert text_from_upload("c.txt", "wide text".encode("utf-16"), MB, 1000)[0] == "wide text"


def test_a_file_over_the_size_limit_is_a_sentence():
    with pytest.raises(TextUploadError, match=r"The file big.txt has 2,097,152 bytes, more than the 1,048,576"):
        text_from_upload("big.txt", b"a" * (2 * MB), MB, 100_000)


@pytest.mark.parametrize("data, said", [
    (b"caf\xe9 au lait", r"is not UTF-8 text \(byte 3 cannot be read"),  # Latin-1
    (b"\x89PNG\r\n\x1a\n\x00\x00", "is not UTF-8 text"),
    (b"text\x00with NUL", "holds NUL characters"),
    (b" \n\t ", "has no text in it"),
])
def test_files_that_are_not_text_are_a_sentence(data, said):
    with pytest.raises(TextUploadError, match=said):
        text_from_upload("odd.txt", data, MB, 100_000)


def test_a_text_longer_than_the_box_is_cut_with_a_note():
    text, note = text_from_upload("long.txt", b"word " * 30_000, MB, 100_000)
    assert len(text) == 100_000
    assert note == "The file long.txt has 150,000 characters; the text box holds 100,000, so its first 100,000 are used."


def test_the_laptop_reads_the_whole_window_and_the_server_keeps_its_cap():
    assert load_settings(environ={}).max_tokens is None
    assert load_settings(environ={"EXPLORER_MODE": "server"}).max_tokens == 256
    assert load_settings(environ={"EXPLORER_MODE": "server", "EXPLORER_MAX_TOKENS": "1024"}).max_tokens == 1024


def test_every_page_of_the_app_is_known_to_the_limit_table():
    paths = {path or "home" for _, path in landed_pages()}
    assert set(PAGE_LIMITS) <= paths
    # pages left out read the whole window: Attention and Long context draw one head or a few rows at a time, and
    # Patching reads its own prompts; the Deck analyses no text, and the Workshop room reads learners' sentences under
    # the room's own limits (EXPLORER_ROOM_MAX_CHARS)
    assert paths - set(PAGE_LIMITS) == {"attention", "long-context", "patching", "deck", "room"}


@pytest.mark.app
@pytest.mark.integration
def test_a_100000_character_word_on_smollm2_gives_the_pages_limit_before_it_computes(bundled_lm):
    """One 100,000-character word is 25,000 SmolLM2 tokens: the app reads its 8,192-token window, the Maxima page
    its own 512, and says so with the sizes read here from the model's config."""
    word = "a" * 100_000
    count = len(bundled_lm.tokenizer(word)["input_ids"])
    config = AutoConfig.from_pretrained(bundled_lm.source)
    layers, heads, window = config.num_hidden_layers, config.num_attention_heads, config.max_position_embeddings
    at = open_app({"model": "SmolLM2-135M-Instruct"}, page="app_pages/maxima.py")
    at.text_area(key="text").set_value(word).run()
    assert not page_errors(at)
    said = [i.value for i in at.info if i.value.startswith("This page reads")]
    gigabytes = 4 * layers * heads * window**2 / 1e9
    assert said == [f"This page reads the first 512 of the text's {count:,} tokens: it reads every head's attention "
                    f"weights at once, and {layers} layers × {heads} heads × {window:,}² weights take "
                    f"{gigabytes:,.0f} GB. Even without this page's limit the text would be cut to "
                    f"SmolLM2-135M-Instruct's {window:,}-token window (the size above is at that length)."], said
    assert limit_sentence("maxima", bundled_lm, 400, window) is None  # a text under the page's limit: no sentence


def test_a_text_past_the_model_s_window_is_said_to_be_cut_to_it_too():
    """Issue 50, item 15: "30 layers × 9 heads × 8,192² weights take 72 GB" on a 59,663-token text never said that the
    text is cut to the model's 8,192-token window anyway; the sizes here are SmolLM2's, the bytes 4 × 30 × 9 × 8,192²."""
    from types import SimpleNamespace

    model = SimpleNamespace(name="SmolLM2", num_layers=30, num_heads=9, max_tokens=8192)
    said = limit_sentence("maxima", model, 59_663, 8192)
    assert said.startswith("This page reads the first 512 of the text's 59,663 tokens: ")
    assert f"30 layers × 9 heads × 8,192² weights take {4 * 30 * 9 * 8192 ** 2 / 1e9:.0f} GB." in said
    assert said.endswith("Even without this page's limit the text would be cut to SmolLM2's 8,192-token window (the "
                         "size above is at that length).")
    capped = limit_sentence("maxima", model, 59_663, 1024)  # a deployment's cap below the window
    assert "1,024² weights" in capped and capped.endswith("cut to the 1,024 tokens this deployment reads (the size "
                                                          "above is at that length).")
    within = limit_sentence("maxima", model, 4000, 8192)  # the whole text is within the window: nothing more to say
    assert "4,000² weights" in within and "Even without" not in within
