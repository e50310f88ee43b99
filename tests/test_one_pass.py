"""Issue 48 item 6: once one page has a text's trace, every other read-only page opens on it without another pass.

Full forward passes are counted by process-wide forward hooks (torch's ``register_module_forward_pre_hook`` and
``register_module_forward_hook``): a call of a token-embedding module (``torch.nn.Embedding``) made inside a
transformers model's forward, one of whose input rows begins with the whole text's token ids, is one full pass over
the text, whichever model object, page or cache made it. A trace's layer computed again (a block called alone) reads
no embedding, so it is not a pass; nor is a lookup of the embedding alone outside a model's forward (Home's
``core.teaching.about.model_facts`` compares the embedding rows of the text with hidden state 0), counted apart.
The pages are opened one after another in ONE AppTest (the sidebar's model SmolLM2 and a text of about 97 tokens),
as a user clicks through them.
"""

from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import PreTrainedModel

from tests.test_app import APP, page_errors

MODEL = "SmolLM2-135M-Instruct"
TEXT = ("Counting passes: the river bank was quiet in the morning, and the old boatman, who had crossed it every day "
        "for forty years, told the children that the water remembers every stone it has ever moved. They laughed, "
        "but one of them kept a small grey pebble from the shallows and carried it home in her pocket. Years later, "
        "when the bridge replaced his boat, she brought it back and set it on the bank where he used to wait.")
OWNED = ["app_pages/home.py", "app_pages/attention.py", "app_pages/maxima.py", "app_pages/stats.py",
         "app_pages/inside.py"]
PAGES = [*OWNED, "app_pages/flow.py", "app_pages/long-context.py"]
QUERY = {"app_pages/long-context.py": {"source": "sidebar"}}  # Long context over the sidebar's text, not its own


def passes_per_page(pages: list[str], model: str = MODEL, text: str = TEXT, options: dict | None = None) -> dict[str, int]:
    """Open ``pages`` in order in one AppTest, from an empty store; the full passes over ``text`` each one ran
    (``options``: more query parameters, an encoder-decoder's target)."""
    from core.model.models import load_model
    from ui.store import store

    ids = torch.tensor(load_model(model).tokenizer(text)["input_ids"])
    assert text != TEXT or 90 <= len(ids) <= 105  # the issue's ~97-token text
    store().forget()  # nothing of this text computed by an earlier test of this process
    counted, lookups, inside = [0], [0], [0]

    def count(module, args):
        if isinstance(module, PreTrainedModel):
            inside[0] += 1
        elif isinstance(module, torch.nn.Embedding) and args and isinstance(args[0], torch.Tensor):
            rows = args[0].reshape(-1, args[0].shape[-1]) if args[0].dim() else args[0][None]
            if rows.shape[-1] >= len(ids) and not rows.is_floating_point():
                whole = int((rows[:, : len(ids)] == ids).all(dim=1).sum())
                (counted if inside[0] else lookups)[0] += whole

    def leave(module, _args, _output):
        if isinstance(module, PreTrainedModel):
            inside[0] -= 1

    found = {}
    handles = [torch.nn.modules.module.register_module_forward_pre_hook(count),
               torch.nn.modules.module.register_module_forward_hook(leave, always_call=True)]
    try:
        at = AppTest.from_file(APP, default_timeout=600)
        at.query_params.update({"model": model, "text": text, **(options or {})})
        for page in pages:
            before = counted[0]
            at.query_params.update(QUERY.get(page, {}))
            at.switch_page(page)
            at.run()
            assert not page_errors(at), (page, page_errors(at))
            found[page] = counted[0] - before
    finally:
        for handle in handles:
            handle.remove()
    print("embedding lookups outside a model's forward:", lookups[0])
    return found


@pytest.mark.app
@pytest.mark.integration
def test_the_seven_read_only_pages_share_one_pass():
    found = passes_per_page(PAGES)
    print("full passes per page:", found)
    assert sum(found.values()) == 1, found
    assert found["app_pages/home.py"] == 1, found  # the first page runs it, every other reads it
